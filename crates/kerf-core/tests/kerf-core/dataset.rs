//! Datasets: the three forms read into the same rows, and every problem named before anything
//! runs (row id and line, JSON pointer or column).

use kerf_core::eval::dataset::{self, Expected};
use kerf_core::{Error, Prompt};
use serde_json::json;

fn prompt(name: &str) -> Prompt {
    Prompt::load(&crate::support::repo().join("prompts").join(name)).unwrap()
}

fn problems(e: Error) -> Vec<String> {
    match e {
        Error::Dataset { problems, .. } => problems,
        other => panic!("expected a dataset error, got {other}"),
    }
}

#[test]
fn a_jsonl_row_fills_the_input_and_finds_expected_records_by_prompt_or_twin() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.jsonl");
    std::fs::write(
        &path,
        concat!(
            r#"{"id": "a", "input": "Stroma is a fluid.", "expected": {"agent-kg-extract": [{"type": "definition", "entity": "stroma", "definition": "a fluid"}]}}"#,
            "\n\n",
            r#"{"input": "x", "expected": [{"type": "definition", "entity": "x", "definition": "y", "aliases": {"entity": ["ex"]}}]}"#,
            "\n"
        ),
    )
    .unwrap();
    let d = dataset::load(&path).unwrap();
    assert_eq!(d.rows.len(), 2);
    assert_eq!(
        d.rows[1].id, "line-3",
        "a row without an id is named by its line"
    );
    let array = prompt("agent-kg-extract-array.json");
    // The array prompt finds the records kept under its twin's id.
    let (records, pointer) = d.rows[0].expected_for(&array).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(pointer, "/expected/agent-kg-extract");
    assert_eq!(d.rows[0].vars_for(&array)["text"], "Stroma is a fluid.");
    dataset::check(&d, &[&prompt("agent-kg-extract.json"), &array]).unwrap();
}

