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
