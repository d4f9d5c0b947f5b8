//! The history on real SQLite files: migrations and committed fixtures of every schema version,
//! refusal of newer or foreign files, recovery of runs whose writer died, concurrent writers.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use kerf_core::run::{FinishReason, Usage};
use kerf_store::{Filter, NewRun, RunEnd, Status, Store};
use serde_json::{Value, json};

const PROMPT: &str = r#"{"id": "kg", "prompt": "Extract from {{text}}", "response-type": "jsonl",
 "schema": {"type": "object", "required": ["entity"], "properties": {"entity": {"type": "string"}}}}"#;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kerf-store/fixtures")
}

/// A clock that starts at 2026-11-22T00:00:00Z and moves one second per reading.
fn ticking() -> kerf_store::Clock {
    let t = Arc::new(AtomicI64::new(1_795_305_600_000));
    Arc::new(move || t.fetch_add(1000, Ordering::SeqCst))
}

/// Cell `row` of a one-prompt, one-provider matrix at 64 tokens, unconstrained.
fn cell(row: &str) -> kerf_store::CellKey {
    kerf_store::CellKey {
        prompt: "p".into(),
        provider: "local".into(),
        model: "m".into(),
        max_tokens: 64,
        constrained: false,
        repeat: 0,
        chunk_size: 0,
        context_chars: 0,
        chunk: 0,
        pass: 0,
        row: row.into(),
    }
}

fn new_run(store: &Store, doc: &str) -> NewRun {
    let version = store
        .put_prompt_version("kg", Some("prompts/kg.json"), "jsonl", PROMPT)
        .unwrap();
    let input = store.put_input(&json!({"text": doc}), &json!({})).unwrap();
    NewRun {
        prompt_version: version,
        input,
        experiment: None,
        rerun_of: None,
        cell: None,
        provider: "local".into(),
        model: "/models/m.gguf".into(),
        model_sha256: Some("ab".repeat(32)),
        params: json!({"max_tokens": 64, "temperature": 0.0}),
        system: None,
        user: format!("Extract from {doc}"),
    }
}

/// A run written as the CLI writes one: streamed in pieces, then ended.
fn record(store: &Store, doc: &str, pieces: &[&str], finish: &str) -> i64 {
    let mut w = store.begin_run(&new_run(store, doc)).unwrap();
    for p in pieces {
        w.push(p).unwrap();
    }
    let raw: String = pieces.concat();
    let report = kerf_core::Prompt::compile(
        kerf_core::PromptFile::from_json_str(PROMPT, "p")
            .unwrap()
            .file,
        "p",
    )
    .unwrap()
    .parse(&raw, &Default::default());
    w.finish(RunEnd {
        report: Some(std::borrow::Cow::Owned(report)),
        usage: Usage {
            prompt_tokens: 10,
            completion_tokens: 20,
            reasoning_tokens: None,
        },
        ..RunEnd::new(FinishReason::parse(finish).unwrap(), raw)
    })
    .unwrap()
}

#[test]
fn a_new_file_is_migrated_and_runs_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/history.sqlite");
    let store = Store::open_with_clock(&path, ticking()).unwrap();
    let id = record(
        &store,
        "DNA and RNA",
        &["{\"entity\": \"DNA\"}\n", "{\"entity\": \"RNA\"}\n"],
        "stop",
    );
    let run = store.run(id).unwrap();
    assert_eq!(run.summary.status, Status::Ok);
    assert_eq!(run.raw, "{\"entity\": \"DNA\"}\n{\"entity\": \"RNA\"}\n");
    assert_eq!(run.summary.objects, Some(2));
    assert_eq!(run.summary.prompt, "kg");
    assert_eq!(run.summary.created_at, "2026-11-22T00:00:02Z");
    // Begun at one reading of the clock, finished at the next: it ticks a second a reading.
    assert_eq!(run.summary.seconds, Some(1.0));
    assert_eq!(run.input.vars, json!({"text": "DNA and RNA"}));
    assert_eq!(run.summary.completion_tokens, Some(20));
    // Content addressing: the same prompt text and input are stored once.
    record(&store, "DNA and RNA", &["x"], "length");
    let n: Vec<_> = store.list(&Filter::default()).unwrap();
    assert_eq!(n.len(), 2);
    assert_eq!(n[0].prompt_version, n[1].prompt_version);
    assert_eq!(n[0].status, Status::Truncated, "newest first");
    let v = store.prompt_version(&n[0].prompt_version[..8]).unwrap();
    assert_eq!(v.text, PROMPT);
    drop(store);
    // Reopening reads the same; WAL mode is on.
    let store = Store::open(&path).unwrap();
    assert_eq!(store.list(&Filter::default()).unwrap().len(), 2);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn every_migration_file_is_embedded_in_order() {
    let mut files: Vec<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
    files.sort();
    let embedded: Vec<&str> = kerf_store::migrate::MIGRATIONS
        .iter()
        .map(|m| m.0)
        .collect();
    assert_eq!(files, embedded);
    for (i, name) in embedded.iter().enumerate() {
        assert!(name.starts_with(&format!("{:04}_", i + 1)), "{name}");
    }
}