#[test]
fn every_problem_is_named_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(
        &path,
        [
            r#"{"id": "ok", "input": "fine"}"#,
            r#"{"id": "broken", "input": "x""#,
            r#"{"id": "schema", "input": "x", "expected": [{"type": "definition", "entity": ""}]}"#,
            r#"{"id": "vars", "input": "x", "vars": {"colour": "red"}}"#,
            r#"{"id": "novar"}"#,
            r#"{"id": "ok", "input": "twice"}"#,
            r#"{"id": "extra", "input": "x", "text": "y"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let file = path.display().to_string();
    let p = problems(dataset::load(&path).unwrap_err());
    assert_eq!(p.len(), 3, "{p:#?}");
    assert!(
        p[0].starts_with(&format!("{file}:2: not valid JSON")),
        "{}",
        p[0]
    );
    assert!(
        p.iter()
            .any(|x| x.contains(":7, row `extra`: /text is not a row key")),
        "{p:#?}"
    );
    assert!(
        p.iter().any(
            |x| x.contains(":6, row `ok`: id `ok` is also the id of the row at")
                && x.ends_with(":1")
        ),
        "{p:#?}"
    );
    // Fixed structure, the rows are held to the prompt.
    std::fs::write(
        &path,
        [
            r#"{"id": "schema", "input": "x", "expected": [{"type": "definition", "entity": ""}]}"#,
            r#"{"id": "vars", "input": "x", "vars": {"colour": "red"}}"#,
            r#"{"id": "novar"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let d = dataset::load(&path).unwrap();
    let p = problems(dataset::check(&d, &[&prompt("agent-kg-extract.json")]).unwrap_err());
    let joined = p.join("\n");
    assert!(
        joined.contains(&format!("{file}:1, row `schema`: /expected/0")),
        "{joined}"
    );
    assert!(
        joined.contains("fails prompt `agent-kg-extract`'s record schema"),
        "{joined}"
    );
    assert!(
        joined.contains(&format!(
            "{file}:2, row `vars`: /vars/colour: unknown variable"
        )),
        "{joined}"
    );
    assert!(
        joined.contains(&format!("{file}:3, row `novar`: missing variable `text`")),
        "{joined}"
    );
}

#[test]
fn an_oversized_row_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    // 2 MiB against a 1 MiB limit (the limit moved by its environment variable in a child
    // process would be cleaner; the default is 16 MiB, so write past it instead).
    let big = "x".repeat(17 << 20);
    std::fs::write(
        &path,
        format!(
            "{{\"id\": \"big\", \"input\": \"{big}\"}}\n{{\"id\": \"small\", \"input\": \"y\"}}\n"
        ),
    )
    .unwrap();
    let p = problems(dataset::load(&path).unwrap_err());
    assert_eq!(p.len(), 1);
    assert!(
        p[0].contains(":1: the row is 17.0 MiB, over the limit of 16 MiB (KERF_MAX_ROW_MIB)"),
        "{}",
        p[0]
    );
}

/// Issue 36, item 2: a CSV record was read whole before its size was checked (one 1,000 MB cell
/// took 1.07 GB), and a dataset that is a link to `/dev/zero` was read until memory ran out.
/// The CSV reader now stops a record at the limit, and only regular files are read.
#[test]
fn a_csv_cell_past_the_limit_stops_the_read_and_devices_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.csv");
    // A quoted cell of 40 MiB with a newline in it, so the record cannot be skipped by lines.
    let big = format!("{}\n{}", "x".repeat(20 << 20), "y".repeat(20 << 20));
    std::fs::write(
        &path,
        format!("id,input\nsmall,fine\nbig,\"{big}\"\nafter,never read\n"),
    )
    .unwrap();
    let p = problems(dataset::load(&path).unwrap_err());
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].ends_with(
            "big.csv:3: the row passes the limit of 16 MiB (KERF_MAX_ROW_MIB); the rest of the file is not read"
        ),
        "{}",
        p[0]
    );

    // A dataset named by a link to a device.
    let zero = dir.path().join("zero.csv");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let e = dataset::load(&zero).unwrap_err().to_string();
    assert!(e.contains("zero.csv: not a regular file"), "{e}");
    let zero = dir.path().join("zero.jsonl");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let e = dataset::load(&zero).unwrap_err().to_string();
    assert!(e.contains("zero.jsonl: not a regular file"), "{e}");
}

#[test]
fn csv_and_folder_datasets_read_into_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("d.csv");
    std::fs::write(
        &csv,
        "id,text,entity_types,expected\nr1,\"Ada wrote notes, in 1843.\",\"[\"\"person\"\"]\",\"[{\"\"type\"\": \"\"entity\"\", \"\"entity_name\"\": \"\"Ada\"\", \"\"entity_type\"\": \"\"person\"\", \"\"entity_description\"\": \"\"A writer\"\"}]\"\n",
    )
    .unwrap();
    let d = dataset::load(&csv).unwrap();
    assert_eq!(d.rows[0].id, "r1");
    assert_eq!(d.rows[0].line, 2);
    assert_eq!(d.rows[0].vars["entity_types"], json!(["person"]));
    assert!(matches!(&d.rows[0].expected, Some(Expected::All(v)) if v.len() == 1));
    dataset::check(&d, &[&prompt("lightrag-extract-delimited.json")]).unwrap();

    let folder = dir.path().join("docs");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("ada.txt"), "Ada wrote notes.").unwrap();
    std::fs::write(folder.join("ada.expected.jsonl"), "{\"type\": \"definition\", \"entity\": \"Ada\", \"definition\": \"a writer\"}\n{\"type\": \"definition\"}\n").unwrap();
    std::fs::write(folder.join("babbage.txt"), "Babbage built engines.").unwrap();
    let d = dataset::load(&folder).unwrap();
    assert_eq!(
        d.rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["ada", "babbage"]
    );
    let p = problems(dataset::check(&d, &[&prompt("agent-kg-extract.json")]).unwrap_err());
    assert_eq!(p.len(), 2, "{p:#?}");
    assert!(p[0].contains("ada.expected.jsonl:2, row `ada`: fails prompt `agent-kg-extract`'s record schema: missing required field \"entity\""), "{}", p[0]);
}

