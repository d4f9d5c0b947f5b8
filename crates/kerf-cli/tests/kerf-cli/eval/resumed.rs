//! Compares and prompt files' tests taken up again after a killed process, as an eval's are:
//! two loopback servers side by side, the process killed with cells of both done and cells of
//! both in flight, then `--resume`. Nothing measured before is bought again, and the result is
//! the one a run never killed gives.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{Again, Model, add_server, kerf_in, repo, rows, setup, stderr, stdout_json};

/// Start `kerf` with `args` in `dir`, wait until each server holds `held` requests, and kill
/// it (SIGKILL: no handler runs, nothing is settled).
fn killed_midway(dir: &std::path::Path, args: &[&str], servers: [&Model; 2], held: usize) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(args)
        .current_dir(repo())
        .env("KERF_CONFIG_DIR", dir)
        .env("KERF_DATA_DIR", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for s in servers {
        s.wait_held(held);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    for s in servers {
        s.release();
    }
}

/// What a compare's row says of its reply, keyed by where it sits in the matrix.
fn row_figures(v: &Value) -> Vec<String> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} on {} at {}: {} objects, {}, truncated {}",
                r["prompt"],
                r["provider"],
                r["max_tokens"],
                r["objects"],
                r["finish_reason"],
                r["truncated"]
            )
        })
        .collect()
}