/// Each committed `vN.sqlite` (a history written by schema version N, with one finished run)
/// opens, migrates to the latest version, and keeps its run.
#[test]
fn every_earlier_schema_version_opens_and_keeps_its_runs() {
    let mut seen = 0;
    for v in 1..=kerf_store::migrate::LATEST {
        let fixture = fixtures().join(format!("v{v}.sqlite"));
        assert!(
            fixture.is_file(),
            "no fixture for schema version {v}: {}",
            fixture.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.sqlite");
        std::fs::copy(&fixture, &path).unwrap();
        let store = Store::open(&path).unwrap();
        let runs = store.list(&Filter::default()).unwrap();
        assert_eq!(runs.len(), 1, "v{v}");
        let run = store.run(runs[0].id).unwrap();
        assert_eq!(run.raw, "{\"entity\": \"DNA\"}\n{\"entity\": \"RN", "v{v}");
        assert_eq!(run.summary.status, Status::Truncated, "v{v}");
        assert_eq!(run.summary.tags, vec!["fixture"], "v{v}");
        assert_eq!(store.integrity_check().unwrap(), "ok");
        seen += 1;
    }
    assert_eq!(seen, kerf_store::migrate::LATEST);
}

/// Writes `fixtures/v{LATEST}.sqlite` — run once when a migration is added:
/// `cargo test -p kerf-store -- --ignored write_fixture_for_this_schema_version`.
#[test]
#[ignore]
fn write_fixture_for_this_schema_version() {
    let path = fixtures().join(format!("v{}.sqlite", kerf_store::migrate::LATEST));
    let _ = std::fs::remove_file(&path);
    {
        let store = Store::open_with_clock(&path, ticking()).unwrap();
        let id = record(
            &store,
            "DNA and RNA",
            &["{\"entity\": \"DNA\"}\n", "{\"entity\": \"RN"],
            "length",
        );
        store.tag(id, "fixture").unwrap();
    }
    // One self-contained file: closing the last connection folds the WAL back in.
    let wal = path.with_file_name(format!("v{}.sqlite-wal", kerf_store::migrate::LATEST));
    assert!(!wal.exists());
    let _ = std::fs::remove_dir_all(kerf_store::owner::dir_for(&path));
}

#[test]
fn a_file_from_a_newer_kerf_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    drop(Store::open(&path).unwrap());
    // What a future Kerf would leave: a higher schema version.
    set_user_version(&path, 99);
    let before = std::fs::read(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert_eq!(err.code(), "store_newer");
    let msg = err.to_string();
    assert!(
        msg.contains("newer Kerf") && msg.contains("99") && msg.contains("history.sqlite"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file must not change"
    );
}

/// Set a SQLite file's user_version by editing its header (bytes 60..64), as a newer Kerf's
/// migration would have.
fn set_user_version(path: &Path, v: u32) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[60..64].copy_from_slice(&v.to_be_bytes());
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_corrupt_or_foreign_file_is_named_and_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    let junk =
        b"these are not the bytes of a database, and Kerf must not write over them. ".repeat(80);
    std::fs::write(&path, &junk).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert_eq!(err.code(), "store_corrupt", "{err}");
    assert!(err.to_string().contains("history.sqlite"), "{err}");
    assert!(err.to_string().contains("left untouched"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), junk);

    // A good history with a damaged page in the middle: refused or reported, never rewritten.
    let path = dir.path().join("damaged.sqlite");
    {
        let store = Store::open(&path).unwrap();
        for i in 0..200 {
            record(
                &store,
                &format!("document {i} {}", "words ".repeat(200)),
                &["{\"entity\": \"x\"}\n"],
                "stop",
            );
        }
    }
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 64 * 1024, "{}", bytes.len());
    for b in &mut bytes[8192..8192 + 4096] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    match Store::open(&path) {
        Err(e) => assert_eq!(e.code(), "store_corrupt", "{e}"),
        Ok(store) => {
            let check = store.integrity_check();
            let bad = match check {
                Ok(s) => s != "ok",
                Err(e) => e.code() == "store_corrupt",
            };
            assert!(bad, "a damaged page went unnoticed");
        }
    }
}

