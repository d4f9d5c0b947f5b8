//! `kerf new` and `kerf twin`: a prompt and its twin written from nothing pass `kerf check` and
//! compare at once on the bundled model; a twin goes back to its source; what cannot be twinned
//! or would overwrite a file is refused with nothing written.

use std::path::Path;
use std::process::Output;

use crate::{kerf_cmd, stderr, stdout_json};

fn kerf_in(dir: &Path, args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    kerf_cmd(home.path())
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn new_twin_check_and_compare_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = kerf_in(d, &["new", "people", "--twin", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    let written = v["written"].as_array().unwrap();
    assert_eq!(written.len(), 2);
    assert_eq!(written[0]["id"], "people");
    assert_eq!(written[0]["responseType"], "jsonl");
    assert_eq!(written[1]["id"], "people-array");
    assert_eq!(written[1]["responseType"], "json");
    assert!(
        d.join("inputs/people.txt").is_file(),
        "the sample input is written"
    );
    let people: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("people.json")).unwrap()).unwrap();
    let array: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("people-array.json")).unwrap())
            .unwrap();
    assert_eq!(people["twin"], "people-array");
    assert_eq!(array["twin"], "people");
    assert_eq!(array["schema"]["type"], "array");
    assert_eq!(
        array["schema"]["items"]["properties"],
        people["schema"]["properties"]
    );

    let o = kerf_in(d, &["check", "people.json", "people-array.json", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The twin of the twin is refused: the file exists; --force writes it, the same file.
    let before = std::fs::read_to_string(d.join("people.json")).unwrap();
    let o = kerf_in(d, &["twin", "people-array.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("people.json exists: nothing was written"),
        "{}",
        stderr(&o)
    );
    let o = kerf_in(
        d,
        &["twin", "people-array.json", "--force", "-o", "again.json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let again: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("again.json")).unwrap()).unwrap();
    let people: serde_json::Value = serde_json::from_str(&before).unwrap();
    for key in [
        "prompt",
        "schema",
        "response-type",
        "system",
        "sample-input",
    ] {
        assert_eq!(again[key], people[key], "`{key}` back as it was");
    }
    assert_eq!(again["id"], "again", "a twin's id is its file's name");
    assert_eq!(
        std::fs::read_to_string(d.join("people-array.json")).unwrap(),
        serde_json::to_string_pretty(&array).unwrap() + "\n",
        "a source that names its twin already is left as it was"
    );

    // The pair compares at once, on the bundled model.
    let o = kerf_in(
        d,
        &[
            "compare",
            "people.json",
            "people-array.json",
            "--sample",
            "--max-tokens",
            "40",
            "--json",
            "--no-history",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    let kinds: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["response_type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"jsonl") && kinds.contains(&"json"),
        "{kinds:?}"
    );
}

#[test]
fn a_twin_elsewhere_takes_its_sample_and_its_source_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = kerf_in(d, &["new", "src/places.json", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = kerf_in(
        d,
        &["twin", "src/places.json", "-o", "out/places-lines.json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        said.contains("src/places.json now names it as its twin"),
        "{said}"
    );
    assert!(
        said.contains("next: kerf compare out/places-lines.json src/places.json"),
        "{said}"
    );
    assert!(d.join("out/inputs/places.txt").is_file(), "{said}");
    let src: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("src/places.json")).unwrap()).unwrap();
    assert_eq!(src["twin"], "places-lines");
    // Its sample input renders from where the twin is.
    let o = kerf_in(
        d,
        &["render", "out/places-lines.json", "--sample", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let user = stdout_json(&o)["user"].as_str().unwrap().to_string();
    assert!(
        user.contains("photosynthesis") && user.contains("one JSON object per line"),
        "{user}"
    );
}

#[test]
fn what_has_no_twin_is_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = kerf_in(d, &["new", "records", "--format", "delimited", "--twin"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("a delimited prompt has no twin"),
        "{}",
        stderr(&o)
    );
    assert!(!d.join("records.json").exists());
    let o = kerf_in(d, &["new", "records", "--format", "delimited"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = kerf_in(d, &["twin", "records.json", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v = stdout_json(&o);
    assert_eq!(v["error"]["code"], "prompt_file");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("records.json"),
        "{v}"
    );
    let o = kerf_in(d, &["new", "../x y"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("a prompt file is named ID.json"),
        "{}",
        stderr(&o)
    );
    std::fs::write(d.join("bad.schema.json"), "{\"type\": \"object\",}").unwrap();
    let o = kerf_in(d, &["new", "bad", "--schema", "bad.schema.json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("bad.schema.json:1"), "{}", stderr(&o));
}

#[test]
fn a_prompt_is_named_by_its_id_from_any_folder() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A shipped prompt (the source tree's, as a clone runs it; the package's from /usr/share).
    let o = kerf_in(d, &["render", "agent-kg-extract", "--sample", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout_json(&o)["user"]
            .as_str()
            .unwrap()
            .contains("photosynthesis")
    );
    // An own prompt, from the user's folder (KERF_DATA_DIR/prompts).
    let home = tempfile::tempdir().unwrap();
    let o = kerf_cmd(home.path())
        .current_dir(home.path())
        .args(["new", "prompts/mine"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = kerf_cmd(home.path())
        .current_dir(d)
        .args(["render", "mine", "--sample", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A name that is neither is said as given.
    let o = kerf_in(d, &["render", "no-such-prompt"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no-such-prompt"), "{}", stderr(&o));
}
