//! Export and import: TrustGraph bundles (lossless round trip), OpenAI and Anthropic shapes.

use kerf_core::export::{provider, trustgraph};
use kerf_core::{Prompt, PromptFile};
use serde_json::{Value, json};

use crate::support::repo;

fn shipped() -> Vec<PromptFile> {
    let mut files: Vec<_> = std::fs::read_dir(repo().join("prompts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| PromptFile::load(p).unwrap().file)
        .collect()
}

#[test]
fn bundle_has_trustgraph_shape() {
    let prompts = shipped();
    let b = trustgraph::bundle(&prompts, None).unwrap().value;
    let m = b.as_object().unwrap();
    // Every value is a JSON-encoded string, as TrustGraph's config API stores them.
    assert!(m.values().all(Value::is_string));
    let index: Vec<String> = serde_json::from_str(m["template-index"].as_str().unwrap()).unwrap();
    assert_eq!(index.len(), prompts.len());
    let system: String = serde_json::from_str(m["system"].as_str().unwrap()).unwrap();
    assert!(system.starts_with("You are"), "{system}");
    let t: Value = serde_json::from_str(m["template.agent-kg-extract"].as_str().unwrap()).unwrap();
    assert_eq!(t["response-type"], "jsonl");
    assert!(t["schema"]["oneOf"].is_array());
    let d: Value =
        serde_json::from_str(m["template.lightrag-extract-delimited"].as_str().unwrap()).unwrap();
    assert_eq!(
        d["response-type"], "text",
        "TrustGraph has no delimited type"
    );
    assert_eq!(d["kerf"]["response-type"], "delimited");
}

#[test]
fn bundle_round_trip_is_lossless() {
    let prompts = shipped();
    let b = trustgraph::bundle(&prompts, None).unwrap().value;
    let back = trustgraph::import(&b, "x", "bundle").unwrap();
    assert_eq!(back, prompts);
}

#[test]
fn template_round_trip_is_lossless() {
    for p in shipped() {
        let t = trustgraph::template_object(&p).value;
        let back = trustgraph::import(&t, p.id(), "t").unwrap();
        assert_eq!(back, vec![p]);
    }
}

#[test]
fn foreign_bundle_imports_with_global_system() {
    let bundle = json!({
        "system": "\"You are terse.\"",
        "template-index": "[\"b\", \"a\"]",
        "template.a": "{\"prompt\": \"A {{text}}\", \"response-type\": \"jsonl\", \"object-schema\": {\"type\": \"object\"}}",
        "template.b": "{\"prompt\": \"B\"}"
    });
    let got = trustgraph::import(&bundle, "x", "b.json").unwrap();
    assert_eq!(
        got.iter().map(|p| p.id()).collect::<Vec<_>>(),
        vec!["b", "a"],
        "index order"
    );
    assert_eq!(got[1].schema, Some(json!({"type": "object"})));
    assert_eq!(got[1].system.as_deref(), Some("You are terse."));
}

#[test]
fn import_errors_name_the_key() {
    let err = trustgraph::import(&json!({"template.a": "{not json"}), "x", "b.json").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("b.json key `template.a`: cannot import"),
        "{err}"
    );
    let err = trustgraph::import(&json!({"foo": 1}), "x", "b.json").unwrap_err();
    assert!(
        err.to_string().contains("not a TrustGraph prompt bundle"),
        "{err}"
    );
}

fn assert_openai_strict(schema: &Value) {
    // OpenAI's rules, checked structurally on every object schema in the result.
    fn walk(v: &Value, at: &str) {
        if let Value::Object(m) = v {
            assert!(!m.contains_key("oneOf"), "{at}: oneOf left");
            if m.contains_key("properties") {
                assert_eq!(m.get("additionalProperties"), Some(&json!(false)), "{at}");
                let props: Vec<&String> = m["properties"].as_object().unwrap().keys().collect();
                let req: Vec<&str> = m["required"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r.as_str().unwrap())
                    .collect();
                for p in props {
                    assert!(req.contains(&p.as_str()), "{at}: {p} not required");
                }
            }
            for (k, c) in m {
                walk(c, &format!("{at}/{k}"));
            }
        } else if let Value::Array(a) = v {
            for (i, c) in a.iter().enumerate() {
                walk(c, &format!("{at}/{i}"));
            }
        }
    }
    assert_eq!(schema["type"], "object");
    walk(schema, "");
}

#[test]
fn openai_export_is_strict_for_every_shipped_prompt() {
    for p in shipped() {
        let e = provider::openai(&p);
        assert_eq!(e.value["type"], "json_schema");
        assert_eq!(e.value["json_schema"]["strict"], true);
        let schema = &e.value["json_schema"]["schema"];
        assert_openai_strict(schema);
        // Still a valid schema.
        kerf_core::CompiledSchema::compile(schema, p.id()).unwrap();
    }
}

#[test]
fn openai_rewrite_lists_changes_and_keeps_meaning() {
    let p = PromptFile::from_json_str(
        r#"{"id": "t", "prompt": "x", "response-type": "json", "schema": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}, "b": {"type": "integer"}}, "required": ["a"]}}}"#,
        "t",
    )
    .unwrap()
    .file;
    let e = provider::openai(&p);
    let s = &e.value["json_schema"]["schema"];
    assert_eq!(s["required"], json!(["items"]));
    let item = &s["properties"]["items"]["items"];
    assert_eq!(
        item["properties"]["b"]["type"],
        json!(["integer", "null"]),
        "optional made nullable"
    );
    assert_eq!(item["required"], json!(["a", "b"]));
    assert!(item["properties"]["a"].get("maxLength").is_none());
    let notes = e.notes.join("\n");
    assert!(notes.contains("`maxLength`"), "{notes}");
    assert!(notes.contains("optional property `b`"), "{notes}");
    assert!(notes.contains("root must be an object"), "{notes}");
}

#[test]
fn openai_jsonl_union_becomes_items_of_any_of() {
    let p = PromptFile::load(&repo().join("prompts/agent-kg-extract.json"))
        .unwrap()
        .file;
    let e = provider::openai(&p);
    let items = &e.value["json_schema"]["schema"]["properties"]["items"]["items"];
    assert_eq!(items["anyOf"].as_array().unwrap().len(), 2);
    assert!(
        e.notes
            .iter()
            .any(|n| n.contains("no structured-output equivalent"))
    );
}

#[test]
fn anthropic_export_forces_one_tool_with_object_root() {
    let p = PromptFile::load(&repo().join("prompts/extract-definitions-array.json"))
        .unwrap()
        .file;
    let e = provider::anthropic(&p).value;
    assert_eq!(
        e["tool_choice"],
        json!({"type": "tool", "name": "extract-definitions-array"})
    );
    let schema = &e["tools"][0]["input_schema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["items"]["type"], "array");
    assert!(schema.get("$schema").is_none());
}

#[test]
fn exported_prompts_still_compile() {
    for p in shipped() {
        let back = trustgraph::import(&trustgraph::template_object(&p).value, p.id(), "t").unwrap();
        Prompt::compile(back[0].clone(), p.id()).unwrap();
    }
}