#[test]
fn a_run_whose_process_died_is_interrupted_with_its_text_on_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    let store = Store::open(&path).unwrap();
    let mut w = store.begin_run(&new_run(&store, "DNA")).unwrap();
    w.push("{\"entity\": \"DNA\"}\n{\"ent").unwrap();
    let id = w.id();
    // Another open while the writer lives: its run is left alone.
    let other = Store::open(&path).unwrap();
    assert_eq!(other.run(id).unwrap().summary.status, Status::Running);
    drop(other);
    // The writer "dies": no finish, no clean-up (what SIGKILL leaves), and its lock goes.
    std::mem::forget(w);
    drop(store);
    let store = Store::open(&path).unwrap();
    let run = store.run(id).unwrap();
    assert_eq!(run.summary.status, Status::Interrupted);
    assert_eq!(run.raw, "{\"entity\": \"DNA\"}\n{\"ent");
    assert!(run.summary.error.unwrap().contains("stopped"));
    // Parsing what arrived needs the prompt compiled: the store leaves it to its caller
    // (kerf-api's `history::open`, tested there) and says which runs need it.
    assert_eq!(run.summary.objects, None);
    assert_eq!(store.runs_without_report().unwrap(), vec![id]);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn a_writer_dropped_without_finishing_keeps_its_run_as_interrupted() {
    let store = Store::in_memory().unwrap();
    let id = {
        let mut w = store.begin_run(&new_run(&store, "d")).unwrap();
        w.push("partial").unwrap();
        w.push(" text").unwrap();
        w.id()
    };
    let run = store.run(id).unwrap();
    assert_eq!(run.summary.status, Status::Interrupted);
    assert_eq!(run.raw, "partial text");
}

#[test]
fn filters_tags_notes_and_delete() {
    let store = Store::in_memory().unwrap().with_clock(ticking());
    let a = record(&store, "one", &["{\"entity\": \"a\"}\n"], "stop");
    let b = record(&store, "two", &["{\"entity\": \"b\"}\n{\"en"], "length");
    let c = record(&store, "three", &[], "cancelled");
    store.tag(b, "baseline").unwrap();
    store.tag(b, "baseline").unwrap();
    store.note(a, Some("first try")).unwrap();
    let ids = |f: Filter| -> Vec<i64> { store.list(&f).unwrap().iter().map(|r| r.id).collect() };
    assert_eq!(ids(Filter::default()), vec![c, b, a]);
    assert_eq!(
        ids(Filter {
            status: Some(Status::Truncated),
            ..Filter::default()
        }),
        vec![b]
    );
    assert_eq!(
        ids(Filter {
            status: Some(Status::Interrupted),
            ..Filter::default()
        }),
        vec![c]
    );
    assert_eq!(
        ids(Filter {
            tag: Some("baseline".into()),
            ..Filter::default()
        }),
        vec![b]
    );
    assert_eq!(
        ids(Filter {
            limit: Some(1),
            ..Filter::default()
        }),
        vec![c]
    );
    let t_b = store.run(b).unwrap().summary.created_ms;
    assert_eq!(
        ids(Filter {
            since: Some(t_b),
            ..Filter::default()
        }),
        vec![c, b]
    );
    assert_eq!(
        ids(Filter {
            prompt: Some("kg".into()),
            ..Filter::default()
        })
        .len(),
        3
    );
    let version = store.run(a).unwrap().summary.prompt_version;
    assert_eq!(
        ids(Filter {
            prompt: Some(version[..10].to_uppercase()),
            ..Filter::default()
        })
        .len(),
        3
    );
    assert_eq!(
        ids(Filter {
            prompt: Some("other".into()),
            ..Filter::default()
        }),
        Vec::<i64>::new()
    );
    assert_eq!(
        ids(Filter {
            provider: Some("local".into()),
            model: Some("m.gguf".into()),
            ..Filter::default()
        })
        .len(),
        3
    );
    assert_eq!(store.run(b).unwrap().summary.tags, vec!["baseline"]);
    assert_eq!(
        store.run(a).unwrap().summary.note.as_deref(),
        Some("first try")
    );
    store.delete(b).unwrap();
    assert_eq!(store.run(b).unwrap_err().code(), "not_found");
    assert_eq!(store.tag(b, "x").unwrap_err().code(), "not_found");
    assert_eq!(ids(Filter::default()), vec![c, a]);
}