#[test]
fn a_killed_compare_of_two_models_resumes_without_buying_a_cell_again() {
    let rows = rows();
    let a = Model::start(rows.clone(), Duration::ZERO);
    let b = Model::start_with(rows.clone(), Duration::ZERO, Again::Fewer);
    let (dir, _) = setup(&a, &rows);
    add_server(dir.path(), "weak", &b.url(), "loopback-small");
    let doc = dir.path().join("stroma.txt");
    std::fs::write(&doc, rows[0]["input"].as_str().unwrap()).unwrap();
    let args = [
        "compare",
        "prompts/agent-kg-extract.json",
        "prompts/agent-kg-extract-array.json",
        "--input",
        doc.to_str().unwrap(),
        "--provider",
        "srv,weak",
        "--max-tokens",
        "40,1000",
        "--constrain",
        "none",
        "--concurrency",
        "2",
    ];
    // Each provider's lane: both prompts at 40 tokens answered, both at 1000 held when the kill
    // lands.
    a.hold_from(2);
    b.hold_from(2);
    killed_midway(dir.path(), &args, [&a, &b], 2);
    assert_eq!((a.requests(), b.requests()), (4, 4));
    // The input file is gone: a resume renders what the history kept, not the file.
    std::fs::remove_file(&doc).unwrap();
    // What remains, announced with nothing sent: the two held cells of each provider.
    let o = kerf_in(dir.path(), &["compare", "--resume", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("compare plan: 4 cell(s)")
            && stderr(&o).contains("srv: 2 request(s)")
            && stderr(&o).contains("weak: 2 request(s)"),
        "{}",
        stderr(&o)
    );
    assert_eq!((a.requests(), b.requests()), (4, 4));
    let o = kerf_in(dir.path(), &["compare", "--resume", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let resumed = stdout_json(&o);
    // Only the held cells were bought again (their answers went to a process that was gone).
    assert_eq!((a.requests(), b.requests()), (6, 6));
    let e = resumed["experiment"].as_i64().unwrap();
    let store = kerf_store::Store::open(&dir.path().join(kerf_store::FILE_NAME)).unwrap();
    let mut cells: Vec<String> = store
        .cells(e)
        .unwrap()
        .into_iter()
        .map(|c| {
            format!(
                "{}|{}|{}",
                c.cell.provider, c.cell.prompt, c.cell.max_tokens
            )
        })
        .collect();
    cells.dedup();
    assert_eq!(cells.len(), 8, "every cell exactly once: {cells:?}");
    let summary = store.experiment(e).unwrap().summary;
    assert_eq!(summary.status.as_str(), "ok");
    assert_eq!(store.integrity_check().unwrap(), "ok");
    drop(store);
    // The same rows and sweeps as a compare never killed.
    std::fs::write(&doc, rows[0]["input"].as_str().unwrap()).unwrap();
    let o = kerf_in(dir.path(), &[&args[..], &["--json"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let whole = stdout_json(&o);
    assert_eq!(row_figures(&resumed), row_figures(&whole));
    assert_eq!(resumed["rows"].as_array().unwrap().len(), 8);
    let sweeps = |v: &Value| -> Vec<(String, String, u64)> {
        v["sweeps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["prompt"].as_str().unwrap().to_string(),
                    s["provider"].as_str().unwrap().to_string(),
                    s["total"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(sweeps(&resumed), sweeps(&whole));
    // Provider by provider: `srv` gives the stroma row's three records in each format; `weak`
    // all but the last.
    assert_eq!(
        sweeps(&resumed)
            .into_iter()
            .map(|(_, p, n)| (p, n))
            .collect::<Vec<_>>(),
        [
            ("srv".to_string(), 3),
            ("srv".to_string(), 3),
            ("weak".to_string(), 2),
            ("weak".to_string(), 2)
        ]
    );
    // A compare that ended cannot be taken up by another kind's resume.
    let o = kerf_in(dir.path(), &["test", "--resume", &e.to_string()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("experiment {e} is a compare, not a test")),
        "{}",
        stderr(&o)
    );
}

#[test]
fn killed_tests_of_two_models_resume_without_running_a_test_again() {
    let rows = rows();
    let a = Model::start(rows.clone(), Duration::ZERO);
    let b = Model::start_with(rows.clone(), Duration::ZERO, Again::Fewer);
    let (dir, _) = setup(&a, &rows);
    add_server(dir.path(), "weak", &b.url(), "loopback-small");
    let mut file: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("prompts/agent-kg-extract.json")).unwrap(),
    )
    .unwrap();
    // Recall at least 0.8: `srv` finds every record; `weak` leaves each document's last out
    // (2 of 3, 1 of 2, 3 of 4: each under 0.8).
    file["tests"] = Value::Array(
        rows.iter()
            .map(|r| {
                serde_json::json!({"name": r["id"], "input": r["input"],
                    "expected": r["expected"]["agent-kg-extract"], "min": {"recall": 0.8}})
            })
            .collect(),
    );
    let prompt = dir.path().join("agent-kg-extract.json");
    std::fs::write(&prompt, file.to_string()).unwrap();
    let args = [
        "test",
        prompt.to_str().unwrap(),
        "--provider",
        "srv,weak",
        "--concurrency",
        "1",
    ];
    // Each provider: its first test answered, its second held, its third not started.
    a.hold_from(1);
    b.hold_from(1);
    killed_midway(dir.path(), &args, [&a, &b], 1);
    assert_eq!((a.requests(), b.requests()), (2, 2));
    // The prompt file changed since: a resume runs the version the tests began with.
    std::fs::write(&prompt, "{}").unwrap();
    let o = kerf_in(dir.path(), &["test", "--resume", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("test plan: 4 cell(s)"),
        "{}",
        stderr(&o)
    );
    // The held test and the one never started, on each server; the answered one not again.
    assert_eq!((a.requests(), b.requests()), (4, 4));
    let v = stdout_json(&o);
    assert_eq!(
        (&v["passed"], &v["failed"], &v["errors"]),
        (&3.into(), &3.into(), &0.into())
    );
    let got: Vec<(String, String, String)> = v["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["provider"].as_str().unwrap().to_string(),
                t["name"].as_str().unwrap().to_string(),
                t["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String, String)> = ["srv", "weak"]
        .into_iter()
        .flat_map(|p| {
            ["stroma", "rubisco", "thylakoid"].map(|n| {
                (
                    p.to_string(),
                    n.to_string(),
                    if p == "srv" { "passed" } else { "failed" }.to_string(),
                )
            })
        })
        .collect();
    assert_eq!(got, want);
    // Each recall as worked out by hand: every record on `srv`, all but the last on `weak`.
    let recalls: Vec<f64> = v["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["scores"]["recall"].as_f64().unwrap())
        .collect();
    assert_eq!(recalls, [1.0, 1.0, 1.0, 2.0 / 3.0, 1.0 / 2.0, 3.0 / 4.0]);
    // Six tests, six runs, none run twice: the first of each provider is the run from before
    // the kill.
    let mut runs: Vec<i64> = v["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["run"].as_i64().unwrap())
        .collect();
    runs.sort_unstable();
    runs.dedup();
    assert_eq!(runs.len(), 6);
    let store = kerf_store::Store::open(&dir.path().join(kerf_store::FILE_NAME)).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    // Taken up again once more, nothing is left to run and nothing is sent.
    drop(store);
    let o = kerf_in(dir.path(), &["test", "--resume", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("test plan: 0 cell(s)"),
        "{}",
        stderr(&o)
    );
    assert_eq!((a.requests(), b.requests()), (4, 4));
    assert_eq!(stdout_json(&o)["tests"], v["tests"]);
}
