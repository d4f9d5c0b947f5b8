//! `json`, strict (TrustGraph's behaviour) and salvage.

use kerf_core::{Parser, ResponseType::Json};
use rstest::rstest;
use serde_json::{Map, Value, json};

use crate::support::*;

fn array_schema() -> Value {
    json!({"type": "array", "items": definition_schema()})
}

fn salvage(text: &str, schema: Option<Value>) -> kerf_core::ParseReport {
    let p: Parser = parser(Json, schema).with_salvage(true);
    p.parse(text, &Map::new())
}

#[rstest]
#[case::whole_text("[{\"entity\": \"a\", \"definition\": \"A\"}]", 1)]
#[case::fenced(
    "Here:\n```json\n[{\"entity\": \"a\", \"definition\": \"A\"}]\n```\nThanks",
    1
)]
#[case::fence_any_tag(
    "```JSON5\n[{\"entity\": \"a\", \"definition\": \"A\"}, {\"entity\": \"b\", \"definition\": \"B\"}]\n```",
    2
)]
#[case::bare_fence("```\n[]\n```", 0)]
fn strict_accepts(#[case] text: &str, #[case] n: usize) {
    let r = parse(Json, Some(array_schema()), text);
    assert_eq!(r.objects.len(), n, "{:?}", r.dropped);
    assert!(r.dropped.is_empty());
    assert!(!r.truncated);
}

#[test]
fn strict_single_object_is_the_one_object() {
    let r = parse(
        Json,
        Some(definition_schema()),
        "{\"entity\": \"a\", \"definition\": \"A\"}",
    );
    assert_eq!(r.objects, vec![def("a", "A")]);
}

#[rstest]
#[case::cut_off("[{\"entity\": \"a\", \"definition\": \"A\"}, {\"entity\": \"b\"", (1, "truncated"), true)]
#[case::invalid("[{\"entity\": \"a\", \"definition\": \"A\"},\n {\"entity\": b}]", (2, "invalid_json"), false)]
#[case::one_bad_element_fails_all("[{\"entity\": \"a\", \"definition\": \"A\"}, {\"entity\": \"b\"}]", (1, "schema"), false)]
#[case::prose_around("Sure, here it is: [{\"entity\": \"a\", \"definition\": \"A\"}]", (1, "invalid_json"), false)]
#[case::empty("", (1, "truncated"), true)]
#[case::cut_string_then_newline("[{\"entity\": \"a\", \"definition\": \"A\"}, {\"entity\": \"b\n", (1, "truncated"), true)]
fn strict_fails(#[case] text: &str, #[case] drop: (usize, &str), #[case] truncated: bool) {
    let r = parse(Json, Some(array_schema()), text);
    assert!(r.objects.is_empty());
    assert_eq!(drops(&r), vec![drop]);
    assert_eq!(r.truncated, truncated);
    assert!(r.failed());
}

#[test]
fn strict_schema_error_names_the_element_pointer() {
    let r = parse(
        Json,
        Some(array_schema()),
        "[{\"entity\": \"a\", \"definition\": \"A\"}, {\"entity\": \"b\"}]",
    );
    assert_eq!(
        r.dropped[0].detail,
        "/1: missing required field \"definition\""
    );
}

#[test]
fn salvage_recovers_complete_elements_of_a_cut_array() {
    let text = "```json\n[\n  {\"entity\": \"a\", \"definition\": \"A\"},\n  {\"entity\": \"b\", \"definition\": \"B\"},\n  {\"entity\": \"c\", \"defi";
    let r = salvage(text, Some(array_schema()));
    assert_eq!(r.objects, vec![def("a", "A"), def("b", "B")]);
    assert_eq!(drops(&r), vec![(5, "truncated")]);
    assert!(r.truncated);
}

#[test]
fn salvage_never_closes_a_cut_element() {
    // The cut element would be valid if closed after "c" — it must still be dropped.
    let r = salvage(
        "[{\"entity\": \"a\", \"definition\": \"A\"}, {\"entity\": \"c\", \"definition\": \"C\"",
        None,
    );
    assert_eq!(r.objects, vec![def("a", "A")]);
    assert_eq!(drops(&r), vec![(1, "truncated")]);
}

