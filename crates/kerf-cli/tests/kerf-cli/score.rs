//! `kerf score`: the interface tools rely on, kept exactly, on a hand-worked document.

use serde_json::json;

use super::{kerf, stderr, stdout_json};

const GOLD: &str = r#"{"type": "definition", "entity": "Chlorophyll", "definition": "The green pigment that absorbs light", "aliases": {"entity": ["chlorophyll a"]}}
{"type": "definition", "entity": "Stroma", "definition": "The fluid inside a chloroplast"}
{"type": "relationship", "subject": "chlorophyll", "predicate": "found in", "object": "chloroplasts", "object-entity": true}
"#;

// The shipped prompt matches a relationship on subject and object (its `match`), so "located in"
// pairs with "found in" and the predicate shows up only as agreement. "the chlorophyll."
// normalises to "chlorophyll" (article and full stop gone); "stroma" twice is one match and one
// spurious duplicate; Mitochondria is neither expected nor in the document.
const GOT: &str = r#"{"type": "definition", "entity": "the chlorophyll.", "definition": "A green pigment absorbing light"}
{"type": "definition", "entity": "Stroma", "definition": "The fluid inside a chloroplast"}
{"type": "definition", "entity": "stroma", "definition": "again"}
{"type": "relationship", "subject": "Chlorophyll", "predicate": "located in", "object": "chloroplasts", "object-entity": true}
{"type": "definition", "entity": "Mitochondria", "definition": "powerhouse"}
"#;

const DOC: &str =
    "Chlorophyll is found in chloroplasts. The stroma is the fluid inside a chloroplast.";

