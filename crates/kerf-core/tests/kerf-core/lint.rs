//! Provider lint.

use kerf_core::lint::{Provider, Severity, lint};
use rstest::rstest;
use serde_json::{Value, json};

fn has(schema: &Value, p: Provider, sev: Severity, pointer: &str, keyword: &str) -> bool {
    lint(schema, p)
        .iter()
        .any(|f| f.severity == sev && f.pointer == pointer && f.keyword == keyword)
}

#[rstest]
#[case::openai_oneof(Provider::Openai, json!({"oneOf": [{"type": "object"}]}), Severity::Rewrite, "/", "oneOf")]
#[case::openai_allof(Provider::Openai, json!({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}}), Severity::Error, "/properties/a", "allOf")]
#[case::openai_open_object(Provider::Openai, json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}), Severity::Rewrite, "/", "additionalProperties")]
#[case::openai_optional(Provider::Openai, json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}), Severity::Rewrite, "/", "required")]
#[case::openai_minlength(Provider::Openai, json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}}), Severity::Rewrite, "/properties/a", "minLength")]
#[case::anthropic_array_root(Provider::Anthropic, json!({"type": "array"}), Severity::Rewrite, "/", "type")]
#[case::anthropic_min_length(Provider::Anthropic, json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}}), Severity::Rewrite, "/properties/a", "minLength")]
#[case::anthropic_min_items(Provider::Anthropic, json!({"type": "object", "properties": {"a": {"type": "array", "minItems": 2}}}), Severity::Rewrite, "/properties/a", "minItems")]
#[case::anthropic_format(Provider::Anthropic, json!({"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}}), Severity::Rewrite, "/properties/a", "format")]
#[case::anthropic_open_object(Provider::Anthropic, json!({"type": "object", "properties": {}}), Severity::Rewrite, "/", "additionalProperties")]
#[case::anthropic_one_of(Provider::Anthropic, json!({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}), Severity::Rewrite, "/properties/a", "oneOf")]
#[case::openai_prefix_items(Provider::Openai, json!({"type": "object", "properties": {"a": {"type": "array", "prefixItems": [{"type": "string"}]}}}), Severity::Rewrite, "/properties/a", "prefixItems")]
#[case::openai_format(Provider::Openai, json!({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}}), Severity::Rewrite, "/properties/a", "format")]
#[case::gemini_const(Provider::Gemini, json!({"type": "object", "properties": {"t": {"const": "a"}}}), Severity::Rewrite, "/properties/t", "const")]
#[case::gemini_ignored(Provider::Gemini, json!({"type": "string", "pattern": "^a$"}), Severity::Ignored, "/", "pattern")]
#[case::llama_unanchored(Provider::Llamacpp, json!({"type": "string", "pattern": "abc"}), Severity::Error, "/", "pattern")]
#[case::llama_open_object(Provider::Llamacpp, json!({"type": "object", "properties": {}}), Severity::Note, "/", "additionalProperties")]
#[case::llama_unbounded_string(Provider::Llamacpp, json!({"type": "string"}), Severity::Note, "/", "maxLength")]
fn findings(
    #[case] p: Provider,
    #[case] schema: Value,
    #[case] sev: Severity,
    #[case] pointer: &str,
    #[case] keyword: &str,
) {
    assert!(
        has(&schema, p, sev, pointer, keyword),
        "{:#?}",
        lint(&schema, p)
    );
}

#[test]
fn clean_schema_for_openai() {
    let s = json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false});
    assert!(lint(&s, Provider::Openai).is_empty());
}

/// Security review, finding 5: a ~300-byte self-referencing schema passed `kerf check`, then
/// inlining its `$ref`s for Gemini took 2.9 GB and aborted before sending. The rewrite now stops
/// at a bounded size and says so as a blocker. (The size limit is the proof, asserted below;
/// the watchdog only keeps an endless rewrite from holding the suite, and is no speed test.)
#[test]
fn a_recursive_schema_stops_the_gemini_rewrite_at_its_size_limit() {
    let schema = json!({
        "$defs": {"n": {"type": "object", "properties": {
            "a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/n"},
            "c": {"$ref": "#/$defs/n"}, "d": {"$ref": "#/$defs/n"}
        }}},
        "$ref": "#/$defs/n"
    });
    let r = crate::support::within(
        std::time::Duration::from_secs(300),
        "the Gemini rewrite of a recursive schema",
        move || kerf_core::lint::gemini_schema(&schema),
    );
    assert!(r.too_large);
    let f = &r.findings[0];
    assert_eq!((f.severity, f.keyword.as_str()), (Severity::Error, "$ref"));
    assert!(f.message.contains("10000 subschemas"), "{}", f.message);
    assert!(serde_json::to_string(&r.schema).unwrap().len() < 4 << 20);
    // A schema of ordinary size is rewritten whole.
    let small = kerf_core::lint::gemini_schema(
        &json!({"type": "object", "properties": {"a": {"type": "string"}}}),
    );
    assert!(!small.too_large);
}

