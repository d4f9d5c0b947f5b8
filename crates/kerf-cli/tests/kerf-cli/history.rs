//! `kerf history` and the recording behind it, through real processes on the real model and a
//! real SQLite file: what is kept, list/show/diff/rerun/export/tag/note/delete, a run killed
//! mid-stream, two processes writing at once, files Kerf must refuse.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use super::server::{Act, Latch, Server};
use super::{repo, stderr, stdout_json};

/// `kerf --data-dir DIR …`.
fn kerf_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kerf"))
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok_json(o: Output) -> Value {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    stdout_json(&o)
}

/// The bundled model's path (fetched by the test command into the default data directory).
fn gguf() -> String {
    let list = ok_json(super::kerf(&["models", "list", "--json"]));
    list["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["default"] == true)
        .unwrap_or_else(|| panic!("run `kerf models fetch` first: {list}"))["path"]
        .as_str()
        .unwrap()
        .to_string()
}

fn run_json(dir: &Path, model: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "run",
        "prompts/agent-kg-extract.json",
        "--sample",
        "--model",
        model,
        "--json",
    ];
    args.extend_from_slice(extra);
    run_out(kerf_in(dir, &args))
}

/// The JSON of a `kerf run`-like command, whose exit code follows the book's table for the
/// way its reply ended (a tiny budget cuts it: 3, or 2 with nothing whole in it); the JSON is
/// printed all the same.
fn run_out(o: Output) -> Value {
    assert!(matches!(o.status.code(), Some(0..=3)), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(o.status.code(), Some(super::run_exit_code(&v)), "{v}");
    v
}

/// Everything a user does with the history, on the bundled model.
#[test]
fn runs_are_recorded_then_listed_shown_diffed_rerun_exported_tagged_and_deleted() {
    let _cpu = super::model_lock();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let model = gguf();
    let a = run_json(dir, &model, &["--max-tokens", "60"]);
    let b = run_json(dir, &model, &["--max-tokens", "120"]);
    let (ia, ib) = (
        a["history_id"].as_i64().unwrap(),
        b["history_id"].as_i64().unwrap(),
    );

    // list --json: newest first, with the documented keys.
    let list = ok_json(kerf_in(dir, &["history", "list", "--json"]));
    let runs = list.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["id"], ib);
    for key in [
        "id",
        "status",
        "prompt",
        "provider",
        "model",
        "created_at",
        "objects",
    ] {
        assert!(runs[0].get(key).is_some(), "{key}: {}", runs[0]);
    }
    assert_eq!(runs[1]["prompt"], "agent-kg-extract");
    assert_eq!(runs[1]["provider"], "local");
    assert_eq!(runs[1]["objects"], a["objects"].as_array().unwrap().len());
    let a_status = if a["finish_reason"] == "length" {
        "truncated"
    } else {
        "ok"
    };
    assert_eq!(runs[1]["status"], a_status);
    let truncated = ok_json(kerf_in(
        dir,
        &["history", "list", "--status", a_status, "--json"],
    ));
    assert!(truncated.as_array().unwrap().iter().any(|r| r["id"] == ia));
    let none = ok_json(kerf_in(
        dir,
        &[
            "history",
            "list",
            "--prompt",
            "extract-definitions",
            "--json",
        ],
    ));
    assert_eq!(none, Value::Array(vec![]));

    // show: exactly what ran and what came back.
    let shown = ok_json(kerf_in(
        dir,
        &["history", "show", &ia.to_string(), "--json"],
    ));
    assert_eq!(shown["raw"], a["raw"]);
    assert_eq!(shown["params"]["max_tokens"], 60);
    assert_eq!(
        shown["model_sha256"],
        kerf_llama::models::DEFAULT_MODEL_SHA256
    );
    assert_eq!(shown["report"]["objects"], a["objects"]);
    assert_eq!(shown["usage"], a["usage"]);
    let rendered = ok_json(super::kerf(&[
        "render",
        "prompts/agent-kg-extract.json",
        "--sample",
        "--json",
    ]));
    assert_eq!(shown["user"], rendered["user"]);
    let text = std::fs::read_to_string(repo().join("prompts/agent-kg-extract.json")).unwrap();
    assert_eq!(shown["prompt_text"], text);
    let human = kerf_in(dir, &["history", "show", "last"]);
    let out = String::from_utf8_lossy(&human.stdout);
    assert!(
        out.contains(&format!("run {ib}")) && out.contains("── reply"),
        "{out}"
    );

    // diff: same prompt and input; the budget changed; the object sets compared.
    let diff = ok_json(kerf_in(
        dir,
        &[
            "history",
            "diff",
            &ia.to_string(),
            &ib.to_string(),
            "--json",
        ],
    ));
    assert_eq!(diff["prompt"]["same"], true);
    assert_eq!(diff["input"]["same"], true);
    let params = diff["params"].as_array().unwrap();
    assert_eq!(params.len(), 1, "{diff}");
    assert_eq!(params[0]["name"], "max_tokens");
    assert_eq!(
        (params[0]["a"].clone(), params[0]["b"].clone()),
        (Value::from(60), Value::from(120))
    );
    let o = &diff["objects"];
    let b_objects = b["objects"].as_array().unwrap().len() as u64;
    assert_eq!(
        o["unchanged"].as_u64().unwrap()
            + o["added"].as_array().unwrap().len() as u64
            + o["changed"].as_array().unwrap().len() as u64,
        b_objects,
        "{o}"
    );

    // rerun: the stored prompt version, input and flags — greedy decoding repeats the reply.
    let again = run_out(kerf_in(
        dir,
        &["history", "rerun", &ia.to_string(), "--json"],
    ));
    assert_eq!(again["raw"], a["raw"]);
    let ic = again["history_id"].as_i64().unwrap();
    let c = ok_json(kerf_in(
        dir,
        &["history", "show", &ic.to_string(), "--json"],
    ));
    assert_eq!(c["rerun_of"], ia);
    assert_eq!(c["prompt_version"], shown["prompt_version"]);
    // An override: a smaller budget, and the finish says so.
    let short = run_out(kerf_in(
        dir,
        &[
            "history",
            "rerun",
            &ia.to_string(),
            "--max-tokens",
            "8",
            "--json",
        ],
    ));
    assert_eq!(short["finish_reason"], "length");
    assert_eq!(short["usage"]["completion_tokens"], 8);

    // tag and note, then filter by tag.
    assert_eq!(
        kerf_in(dir, &["history", "tag", &ia.to_string(), "baseline", "v1"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        kerf_in(
            dir,
            &[
                "history",
                "note",
                &ia.to_string(),
                "before the schema change"
            ]
        )
        .status
        .code(),
        Some(0)
    );
    let tagged = ok_json(kerf_in(
        dir,
        &["history", "list", "--tag", "baseline", "--json"],
    ));
    assert_eq!(tagged.as_array().unwrap().len(), 1);
    assert_eq!(tagged[0]["tags"], serde_json::json!(["baseline", "v1"]));
    assert_eq!(tagged[0]["note"], "before the schema change");

    // export: every run as JSON lines; CSV with a header row.
    let jsonl = kerf_in(dir, &["history", "export"]);
    let lines: Vec<Value> = String::from_utf8_lossy(&jsonl.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert!(lines.iter().any(|l| l["raw"] == a["raw"] && l["id"] == ia));
    let out = d.path().join("runs.csv");
    let csv = kerf_in(
        dir,
        &[
            "history",
            "export",
            "--format",
            "csv",
            "--tag",
            "baseline",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(csv.status.code(), Some(0), "{}", stderr(&csv));
    let csv = std::fs::read_to_string(&out).unwrap();
    assert!(csv.starts_with("id,created_at,status,prompt,"), "{csv}");
    assert_eq!(csv.lines().count(), 2, "{csv}");

    // --no-history leaves the history as it was.
    run_json(dir, &model, &["--max-tokens", "4", "--no-history"]);
    assert_eq!(
        ok_json(kerf_in(dir, &["history", "list", "--json"]))
            .as_array()
            .unwrap()
            .len(),
        4
    );

    // delete asks first; without a terminal it says to pass --yes and deletes nothing.
    let refused = kerf_in(dir, &["history", "delete", &ib.to_string()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("--yes"), "{}", stderr(&refused));
    let gone = kerf_in(dir, &["history", "delete", &ib.to_string(), "--yes"]);
    assert_eq!(gone.status.code(), Some(0), "{}", stderr(&gone));
    let missing = kerf_in(dir, &["history", "show", &ib.to_string()]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains(&format!("run {ib} is not in the history")),
        "{}",
        stderr(&missing)
    );

    // compare and sweep are experiments grouping their runs and curves.
    let cmp = ok_json(kerf_in(
        dir,
        &[
            "compare",
            "prompts/agent-kg-extract.json",
            "prompts/agent-kg-extract-array.json",
            "--sample",
            "--model",
            &model,
            "--max-tokens",
            "16",
            "--constrain",
            "none",
            "--json",
        ],
    ));
    let e = cmp["experiment"].as_i64().unwrap();
    let x = ok_json(kerf_in(
        dir,
        &["history", "show", &format!("e{e}"), "--json"],
    ));
    assert_eq!(x["kind"], "compare");
    assert_eq!(x["status"], "ok");
    assert_eq!(x["run_list"].as_array().unwrap().len(), 2);
    assert_eq!(x["result"]["rows"], cmp["rows"]);
    let reply = d.path().join("reply.jsonl");
    std::fs::write(&reply, a["raw"].as_str().unwrap()).unwrap();
    let sweep = kerf_in(
        dir,
        &[
            "sweep",
            reply.to_str().unwrap(),
            "--prompt",
            "prompts/agent-kg-extract.json",
            "--json",
        ],
    );
    assert_eq!(sweep.status.code(), Some(0), "{}", stderr(&sweep));
    let xs = ok_json(kerf_in(dir, &["history", "experiments", "--json"]));
    assert_eq!(xs[0]["kind"], "sweep");
    assert_eq!(xs[1]["kind"], "compare");
}

/// `kerf run` started with `args`, its standard output piped: the reply shows there as it streams.
fn spawn_run(dir: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_kerf"))
        .arg("--data-dir")
        .arg(dir)
        .arg("run")
        .args(args)
        .current_dir(repo())
        .env("KERF_CONFIG_DIR", dir)
        .env("KERF_KEYRING", "kernel")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Once `shown` bytes of the reply have shown, SIGKILL the run. Returns everything it showed,
/// and whether the kill is what ended it (rather than the run ending on its own first).
fn kill_after(mut child: std::process::Child, shown: usize) -> (Vec<u8>, bool) {
    let mut stdout = child.stdout.take().unwrap();
    let mut first = vec![0u8; shown];
    stdout.read_exact(&mut first).unwrap();
    // Killing a process that has exited but is not yet reaped is not an error, and its exit
    // status then says how it ended.
    let _ = child.kill();
    let status = child.wait().unwrap();
    let mut rest = Vec::new();
    let _ = stdout.read_to_end(&mut rest);
    use std::os::unix::process::ExitStatusExt as _;
    const SIGKILL: i32 = 9;
    ([first, rest].concat(), status.signal() == Some(SIGKILL))
}

/// A run killed mid-stream: the next open finds it `interrupted`, with a non-empty stored text
/// that is a prefix of what the user saw (the store may hold up to one batch less, or a batch
/// the pipe had not delivered yet), and the error saying its process stopped.
fn assert_interrupted(dir: &Path, run: &Value, shown: &[u8], seed: u64) {
    assert_eq!(run["status"], "interrupted", "KERF_TEST_SEED={seed}: {run}");
    let full = ok_json(kerf_in(
        dir,
        &["history", "show", &run["id"].to_string(), "--json"],
    ));
    let raw = full["raw"].as_str().unwrap();
    assert!(!raw.is_empty(), "KERF_TEST_SEED={seed}: {full}");
    let shown = String::from_utf8_lossy(shown);
    assert!(
        shown.starts_with(raw) || raw.starts_with(shown.as_ref()),
        "KERF_TEST_SEED={seed}: stored {raw:?} vs shown {shown:?}"
    );
    assert!(
        full["error"].as_str().unwrap().contains("stopped"),
        "KERF_TEST_SEED={seed}: {full}"
    );
}

/// An OpenAI stream's content events for `text`, one event a chunk, and no end: the reply is
/// still streaming whenever the client is killed.
fn openai_pieces(text: &str) -> Vec<Vec<u8>> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(7)
        .map(|piece| {
            let s: String = piece.iter().collect();
            let ev = serde_json::json!({"choices": [{"index": 0, "delta": {"content": s}, "finish_reason": null}]});
            format!("data: {ev}\n\n").into_bytes()
        })
        .collect()
}

/// The end of an OpenAI stream: the finish reason and usage, then `[DONE]`.
fn openai_end(finish: &str) -> Vec<u8> {
    let end = serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": {"prompt_tokens": 300, "completion_tokens": 150}});
    format!("data: {end}\n\ndata: [DONE]\n\n").into_bytes()
}

/// Runs listed oldest first: by id, the order they were begun (their times may tie).
fn runs_oldest_first(dir: &Path) -> Vec<Value> {
    let mut runs = ok_json(kerf_in(dir, &["history", "list", "--limit", "0", "--json"]))
        .as_array()
        .unwrap()
        .clone();
    runs.sort_by_key(|r| r["id"].as_i64().unwrap());
    runs
}

/// SIGKILL `kerf run` at 20 random moments mid-stream: each time the next open finds the run
/// `interrupted`, with the text it had shown, and the file intact. The reply comes from a
/// loopback OpenAI-compatible server that never ends it, so every kill lands while it streams,
/// however fast or busy the machine; the moment is drawn as a number of bytes shown.
#[test]
fn a_run_killed_mid_stream_is_interrupted_with_its_partial_reply() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let reply: String = (0..12)
        .map(|i| format!("{{\"type\": \"definition\", \"entity\": \"E{i}\", \"definition\": \"the {i}th entity\"}}\n"))
        .collect();
    let kills = 20;
    let server = Server::start(
        (0..kills)
            .map(|_| {
                Act::sse(200, openai_pieces(&reply))
                    .gap(std::time::Duration::from_millis(1))
                    .hold_open()
            })
            .collect(),
    );
    super::eval::add_server(dir, "endless", &server.base_url(), "endless");
    let mut moments = super::Moments::new("a_run_killed_mid_stream");
    let seed = moments.seed;
    let mut shown_texts = Vec::new();
    for _ in 0..kills {
        let child = spawn_run(
            dir,
            &[
                "prompts/agent-kg-extract.json",
                "--sample",
                "--max-tokens",
                "400",
                "--constrain",
                "none",
                "--provider",
                "endless",
            ],
        );
        let at = 1 + moments.below(reply.len() as u64) as usize;
        let (shown, killed) = kill_after(child, at);
        assert!(
            killed,
            "KERF_TEST_SEED={seed}: the run ended before its kill"
        );
        shown_texts.push(shown);
    }
    // The next command marks the last killed run interrupted and says so on stderr, a pipe
    // here: plain text, no colour codes (they once came along into pipes and CI logs).
    let listed = kerf_in(dir, &["history", "list"]);
    let said = stderr(&listed);
    assert!(
        said.contains("marked interrupted") && !said.contains('\x1b'),
        "KERF_TEST_SEED={seed}: {said:?}"
    );
    let runs = runs_oldest_first(dir);
    assert_eq!(runs.len(), kills, "KERF_TEST_SEED={seed}");
    for (r, shown) in runs.iter().zip(&shown_texts) {
        assert_interrupted(dir, r, shown, seed);
    }
    let store = kerf_store::Store::open(&dir.join("history.sqlite")).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

/// The same on the real model: the full greedy reply is measured first, and each kill is drawn
/// within its first half, so the model still has half its reply to write when the kill comes.
/// The exit status says whether the kill ended the run; one that had already ended on its own (a
/// machine far faster than this one) must then be kept whole, and the kill is drawn again earlier.
#[test]
fn a_run_killed_mid_stream_on_the_model_is_interrupted_with_its_partial_reply() {
    let _cpu = super::model_lock();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let model = gguf();
    let args = [
        "prompts/agent-kg-extract.json",
        "--sample",
        "--max-tokens",
        "400",
        "--constrain",
        "none",
        "--model",
        &model,
    ];
    let mut whole = Vec::new();
    spawn_run(dir, &args)
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut whole)
        .unwrap();
    let reference = runs_oldest_first(dir)[0].clone();
    assert_eq!(reference["status"], "ok", "{reference}");
    let full = ok_json(kerf_in(
        dir,
        &["history", "show", &reference["id"].to_string(), "--json"],
    ));
    let reply = full["raw"].as_str().unwrap().to_string();
    assert!(reply.len() >= 40, "a reply long enough to cut: {reply:?}");
    let mut moments = super::Moments::new("a_run_killed_mid_stream_on_the_model");
    let seed = moments.seed;
    let mut landed = 0;
    let mut attempts = 0;
    let mut half = reply.len() / 2;
    while landed < 5 {
        attempts += 1;
        assert!(
            attempts <= 20,
            "KERF_TEST_SEED={seed}: the run kept ending before its kill"
        );
        let at = 1 + moments.below(half as u64) as usize;
        let (shown, killed) = kill_after(spawn_run(dir, &args), at);
        let run = runs_oldest_first(dir).pop().unwrap();
        if run["status"] == "ok" {
            // It ended before the kill came: kept whole, and the next kill comes earlier.
            let stored = ok_json(kerf_in(
                dir,
                &["history", "show", &run["id"].to_string(), "--json"],
            ));
            assert_eq!(stored["raw"], reply, "KERF_TEST_SEED={seed}");
            half = (half / 2).max(1);
            continue;
        }
        assert!(killed, "KERF_TEST_SEED={seed}: {run}");
        assert_interrupted(dir, &run, &shown, seed);
        landed += 1;
    }
    let store = kerf_store::Store::open(&dir.join("history.sqlite")).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

/// `kerf --data-dir DIR …` with DIR as its configuration directory too (providers).
fn kerf_in_config(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kerf"))
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .current_dir(repo())
        .env("KERF_CONFIG_DIR", dir)
        .env("KERF_KEYRING", "kernel")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Ctrl-C while a reply streams (from a server that never ends it, so the signal always lands
/// mid-stream): the run stops, what arrived is parsed and reported as `cancelled`, and the history
/// keeps it as shown.
#[test]
fn ctrl_c_mid_stream_stops_the_run_and_keeps_what_arrived() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let line = "{\"type\": \"definition\", \"entity\": \"DNA\", \"definition\": \"a molecule\"}\n";
    let reply = line.repeat(8);
    let server = Server::start(vec![
        Act::sse(200, openai_pieces(&reply))
            .gap(std::time::Duration::from_millis(1))
            .hold_open(),
    ]);
    super::eval::add_server(dir, "endless", &server.base_url(), "endless");
    let mut moments = super::Moments::new("ctrl_c_mid_stream");
    let seed = moments.seed;
    let mut child = spawn_run(
        dir,
        &[
            "prompts/agent-kg-extract.json",
            "--sample",
            "--constrain",
            "none",
            "--provider",
            "endless",
        ],
    );
    // At least two whole lines shown, so the report has objects to show.
    let at = 2 * line.len() + moments.below((reply.len() - 2 * line.len()) as u64) as usize;
    let mut shown = vec![0u8; at];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut shown)
        .unwrap();
    super::ctrl_c(&child);
    let o = child.wait_with_output().unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&shown),
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        out.contains("finish: cancelled"),
        "KERF_TEST_SEED={seed}: {out}\n{}",
        stderr(&o)
    );
    // Cancelled, by the exit code table.
    assert_eq!(o.status.code(), Some(130), "KERF_TEST_SEED={seed}");
    let run = runs_oldest_first(dir).pop().unwrap();
    assert_eq!(run["status"], "interrupted", "KERF_TEST_SEED={seed}: {run}");
    let full = ok_json(kerf_in(
        dir,
        &["history", "show", &run["id"].to_string(), "--json"],
    ));
    assert_eq!(
        full["finish_reason"], "cancelled",
        "KERF_TEST_SEED={seed}: {full}"
    );
    let raw = full["raw"].as_str().unwrap();
    assert!(raw.len() >= at, "KERF_TEST_SEED={seed}: {raw:?}");
    assert!(reply.starts_with(raw), "KERF_TEST_SEED={seed}: {raw:?}");
    assert!(
        out.starts_with(raw),
        "KERF_TEST_SEED={seed}: {raw:?} vs {out:?}"
    );
    assert!(
        full["report"]["objects"].as_array().unwrap().len() >= 2,
        "{full}"
    );
}

/// The CLI and the app write at once: a run streams into the history while other processes
/// record sweeps and tag runs. None fails with "database is locked".
#[test]
fn two_processes_writing_at_once_never_see_database_is_locked() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_path_buf();
    let reply = d.path().join("reply.jsonl");
    let line = "{\"type\": \"definition\", \"entity\": \"DNA\", \"definition\": \"x\"}\n";
    std::fs::write(&reply, line.repeat(50)).unwrap();
    // The running reply streams (a piece every 10 ms, written to the history in batches) and its
    // last piece waits until the writers are done: it is provably still streaming all the while,
    // however fast or busy the machine.
    let writers_done = Latch::default();
    let with_end = |mut pieces: Vec<Vec<u8>>, finish: &str| {
        pieces.push(openai_end(finish));
        pieces
    };
    let server = Server::start(vec![
        Act::sse(200, with_end(openai_pieces(line), "stop")),
        Act::sse(200, with_end(openai_pieces(&line.repeat(40)), "length"))
            .gap(std::time::Duration::from_millis(10))
            .last_waits_for(&writers_done),
    ]);
    super::eval::add_server(&dir, "loopback", &server.base_url(), "loopback");
    let seed = run_out(kerf_in_config(
        &dir,
        &[
            "run",
            "prompts/agent-kg-extract.json",
            "--sample",
            "--provider",
            "loopback",
            "--json",
        ],
    ));
    let seed_id = seed["history_id"].to_string();
    let mut running = spawn_run(
        &dir,
        &[
            "prompts/agent-kg-extract.json",
            "--sample",
            "--max-tokens",
            "150",
            "--constrain",
            "none",
            "--provider",
            "loopback",
            "--json",
        ],
    );
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (dir, reply, seed_id) = (dir.clone(), reply.clone(), seed_id.clone());
            std::thread::spawn(move || {
                for i in 0..15 {
                    let s = kerf_in(
                        &dir,
                        &[
                            "sweep",
                            reply.to_str().unwrap(),
                            "--prompt",
                            "prompts/agent-kg-extract.json",
                            "--json",
                        ],
                    );
                    assert_eq!(s.status.code(), Some(0), "{}", stderr(&s));
                    let t = kerf_in(&dir, &["history", "tag", &seed_id, &format!("w{w}-{i}")]);
                    assert_eq!(t.status.code(), Some(0), "{}", stderr(&t));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    assert!(
        running.try_wait().unwrap().is_none(),
        "the run streamed while the others wrote"
    );
    writers_done.open();
    let out = running.wait_with_output().unwrap();
    let v = run_out(out.clone());
    assert_eq!(v["finish_reason"], "length", "{v}");
    assert!(!stderr(&out).contains("locked"));
    let xs = ok_json(kerf_in(
        &dir,
        &["history", "experiments", "--limit", "0", "--json"],
    ));
    assert_eq!(xs.as_array().unwrap().len(), 30);
    let shown = ok_json(kerf_in(&dir, &["history", "show", &seed_id, "--json"]));
    assert_eq!(shown["tags"].as_array().unwrap().len(), 30);
    let runs = ok_json(kerf_in(&dir, &["history", "list", "--json"]));
    assert_eq!(runs[0]["status"], "truncated", "{}", runs[0]);
}

/// A history from a newer Kerf, and a file that is not one, are refused by name with exit 2 —
/// and left exactly as they were.
#[test]
fn a_newer_or_corrupt_history_is_refused_untouched() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let path: PathBuf = dir.join("history.sqlite");
    std::fs::write(
        &path,
        b"not a database at all, and precious to someone".repeat(100),
    )
    .unwrap();
    let reply = dir.join("reply.jsonl");
    std::fs::write(&reply, "{\"a\": 1}\n").unwrap();
    let reply = reply.to_str().unwrap();
    let before = std::fs::read(&path).unwrap();
    for args in [
        &["history", "list"][..],
        &["sweep", reply, "--type", "jsonl"][..],
    ] {
        let o = kerf_in(dir, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(
            e.contains("error[store_corrupt]") && e.contains(path.to_str().unwrap()),
            "{e}"
        );
        assert!(e.contains("left untouched"), "{e}");
    }
    // --no-history still works, and the file is as it was.
    let o = kerf_in(dir, &["sweep", reply, "--type", "jsonl", "--no-history"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(&path).unwrap(), before);

    std::fs::remove_file(&path).unwrap();
    drop(kerf_store::Store::open(&path).unwrap());
    let mut bytes = std::fs::read(&path).unwrap();
    // One version past what this build writes.
    let newer = u32::try_from(kerf_store::migrate::LATEST).unwrap() + 1;
    bytes[60..64].copy_from_slice(&newer.to_be_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let o = kerf_in(dir, &["history", "list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("error[store_newer]") && stderr(&o).contains("newer Kerf"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

/// Security review, finding 13: `history export --format csv` wrote a note or tag starting
/// with `=` as a cell a spreadsheet runs as a formula, and built the whole export in memory.
/// Such cells now start with `'` (shown as text); rows are written one at a time, to a file
/// that is complete or absent.
#[test]
fn csv_export_never_writes_a_formula_cell() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    {
        let store = kerf_store::Store::open(&dir.join("history.sqlite")).unwrap();
        let version = store
            .put_prompt_version("=kg", None, "jsonl", r#"{"id": "=kg", "prompt": "x"}"#)
            .unwrap();
        let input = store
            .put_input(&serde_json::json!({"text": "doc"}), &serde_json::json!({}))
            .unwrap();
        let w = store
            .begin_run(&kerf_store::NewRun {
                prompt_version: version,
                input,
                experiment: None,
                rerun_of: None,
                cell: None,
                provider: "local".into(),
                model: "@model".into(),
                model_sha256: None,
                params: serde_json::json!({"max_tokens": 8}),
                system: None,
                user: "x".into(),
            })
            .unwrap();
        let id = w
            .finish(kerf_store::RunEnd::new(kerf_llm::FinishReason::Stop, "[]"))
            .unwrap();
        store.tag(id, "+cmd").unwrap();
        store
            .note(
                id,
                Some("=HYPERLINK(\"http://evil.example\",\"click\"), -2+3"),
            )
            .unwrap();
    }
    let out = dir.join("out/runs.csv");
    let o = kerf_in(
        dir,
        &[
            "history",
            "export",
            "--format",
            "csv",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let csv = std::fs::read_to_string(&out).unwrap();
    let row = csv.lines().nth(1).unwrap();
    assert!(
        row.contains(",'=kg,") && row.contains(",'@model,") && row.contains(",'+cmd,"),
        "{row}"
    );
    assert!(
        row.ends_with(r#","'=HYPERLINK(""http://evil.example"",""click""), -2+3""#),
        "{row}"
    );
    // Nothing but the export in its folder (no temporary left behind).
    let names: Vec<_> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("runs.csv")]);
    // The same rows on standard output, and with `-o -` (once a file named `-`).
    let o = kerf_in(dir, &["history", "export", "--format", "csv"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), csv);
    let o = kerf_in(dir, &["history", "export", "--format", "csv", "-o", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), csv);
    assert!(!dir.join("-").exists() && !repo().join("-").exists());
    // A FIFO is written in place: its reader gets the rows and it stays a FIFO (a rename once
    // replaced it with a regular file and the reader got nothing).
    let fifo = dir.join("rows.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let o = kerf_in(
        dir,
        &[
            "history",
            "export",
            "--format",
            "csv",
            "-o",
            fifo.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(reader.join().unwrap(), csv);
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

/// The parameters run `id` was recorded with (`kerf history show --json`).
fn stored_params(dir: &Path, id: i64) -> Value {
    ok_json(kerf_in(
        dir,
        &["history", "show", &id.to_string(), "--json"],
    ))["params"]
        .clone()
}

/// The window's workbench over the data folder `dir` (its history, its providers).
fn window_workbench(dir: &Path) -> kerf_api::workbench::Workbench {
    kerf_api::workbench::Workbench {
        prompt_dirs: Vec::new(),
        history: Some(dir.join("history.sqlite")),
        providers: dir.join("providers.json"),
        models: dir.join("models"),
    }
}

/// The window's use case, as the Run screen calls it.
fn window_run(
    dir: &Path,
    model: &str,
    temperature: f32,
    seed: u64,
) -> kerf_api::runs::wire::RunDone {
    let path = repo().join("prompts/agent-kg-extract.json");
    let doc = kerf_api::prompts::open(&path).unwrap();
    let input = kerf_api::runs::wire::RunInput {
        draft: doc.draft,
        path: Some(path.display().to_string()),
        input: "Ada Lovelace wrote the first program for the Analytical Engine.".into(),
        vars: Default::default(),
    };
    let options = kerf_api::runs::wire::RunOptions {
        provider: "local".into(),
        model: Some(model.into()),
        max_tokens: 40,
        constrain: false,
        temperature: Some(temperature),
        seed: Some(seed),
        gpu_layers: "none".into(),
        max_requests: 1,
        max_run_tokens: 100_000,
    };
    let cancel = kerf_llm::CancelToken::new();
    kerf_api::runs::run_draft(
        &window_workbench(dir),
        &input,
        &options,
        &cancel,
        &mut |_| {},
    )
    .unwrap()
}

/// Issue 18, bug A: `kerf history rerun` of a run made in the window rebuilt its settings from
/// CLI flags only the CLI records, so it ran on the defaults (greedy, no seed). Now it reruns
/// with every stored setting: the same parameters recorded and, with the same seed, the same
/// reply.
#[test]
fn bug_a_a_window_run_reruns_from_the_cli_with_its_own_settings() {
    let _cpu = super::model_lock();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let model = gguf();
    let first = window_run(dir, &model, 0.9, 11);
    let id = first.history_id.unwrap();
    let again = run_out(kerf_in(
        dir,
        &["history", "rerun", &id.to_string(), "--json"],
    ));
    let rerun_id = again["history_id"].as_i64().unwrap();
    assert_eq!(stored_params(dir, rerun_id), stored_params(dir, id));
    assert_eq!(stored_params(dir, id)["temperature"], 0.9);
    assert_eq!(
        again["raw"], first.raw,
        "the same seed and settings gave another reply"
    );
}

/// Issue 18, bug B: re-running a CLI run from the History screen kept five of its settings
/// (`top_p`, `stop`, `threads`, `context`, `flash_attn`, … were lost). Now every one is kept.
#[test]
fn bug_b_a_cli_run_reruns_from_the_window_with_every_setting() {
    let _cpu = super::model_lock();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let model = gguf();
    let first = run_json(
        dir,
        &model,
        &[
            "--max-tokens",
            "40",
            "--temperature",
            "0.8",
            "--seed",
            "5",
            "--top-p",
            "0.9",
            "--stop",
            "\n\n\n",
            "--threads",
            "1",
            "--context",
            "1024",
            "--flash-attn",
            "off",
            "--gpu-layers",
            "none",
            "--max-requests",
            "2",
        ],
    );
    let id = first["history_id"].as_i64().unwrap();
    let cancel = kerf_llm::CancelToken::new();
    let again = kerf_api::history::rerun(&window_workbench(dir), id, &cancel, &mut |_| {}).unwrap();
    let rerun_id = again.history_id.unwrap();
    let (a, b) = (stored_params(dir, id), stored_params(dir, rerun_id));
    assert_eq!(b, a);
    for (key, value) in [
        ("top_p", serde_json::json!(0.9)),
        ("stop", serde_json::json!(["\n\n\n"])),
        ("threads", serde_json::json!(1)),
        ("context", serde_json::json!(1024)),
        ("flash_attn", serde_json::json!("off")),
    ] {
        assert_eq!(b[key], value, "{key} was not kept: {b}");
    }
    assert_eq!(
        again.raw, first["raw"],
        "the same seed and settings gave another reply"
    );
}

/// Issue 35: a rerun's flags are a typed patch on the stored parameters. Each given flag
/// replaces one setting; the rest stay as they ran; values that begin with `-` are values.
#[test]
fn a_rerun_replaces_only_the_settings_given_and_takes_values_beginning_with_a_dash() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let reply = "{\"type\": \"definition\", \"entity\": \"DNA\", \"definition\": \"a molecule\"}\n";
    let server = Server::start(
        (0..2)
            .map(|_| {
                let mut pieces = openai_pieces(reply);
                pieces.push(openai_end("stop"));
                Act::sse(200, pieces)
            })
            .collect(),
    );
    super::eval::add_server(dir, "srv", &server.base_url(), "loopback");
    let first = run_out(kerf_in_config(
        dir,
        &[
            "run",
            "prompts/agent-kg-extract.json",
            "--sample",
            "--provider",
            "srv",
            "--temperature",
            "0.5",
            "--seed",
            "7",
            "--stop",
            "END",
            "--max-tokens",
            "300",
            "--json",
        ],
    ));
    let id = first["history_id"].as_i64().unwrap().to_string();
    let again = run_out(kerf_in_config(
        dir,
        &[
            "history",
            "rerun",
            &id,
            "--stop",
            "-->",
            "--max-tokens",
            "128",
            "--json",
        ],
    ));
    let rerun = again["history_id"].as_i64().unwrap();
    let (before, after) = (
        stored_params(dir, id.parse().unwrap()),
        stored_params(dir, rerun),
    );
    assert_eq!(after["stop"], serde_json::json!(["-->"]));
    assert_eq!(after["max_tokens"], 128);
    // Everything else as it ran.
    for key in [
        "temperature",
        "seed",
        "constrain",
        "max_requests",
        "max_run_tokens",
    ] {
        assert_eq!(after[key], before[key], "{key}");
    }
    assert_eq!(after["temperature"], 0.5);
    // And what was sent says so.
    let sent: Value = serde_json::from_slice(&server.requests()[1].body).unwrap();
    assert_eq!(sent["stop"], serde_json::json!(["-->"]), "{sent}");
    assert_eq!(sent["max_tokens"], 128, "{sent}");
    assert_eq!(sent["temperature"], 0.5, "{sent}");
    assert_eq!(sent["seed"], 7, "{sent}");

    // Out of range, from the run flags or a rerun's: refused before anything is sent or stored
    // (NaN and inf once went out as "unset", -5 and 0 as given).
    for (args, says) in [
        (
            vec![
                "run",
                "prompts/agent-kg-extract.json",
                "--sample",
                "--provider",
                "srv",
                "--temperature",
                "NaN",
            ],
            "--temperature NaN: give a number from 0 to 2",
        ),
        (
            vec![
                "run",
                "prompts/agent-kg-extract.json",
                "--sample",
                "--provider",
                "srv",
                "--temperature",
                "inf",
            ],
            "--temperature inf: give a number from 0 to 2",
        ),
        (
            vec!["history", "rerun", &id, "--top-p", "-5"],
            "--top-p -5: give a number from 0 to 1",
        ),
        (
            vec!["history", "rerun", &id, "--max-tokens", "0"],
            "--max-tokens 0: a budget must be at least 1 token",
        ),
    ] {
        let o = kerf_in_config(dir, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(server.requests().len(), 2, "nothing more was sent");
    let runs = ok_json(kerf_in(dir, &["history", "list", "--json"]));
    assert_eq!(runs.as_array().unwrap().len(), 2, "nothing more was stored");
}