/// `kerf score --json` of `got` against `gold` with the shipped knowledge-graph prompt, files
/// written in `dir`; grounded against `doc` when given.
fn scored(dir: &std::path::Path, gold: &str, got: &str, doc: Option<&str>) -> std::process::Output {
    let (gold_file, got_file, doc_file) = (
        dir.join("gold.jsonl"),
        dir.join("got.jsonl"),
        dir.join("doc.txt"),
    );
    std::fs::write(&gold_file, gold).unwrap();
    std::fs::write(&got_file, got).unwrap();
    let mut args = vec![
        "score".to_string(),
        "--prompt".into(),
        "prompts/agent-kg-extract.json".into(),
        "--expected".into(),
        gold_file.display().to_string(),
        "--actual".into(),
        got_file.display().to_string(),
        "--json".into(),
    ];
    if let Some(doc) = doc {
        std::fs::write(&doc_file, doc).unwrap();
        args.extend(["--input".to_string(), doc_file.display().to_string()]);
    }
    kerf(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn score_json_form_is_exactly_the_documented_object() {
    let dir = tempfile::tempdir().unwrap();
    let o = scored(dir.path(), GOLD, GOT, Some(DOC));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    for key in [
        "tp",
        "fp",
        "fn",
        "precision",
        "recall",
        "f1",
        "by_type",
        "matched",
        "missed",
        "spurious",
        "ungrounded",
    ] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    // tp 3 (Chlorophyll, Stroma, the relationship), fp 2, fn 0: P 3/5, R 1, F1 6/(6+2) = 0.75.
    assert_eq!(
        (v["tp"].clone(), v["fp"].clone(), v["fn"].clone()),
        (json!(3), json!(2), json!(0))
    );
    assert_eq!(v["precision"], json!(0.6));
    assert_eq!(v["recall"], json!(1.0));
    assert_eq!(v["f1"], json!(0.75));
    assert_eq!(
        v["by_type"]["relationship"],
        json!({"tp": 1, "fp": 0, "fn": 0, "precision": 1.0, "recall": 1.0, "f1": 1.0})
    );
    assert_eq!(v["by_type"]["definition"]["f1"], json!(2.0 / 3.0));
    assert_eq!(v["matched"][0]["actual"]["entity"], "the chlorophyll.");
    assert_eq!(v["matched"][0]["similarity"], json!(1.0));
    assert_eq!(v["matched"][2]["actual"]["predicate"], "located in");
    assert_eq!(v["missed"], json!([]));
    assert_eq!(v["spurious"].as_array().unwrap().len(), 2);
    assert_eq!(
        v["spurious"][0]["definition"], "again",
        "the later duplicate is the spurious one"
    );
    assert_eq!(
        v["ungrounded"],
        json!([{"type": "definition", "entity": "Mitochondria", "definition": "powerhouse"}])
    );
    // Without --input there is no grounding key.
    let o = scored(dir.path(), GOLD, GOT, None);
    assert!(stdout_json(&o).get("ungrounded").is_none());
}

#[test]
fn score_refuses_an_expected_record_that_fails_the_schema_naming_line_and_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let (gold, got) = (dir.path().join("gold.jsonl"), dir.path().join("got.jsonl"));
    std::fs::write(&gold, "{\"type\": \"definition\", \"entity\": \"a\", \"definition\": \"b\"}\n{\"type\": \"relationship\", \"subject\": 3}\nnot json\n").unwrap();
    std::fs::write(&got, "").unwrap();
    let o = kerf(&[
        "score",
        "--prompt",
        "prompts/agent-kg-extract.json",
        "--expected",
        gold.to_str().unwrap(),
        "--actual",
        got.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("error[dataset]"), "{err}");
    assert!(
        err.contains(&format!("{}:3: not valid JSON", gold.display())),
        "{err}"
    );
    std::fs::write(&gold, "{\"type\": \"definition\", \"entity\": \"a\", \"definition\": \"b\"}\n{\"type\": \"relationship\", \"subject\": 3, \"predicate\": \"p\", \"object\": \"o\", \"object-entity\": true}\n").unwrap();
    let o = kerf(&[
        "score",
        "--prompt",
        "prompts/agent-kg-extract.json",
        "--expected",
        gold.to_str().unwrap(),
        "--actual",
        got.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "{}:2: /subject: fails prompt `agent-kg-extract`'s record schema",
            gold.display()
        )),
        "{err}"
    );
}

#[test]
fn score_explain_prints_the_identity_fields_per_type() {
    let o = kerf(&[
        "score",
        "--prompt",
        "prompts/agent-kg-extract.json",
        "--explain",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("type `definition`: identity `entity`"),
        "{out}"
    );
    assert!(
        out.contains(
            "type `relationship`: identity `subject`, `object` (declared in the prompt's `match.keys`)"
        ),
        "{out}"
    );
    // Without `match`, the defaults and why each field was left out (extract-definitions has
    // none).
    let o = kerf(&[
        "score",
        "--prompt",
        "prompts/extract-definitions.json",
        "--explain",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("`definition` left out: free text"), "{out}");
}

/// A Japanese document has no spaces between words: names written inside its sentences are
/// grounded, an invented one is not.
#[test]
fn names_in_a_document_written_without_spaces_are_grounded() {
    let dir = tempfile::tempdir().unwrap();
    let records = r#"{"type": "definition", "entity": "葉緑体", "definition": "光合成を行う器官"}
{"type": "relationship", "subject": "クロロフィル", "predicate": "含まれる", "object": "葉緑体", "object-entity": true}
"#;
    let invented = r#"{"type": "definition", "entity": "ミトコンドリア", "definition": "発電所"}"#;
    let doc = "クロロフィルは葉緑体に含まれ、葉緑体は光合成を行う器官である。";
    let o = scored(
        dir.path(),
        records,
        &format!("{records}{invented}\n"),
        Some(doc),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!((v["tp"].clone(), v["fp"].clone()), (json!(2), json!(1)));
    assert_eq!(
        v["ungrounded"],
        json!([{"type": "definition", "entity": "ミトコンドリア", "definition": "発電所"}])
    );
}