#[test]
fn experiments_group_their_runs() {
    let store = Store::in_memory().unwrap();
    let e = store
        .begin_experiment(
            kerf_store::ExperimentKind::Compare,
            &json!({"budgets": [24, 300]}),
        )
        .unwrap();
    let mut run = new_run(&store, "doc");
    run.experiment = Some(e);
    let w = store.begin_run(&run).unwrap();
    let id = w.finish(RunEnd::new(FinishReason::Stop, "")).unwrap();
    store
        .finish_experiment(
            e,
            &json!({"rows": [1]}).to_string(),
            &Default::default(),
            None,
        )
        .unwrap();
    let x = store.experiment(e).unwrap();
    assert_eq!(x.summary.status, Status::Ok);
    assert_eq!(x.summary.runs, 1);
    assert_eq!(x.run_list[0].id, id);
    assert_eq!(x.result, Some(json!({"rows": [1]})));
    assert_eq!(store.experiments(None).unwrap().len(), 1);
    // What was asked of it, read alone (its result is not read); an unknown one is not found.
    assert_eq!(
        store.experiment_spec(e).unwrap(),
        (
            kerf_store::ExperimentKind::Compare,
            json!({"budgets": [24, 300]})
        )
    );
    assert!(matches!(
        store.experiment_spec(e + 1),
        Err(kerf_store::Error::NotFound { .. })
    ));
}

