//! Prompt files: bare TrustGraph objects, aliases, warnings for unknown keys, errors for wrong types.

use kerf_core::{Error, Prompt, PromptFile, ResponseType};
use rstest::rstest;
use serde_json::json;

#[test]
fn bare_trustgraph_template_loads() {
    let text = r#"{"prompt": "Extract from {{text}}", "response-type": "jsonl", "schema": {"type": "object"}}"#;
    let l = PromptFile::from_json_str(text, "t.json").unwrap();
    assert!(l.warnings.is_empty());
    assert_eq!(l.file.response_type, ResponseType::Jsonl);
    assert_eq!(l.file.schema, Some(json!({"type": "object"})));
}

#[test]
fn response_type_defaults_to_text_like_trustgraph() {
    let l = PromptFile::from_json_str(r#"{"prompt": "Hi"}"#, "t.json").unwrap();
    assert_eq!(l.file.response_type, ResponseType::Text);
}

#[test]
fn object_schema_is_an_alias_of_schema() {
    let l = PromptFile::from_json_str(
        r#"{"prompt": "x", "response-type": "jsonl", "object-schema": {"type": "object"}}"#,
        "t.json",
    )
    .unwrap();
    assert_eq!(l.file.schema, Some(json!({"type": "object"})));
    // Kept under its own name when written, and TrustGraph's treatment of it is a warning.
    assert_eq!(
        l.file.schema_key,
        kerf_core::prompt::SchemaKey::ObjectSchema
    );
    assert!(l.file.to_json_string().contains("\"object-schema\""));
    assert!(!l.file.to_json_string().contains("\"schema\""));
    assert_eq!(l.warnings.len(), 1);
    assert!(
        l.warnings[0].contains("TrustGraph ignores `object-schema`"),
        "{:?}",
        l.warnings
    );
}

#[test]
fn unknown_keys_warn_with_their_line() {
    let text = "{\n  \"prompt\": \"x\",\n  \"temprature\": 0.2\n}";
    let l = PromptFile::from_json_str(text, "p.json").unwrap();
    assert_eq!(
        l.warnings,
        vec!["p.json:3: unknown key `temprature` ignored".to_string()]
    );
}

#[rstest]
#[case::wrong_type(
    "{\n\"prompt\": \"x\",\n\"terms\": [1]\n}",
    "p.json:3: key `terms`: invalid type: sequence, expected a map"
)]
#[case::unknown_response_type(
    "{\"prompt\": \"x\", \"response-type\": \"xml\"}",
    "p.json:1: key `response-type`: unknown variant `xml`, expected one of `text`, `json`, `jsonl`, `delimited`"
)]
#[case::prompt_not_string(
    "{\"prompt\": 3}",
    "p.json:1: key `prompt`: invalid type: integer `3`, expected a string"
)]
#[case::missing_prompt("{\"schema\": {}}", "p.json: missing key `prompt` (the template text)")]
#[case::not_an_object(
    "[1, 2]",
    "p.json: a prompt file must be a JSON object with at least a `prompt` key, not an array"
)]
#[case::nested_wrong_type(
    "{\"prompt\": \"x\", \"post\": {\"ensure\": \"a\"}}",
    "p.json:1: key `post.ensure`: invalid type: string \"a\", expected a sequence"
)]
fn wrong_shapes_name_the_key(#[case] text: &str, #[case] expected: &str) {
    let err = PromptFile::from_json_str(text, "p.json").unwrap_err();
    assert_eq!(err.to_string(), expected);
    assert_eq!(err.code(), "prompt_file");
}

#[test]
fn invalid_json_names_line_and_column() {
    let err = PromptFile::from_json_str("{\n  \"prompt\": \"x\",,\n}", "p.json").unwrap_err();
    assert!(matches!(err, Error::Json { line: 2, .. }), "{err}");
    assert!(err.to_string().starts_with("p.json:2:"), "{err}");
}

#[test]
fn a_bad_schema_in_a_prompt_names_the_key_and_pointer() {
    let f = PromptFile::from_json_str(
        r#"{"prompt": "x", "response-type": "json", "schema": {"type": "arry"}}"#,
        "p.json",
    )
    .unwrap()
    .file;
    let err = Prompt::compile(f, "p.json").unwrap_err();
    assert_eq!(err.code(), "schema_invalid");
    assert!(
        err.to_string()
            .starts_with("p.json (key `schema`): invalid JSON Schema at /type:"),
        "{err}"
    );
}

#[test]
fn published_schema_has_no_drift() {
    // `KERF_UPDATE_SCHEMAS=1 cargo test` rewrites it after an intended change.
    let path = crate::support::repo().join("schemas/kerf-prompt-file.schema.json");
    let generated =
        serde_json::to_string_pretty(&kerf_core::prompt::prompt_file_json_schema()).unwrap() + "\n";
    if std::env::var_os("KERF_UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "schemas/kerf-prompt-file.schema.json is stale: run `KERF_UPDATE_SCHEMAS=1 cargo test -p kerf-core`"
    );
}

