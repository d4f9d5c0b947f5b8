//! JSONL parsing: every case of TrustGraph's test strategy, and what models really emit.

use kerf_core::ResponseType::Jsonl;
use rstest::rstest;
use serde_json::{Value, json};

use crate::support::*;

fn defs(pairs: &[(&str, &str)]) -> Vec<Value> {
    pairs.iter().map(|(e, d)| def(e, d)).collect()
}

#[rstest]
// TrustGraph spec: valid input.
#[case::valid(
    "{\"entity\": \"a\", \"definition\": \"A\"}\n{\"entity\": \"b\", \"definition\": \"B\"}",
    &[("a", "A"), ("b", "B")], &[], false)]
// Spec: empty lines are skipped, not reported.
#[case::empty_lines(
    "\n{\"entity\": \"a\", \"definition\": \"A\"}\n\n   \n{\"entity\": \"b\", \"definition\": \"B\"}\n\n",
    &[("a", "A"), ("b", "B")], &[], false)]
// Spec: markdown fences.
#[case::fences(
    "```json\n{\"entity\": \"a\", \"definition\": \"A\"}\n```",
    &[("a", "A")], &[], false)]
// Fences with any language tag (TrustGraph's regex only strips json/jsonl at the very start).
#[case::fence_any_tag(
    "Sure!\n```ndjson\n{\"entity\": \"a\", \"definition\": \"A\"}\n```\nDone.",
    &[("a", "A")], &[(1, "prose"), (5, "prose")], false)]
// Spec: truncated final line.
#[case::truncated_final_line(
    "{\"entity\": \"a\", \"definition\": \"A\"}\n{\"entity\": \"b\", \"defin",
    &[("a", "A")], &[(2, "truncated")], true)]
// A cut inside a string followed by a newline is still a cut, not invalid JSON.
#[case::cut_string_then_newline(
    "{\"entity\": \"a\", \"definition\": \"A\"}\n{\"entity\": \"b\", \"definition\": \"par\n",
    &[("a", "A")], &[(2, "truncated")], true)]
// Spec: invalid JSON lines interspersed.
#[case::invalid_interspersed(
    "{\"entity\": \"a\", \"definition\": \"A\"}\n{\"entity\": b}\n{\"entity\": \"c\", \"definition\": \"C\"}",
    &[("a", "A"), ("c", "C")], &[(2, "invalid_json")], false)]
// An unterminated object in the middle does not swallow the next line.
#[case::unterminated_middle(
    "{\"entity\": \"a\", \"definition\": \"A\"\n{\"entity\": \"c\", \"definition\": \"C\"}",
    &[("c", "C")], &[(1, "invalid_json")], false)]
// CRLF line endings and a BOM.
#[case::crlf_bom(
    "\u{feff}{\"entity\": \"a\", \"definition\": \"A\"}\r\n{\"entity\": \"b\", \"definition\": \"B\"}\r\n",
    &[("a", "A"), ("b", "B")], &[], false)]
// An object pretty-printed across several lines.
#[case::pretty_printed(
    "{\n  \"entity\": \"a\",\n  \"definition\": \"A\"\n}\n{\n  \"entity\": \"b\",\n  \"definition\": \"B\"\n}",
    &[("a", "A"), ("b", "B")], &[], false)]
// A pretty-printed object cut off is one truncated drop at its first line.
#[case::pretty_printed_cut(
    "{\"entity\": \"a\", \"definition\": \"A\"}\n{\n  \"entity\": \"b\",\n  \"defin",
    &[("a", "A")], &[(2, "truncated")], true)]
// Several objects on one line, with or without commas.
#[case::several_per_line(
    "{\"entity\": \"a\", \"definition\": \"A\"} {\"entity\": \"b\", \"definition\": \"B\"}, {\"entity\": \"c\", \"definition\": \"C\"}",
    &[("a", "A"), ("b", "B"), ("c", "C")], &[], false)]
// A JSON array on one line.
#[case::array_one_line(
    "[{\"entity\": \"a\", \"definition\": \"A\"}, {\"entity\": \"b\", \"definition\": \"B\"}]",
    &[("a", "A"), ("b", "B")], &[], false)]
// A JSON array over many lines: `[`/`]` lines and trailing commas are punctuation.
#[case::array_many_lines(
    "[\n  {\"entity\": \"a\", \"definition\": \"A\"},\n  {\"entity\": \"b\", \"definition\": \"B\"}\n]",
    &[("a", "A"), ("b", "B")], &[], false)]
// A JSON array cut off: complete elements recovered, the unclosed array marks truncation.
#[case::array_cut(
    "[\n  {\"entity\": \"a\", \"definition\": \"A\"},\n  {\"entity\": \"b\", \"definition\": \"B\"},\n",
    &[("a", "A"), ("b", "B")], &[], true)]
// Prose lines before, between and after.
#[case::prose(
    "Here are the definitions:\n{\"entity\": \"a\", \"definition\": \"A\"}\nI hope this helps.",
    &[("a", "A")], &[(1, "prose"), (3, "prose")], false)]
// Prose then an object on the same line.
#[case::prose_then_object(
    "Result: {\"entity\": \"a\", \"definition\": \"A\"}",
    &[("a", "A")], &[(1, "prose")], false)]
// List markers before objects.
#[case::list_markers(
    "1. {\"entity\": \"a\", \"definition\": \"A\"}\n- {\"entity\": \"b\", \"definition\": \"B\"}",
    &[("a", "A"), ("b", "B")], &[], false)]
// Scalars where objects belong.
#[case::not_object(
    "\"just a string\"\n42\n{\"entity\": \"a\", \"definition\": \"A\"}",
    &[("a", "A")], &[(1, "not_object"), (2, "not_object")], false)]
