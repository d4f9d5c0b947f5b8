//! Templates: TrustGraph's syntax, strict undefined variables, term order, variable listing.

use kerf_core::{Error, Template};
use rstest::rstest;
use serde_json::{Map, Value, json};

fn ctx(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[rstest]
#[case::var("Hello {{ x }}", json!({"x": "you"}), "Hello you")]
#[case::attr("{{ a.b }}", json!({"a": {"b": 2}}), "2")]
#[case::items("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", json!({"d": {"z": 1, "a": 2}}), "z=1;a=2;")]
#[case::join("{{ l|join(', ') }}", json!({"l": ["a", "b"]}), "a, b")]
#[case::if_and("{% if a and b %}yes{% else %}no{% endif %}", json!({"a": true, "b": false}), "no")]
#[case::loop_fields("{% for f in s.fields %}- {{ f.name }}\n{% endfor %}", json!({"s": {"fields": [{"name": "a"}, {"name": "b"}]}}), "- a\n- b\n")]
#[case::no_html_escaping("{{ x }}", json!({"x": "<a & b>"}), "<a & b>")]
#[case::trailing_newline_kept("x\n", json!({}), "x\n")]
fn trustgraph_syntax(#[case] src: &str, #[case] vars: Value, #[case] out: &str) {
    assert_eq!(
        Template::new("t", src).unwrap().render(&ctx(vars)).unwrap(),
        out
    );
}

/// `{{ value }}` prints Python's `str(value)`, as TrustGraph's renderer (ibis) does; the parity
/// test checks the same against the real one.
#[rstest]
#[case::list_of_strings("{{ x }}", json!({"x": ["a", "b"]}), "['a', 'b']")]
#[case::dict_in_order("{{ x }}", json!({"x": {"name": "crops", "primary": true, "n": null}}), "{'name': 'crops', 'primary': True, 'n': None}")]
#[case::bools_and_none("{{ t }} {{ f }} {{ n }}", json!({"t": true, "f": false, "n": null}), "True False None")]
#[case::numbers("{{ i }} {{ f }} {{ g }} {{ e }}", json!({"i": 42, "f": 1.0, "g": 2.5, "e": 1e16}), "42 1.0 2.5 1e+16")]
#[case::quotes("{{ x }}", json!({"x": ["it's", "say \"hi\"", "both ' \""]}), "[\"it's\", 'say \"hi\"', 'both \\' \"']")]
#[case::non_ascii_and_controls("{{ x }}", json!({"x": ["é日本", "a\nb\t\u{1}"]}), "['é日本', 'a\\nb\\t\\x01']")]
#[case::nested("{{ x }}", json!({"x": {"rows": [{"k": [1, 2.0]}], "empty": {}, "none": []}}), "{'rows': [{'k': [1, 2.0]}], 'empty': {}, 'none': []}")]
#[case::top_level_string_unquoted("{{ x }}", json!({"x": "it's \"plain\""}), "it's \"plain\"")]
#[case::element_of_list("{{ x[0] }}", json!({"x": [true]}), "True")]
#[case::join_items_as_python("{{ x|join(', ') }}", json!({"x": ["a", true, null, 1.0, [1]]}), "a, True, None, 1.0, [1]")]
#[case::silent_undefined_is_empty("[{{ a if b }}]", json!({"a": 1, "b": false}), "[]")]
fn values_print_as_python_prints_them(#[case] src: &str, #[case] vars: Value, #[case] out: &str) {
    assert_eq!(
        Template::new("t", src).unwrap().render(&ctx(vars)).unwrap(),
        out
    );
}

#[test]
fn a_value_python_cannot_print_falls_back_with_a_warning() {
    let t = Template::new("t", "{% for x in [1] %}[{{ loop }}]{% endfor %}").unwrap();
    let (text, warnings) = t.render_with_warnings(&Map::new()).unwrap();
    assert!(text.starts_with('[') && text.ends_with(']'), "{text}");
    assert_eq!(warnings.len(), 1, "{text} {warnings:?}");
    assert!(warnings[0].contains("no Python form"), "{warnings:?}");
}

#[test]
fn undefined_variable_names_template_line_and_variable() {
    let t = Template::new("extract", "line one\nText: {{ text }}\n").unwrap();
    let err = t.render(&Map::new()).unwrap_err();
    match &err {
        Error::TemplateUndefined {
            name,
            line,
            variable,
        } => {
            assert_eq!(
                (name.as_str(), *line, variable.as_str()),
                ("extract", Some(2), "text")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.code(), "template_undefined");
}

#[test]
fn undefined_attribute_is_named_with_its_path() {
    let t = Template::new("t", "{{ schema.name }}\n{{ schema.missing }}").unwrap();
    let err = t
        .render(&ctx(json!({"schema": {"name": "n"}})))
        .unwrap_err();
    assert!(
        matches!(&err, Error::TemplateUndefined { variable, line: Some(2), .. } if variable == "schema.missing"),
        "{err:?}"
    );
}

#[test]
fn syntax_error_names_line() {
    let err = Template::new("broken", "ok\n{% for x in %}\n").unwrap_err();
    assert!(
        matches!(err, Error::TemplateSyntax { line: Some(2), .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("template `broken` line 2: syntax error"),
        "{err}"
    );
}

#[test]
fn variables_are_listed() {
    let t = Template::new(
        "t",
        "{{ text }} {% for k, v in d.items() %}{{ k }}{% endfor %} {{ a.b }}",
    )
    .unwrap();
    assert_eq!(t.variables(), vec!["a", "d", "text"]);
}

#[test]
fn terms_merge_in_trustgraph_order() {
    let global = ctx(json!({"a": "global", "b": "global", "c": "global"}));
    let prompt = ctx(json!({"b": "prompt", "c": "prompt"}));
    let vars = ctx(json!({"c": "run"}));
    let merged = kerf_core::template::merge_terms(&global, &prompt, &vars);
    assert_eq!(
        Value::Object(merged),
        json!({"a": "global", "b": "prompt", "c": "run"})
    );
}

#[test]
fn prompt_renders_system_and_user() {
    let f = kerf_core::PromptFile::from_json_str(
        r#"{"prompt": "{{ text }} in {{ lang }}", "system": "You speak {{ lang }}.", "terms": {"lang": "English"}}"#,
        "p",
    )
    .unwrap()
    .file;
    let p = kerf_core::Prompt::compile(f, "p").unwrap();
    let r = p.render(&Map::new(), &ctx(json!({"text": "Doc"}))).unwrap();
    assert_eq!(r.system.as_deref(), Some("You speak English."));
    assert_eq!(r.user, "Doc in English");
    assert_eq!(p.input_variables(), vec!["text"]);
}

#[test]
fn var_specs_parse_json_values() {
    assert_eq!(
        kerf_core::template::parse_var("n=3").unwrap(),
        ("n".into(), json!(3))
    );
    assert_eq!(
        kerf_core::template::parse_var("l=[\"a\"]").unwrap(),
        ("l".into(), json!(["a"]))
    );
    assert_eq!(
        kerf_core::template::parse_var("s=hello world").unwrap(),
        ("s".into(), json!("hello world"))
    );
    assert!(kerf_core::template::parse_var("novalue").is_err());
}

/// Security review, finding 4: a template with nested `range` loops hung the render (and, in the
/// window, the app). Renders now have a step limit and fail naming it. (The error naming the
/// limit is the proof: unlimited, these 10^10 iterations would run for hours. The watchdog only
/// keeps a return of the hang from holding the suite; it is no speed test.)
#[test]
fn a_template_that_loops_for_ever_is_stopped_naming_the_limit() {
    let (code, message) = crate::support::within(
        std::time::Duration::from_secs(300),
        "the render of a template looping for ever",
        || {
            let t = Template::new(
                "loops",
                "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}",
            )
            .unwrap();
            let err = t.render(&Map::new()).unwrap_err();
            (err.code(), err.to_string())
        },
    );
    assert_eq!(code, "template_render");
    assert!(
        message.contains("took more than") && message.contains("steps"),
        "{message}"
    );
}

/// Security review, finding 4: a template printing a 100 MB string in a loop (few engine steps,
/// each a huge write) filled memory. The rendered text is capped (32 MiB by default) and the
/// render fails naming the limit, having held at most that much.
#[test]
fn a_template_whose_output_is_too_large_is_stopped_naming_the_limit() {
    let t = Template::new(
        "floods",
        "{% for i in range(1000) %}{{ 'x' * 10000000 }}{% endfor %}",
    )
    .unwrap();
    let err = t.render(&Map::new()).unwrap_err();
    assert_eq!(err.code(), "template_render");
    assert!(
        err.to_string().contains("passed 32 MiB")
            && err.to_string().contains("KERF_MAX_RENDER_MIB"),
        "{err}"
    );
    // Under the limit, large output is fine.
    let t = Template::new("big", "{{ 'é' * 1000000 }}").unwrap();
    assert_eq!(t.render(&Map::new()).unwrap().len(), 2_000_000);
}