/// The shipped dataset holds to the prompts it was annotated for: every row loads, every
/// expected record passes its prompt's record schema (the array twin finds the JSONL prompt's
/// records), and every name the annotators wrote is found in the document, as grounding reads
/// it (the guidelines ask for names as the text writes them).
#[test]
fn the_shipped_dataset_checks_against_its_prompts_and_is_grounded() {
    let repo = crate::support::repo();
    let d = dataset::load(&repo.join("datasets/knowledge-graph.jsonl")).unwrap();
    assert!(d.rows.len() >= 30, "{} rows", d.rows.len());
    let prompts = [
        prompt("agent-kg-extract.json"),
        prompt("agent-kg-extract-array.json"),
        prompt("lightrag-extract-delimited.json"),
    ];
    let refs: Vec<&Prompt> = prompts.iter().collect();
    dataset::check(&d, &refs).unwrap();
    for p in &prompts {
        let m = p.matcher();
        for row in &d.rows {
            let (records, _) = row
                .expected_for(p)
                .unwrap_or_else(|| panic!("row {} has no records for {}", row.id, p.id()));
            assert!(
                records.len() >= 3,
                "row {}: {} records",
                row.id,
                records.len()
            );
            let g = kerf_core::eval::Grounding::new(&m, row.document(p).unwrap());
            let ungrounded = g.ungrounded(&m, records);
            assert!(
                ungrounded.is_empty(),
                "row {} ({}): not in the text: {:?}",
                row.id,
                p.id(),
                ungrounded.iter().map(|&i| &records[i]).collect::<Vec<_>>()
            );
        }
    }
}

/// The shipped long documents (for a chunk-size study) are 5 KB or more each, check against the
/// knowledge-graph prompts, name every record as their text writes it, and hold no record twice
/// (a repeat would be scored as a spurious second mention).
#[test]
fn the_shipped_long_documents_check_against_their_prompts_and_are_grounded() {
    let repo = crate::support::repo();
    let d = dataset::load(&repo.join("datasets/long-documents.jsonl")).unwrap();
    assert!(d.rows.len() >= 4, "{} rows", d.rows.len());
    let prompts = [
        prompt("agent-kg-extract.json"),
        prompt("agent-kg-extract-array.json"),
    ];
    let refs: Vec<&Prompt> = prompts.iter().collect();
    dataset::check(&d, &refs).unwrap();
    for p in &prompts {
        let m = p.matcher();
        for row in &d.rows {
            let doc = row.document(p).unwrap();
            assert!(
                doc.len() >= 5_000 && doc.len() <= 30_000,
                "row {}: {} bytes",
                row.id,
                doc.len()
            );
            let (records, _) = row.expected_for(p).unwrap();
            let g = kerf_core::eval::Grounding::new(&m, doc);
            assert_eq!(
                g.ungrounded(&m, records),
                Vec::<usize>::new(),
                "row {}",
                row.id
            );
            let ids: std::collections::BTreeSet<String> = records
                .iter()
                .map(|r| kerf_core::eval::identity(&m, r))
                .collect();
            assert_eq!(
                ids.len(),
                records.len(),
                "row {}: a record named twice",
                row.id
            );
        }
    }
}