// A line that fails the schema is dropped with its pointer.
#[case::schema(
    "{\"entity\": \"a\"}\n{\"entity\": \"b\", \"definition\": \"B\"}",
    &[("b", "B")], &[(1, "schema")], false)]
// An unclosed fence means the reply stopped early.
#[case::unclosed_fence(
    "```jsonl\n{\"entity\": \"a\", \"definition\": \"A\"}\n",
    &[("a", "A")], &[], true)]
// Nothing at all.
#[case::empty("", &[], &[], false)]
fn jsonl_cases(
    #[case] text: &str,
    #[case] objects: &[(&str, &str)],
    #[case] dropped: &[(usize, &str)],
    #[case] truncated: bool,
) {
    let r = parse(Jsonl, Some(definition_schema()), text);
    assert_eq!(r.objects, defs(objects), "objects; drops: {:?}", r.dropped);
    assert_eq!(drops(&r), dropped.to_vec(), "drops: {:?}", r.dropped);
    assert_eq!(r.truncated, truncated, "truncated");
}

#[test]
fn discriminated_union_mixed_types() {
    // Spec: mixed-type extraction with a type discriminator.
    let text = r#"{"type": "definition", "entity": "DNA", "definition": "Molecule carrying genetic instructions"}
{"type": "relationship", "subject": "DNA", "predicate": "located_in", "object": "cell nucleus", "object-entity": true}
{"type": "relationship", "subject": "RNA", "predicate": "transcribed_from", "object": "DNA", "object-entity": "yes"}
{"type": "event", "name": "x"}
{"entity": "no type", "definition": "d"}"#;
    let r = parse(Jsonl, Some(union_schema()), text);
    assert_eq!(
        r.objects,
        vec![
            json!({"type": "definition", "entity": "DNA", "definition": "Molecule carrying genetic instructions"}),
            json!({"type": "relationship", "subject": "DNA", "predicate": "located_in", "object": "cell nucleus", "object-entity": true}),
        ]
    );
    assert_eq!(drops(&r), vec![(3, "schema"), (4, "schema"), (5, "schema")]);
    assert_eq!(
        r.dropped[0].detail,
        "/object-entity: expected boolean, got string \"yes\" (as `relationship`)"
    );
    assert_eq!(
        r.dropped[1].detail,
        "/type: unknown type \"event\"; expected one of `definition`, `relationship`"
    );
    assert!(
        r.dropped[2].detail.contains("missing `type` field"),
        "{}",
        r.dropped[2].detail
    );
}

#[test]
fn ontology_all_three_types() {
    // Spec: ontology extraction with all three types, against the shipped schema.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("schemas/extract-with-ontologies.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let text = r#"{"type": "entity", "entity": "Cornish pasty", "entity_type": "fo/Recipe"}
{"type": "entity", "entity": "beef", "entity_type": "fo/Food"}
{"type": "relationship", "subject": "Cornish pasty", "subject_type": "fo/Recipe", "relation": "fo/has_ingredient", "object": "beef", "object_type": "fo/Food"}
{"type": "attribute", "entity": "Cornish pasty", "entity_type": "fo/Recipe", "attribute": "fo/serves", "value": "4 people"}"#;
    let r = parse(Jsonl, Some(schema), text);
    let objects = r.objects.to_vec();
    let types: Vec<&str> = objects
        .iter()
        .map(|o| o["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, vec!["entity", "entity", "relationship", "attribute"]);
    assert!(r.dropped.is_empty(), "{:?}", r.dropped);
}

#[test]
fn without_schema_any_object_is_accepted() {
    let r = parse(Jsonl, None, "{\"x\": 1}\n{\"y\": [1, 2]}");
    assert_eq!(r.objects, vec![json!({"x": 1}), json!({"y": [1, 2]})]);
}

#[test]
fn simulated_truncation_jsonl_keeps_complete_lines_array_keeps_nothing() {
    // Spec: "Verify truncation resilience: JSONL yields partial results where JSON fails."
    let lines: Vec<String> = (0..5)
        .map(|i| format!("{{\"entity\": \"e{i}\", \"definition\": \"d{i}\"}}"))
        .collect();
    let jsonl = lines.join("\n");
    let array = format!("[{}]", lines.join(",\n"));
    for frac in [0.3, 0.5, 0.9] {
        let cut_l = (jsonl.len() as f64 * frac) as usize;
        let cut_a = (array.len() as f64 * frac) as usize;
        let complete_lines = jsonl[..cut_l].matches('}').count();
        let l = parse(Jsonl, Some(definition_schema()), &jsonl[..cut_l]);
        assert_eq!(l.objects.len(), complete_lines, "jsonl at {frac}");
        let a = parse(kerf_core::ResponseType::Json, None, &array[..cut_a]);
        assert!(
            a.objects.is_empty(),
            "strict json at {frac} recovered {:?}",
            a.objects
        );
        assert!(a.truncated);
    }
}

#[test]
fn objects_keep_their_key_order_and_the_last_of_a_repeated_key() {
    let text =
        "{\"z\": 1, \"a\": {\"y\": [3, 2, {\"q\": 0, \"b\": 1}], \"c\": 2}, \"m\": 0, \"z\": 9}\n";
    for (t, text) in [
        (Jsonl, text.to_string()),
        (kerf_core::ResponseType::Json, format!("[{}]", text.trim())),
    ] {
        let r = parse(t, None, &text);
        assert_eq!(
            serde_json::to_string(&r.objects).unwrap(),
            r#"[{"z":9,"a":{"y":[3,2,{"q":0,"b":1}],"c":2},"m":0}]"#
        );
    }
}