/// Several connections writing at once (each as a separate process would: its own connection
/// and file locks): every write lands, none fails with "database is locked".
#[test]
fn concurrent_writers_never_see_database_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    drop(Store::open(&path).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = Store::open(&path).unwrap();
                for i in 0..25 {
                    let mut w = store
                        .begin_run(&new_run(&store, &format!("{t}-{i}")))
                        .unwrap();
                    for _ in 0..5 {
                        w.push("{\"entity\": \"x\"}\n").unwrap();
                        w.flush().unwrap();
                    }
                    let id = w.finish(RunEnd::new(FinishReason::Stop, "")).unwrap();
                    store.tag(id, &format!("t{t}")).unwrap();
                    store
                        .list(&Filter {
                            limit: Some(10),
                            ..Filter::default()
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.list(&Filter::default()).unwrap().len(), 100);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

/// Stores of many processes claim, drop and sweep one owners folder at once (threads here: a
/// file lock taken through another open file conflicts within a process too). No claim fails
/// because another owner's drop removed the folder under it, and a live owner is never judged
/// dead, however the claims, drops and sweeps interleave.
#[test]
fn owners_claimed_dropped_and_swept_at_once_never_fail_or_die_early() {
    use kerf_store::owner::{self, Owner};
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("history.sqlite-owners");
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                for i in 0..300 {
                    let o = Owner::claim(&dir).unwrap_or_else(|e| panic!("claim {i}: {e}"));
                    owner::sweep_dead(&dir);
                    assert!(owner::is_alive(&dir, &o.id), "claim {i}: {o:?} judged dead");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Every owner that went left nothing behind.
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
}

#[test]
fn status_follows_the_finish_reason() {
    for (reason, status) in [
        ("stop", Status::Ok),
        ("refusal", Status::Ok),
        ("content_filter", Status::Ok),
        ("length", Status::Truncated),
        ("cancelled", Status::Interrupted),
        ("interrupted", Status::Interrupted),
        ("error", Status::Error),
    ] {
        let reason = FinishReason::parse(reason).unwrap();
        assert_eq!(Status::for_finish(reason), status, "{reason}");
    }
    let _: Value = json!(null);
}

/// Security review, finding 13: a foreign SQLite file was switched to WAL (its header rewritten,
/// `-wal`/`-shm` files created) before being refused "untouched". It is now identified from its
/// header, read as plain bytes, before SQLite opens it for writing.
#[test]
fn a_foreign_sqlite_file_is_refused_before_anything_touches_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    {
        let other = rusqlite::Connection::open(&path).unwrap();
        other
            .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('mine');")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert_eq!(err.code(), "store_corrupt", "{err}");
    assert!(err.to_string().contains("not a Kerf history"), "{err}");
    assert!(std::fs::read(&path).unwrap() == before, "the file changed");
    let siblings: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        siblings,
        vec!["history.sqlite".to_string()],
        "files were created beside it"
    );

    // An empty file is a new history, and Kerf's own file opens again.
    let fresh = dir.path().join("fresh.sqlite");
    std::fs::write(&fresh, b"").unwrap();
    drop(Store::open(&fresh).unwrap());
    drop(Store::open(&fresh).unwrap());
}

/// Error codes have one spelling (snake case); a run recorded before that, with a code in kebab
/// case, reads back as the code is spelled now.
#[test]
fn an_error_code_recorded_in_kebab_case_reads_back_in_snake_case() {
    let store = Store::in_memory().unwrap();
    let mut w = store.begin_run(&new_run(&store, "doc")).unwrap();
    w.push("{\"a\"").unwrap();
    let id = w.fail("provider-unavailable", "no such server").unwrap();
    let rec = store.run(id).unwrap();
    assert_eq!(rec.error_code.as_deref(), Some("provider_unavailable"));
    assert_eq!(rec.summary.error.as_deref(), Some("no such server"));
}

/// Version 5 keeps every kind's cells in one table keyed by provider and model too. A version-4
/// eval's cells keep their runs and take the provider and model its spec names (or, where a
/// spec lacks them, their runs'); the runs' experiments, the rows and the kind are untouched.
#[test]
fn migrating_to_v5_gives_each_eval_cell_its_provider_and_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    std::fs::copy(fixtures().join("v4.sqlite"), &path).unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            r#"INSERT INTO experiments (id, kind, status, created_at, spec) VALUES
                 (3, 'eval', 'interrupted', 0, '{"provider": "srv", "model": "loopback", "cells": 2}'),
                 (4, 'eval', 'ok', 0, 'not json');
               UPDATE runs SET experiment_id = 3;
               INSERT INTO eval_rows VALUES (3, 0, 'a', '{"id":"a"}'), (3, 1, 'b', '{"id":"b"}');
               INSERT INTO eval_cells VALUES (3, 'p', 64, 1, 0, 'a', (SELECT min(id) FROM runs)),
                                             (3, 'p', 64, 1, 0, 'b', NULL),
                                             (4, 'q', 32, 0, 1, 'a', (SELECT min(id) FROM runs));"#,
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let run = store.list(&Filter::default()).unwrap()[0].clone();
    let cells = store.cells(3).unwrap();
    let keys: Vec<_> = cells
        .iter()
        .map(|c| {
            (
                c.cell.provider.as_str(),
                c.cell.model.as_str(),
                c.cell.row.as_str(),
                c.run,
            )
        })
        .collect();
    assert_eq!(
        keys,
        vec![
            ("srv", "loopback", "a", Some(run.id)),
            ("srv", "loopback", "b", None)
        ]
    );
    assert!(cells.iter().all(|c| c.cell.chunk == 0 && c.cell.pass == 0));
    assert_eq!(cells[0].cell.max_tokens, 64);
    assert!(cells[0].cell.constrained);
    assert_eq!(cells[0].status, Some(Status::Truncated));
    // A spec that is not JSON: the run's provider and model.
    let other = store.cells(4).unwrap();
    assert_eq!(
        (
            other[0].cell.provider.as_str(),
            other[0].cell.model.as_str(),
            other[0].cell.repeat
        ),
        (run.provider.as_str(), run.model.as_str(), 1)
    );
    let e = store.experiment(3).unwrap();
    assert_eq!(
        (e.summary.kind, e.summary.status, e.run_list.len()),
        (kerf_store::ExperimentKind::Eval, Status::Interrupted, 1)
    );
    assert_eq!(store.eval_row_ids(3).unwrap(), vec!["a", "b"]);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

/// Version 6 keeps what lists show of a result in columns of their own. Every experiment a
/// version-5 history settled gets them from its result, as the list read them before: an eval's
/// pending cells and summary lines (a line of an older eval names no provider), a test's
/// verdicts, a compare's rows; a result that is not JSON, or of another shape, gives none.
#[test]
fn migrating_to_v6_keeps_each_results_figures_typed() {
    use kerf_store::{ExperimentKind, FigureLine, Figures};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    std::fs::copy(fixtures().join("v5.sqlite"), &path).unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            r#"INSERT INTO experiments (id, kind, status, created_at, spec, result) VALUES
                 (1, 'eval', 'interrupted', 1, '{"cells": 8}',
                  '{"pending": 3, "summary": [
                      {"prompt": "kg", "provider": "srv", "max_tokens": 64, "constrained": true, "f1": 0.5},
                      {"prompt": "kg-array", "max_tokens": 128, "constrained": false, "f1": null},
                      "not a line", {"prompt": 7, "max_tokens": 1}]}'),
                 (2, 'test', 'ok', 2, '{"plan": {"cells": 4}}',
                  '{"passed": 3, "failed": 1, "errors": 0, "tests": []}'),
                 (3, 'compare', 'ok', 3, '{"plan": {"cells": 2}}', '{"rows": [{}, {}]}'),
                 (4, 'eval', 'ok', 4, '{"cells": 1}', 'not json'),
                 (5, 'test', 'error', 5, '{}', NULL),
                 (6, 'eval', 'ok', 6, '{"cells": 1}', '{"pending": "many", "summary": {}}');"#,
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let list = store.experiments(None).unwrap();
    let by_id = |id: i64| list.iter().find(|e| e.id == id).unwrap();
    assert_eq!(
        by_id(1).figures,
        Figures {
            pending: Some(3),
            lines: vec![
                FigureLine {
                    prompt: "kg".into(),
                    provider: Some("srv".into()),
                    max_tokens: 64,
                    constrained: true,
                    f1: Some(0.5),
                },
                FigureLine {
                    prompt: "kg-array".into(),
                    provider: None,
                    max_tokens: 128,
                    constrained: false,
                    f1: None,
                },
            ],
            ..Figures::default()
        }
    );
    assert_eq!(by_id(1).cells, Some(8));
    assert_eq!(
        (
            by_id(2).figures.passed,
            by_id(2).figures.failed,
            by_id(2).figures.errors,
            by_id(2).cells
        ),
        (Some(3), Some(1), Some(0), Some(4))
    );
    assert_eq!((by_id(3).figures.rows, by_id(3).cells), (Some(2), Some(2)));
    for id in [4, 5, 6] {
        assert_eq!(by_id(id).figures, Figures::default(), "experiment {id}");
    }
    assert_eq!(by_id(2).kind, ExperimentKind::Test);
    // One experiment read whole has its lines too.
    assert_eq!(store.experiment(1).unwrap().summary.figures.lines.len(), 2);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

/// Settling writes the figures with the result, in one transaction, and settling again (a
/// resume's pass) replaces them, lines and all.
#[test]
fn an_experiments_figures_are_kept_as_it_settles() {
    use kerf_store::{ExperimentKind, FigureLine, Figures};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("history.sqlite")).unwrap();
    let id = store
        .begin_experiment(ExperimentKind::Eval, &json!({"cells": 4}))
        .unwrap();
    let line = |prompt: &str, f1| FigureLine {
        prompt: prompt.into(),
        provider: Some("local".into()),
        max_tokens: 256,
        constrained: true,
        f1,
    };
    let stopped = Figures {
        pending: Some(2),
        lines: vec![line("a", Some(0.25)), line("b", None)],
        ..Figures::default()
    };
    store
        .interrupt_experiment(id, &json!({"pending": 2}).to_string(), &stopped, "stopped")
        .unwrap();
    assert_eq!(store.experiments(None).unwrap()[0].figures, stopped);
    let whole = Figures {
        pending: Some(0),
        lines: vec![line("a", Some(0.75))],
        ..Figures::default()
    };
    store
        .finish_experiment(id, &json!({"pending": 0}).to_string(), &whole, None)
        .unwrap();
    let listed = &store.experiments(None).unwrap()[0];
    assert_eq!((&listed.figures, listed.status), (&whole, Status::Ok));
    assert_eq!(store.experiment(id).unwrap().summary.figures, whole);
}

/// The kind and status columns are closed: a file edited past the schema's CHECKs is named as
/// corrupt when listed, never read as some other kind.
#[test]
fn an_experiment_kind_kerf_never_writes_is_named_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    drop(Store::open(&path).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA ignore_check_constraints = ON;
             INSERT INTO experiments (kind, status, created_at, spec) VALUES ('poll', 'ok', 0, '{}');",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let err = store.experiments(None).unwrap_err();
    assert_eq!(err.code(), "store_corrupt");
    assert!(
        err.to_string()
            .contains("experiment kind `poll` is not one Kerf writes")
            && err.to_string().contains("history.sqlite"),
        "{err}"
    );
}

/// Version 2 rebuilds `experiments` (its kind gains `eval`). A version-1 file whose run belongs
/// to an experiment keeps that link: the rebuild runs with foreign keys off, so dropping the old
/// table does not null the runs' `experiment_id` (ON DELETE SET NULL).
#[test]
fn migrating_to_v2_keeps_runs_in_their_experiments() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    std::fs::copy(fixtures().join("v1.sqlite"), &path).unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "INSERT INTO experiments (id, kind, status, created_at, spec) VALUES (7, 'compare', 'ok', 0, '{}');
             UPDATE runs SET experiment_id = 7;",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let runs = store.list(&Filter::default()).unwrap();
    assert_eq!(runs[0].experiment, Some(7));
    let e = store.experiment(7).unwrap();
    assert_eq!(
        (e.summary.kind, e.run_list.len()),
        (kerf_store::ExperimentKind::Compare, 1)
    );
    // The new kind is accepted, and an eval's cells point at their runs.
    let ev = store
        .begin_experiment(kerf_store::ExperimentKind::Eval, &json!({}))
        .unwrap();
    let mut run = new_run(&store, "doc");
    run.experiment = Some(ev);
    run.cell = Some(cell("r1"));
    let first = store.begin_run(&run).unwrap().id();
    // A retry of the same cell replaces its run: each cell is held once.
    let second = store.begin_run(&run).unwrap().id();
    let cells = store.cells(ev).unwrap();
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0].run, Some(second));
    assert_ne!(first, second);
    assert_eq!(
        store
            .latest_experiment(kerf_store::ExperimentKind::Eval)
            .unwrap(),
        Some(ev)
    );
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

