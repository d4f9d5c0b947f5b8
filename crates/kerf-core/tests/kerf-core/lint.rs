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
