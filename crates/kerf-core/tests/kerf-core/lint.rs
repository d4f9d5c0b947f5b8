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
#[case::anthropic_pattern(Provider::Anthropic, json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x$"}}}), Severity::Ignored, "/properties/a", "pattern")]
#[case::gemini_oneof(Provider::Gemini, json!({"oneOf": []}), Severity::Error, "/", "oneOf")]
#[case::gemini_const(Provider::Gemini, json!({"type": "object", "properties": {"t": {"const": "a"}}}), Severity::Error, "/properties/t", "const")]
#[case::gemini_type_array(Provider::Gemini, json!({"type": ["string", "null"]}), Severity::Error, "/", "type")]
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
/// at a bounded size and says so as a blocker.
#[test]
fn a_recursive_schema_stops_the_gemini_rewrite_at_its_size_limit() {
    let schema = json!({
        "$defs": {"n": {"type": "object", "properties": {
            "a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/n"},
            "c": {"$ref": "#/$defs/n"}, "d": {"$ref": "#/$defs/n"}
        }}},
        "$ref": "#/$defs/n"
    });
    let t = std::time::Instant::now();
    let r = kerf_core::lint::gemini_schema(&schema);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
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