/// Review 2, item 1: a folder dataset reads only regular files that stay inside the folder. A
/// link out of it (a checkout or archive can carry one: `/proc/self/environ` held the API keys)
/// is refused by name, and its text reaches no row; a link to a device is refused unread; a
/// link that stays inside is followed.
#[cfg(unix)]
#[test]
fn a_folder_dataset_refuses_files_linked_out_of_the_folder() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "OPENAI_API_KEY=sk-planted").unwrap();
    let outside = dir.path().join("outside.jsonl");
    std::fs::write(&outside, "{\"type\": \"definition\"}\n").unwrap();
    let folder = dir.path().join("docs");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("ada.txt"), "Ada wrote notes.").unwrap();
    symlink(&secret, folder.join("leak.txt")).unwrap();
    symlink("/dev/zero", folder.join("ada.vars.json")).unwrap();
    symlink(&outside, folder.join("ada.expected.jsonl")).unwrap();
    symlink("/dev/zero", folder.join("zero.txt")).unwrap();
    // A FIFO inside the folder: opened without blocking (no writer ever comes), checked as
    // opened, refused unread.
    assert!(
        std::process::Command::new("mkfifo")
            .arg(folder.join("pipe.txt"))
            .status()
            .unwrap()
            .success()
    );
    // A link that stays inside is a document like any other.
    std::fs::write(folder.join("notes.md"), "Babbage built engines.").unwrap();
    symlink(folder.join("notes.md"), folder.join("babbage.txt")).unwrap();
    let p = problems(dataset::load(&folder).unwrap_err());
    for refused in [
        "leak.txt",
        "ada.vars.json",
        "ada.expected.jsonl",
        "zero.txt",
        "pipe.txt",
    ] {
        assert!(
            p.iter().any(|m| m.contains(refused)
                && m.contains("not a regular file inside the dataset folder")),
            "{refused} not refused by name: {p:#?}"
        );
    }
    assert_eq!(p.len(), 5, "{p:#?}");
    assert!(p.iter().all(|m| !m.contains("sk-planted")), "{p:#?}");

    // Without the links out, the folder loads, the link inside followed.
    for name in [
        "leak.txt",
        "ada.vars.json",
        "ada.expected.jsonl",
        "zero.txt",
        "pipe.txt",
    ] {
        std::fs::remove_file(folder.join(name)).unwrap();
    }
    let d = dataset::load(&folder).unwrap();
    let texts: Vec<_> = d
        .rows
        .iter()
        .map(|r| (r.id.as_str(), r.input.as_deref()))
        .collect();
    assert_eq!(
        texts,
        [
            ("ada", Some("Ada wrote notes.")),
            ("babbage", Some("Babbage built engines."))
        ]
    );
}

/// Review 2, item 3: a message quotes a user's value short, and lists a bounded number of
/// problems. 200 rows sharing one 100 KB id once made a message of 200 × 2 × 100 KB.
#[test]
fn a_datasets_problems_quote_long_values_short_and_are_listed_up_to_a_bound() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    let id = "x".repeat(100_000);
    let row = json!({"id": id, "input": "Ada."}).to_string();
    std::fs::write(&data, format!("{row}\n").repeat(200)).unwrap();
    let e = dataset::load(&data).unwrap_err();
    let message = e.to_string();
    assert!(
        message.contains("199 problems in the dataset"),
        "{}",
        &message[..200]
    );
    assert!(
        message.contains("… and 149 more problem(s)"),
        "{}",
        &message[message.len() - 200..]
    );
    assert!(
        message.contains("xxx… (100000 bytes)"),
        "{}",
        &message[..400]
    );
    assert!(message.len() < 30_000, "{} bytes", message.len());
}