#[test]
fn salvage_drops_one_bad_element_not_the_array() {
    let text = "[\n{\"entity\": \"a\", \"definition\": \"A\"},\n{\"entity\": \"b\"},\n{\"entity\": \"c\", \"definition\": \"C\"}\n]";
    let r = salvage(text, Some(array_schema()));
    assert_eq!(r.objects, vec![def("a", "A"), def("c", "C")]);
    assert_eq!(drops(&r), vec![(3, "schema")]);
    assert!(!r.truncated);
}

#[test]
fn salvage_finds_the_value_in_prose() {
    let r = salvage(
        "Sure! [1] is my note. The answer:\n[{\"entity\": \"a\", \"definition\": \"A\"}]\nBye.",
        Some(array_schema()),
    );
    assert_eq!(r.objects, vec![def("a", "A")]);
}

#[test]
fn salvage_opening_fence_without_close() {
    let r = salvage(
        "```json\n[{\"entity\": \"a\", \"definition\": \"A\"}]\n",
        Some(array_schema()),
    );
    assert_eq!(r.objects, vec![def("a", "A")]);
    assert!(
        r.truncated,
        "an unclosed fence means the reply stopped early"
    );
}

#[test]
fn salvage_resyncs_after_a_broken_element() {
    let text = "[\n{\"entity\": \"a\", \"definition\": \"A\"},\n{\"entity\": oops},\n{\"entity\": \"c\", \"definition\": \"C\"}\n]";
    let r = salvage(text, Some(array_schema()));
    assert_eq!(r.objects, vec![def("a", "A"), def("c", "C")]);
    assert_eq!(drops(&r), vec![(3, "invalid_json")]);
}

fn lightrag_schema() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(repo().join("schemas/lightrag-json.schema.json")).unwrap(),
    )
    .unwrap()
}

#[test]
fn salvage_object_recovers_arrays_under_top_level_keys() {
    let text = r#"{
  "entities": [
    {"entity_name": "Flannan Isles", "entity_type": "geo", "entity_description": "Islands off Scotland"},
    {"entity_name": "James Ducat", "entity_type": "person", "entity_description": "A keeper"}
  ],
  "relationships": [
    {"source_entity": "James Ducat", "target_entity": "Flannan Isles", "relationship_keywords": ["keeper"], "relationship_description": "Kept the light", "relationship_strength": 8},
    {"source_entity": "Thomas Marshall", "target_entity": "Flann"#;
    let r = salvage(text, Some(lightrag_schema()));
    assert_eq!(r.objects.len(), 1);
    let o = &r.objects.to_vec()[0];
    assert_eq!(o["entities"].as_array().unwrap().len(), 2);
    assert_eq!(o["relationships"].as_array().unwrap().len(), 1);
    assert!(o.get("content_keywords").is_none(), "never invented");
    assert_eq!(drops(&r), vec![(8, "truncated"), (1, "truncated")]);
    assert!(
        r.dropped[1].detail.contains("`content_keywords`"),
        "{}",
        r.dropped[1].detail
    );
    assert!(r.truncated);
}

#[test]
fn salvage_object_drops_bad_elements_individually() {
    let text = r#"{"entities": [{"entity_name": "A", "entity_type": "person", "entity_description": "x"}, {"entity_name": "B"}], "relationships": [], "content_keywords": ["k"]}"#;
    let r = salvage(text, Some(lightrag_schema()));
    assert_eq!(
        r.objects.to_vec()[0]["entities"].as_array().unwrap().len(),
        1
    );
    assert_eq!(drops(&r), vec![(1, "schema")]);
    assert!(!r.truncated);
}

#[test]
fn salvage_with_nothing_json() {
    let r = salvage("I cannot help with that.", None);
    assert!(r.objects.is_empty());
    assert_eq!(drops(&r), vec![(1, "invalid_json")]);
}

#[test]
fn text_response_type_is_the_reply_as_is() {
    // Spec: backward compatibility of `text` prompts.
    let r = parse(kerf_core::ResponseType::Text, None, "Hello\nworld");
    assert_eq!(r.objects, vec![Value::String("Hello\nworld".into())]);
}
