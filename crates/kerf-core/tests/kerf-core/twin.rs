//! Twins written by Kerf: the JSON-array twin of each shipped JSONL prompt is the hand-written
//! one (its instructions, schema and parse settings), twins go back to where they came from, and
//! a new prompt in every format loads, compiles and twins.

use kerf_core::twin::{new_prompt, twin};
use kerf_core::{Prompt, PromptFile, ResponseType};
use serde_json::{Map, Value, json};

use crate::support::repo;

fn object(path: &std::path::Path) -> Map<String, Value> {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_array_twin_of_each_shipped_jsonl_prompt_is_the_shipped_one() {
    let dir = repo().join("prompts");
    let mut checked = 0;
    for id in [
        "agent-kg-extract",
        "extract-definitions",
        "extract-relationships",
        "extract-rows",
        "extract-topics",
        "extract-with-ontologies",
    ] {
        let source = object(&dir.join(format!("{id}.json")));
        let shipped = object(&dir.join(format!("{id}-array.json")));
        let made = twin(&source, id, id).unwrap();
        assert_eq!(made.id, format!("{id}-array"));
        assert_eq!(made.response_type, ResponseType::Json);
        for key in [
            "id",
            "prompt",
            "response-type",
            "schema",
            "twin",
            "salvage",
            "description",
            "system",
        ] {
            assert_eq!(made.file.get(key), shipped.get(key), "{id}: `{key}`");
        }
        // And back: the JSONL twin of the array twin is the source.
        let back = twin(&made.file, &made.id, &made.id).unwrap();
        assert_eq!(back.id, id);
        for key in [
            "id",
            "prompt",
            "response-type",
            "schema",
            "twin",
            "description",
            "system",
        ] {
            assert_eq!(
                back.file.get(key),
                source.get(key),
                "{id} and back: `{key}`"
            );
        }
        assert!(
            !back.file.contains_key("salvage"),
            "{id}: the JSONL twin salvages as JSONL does"
        );
        checked += 1;
    }
    assert_eq!(checked, 6);
}

#[test]
fn a_prompt_worded_otherwise_gets_the_format_sentence_and_unknown_keys_survive() {
    let source: Map<String, Value> = serde_json::from_value(json!({
        "id": "people",
        "prompt": "List the people in {{ text }}.",
        "response-type": "jsonl",
        "schema": {"type": "object", "$defs": {"n": {"type": "string"}},
                   "properties": {"name": {"$ref": "#/$defs/n"}}, "required": ["name"]},
        "tests": [{"name": "one", "input": "Ada met Charles.", "expected": [{"name": "Ada"}]}]
    }))
    .unwrap();
    let made = twin(&source, "people", "people.json").unwrap();
    let prompt = made.file["prompt"].as_str().unwrap();
    assert!(
        prompt.starts_with("List the people in {{ text }}.\n\nOutput a single JSON array"),
        "{prompt}"
    );
    assert!(
        made.changes
            .iter()
            .any(|c| c.contains("no sentence named the format")),
        "{:?}",
        made.changes
    );
    assert_eq!(made.file["tests"], source["tests"]);
    // The $defs moved to the array's root, so the item's $ref still resolves: it compiles.
    assert_eq!(
        made.file["schema"]["$defs"],
        json!({"n": {"type": "string"}})
    );
    let loaded = PromptFile::from_value(Value::Object(made.file.clone()), "twin", None).unwrap();
    Prompt::from_loaded(loaded, std::path::Path::new("twin.json")).unwrap();
}

#[test]
fn prompts_without_a_twin_say_why() {
    let delimited = object(&repo().join("prompts/lightrag-extract-delimited.json"));
    let e = twin(
        &delimited,
        "lightrag-extract-delimited",
        "lightrag-extract-delimited.json",
    )
    .unwrap_err();
    assert_eq!(e.code(), "prompt_file");
    assert!(
        e.to_string().contains("lightrag-extract-delimited.json")
            && e.to_string().contains("no twin"),
        "{e}"
    );
    let object_root: Map<String, Value> = serde_json::from_value(json!({
        "prompt": "{{ text }}", "response-type": "json", "schema": {"type": "object"}
    }))
    .unwrap();
    let e = twin(&object_root, "x", "x.json").unwrap_err().to_string();
    assert!(e.contains("array schema"), "{e}");
}

#[test]
fn a_new_prompt_in_each_format_compiles_and_its_twin_is_the_other_new_prompt() {
    for format in [
        ResponseType::Jsonl,
        ResponseType::Json,
        ResponseType::Delimited,
    ] {
        let made = new_prompt("people", format, None, Some("inputs/people.txt")).unwrap();
        let loaded = PromptFile::from_value(Value::Object(made.clone()), "new", None).unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let p = Prompt::from_loaded(loaded, std::path::Path::new("people.json")).unwrap();
        assert_eq!(p.file.response_type, format);
        assert_eq!(p.file.sample_input.as_deref(), Some("inputs/people.txt"));
        let prompt = made["prompt"].as_str().unwrap();
        assert!(
            prompt.contains("- name: The name of the thing") && prompt.contains("{{ text }}"),
            "{prompt}"
        );
    }
    let jsonl = new_prompt("people", ResponseType::Jsonl, None, None).unwrap();
    let json = new_prompt("people-array", ResponseType::Json, None, None).unwrap();
    let made = twin(&jsonl, "people", "people.json").unwrap();
    assert_eq!(
        made.file["prompt"], json["prompt"],
        "the twin words it as a new array prompt does"
    );
    let mut item = jsonl["schema"].clone();
    item.as_object_mut().unwrap().remove("$schema");
    assert_eq!(
        made.file["schema"]["items"], item,
        "the item schema, its `$schema` at the root"
    );
    // A union's branches are listed each under its title.
    let union = json!({"oneOf": [
        {"title": "Person", "type": "object", "properties": {"type": {"const": "person"}, "name": {"type": "string"}}},
        {"title": "Place", "type": "object", "properties": {"type": {"const": "place"}, "name": {"type": "string"}}}
    ]});
    let made = new_prompt("things", ResponseType::Jsonl, Some(union), None).unwrap();
    let prompt = made["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("Person:\n- type: always \"person\"") && prompt.contains("Place:\n"),
        "{prompt}"
    );
    let e = new_prompt("x", ResponseType::Text, None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("jsonl, json or delimited"), "{e}");
}