/// Issue 36, item 3: every value of the dataset a message repeats is quoted short, not only row
/// ids — a row's key, a variable's name, a record's field and a record's value (jsonschema's own
/// messages quote the whole value).
#[test]
fn keys_fields_and_values_of_the_dataset_are_quoted_short_too() {
    let dir = tempfile::tempdir().unwrap();
    let prompt_file = dir.path().join("short.json");
    std::fs::write(
        &prompt_file,
        json!({"prompt": "{{ text }}", "response-type": "jsonl",
               "schema": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}},
                          "additionalProperties": false}})
        .to_string(),
    )
    .unwrap();
    let p = Prompt::load(&prompt_file).unwrap();
    let long = "k".repeat(100_000);
    let rows = [
        json!({"id": "a", "input": "x", "vars": {long.clone(): 1}, "expected": [{"name": "ok"}]}),
        json!({"id": "b", "input": "x", "expected": [{"name": long.clone()}]}),
        json!({"id": "c", "input": "x", "expected": [{long.clone(): 1}]}),
    ];
    let data = dir.path().join("d.jsonl");
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&data, text).unwrap();
    let d = dataset::load(&data).unwrap();
    let found = problems(dataset::check(&d, &[&p]).unwrap_err());
    assert_eq!(found.len(), 3, "{found:.300?}");
    for m in &found {
        assert!(m.len() < 600, "{} bytes: {}", m.len(), &m[..300]);
    }
    assert!(found[0].contains("/vars/kkkk"), "{}", found[0]);
    assert!(
        found[0].contains("… (100000 bytes): unknown variable"),
        "{}",
        found[0]
    );
    assert!(found[1].contains("\"kkkk"), "{}", found[1]);
    assert!(
        found[1].contains("longer than 10 characters"),
        "{}",
        found[1]
    );
    assert!(
        found[2].contains("unexpected field(s) `kkkk"),
        "{}",
        found[2]
    );

    // A row's key, at load.
    let data = dir.path().join("e.jsonl");
    std::fs::write(
        &data,
        format!("{}\n", json!({"id": "d", "input": "x", long.clone(): 1})),
    )
    .unwrap();
    let m = dataset::load(&data).unwrap_err().to_string();
    assert!(m.len() < 600, "{} bytes", m.len());
    assert!(m.contains("… (100000 bytes) is not a row key"), "{m}");
}

/// Issue 36, item 13: `scan` reads a dataset a row at a time — each row handed on and let go —
/// and finds what `load` finds, once every row is read; `Checker` holds one row at a time to
/// the prompts, listing what `check` lists.
#[test]
fn a_dataset_is_read_and_checked_a_row_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.jsonl");
    let good: String = (0..200)
        .map(|n| format!("{{\"id\": \"r{n}\", \"input\": \"Document {n}.\"}}\n"))
        .collect();
    std::fs::write(&path, &good).unwrap();
    dataset::held::reset();
    let base = dataset::held::now();
    let mut ids = Vec::new();
    let n = dataset::scan::<Error>(&path, &mut |row| {
        ids.push(row.id);
        Ok(())
    })
    .unwrap();
    assert_eq!((n, ids.len()), (200, 200));
    assert_eq!(ids[199], "r199");
    assert_eq!(dataset::held::peak(), base + 1, "a row at a time");
    let loaded = dataset::load(&path).unwrap();
    assert_eq!(dataset::held::peak(), base + 200, "load keeps every row");
    drop(loaded);
    // Problems: the same list, after every row was handed on.
    let bad = format!("{good}{{\"id\": \"r3\", \"input\": \"again\"}}\nnot json\n");
    std::fs::write(&path, bad).unwrap();
    let mut handed = 0;
    let e = dataset::scan::<Error>(&path, &mut |_| {
        handed += 1;
        Ok(())
    })
    .unwrap_err();
    assert_eq!(handed, 201);
    assert_eq!(problems(e), problems(dataset::load(&path).unwrap_err()));
    // Rows held to a prompt one at a time: what `check` lists, in its order.
    std::fs::write(
        &path,
        [
            r#"{"id": "vars", "input": "x", "vars": {"colour": "red"}}"#,
            r#"{"id": "novar"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let d = dataset::load(&path).unwrap();
    let p = prompt("agent-kg-extract.json");
    let prompts = [&p];
    let checker = dataset::Checker::new(&prompts);
    let mut one_by_one = Vec::new();
    for row in &d.rows {
        checker.row(row, &mut one_by_one);
    }
    assert_eq!(one_by_one.len(), 2, "{one_by_one:#?}");
    assert_eq!(
        one_by_one,
        problems(dataset::check(&d, &prompts).unwrap_err())
    );
}