#[test]
fn prompt_files_validate_against_the_published_schema() {
    let schema = kerf_core::CompiledSchema::compile(
        &kerf_core::prompt::prompt_file_json_schema(),
        "prompt-file schema",
    )
    .unwrap();
    for entry in std::fs::read_dir(crate::support::repo().join("prompts")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            assert!(
                schema.validate(&v).is_ok(),
                "{}: {:?}",
                path.display(),
                schema.validate(&v)
            );
        }
    }
}

/// Security review, finding 1: `repair.max-attempts` was documented as 1–10 but never checked; a
/// prompt file (or an imported bundle's `kerf` object) with 1,000,000 made a run send that many
/// paid requests.
#[rstest]
#[case::zero(0)]
#[case::eleven(11)]
#[case::a_million(1_000_000)]
fn repair_max_attempts_outside_1_to_10_is_refused_with_its_line(#[case] n: u32) {
    let text = format!("{{\n  \"prompt\": \"x\",\n  \"repair\": {{\"max-attempts\": {n}}}\n}}");
    let err = PromptFile::from_json_str(&text, "p.json").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "p.json:3: key `repair.max-attempts`: must be between 1 and 10 (replies in all), got {n}"
        )
    );
    // The same through a TrustGraph bundle's `kerf` object.
    let bundle = json!({
        "template.t": json!({"prompt": "x", "response-type": "text", "kerf": {"repair": {"max-attempts": n}}}).to_string()
    });
    let err = kerf_core::export::trustgraph::import(&bundle, "t", "bundle.json").unwrap_err();
    assert!(err.to_string().contains("repair.max-attempts"), "{err}");
}

/// Security review, finding 11: `sample-input` could name any file (`/etc/…`, `../../…`); it was
/// read into the preview when the prompt was opened and sent to the provider with the sample.
#[rstest]
#[case::absolute("/etc/passwd")]
#[case::parent("../../secrets.txt")]
#[case::parent_inside("inputs/../../x.txt")]
#[case::windows_parent("inputs\\\\..\\\\..\\\\x.txt")]
#[case::drive("C:/Users/x.txt")]
fn sample_input_outside_the_prompt_folder_is_refused(#[case] rel: &str) {
    let text = json!({"prompt": "x", "sample-input": rel}).to_string();
    let err = PromptFile::from_json_str(&text, "p.json").unwrap_err();
    assert!(
        err.to_string()
            .contains("key `sample-input`: must name a file inside the prompt's folder"),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn a_sample_input_symlinked_out_of_the_folder_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("s.txt"))
        .unwrap();
    std::fs::write(dir.path().join("ok.txt"), "sample").unwrap();
    assert_eq!(
        kerf_core::prompt::resolve_sample_input(dir.path(), "s.txt"),
        None
    );
    assert_eq!(
        kerf_core::prompt::resolve_sample_input(dir.path(), "ok.txt"),
        Some(dir.path().join("ok.txt"))
    );
}

/// `tests` in a prompt file: each problem named with the key's line and the test's pointer, and
/// the tests survive a TrustGraph export and import (under `kerf`).
#[rstest]
#[case::no_name(json!([{"name": " ", "input": "x"}]), "/tests/0: a test needs a `name`")]
#[case::twice(json!([{"name": "a", "input": "x"}, {"name": "a", "input": "y"}]), "/tests/1: test name `a` is used twice")]
#[case::nothing_to_run(json!([{"name": "a"}]), "/tests/0: test `a` has neither `input` nor `vars`")]
#[case::zero_budget(json!([{"name": "a", "input": "x", "max-tokens": 0}]), "/tests/0: test `a`: `max-tokens` must be above 0")]
#[case::minimum_above_one(json!([{"name": "a", "input": "x", "min": {"recall": 80}}]), "/tests/0: test `a`: `min.recall` must be between 0 and 1, got 80")]
fn prompt_tests_are_checked_as_the_file_loads(
    #[case] tests: serde_json::Value,
    #[case] message: &str,
) {
    let text = format!("{{\n  \"prompt\": \"{{{{text}}}}\",\n  \"tests\": {tests}\n}}");
    let err = PromptFile::from_json_str(&text, "p.json").unwrap_err();
    assert_eq!(err.to_string(), format!("p.json:3: {message}"));
}

#[test]
fn prompt_tests_round_trip_through_a_trustgraph_bundle() {
    let file = json!({"id": "t", "prompt": "{{text}}", "response-type": "jsonl",
                      "tests": [{"name": "a", "input": "doc", "expected": [{"x": 1}], "min": {"f1": 0.5}}]});
    let loaded = PromptFile::from_json_str(&file.to_string(), "t.json")
        .unwrap()
        .file;
    assert_eq!(loaded.tests[0].min.f1, Some(0.5));
    let bundle =
        kerf_core::export::trustgraph::bundle(std::slice::from_ref(&loaded), None).unwrap();
    let back = kerf_core::export::trustgraph::import(&bundle.value, "t", "bundle.json").unwrap();
    assert_eq!(back[0].tests, loaded.tests);
}