/// Issue 35: a request handed to a provider that answers later (a batch API) is `submitted`.
/// The process that submitted it goes away; a second one opening the history recovers what
/// died `running` and leaves it alone; a third settles it. Two settles of one run: one wins.
#[test]
fn a_submitted_run_survives_another_process_opening_the_history_and_a_third_settles_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    let (run, dead, experiment) = {
        let first = Store::open(&path).unwrap();
        let experiment = first
            .begin_experiment(kerf_store::ExperimentKind::Eval, &json!({}))
            .unwrap();
        let mut new = new_run(&first, "doc");
        new.experiment = Some(experiment);
        let run = first
            .begin_run(&new)
            .unwrap()
            .submit("batch_69/request-3")
            .unwrap();
        first.submit_experiment(experiment).unwrap();
        // Beside it, a run this process was streaming when it died.
        let mut w = first.begin_run(&new_run(&first, "other")).unwrap();
        w.push("{\"entity\": \"D").unwrap();
        let dead = w.id();
        std::mem::forget(w);
        (run, dead, experiment)
    };
    {
        let second = Store::open(&path).unwrap();
        assert_eq!(
            second.run(dead).unwrap().summary.status,
            Status::Interrupted
        );
        assert_eq!(second.run(run).unwrap().summary.status, Status::Submitted);
        assert_eq!(
            second.submitted_runs().unwrap(),
            vec![(run, "batch_69/request-3".to_string())]
        );
        let e = second.experiment(experiment).unwrap();
        assert_eq!(e.summary.status, Status::Submitted);
    }
    let third = Store::open(&path).unwrap();
    let end = RunEnd {
        usage: Usage {
            prompt_tokens: 12,
            completion_tokens: 7,
            reasoning_tokens: None,
        },
        ..RunEnd::new(FinishReason::Stop, "{\"entity\": \"DNA\"}\n")
    };
    assert!(third.settle_run(run, &end).unwrap());
    let settled = third.run(run).unwrap();
    assert_eq!(settled.summary.status, Status::Ok);
    assert_eq!(settled.raw, "{\"entity\": \"DNA\"}\n");
    assert_eq!(settled.summary.completion_tokens, Some(7));
    assert!(third.submitted_runs().unwrap().is_empty());
    // Settled once: a second settle leaves it as it is.
    let other = RunEnd::new(FinishReason::Error, "");
    assert!(!third.settle_run(run, &other).unwrap());
    assert_eq!(third.run(run).unwrap().raw, settled.raw);
    third
        .finish_experiment(
            experiment,
            &json!({"cells": 1}).to_string(),
            &Default::default(),
            None,
        )
        .unwrap();
    assert_eq!(
        third.experiment(experiment).unwrap().summary.status,
        Status::Ok
    );
    assert_eq!(third.integrity_check().unwrap(), "ok");
}

