//! Schemas: meta-schema checks pointing into the schema, drafts, pointers, union diagnostics.

use kerf_core::{CompiledSchema, Error};
use rstest::rstest;
use serde_json::{Value, json};

use crate::support::*;

fn compile_err(schema: Value) -> (String, String) {
    match CompiledSchema::compile(&schema, "s.json") {
        Err(Error::Schema {
            pointer, message, ..
        }) => (pointer, message),
        other => panic!("expected a schema error, got {other:?}"),
    }
}

#[rstest]
#[case::bad_type(json!({"type": "strin"}), "/type")]
#[case::nested(json!({"properties": {"a": {"type": 5}}}), "/properties/a/type")]
#[case::required_not_array(json!({"required": "a"}), "/required")]
#[case::not_a_schema(json!("hello"), "/")]
fn meta_schema_errors_point_into_the_schema(#[case] schema: Value, #[case] pointer: &str) {
    let (p, _) = compile_err(schema);
    assert_eq!(p, pointer);
}

#[test]
fn draft7_when_declared() {
    // `definitions` + `$ref` and draft-7 tuple `items` work under draft 7.
    let s = CompiledSchema::compile(
        &json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "string"}, {"type": "integer"}]}),
        "d7",
    )
    .unwrap();
    assert!(s.is_valid(&json!(["a", 1])));
    assert!(!s.is_valid(&json!([1, "a"])));
}

#[test]
fn draft_2020_12_by_default() {
    // prefixItems is 2020-12 only.
    let s = CompiledSchema::compile(
        &json!({"type": "array", "prefixItems": [{"type": "string"}]}),
        "d",
    )
    .unwrap();
    assert!(!s.is_valid(&json!([1])));
}

#[test]
fn violations_carry_instance_pointers() {
    let s = CompiledSchema::compile(&json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}), "p").unwrap();
    let v = s.validate(&json!({"a": [1, "x", 3]})).unwrap_err();
    assert_eq!(v[0].pointer, "/a/1");
    assert_eq!(v[0].message, "expected integer, got string \"x\"");
}

#[rstest]
#[case::bad_branch(json!({"type": "relationship", "subject": "a", "predicate": "p", "object": "o", "object-entity": "yes"}), "/object-entity: expected boolean, got string \"yes\" (as `relationship`)")]
#[case::missing_in_branch(json!({"type": "definition", "entity": "a"}), "/: missing required field \"definition\" (as `definition`)")]
#[case::unknown_tag(json!({"type": "event"}), "/type: unknown type \"event\"; expected one of `definition`, `relationship`")]
#[case::no_tag(json!({"entity": "a"}), "/: missing `type` field; expected one of `definition`, `relationship` (oneOf)")]
fn discriminated_union_diagnostics(#[case] value: Value, #[case] expected: &str) {
    let s = CompiledSchema::compile(&union_schema(), "u").unwrap();
    let v = s.validate(&value).unwrap_err();
    assert_eq!(kerf_core::schema::describe(&v), expected);
}

#[test]
fn union_branches_through_refs_with_root_keywords() {
    // Branches given as $refs, and a root keyword beside oneOf (so the full schema decides).
    let schema = json!({
        "$defs": {
            "a": {"type": "object", "properties": {"type": {"const": "a"}, "n": {"type": "integer"}}, "required": ["type", "n"]},
            "b": {"type": "object", "properties": {"type": {"enum": ["b"]}}, "required": ["type"]}
        },
        "required": ["type"],
        "oneOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}]
    });
    let s = CompiledSchema::compile(&schema, "r").unwrap();
    assert_eq!(s.union_tags(), vec!["a", "b"]);
    assert!(s.is_valid(&json!({"type": "a", "n": 1})));
    let v = s.validate(&json!({"type": "a", "n": "1"})).unwrap_err();
    assert_eq!(v[0].pointer, "/n");
}

#[test]
fn fast_path_agrees_with_full_validation() {
    // The branch-only fast path must accept and refuse exactly what full validation does.
    let s = CompiledSchema::compile(&union_schema(), "u").unwrap();
    let full = jsonschema::validator_for(&union_schema()).unwrap();
    let samples = [
        json!({"type": "definition", "entity": "a", "definition": "b"}),
        json!({"type": "definition", "entity": "a"}),
        json!({"type": "relationship", "subject": "a", "predicate": "p", "object": "o", "object-entity": false}),
        json!({"type": "relationship", "subject": "a"}),
        json!({"type": "other"}),
        json!({"type": 3}),
        json!({}),
        json!([]),
    ];
    for v in samples {
        assert_eq!(s.is_valid(&v), full.is_valid(&v), "{v}");
        assert_eq!(s.validate(&v).is_ok(), full.is_valid(&v), "{v}");
    }
}