/// `responseJsonSchema` takes JSON Schema: unions, type arrays and closed objects are no finding.
#[test]
fn gemini_json_schema_accepts_unions_type_arrays_and_closed_objects() {
    let s = json!({"type": "array", "items": {"oneOf": [{"type": "object",
        "properties": {"a": {"type": ["string", "null"]}, "b": {"$ref": "#/$defs/b"}},
        "required": ["a"], "additionalProperties": false}]},
        "$defs": {"b": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]}}});
    assert_eq!(lint(&s, Provider::Gemini), vec![]);
}

/// Anthropic's documented complexity limits: more than 24 optional properties, or more than 16
/// union-typed ones, in one schema is a blocker.
#[test]
fn anthropic_complexity_limits_are_blockers() {
    let props: serde_json::Map<String, Value> = (0..25)
        .map(|i| {
            (
                format!("p{i}"),
                json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
            )
        })
        .collect();
    let s = json!({"type": "object", "properties": props, "additionalProperties": false});
    let found = lint(&s, Provider::Anthropic);
    let blockers: Vec<&str> = found
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(blockers.len(), 2, "{found:#?}");
    assert!(
        blockers[0].starts_with("25 optional properties"),
        "{}",
        blockers[0]
    );
    assert!(
        blockers[1].starts_with("25 properties with union types"),
        "{}",
        blockers[1]
    );
}

/// OpenAI's size limits: enum values across the schema, and a big enum's characters.
#[test]
fn openai_size_limits_are_blockers() {
    let values: Vec<String> = (0..1001).map(|i| format!("value-number-{i:04}")).collect();
    let s = json!({"type": "object", "properties": {"e": {"type": "string", "enum": values}},
        "required": ["e"], "additionalProperties": false});
    let found = lint(&s, Provider::Openai);
    let msgs: Vec<&str> = found
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.message.as_str())
        .collect();
    assert!(
        msgs.iter().any(|m| m.starts_with("1001 enum values")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter().any(|m| m.contains("has 1001 values of")),
        "{msgs:?}"
    );
}

/// The rewrites: OpenAI's drops a tuple into an `anyOf` of its members and an unsupported
/// `format`; Anthropic's moves what it rejects into the description and closes objects;
/// Gemini's `responseJsonSchema` changes only `const`.
#[test]
fn the_strict_rewrites_relax_only_what_each_provider_rejects() {
    let s = json!({"type": "object", "properties": {
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
        "site": {"type": "string", "format": "uri"},
        "when": {"type": "string", "format": "date"}},
        "required": ["pair", "site", "when"]});
    let o = kerf_core::lint::openai_strict(&s).schema;
    assert_eq!(
        o["properties"]["pair"],
        json!({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}})
    );
    assert!(o["properties"]["site"].get("format").is_none());
    assert_eq!(o["properties"]["when"]["format"], "date");

    let a = kerf_core::lint::anthropic_strict(&json!({"type": "array", "minItems": 3,
        "items": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "description": "How many."}},
                  "additionalProperties": {"type": "string"}}}));
    assert_eq!(a.wrapped_in, Some("items"));
    let items = &a.schema["properties"]["items"];
    assert_eq!(items["description"], "Constraints: minItems: 3.");
    assert_eq!(
        items["items"]["properties"]["n"],
        json!({"type": "integer", "description": "How many. Constraints: minimum: 1."})
    );
    assert_eq!(items["items"]["additionalProperties"], false);
    assert_eq!(
        items["items"]["description"],
        "Constraints: additionalProperties: {\"type\":\"string\"}."
    );
    assert_eq!(a.schema["additionalProperties"], false);

    let g = kerf_core::lint::gemini_json_schema(&json!({"type": "object",
        "properties": {"t": {"const": "x"}, "u": {"oneOf": [{"type": "string"}]}}}));
    assert_eq!(
        g.schema,
        json!({"type": "object", "properties": {"t": {"enum": ["x"]}, "u": {"oneOf": [{"type": "string"}]}}})
    );
}

/// Enum/const letter case, corrected only where one allowed value matches ignoring case, through
/// a discriminated union; each correction reported with its pointer.
#[test]
fn enum_case_is_folded_through_unions_and_reported() {
    let schema = json!({"type": "array", "items": {"oneOf": [
        {"type": "object", "properties": {"type": {"const": "definition"}, "entity": {"type": "string"}}},
        {"type": "object", "properties": {"type": {"const": "relationship"},
            "kind": {"enum": ["is-a", "part-of", "Part-Of"]}, "mood": {"enum": ["calm", "tense"]}}}
    ]}});
    let mut v = json!([
        {"type": "Definition", "entity": "Ada"},
        {"type": "RELATIONSHIP", "kind": "IS-A", "mood": "Calm"},
        {"type": "relationship", "kind": "PART-OF", "mood": "angry"}
    ]);
    let notes = kerf_core::schema::fold_enum_case(&schema, &mut v);
    assert_eq!(
        notes,
        vec![
            "/0/type: \"Definition\" → \"definition\"",
            "/1/type: \"RELATIONSHIP\" → \"relationship\"",
            "/1/kind: \"IS-A\" → \"is-a\"",
            "/1/mood: \"Calm\" → \"calm\"",
        ]
    );
    // Two allowed values match `PART-OF` ignoring case, and `angry` matches none: both kept.
    assert_eq!(
        v[2],
        json!({"type": "relationship", "kind": "PART-OF", "mood": "angry"})
    );
    assert_eq!(v[0]["entity"], "Ada");
}