/// Issue 36, item 13: an eval's rows are kept as they come (in one transaction: a writer
/// dropped before its commit keeps none) and read back one at a time; its cells' outcomes are
/// read without their replies, and each reply by its run.
#[test]
fn an_evals_rows_and_replies_are_read_one_at_a_time() {
    let store = Store::in_memory().unwrap();
    let ev = store
        .begin_experiment(kerf_store::ExperimentKind::Eval, &json!({}))
        .unwrap();
    {
        let mut w = store.eval_rows_writer(ev).unwrap();
        w.put("a", r#"{"id":"a"}"#).unwrap();
    }
    assert!(store.eval_row_ids(ev).unwrap().is_empty(), "not committed");
    let mut w = store.eval_rows_writer(ev).unwrap();
    for id in ["a", "b", "c"] {
        w.put(id, &json!({ "id": id }).to_string()).unwrap();
    }
    w.commit().unwrap();
    assert_eq!(store.eval_row_ids(ev).unwrap(), ["a", "b", "c"]);
    assert_eq!(
        store.eval_row(ev, 1).unwrap().as_deref(),
        Some(r#"{"id":"b"}"#)
    );
    assert_eq!(store.eval_row(ev, 3).unwrap(), None);
    let mut seen = Vec::new();
    store
        .each_eval_row(ev, |seq, text| -> kerf_store::Result<()> {
            seen.push((seq, text));
            Ok(())
        })
        .unwrap();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[2], (2, r#"{"id":"c"}"#.to_string()));
    // A cell measured by a run: its outcome without its reply, then the reply by its run.
    let run = record(&store, "DNA", &["{\"entity\": \"DNA\"}\n"], "stop");
    store.put_cell(ev, &cell("a"), run).unwrap();
    let outcomes = store.eval_outcomes(ev).unwrap();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].cell.status, Some(Status::Ok));
    assert_eq!(outcomes[0].completion_tokens, Some(20));
    assert!(outcomes[0].report.is_none() && outcomes[0].raw.is_none());
    let all = store.eval_replies(ev, true).unwrap();
    let parsed = store.eval_reply(run, false).unwrap();
    assert_eq!(parsed.report, all[0].report);
    assert_eq!(parsed.report.unwrap().objects.len(), 1);
    let raw = store.eval_reply(run, true).unwrap();
    assert_eq!(raw.raw.as_deref(), Some("{\"entity\": \"DNA\"}\n"));
    assert_eq!(raw.details, all[0].details);
    assert_eq!(
        store.eval_reply(run + 100, false).unwrap(),
        Default::default()
    );
}

#[test]
fn a_documents_cells_are_read_without_its_neighbours() {
    let store = Store::in_memory().unwrap();
    let ev = store
        .begin_experiment(kerf_store::ExperimentKind::Eval, &json!({}))
        .unwrap();
    let run = record(&store, "DNA", &["{\"entity\": \"DNA\"}\n"], "stop");
    let at = |row: &str, size: u32, context: u32, chunk: u32, pass: u32| kerf_store::CellKey {
        chunk_size: size,
        context_chars: context,
        chunk,
        pass,
        ..cell(row)
    };
    // Document `a` cut at 100: three chunks, two passes each; beside it, `b` at the same size,
    // `a` at another size and with context, and `a` uncut.
    let mut mine = Vec::new();
    for chunk in 0..3 {
        for pass in 0..2 {
            mine.push(at("a", 100, 0, chunk, pass));
        }
    }
    let others = [
        at("b", 100, 0, 0, 0),
        at("a", 400, 0, 0, 0),
        at("a", 100, 50, 0, 0),
        at("a", 0, 0, 0, 0),
    ];
    for key in mine.iter().rev().chain(&others) {
        store.put_cell(ev, key, run).unwrap();
    }
    let read: Vec<kerf_store::CellKey> = store
        .eval_document_outcomes(ev, &at("a", 100, 0, 2, 1))
        .unwrap()
        .into_iter()
        .map(|o| o.cell.cell)
        .collect();
    assert_eq!(read, mine, "every chunk and pass of `a` at 100, in order");
    assert_eq!(
        store.eval_outcomes(ev).unwrap().len(),
        mine.len() + others.len()
    );
    assert_eq!(
        store
            .eval_outcome(ev, &at("a", 100, 0, 1, 1))
            .unwrap()
            .map(|o| o.cell.cell),
        Some(at("a", 100, 0, 1, 1))
    );
    assert!(
        store
            .eval_document_outcomes(ev, &at("c", 100, 0, 0, 0))
            .unwrap()
            .is_empty()
    );
}
