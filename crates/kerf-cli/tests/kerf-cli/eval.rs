//! `kerf eval`: a dataset run through prompts at two budgets against a loopback
//! OpenAI-compatible server that "extracts" each document's expected records (streamed in the
//! documented chunk format, cut at its `max_tokens` the way a model is), so every figure is
//! known by hand: the roomy budget finds everything; at the tight one, JSONL keeps its whole
//! lines and every record the cut took is counted as lost to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::{repo, stderr, stdout_json};

mod adaptive;
mod batched;
mod chunked;
mod resumed;
mod side_by_side;

/// Three documents, each with the records a perfect extraction holds.
fn rows() -> Vec<Value> {
    let def = |e: &str, d: &str| json!({"type": "definition", "entity": e, "definition": d});
    let rel = |s: &str, p: &str, o: &str| json!({"type": "relationship", "subject": s, "predicate": p, "object": o, "object-entity": true});
    vec![
        json!({"id": "stroma", "input": "The stroma is the fluid inside a chloroplast, where the Calvin cycle runs.",
               "expected": {"agent-kg-extract": [def("Stroma", "The fluid inside a chloroplast"), def("Calvin cycle", "A cycle that runs in the stroma"), rel("Calvin cycle", "runs in", "Stroma")]}}),
        json!({"id": "rubisco", "input": "RuBisCO is an enzyme that fixes carbon dioxide.",
               "expected": {"agent-kg-extract": [def("RuBisCO", "An enzyme that fixes carbon dioxide"), rel("RuBisCO", "fixes", "carbon dioxide")]}}),
        json!({"id": "thylakoid", "input": "Thylakoids are membranes inside chloroplasts where light reactions happen.",
               "expected": {"agent-kg-extract": [def("Thylakoid", "A membrane inside chloroplasts"), def("Light reactions", "Reactions that happen in thylakoids"), rel("Light reactions", "happen in", "Thylakoid"), rel("Thylakoid", "inside", "chloroplasts")]}}),
    ]
}

/// A loopback OpenAI-compatible server: each chat completion gets the expected records of the
/// document found in its prompt, as JSONL or a JSON array (as the prompt asks), streamed and
/// cut at `max_tokens` × 4 bytes with `finish_reason: "length"`.
struct Model {
    port: u16,
    counts: Arc<Counts>,
}

/// What the server has seen: requests in all, and the most it answered at once; and the gate
/// that holds requests until the test lets them go.
#[derive(Default)]
struct Counts {
    requests: AtomicUsize,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    /// How long each reply takes to come, in milliseconds.
    delay_ms: std::sync::atomic::AtomicU64,
    gate: Gate,
    /// The model file the server says it serves (`GET /models`, as llama-server answers it:
    /// one entry, whatever name the provider asks for), and how often it was asked.
    served: Mutex<String>,
    model_lists: AtomicUsize,
    /// Each request answered, as `row|max_tokens|format` (`jsonl` or `array`).
    answered: Mutex<Vec<String>>,
    /// Requests refused for being past the capacity.
    refused: AtomicUsize,
    /// Requests holding one of the server's slots now ([`Again::Slots`]).
    serving: AtomicUsize,
}

/// Holds requests, so a test acts while they are in flight whatever the machine's speed, instead
/// of guessing how long they take.
struct Gate {
    /// Requests numbered from this one (from 0) wait until [`Model::release`].
    hold_from: AtomicUsize,
    /// Requests wait until this many have been in flight at once (or [`Gate::AT_MOST`] passes).
    together: AtomicUsize,
    state: Mutex<GateState>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct GateState {
    released: bool,
    /// Requests held so far.
    held: usize,
    /// Whether `together` requests have been in flight at once: latched, so a request woken
    /// after another has already answered (and left) still goes on.
    met: bool,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            hold_from: AtomicUsize::new(usize::MAX),
            together: AtomicUsize::new(0),
            state: Mutex::new(GateState::default()),
            changed: std::sync::Condvar::new(),
        }
    }
}

impl Gate {
    /// The longest a request is held: a test that never lets go still ends, and fails.
    const AT_MOST: Duration = Duration::from_secs(60);

    /// Request `n`, now one of `in_flight`, waits here as the test asked.
    fn pass(&self, n: usize, in_flight: &AtomicUsize) {
        let mut state = self.state.lock().unwrap();
        let held = n >= self.hold_from.load(Ordering::SeqCst);
        state.held += usize::from(held);
        if in_flight.load(Ordering::SeqCst) >= self.together.load(Ordering::SeqCst) {
            state.met = true;
        }
        self.changed.notify_all();
        let _ = self
            .changed
            .wait_timeout_while(state, Self::AT_MOST, |s| (held && !s.released) || !s.met)
            .unwrap();
    }
}

/// How the server answers the same request again.
#[derive(Clone, Copy, PartialEq)]
enum Again {
    /// The same reply every time.
    Same,
    /// Every second time the same prompt, document and budget come, the last record is left
    /// out (a model that is not sure of it).
    Unsure,
    /// The first requests are refused with 429 and `retry-after: 1` (a rate limit reached).
    Limited(usize),
    /// Every reply goes on after its records with this many MiB of blank lines (a model that
    /// never stops), more than Kerf reads of a reply.
    Endless(usize),
    /// The last record of every document is always left out (a weaker model).
    Fewer,
    /// At most this many requests are served at once; one past it is refused with 429 and
    /// `retry-after-ms` (a server, or a fleet behind one URL, at its capacity).
    Capacity(usize),
    /// The first requests' replies break off after their first piece with an error event, as
    /// a router ends the stream of a server killed while it decodes.
    Broken(usize),
    /// This many slots: every request's headers are answered at once, and its reply waits for
    /// a free slot, then takes the delay (a `llama-server` with `--parallel N`, or a router in
    /// front of one, queueing what is past its slots).
    Slots(usize),
    /// Each request gets every record (of any row) whose grounding texts — a definition's
    /// entity, a relationship's subject and object — are all in its messages: a model reading
    /// only the chunk (and context) it was sent.
    ByText,
    /// As [`Again::ByText`], but the first time a request comes its last record is left out
    /// (a sampled pass that missed one; the next pass over the same chunk finds it).
    ByTextForgetful,
}

impl Model {
    fn start(rows: Vec<Value>, delay: Duration) -> Model {
        Model::start_with(rows, delay, Again::Same)
    }

    fn start_with(rows: Vec<Value>, delay: Duration, again: Again) -> Model {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let counts = Arc::new(Counts::default());
        counts
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
        let count = counts.clone();
        let rows = Arc::new(rows);
        let seen = Arc::new(Mutex::new(std::collections::HashMap::new()));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (rows, count, seen) = (rows.clone(), count.clone(), seen.clone());
                std::thread::spawn(move || {
                    let _ = answer(stream, &rows, &count, (again, &seen));
                });
            }
        });
        Model { port, counts }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Serve another model file from now on (a server restarted with another model under the
    /// same URL and name).
    fn serve(&self, file: &str) {
        *self.counts.served.lock().unwrap() = file.to_string();
    }

    fn requests(&self) -> usize {
        self.counts.requests.load(Ordering::SeqCst)
    }

    /// Each request it answered (`row|max_tokens|format`), sorted.
    fn answered(&self) -> Vec<String> {
        let mut a = self.counts.answered.lock().unwrap().clone();
        a.sort();
        a
    }

    /// The most requests it was answering at one time.
    fn peak(&self) -> usize {
        self.counts.peak.load(Ordering::SeqCst)
    }

    /// From now on, each reply takes `d` to come.
    fn set_delay(&self, d: Duration) {
        self.counts
            .delay_ms
            .store(d.as_millis() as u64, Ordering::SeqCst);
    }

    /// Hold every request from the `n`th (counted from 0) until [`Model::release`].
    fn hold_from(&self, n: usize) {
        self.counts.gate.hold_from.store(n, Ordering::SeqCst);
    }

    /// Answer no request until `k` are in flight at once: a client that sends `k` at once is
    /// seen to, however slowly the machine starts them.
    fn together(&self, k: usize) {
        self.counts.gate.together.store(k, Ordering::SeqCst);
    }

    /// Wait until `k` requests are held (for at most [`Gate::AT_MOST`]).
    fn wait_held(&self, k: usize) {
        let gate = &self.counts.gate;
        let state = gate.state.lock().unwrap();
        let (state, _) = gate
            .changed
            .wait_timeout_while(state, Gate::AT_MOST, |s| s.held < k)
            .unwrap();
        assert!(state.held >= k, "{k} requests never came");
    }

    /// Let every held request go, and hold no more.
    fn release(&self) {
        let gate = &self.counts.gate;
        gate.hold_from.store(usize::MAX, Ordering::SeqCst);
        gate.state.lock().unwrap().released = true;
        gate.changed.notify_all();
    }
}

type Seen = Mutex<std::collections::HashMap<String, usize>>;

fn answer(
    stream: TcpStream,
    rows: &[Value],
    count: &Counts,
    (again, seen): (Again, &Seen),
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    // One request per connection (`connection: close`).
    {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line.starts_with("GET ") && line.contains("/models ") {
            count.model_lists.fetch_add(1, Ordering::SeqCst);
            let served = count.served.lock().unwrap().clone();
            let created = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let body = json!({"object": "list", "data": [{"id": served, "object": "model",
                "created": created, "owned_by": "llamacpp", "meta": {"n_params": 494032768}}]})
            .to_string();
            write!(
                out,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )?;
            return out.flush();
        }
        let mut length = 0;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            if h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let n = count.requests.fetch_add(1, Ordering::SeqCst);
        if let Again::Limited(refused) = again
            && n < refused
        {
            let body = r#"{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}"#;
            write!(
                out,
                "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )?;
            return out.flush();
        }
        let now = count.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        if let Again::Capacity(most) = again
            && now > most
        {
            count.in_flight.fetch_sub(1, Ordering::SeqCst);
            count.refused.fetch_add(1, Ordering::SeqCst);
            let body = r#"{"error": {"message": "Server at capacity", "type": "overloaded"}}"#;
            write!(
                out,
                "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after-ms: 100\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )?;
            return out.flush();
        }
        count.peak.fetch_max(now, Ordering::SeqCst);
        count.gate.pass(n, &count.in_flight);
        let slots = match again {
            Again::Slots(n) => Some(n),
            _ => None,
        };
        if slots.is_none() {
            std::thread::sleep(Duration::from_millis(count.delay_ms.load(Ordering::SeqCst)));
        }
        let prompt = req["messages"].to_string();
        let row = rows
            .iter()
            .find(|r| prompt.contains(r["input"].as_str().unwrap()))
            .cloned()
            .unwrap_or(Value::Null);
        let mut records = match again {
            Again::ByText | Again::ByTextForgetful => {
                rows.iter().flat_map(|r| read_in(r, &prompt)).collect()
            }
            _ => row["expected"]["agent-kg-extract"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        };
        let times = {
            let key = format!("{prompt}{}", req["max_tokens"]);
            let mut seen = seen.lock().unwrap();
            let n = seen.entry(key).or_insert(0);
            *n += 1;
            *n
        };
        if (again == Again::Unsure && times % 2 == 0)
            || again == Again::Fewer
            || (again == Again::ByTextForgetful && times == 1)
        {
            records.pop();
        }
        count.answered.lock().unwrap().push(format!(
            "{}|{}|{}",
            row["id"].as_str().unwrap_or("?"),
            req["max_tokens"],
            if prompt.contains("one JSON object per line") {
                "jsonl"
            } else {
                "array"
            }
        ));
        let budget = req["max_tokens"]
            .as_u64()
            .or(req["max_completion_tokens"].as_u64())
            .unwrap_or(4096);
        let (text, finish) = reply_text(
            &records,
            prompt.contains("one JSON object per line"),
            budget,
        );
        let (text, piece) = match again {
            Again::Endless(mib) => (format!("{text}{}", "\n".repeat(mib << 20)), 4096),
            _ => (text.to_string(), 16),
        };
        let mut sse = String::new();
        // Pieces of about `piece` bytes, each whole characters (an event's content is a JSON
        // string: a provider never splits a character between two).
        let mut from = 0;
        while from < text.len() {
            let mut to = (from + piece).min(text.len());
            while !text.is_char_boundary(to) {
                to += 1;
            }
            let s = &text[from..to];
            from = to;
            let ev =
                json!({"choices": [{"index": 0, "delta": {"content": s}, "finish_reason": null}]});
            sse.push_str(&format!("data: {ev}\n\n"));
        }
        if let Again::Broken(broken) = again
            && n < broken
        {
            sse.truncate(sse.find("\n\n").map_or(0, |e| e + 2));
            sse.push_str("data: {\"error\": {\"message\": \"litellm.APIConnectionError: Connection error.\", \"type\": null, \"code\": \"500\"}}\n\n");
        }
        let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                         "usage": {"prompt_tokens": prompt.len() / 4, "completion_tokens": text.len().div_ceil(4)}});
        if !matches!(again, Again::Broken(b) if n < b) {
            sse.push_str(&format!("data: {end}\n\ndata: [DONE]\n\n"));
        }
        let written = match slots {
            None => write!(
                out,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{sse}",
                sse.len()
            ),
            Some(slots) => {
                // The headers now; the reply once a slot is free, after the delay.
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    sse.len()
                )?;
                out.flush()?;
                while count
                    .serving
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                        (n < slots).then_some(n + 1)
                    })
                    .is_err()
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                std::thread::sleep(Duration::from_millis(count.delay_ms.load(Ordering::SeqCst)));
                let w = write!(out, "{sse}");
                count.serving.fetch_sub(1, Ordering::SeqCst);
                w
            }
        };
        count.in_flight.fetch_sub(1, Ordering::SeqCst);
        written?;
        out.flush()?;
    }
    Ok(())
}

/// Row `row`'s expected records whose grounding texts are all in `text` ([`Again::ByText`]).
fn read_in(row: &Value, text: &str) -> Vec<Value> {
    row["expected"]["agent-kg-extract"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| {
            ["entity", "subject", "object"]
                .iter()
                .filter_map(|k| r[*k].as_str())
                .all(|t| text.contains(t))
        })
        .cloned()
        .collect()
}

/// What the loopback model replies with `records`: JSONL or a JSON array (as the prompt asks),
/// cut at `budget` tokens × 4 bytes with the finish reason `length` (else `stop`).
fn reply_text(records: &[Value], jsonl: bool, budget: u64) -> (String, &'static str) {
    let full = if jsonl {
        records
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        Value::Array(records.to_vec()).to_string()
    };
    let budget = budget as usize * 4;
    if full.len() > budget {
        (full[..budget].to_string(), "length")
    } else {
        (full, "stop")
    }
}

fn kerf_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(args)
        .current_dir(repo())
        .env("KERF_CONFIG_DIR", dir)
        .env("KERF_DATA_DIR", dir)
        .env("KERF_KEYRING", "kernel")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Configure the keyless OpenAI-compatible server at `url` as provider `name`.
pub(super) fn add_server(dir: &Path, name: &str, url: &str, model: &str) {
    let add = kerf_in(
        dir,
        &[
            "providers",
            "add",
            name,
            "--kind",
            "openai",
            "--base-url",
            url,
            "--model",
            model,
            "--no-key",
        ],
    );
    assert!(add.status.success(), "{}", stderr(&add));
}

/// A data directory with the server configured as provider `srv`, and the dataset written.
fn setup(model: &Model, rows: &[Value]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    add_server(dir.path(), "srv", &model.url(), "loopback");
    let data = dir.path().join("d.jsonl");
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&data, text).unwrap();
    (dir, data)
}

const EVAL: &[&str] = &[
    "--prompt",
    "prompts/agent-kg-extract.json",
    "--prompt",
    "prompts/agent-kg-extract-array.json",
    "--provider",
    "srv",
    "--max-tokens",
    "40,1000",
    "--constrain",
    "none",
    "--concurrency",
    "4",
];

fn eval(dir: &Path, data: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["eval", data.to_str().unwrap()];
    args.extend_from_slice(EVAL);
    args.extend_from_slice(extra);
    kerf_in(dir, &args)
}

#[test]
fn an_eval_scores_every_cell_and_counts_what_the_cut_lost() {
    let rows = rows();
    let model = Model::start(rows.clone(), Duration::ZERO);
    let (dir, data) = setup(&model, &rows);
    let o = eval(dir.path(), &data, &["--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    // 2 prompts × 2 budgets × 1 variant × 1 repeat × 3 rows.
    assert_eq!(model.requests(), 12);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 12);
    for key in [
        "row",
        "prompt",
        "max_tokens",
        "constrained",
        "repeat",
        "run",
        "finish_reason",
        "objects",
        "tp",
        "fp",
        "fn",
        "precision",
        "recall",
        "f1",
        "lost_to_cut",
    ] {
        assert!(
            cells[0].get(key).is_some(),
            "cell lacks {key}: {}",
            cells[0]
        );
    }
    let summary = v["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 4);
    for key in [
        "prompt",
        "max_tokens",
        "constrained",
        "cells",
        "tp",
        "fp",
        "fn",
        "precision",
        "recall",
        "f1",
        "macro_f1",
    ] {
        assert!(summary[0].get(key).is_some(), "summary lacks {key}");
    }
    let line = |p: &str, b: u64| {
        summary
            .iter()
            .find(|l| l["prompt"] == p && l["max_tokens"] == b)
            .unwrap()
            .clone()
    };
    // The roomy budget: every expected record (3 + 2 + 4 = 9) found, nothing else.
    for p in ["agent-kg-extract", "agent-kg-extract-array"] {
        let l = line(p, 1000);
        assert_eq!(
            (l["tp"].clone(), l["fp"].clone(), l["fn"].clone()),
            (json!(9), json!(0), json!(0)),
            "{p}"
        );
        assert_eq!(
            (l["f1"].clone(), l["macro_f1"].clone()),
            (json!(1.0), json!(1.0)),
            "{p}"
        );
        assert_eq!(l["cells"], 3);
    }
    // At 40 tokens (160 bytes) every reply is cut. Whatever a cut cell missed, its roomy
    // sibling found: lost_to_cut is exactly its fn. JSONL keeps its whole lines; the array,
    // unclosed, keeps nothing.
    for c in cells.iter().filter(|c| c["max_tokens"] == 40) {
        assert_eq!(c["finish_reason"], "length", "{c}");
        assert_eq!(c["lost_to_cut"], c["fn"], "{c}");
        assert_eq!(c["fp"], 0, "{c}");
    }
    let jsonl = line("agent-kg-extract", 40);
    let array = line("agent-kg-extract-array", 40);
    assert!(jsonl["tp"].as_u64().unwrap() >= 3, "{jsonl}");
    assert_eq!(array["tp"], 0, "{array}");
    assert_eq!(array["lost_to_cut"], 9);
    assert_eq!(
        jsonl["lost_to_cut"].as_u64().unwrap() + jsonl["tp"].as_u64().unwrap(),
        9
    );
    // JSONL against the array, row by row: equal at the roomy budget; at the tight one the
    // array is worse on every row, and what it lost is the JSONL reply's records.
    let comparisons = v["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 2, "{}", v["comparisons"]);
    let at = |b: u64| {
        comparisons
            .iter()
            .find(|c| c["a"]["max_tokens"] == b)
            .unwrap()
            .clone()
    };
    let roomy = at(1000);
    assert_eq!(roomy["a"]["prompt"], "agent-kg-extract");
    assert_eq!(roomy["b"]["prompt"], "agent-kg-extract-array");
    assert_eq!(
        (roomy["f1_diff"].clone(), roomy["f1_diff_ci"].clone()),
        (json!(0.0), json!([0.0, 0.0]))
    );
    assert_eq!(
        (roomy["same"].clone(), roomy["rows"].clone()),
        (json!(3), json!(3))
    );
    let tight = at(40);
    assert_eq!(tight["worse"], 3, "{tight}");
    assert_eq!(tight["b"]["f1"], 0.0);
    assert!(tight["f1_diff"].as_f64().unwrap() < 0.0);
    let [lo, hi] = [0, 1].map(|i| tight["f1_diff_ci"][i].as_f64().unwrap());
    assert!(
        lo <= tight["f1_diff"].as_f64().unwrap() && hi < 0.0,
        "{tight}"
    );
    for r in tight["per_row"].as_array().unwrap() {
        let jsonl = cells
            .iter()
            .find(|c| {
                c["row"] == r["row"] && c["max_tokens"] == 40 && c["prompt"] == "agent-kg-extract"
            })
            .unwrap();
        assert_eq!(
            r["lost"].as_array().unwrap().len() as u64,
            jsonl["objects"].as_u64().unwrap()
        );
        assert_eq!(r["gained"], json!([]));
    }
    // Budget advice: only the roomy budget keeps recall within 5% of the best, and the array's
    // tight replies dropped their cut piece on every row.
    for a in v["advice"].as_array().unwrap() {
        assert_eq!(
            (a["max_tokens"].clone(), a["best_recall"].clone()),
            (json!(1000), json!(1.0)),
            "{a}"
        );
        assert!(a["completion_tokens_per_document"].as_f64().unwrap() > 0.0);
    }
    let array_drops = v["drops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["prompt"] == "agent-kg-extract-array")
        .unwrap();
    let truncated = array_drops["bars"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["kind"] == "truncated")
        .unwrap();
    assert_eq!(truncated["rows"], json!(["stroma", "rubisco", "thylakoid"]));
    // Each cell's run is in the history, under the experiment.
    let e = v["experiment"].as_i64().unwrap();
    let h = kerf_in(dir.path(), &["history", "experiments", "--json"]);
    assert!(
        stdout_json(&h).to_string().contains("\"eval\""),
        "{}",
        stdout_json(&h)
    );
    // Showing it again prints the same figures, from the history alone, and a resume of a
    // finished eval buys nothing.
    let shown = kerf_in(dir.path(), &["eval", "show", &e.to_string(), "--json"]);
    assert_eq!(stdout_json(&shown), v);
    // Every figure again from the raw replies alone, parsed anew: bit for bit.
    let rescored = kerf_in(dir.path(), &["eval", "rescore", &e.to_string(), "--json"]);
    assert_eq!(rescored.status.code(), Some(0), "{}", stderr(&rescored));
    assert_eq!(stdout_json(&rescored), v);
    assert_eq!(stderr(&rescored), "", "no prompt's match settings changed");
    let resumed = kerf_in(dir.path(), &["eval", "resume", "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(stdout_json(&resumed), v);
    assert_eq!(model.requests(), 12);
    // The table for people, and a threshold that the tight budget misses: exit 1, named.
    // Review 2, item 18: the report files are written through a temporary and a rename; a link
    // at the target is replaced, and what it pointed at is untouched.
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "not a report").unwrap();
    let junit = dir.path().join("eval.xml");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&victim, &junit).unwrap();
    let o = eval(
        dir.path(),
        &data,
        &["--fail-under", "f1=0.9", "--junit", junit.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&junit).unwrap().is_file());
    // JUnit for CI: a case per line, the tight ones failed with the figure that missed.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(r#"tests="4" skipped="0" failures="2" errors="0""#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<testcase name="agent-kg-extract-array at 40 tokens">"#)
            && xml.contains(r#"<failure message="f1 0.000 &lt; 0.9""#),
        "{xml}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("agent-kg-extract-array") && out.contains("macro F1"),
        "{out}"
    );
    assert!(
        stderr(&o).contains("agent-kg-extract-array at 40 tokens: f1 0.000 < 0.9"),
        "{}",
        stderr(&o)
    );
    assert!(
        out.contains("Budget advice") && out.contains("b better on 0, worse on 3"),
        "{out}"
    );
    // The report for people: one file, charts inline, every row's records side by side.
    let html = dir.path().join("eval.html");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&victim, &html).unwrap();
    let o = kerf_in(
        dir.path(),
        &[
            "eval",
            "report",
            &e.to_string(),
            "--html",
            html.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&html).unwrap().is_file());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "not a report");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches("<svg").count(),
        5,
        "F1 and recall against the budget, requests in flight, run times, why pieces were dropped"
    );
    for title in ["Requests in flight", "How long runs took"] {
        assert!(page.contains(title), "no {title:?} chart");
    }
    // The drop reasons are a chart too, each reason named under its bars.
    let drops = &page[page.find("Why pieces were dropped").unwrap()..];
    let chart = &drops[drops.find("<svg").unwrap()..drops.find("</svg>").unwrap()];
    assert!(chart.contains("\ntruncated\n"), "{chart}");
    for needle in [
        "F1 against the budget",
        "Budget advice",
        "Why pieces were dropped",
        "<strong>thylakoid</strong>",
        r#"<li class="matched">"#,
        r#"<li class="missed">"#,
    ] {
        assert!(page.contains(needle), "{needle} not in the report");
    }
    assert!(
        !page.contains("<script") && !page.contains("src=") && !page.contains("<link"),
        "self-contained, no script"
    );
    // Two evals compared: the same server, the same replies, no difference on any line.
    let second = stdout_json(&kerf_in(dir.path(), &["eval", "show", "--json"]));
    let b = second["experiment"].to_string();
    let o = kerf_in(
        dir.path(),
        &["eval", "compare", &e.to_string(), &b, "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let c = stdout_json(&o);
    assert_eq!(c["comparisons"].as_array().unwrap().len(), 4);
    for line in c["comparisons"].as_array().unwrap() {
        assert_eq!(line["f1_diff"], 0.0, "{line}");
        assert_eq!(line["a"]["prompt"], line["b"]["prompt"]);
        assert_eq!(line["same"], 3);
    }
}

#[test]
fn repeats_show_which_records_a_model_is_unsure_of() {
    let rows = rows();
    // One in flight: repeat 0 gets every record, repeat 1 all but each row's last.
    let model = Model::start_with(rows.clone(), Duration::ZERO, Again::Unsure);
    let (dir, data) = setup(&model, &rows);
    let o = kerf_in(
        dir.path(),
        &[
            "eval",
            data.to_str().unwrap(),
            "--prompt",
            "prompts/agent-kg-extract.json",
            "--provider",
            "srv",
            "--constrain",
            "none",
            "--repeat",
            "2",
            "--concurrency",
            "1",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["cells"].as_array().unwrap().len(), 6);
    let line = &v["summary"][0];
    // Pooled: 9 + 6 found of 18 expected.
    assert_eq!(
        (line["tp"].clone(), line["fn"].clone()),
        (json!(15), json!(3))
    );
    let r = &line["repeats"];
    // Repeat 0: F1 1; repeat 1: 6 found of 9, F1 12/15.
    assert_eq!(r["f1_by_repeat"], json!([1.0, 0.8]));
    assert!((r["f1_mean"].as_f64().unwrap() - 0.9).abs() < 1e-12);
    assert!((r["f1_sd"].as_f64().unwrap() - 0.02f64.sqrt()).abs() < 1e-12);
    // Per row the repeats share all but one record: 2/3, 1/2, 3/4.
    let jaccard = (2.0 / 3.0 + 0.5 + 0.75) / 3.0;
    assert!(
        (r["jaccard_mean"].as_f64().unwrap() - jaccard).abs() < 1e-12,
        "{r}"
    );
    assert_eq!(
        (
            r["distinct_outputs_mean"].clone(),
            r["distinct_outputs_max"].clone()
        ),
        (json!(2.0), json!(2))
    );
    assert_eq!(
        (
            r["found_always"].clone(),
            r["found_sometimes"].clone(),
            r["found_never"].clone()
        ),
        (json!(6), json!(3), json!(0))
    );
    let unsure: Vec<String> = r["find_rate"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["found"] == 1)
        .map(|f| {
            format!(
                "{} {}",
                f["row"].as_str().unwrap(),
                f["identity"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        unsure,
        [
            "rubisco relationship · rubisco · carbon dioxide",
            "stroma relationship · calvin cycle · stroma",
            "thylakoid relationship · thylakoid · chloroplasts",
        ]
    );
    // The interval over rows holds the pooled figure.
    let f1 = line["f1"].as_f64().unwrap();
    let ci = &line["f1_ci"];
    assert!(
        ci[0].as_f64().unwrap() <= f1 && f1 <= ci[1].as_f64().unwrap(),
        "{ci}"
    );
    let table = String::from_utf8_lossy(&kerf_in(dir.path(), &["eval", "show"]).stdout).to_string();
    assert!(
        table.contains("Over 2 repeats") && table.contains("F1 0.900 ± 0.141"),
        "{table}"
    );
}

/// Issue 36, item 14: a reply cut by Kerf's own size limit was counted as unmeasured, so every
/// `resume` bought it again. It is a finished measurement of a truncated reply, with its own
/// finish reason; a resume leaves it.
#[test]
fn a_reply_cut_by_the_size_limit_is_measured_and_not_bought_again() {
    let rows = rows();
    let model = Model::start_with(rows.clone(), Duration::ZERO, Again::Endless(2));
    let (dir, data) = setup(&model, &rows);
    let kerf = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kerf"))
            .args(args)
            .current_dir(repo())
            .env("KERF_CONFIG_DIR", dir.path())
            .env("KERF_DATA_DIR", dir.path())
            .env("KERF_MAX_REPLY_MIB", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let o = kerf(&[
        "eval",
        data.to_str().unwrap(),
        "--prompt",
        "prompts/agent-kg-extract.json",
        "--provider",
        "srv",
        "--max-tokens",
        "1000",
        "--constrain",
        "none",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    for c in cells {
        assert_eq!(c["finish_reason"], "size_limit", "{c}");
        // Measured and scored: the records before the endless tail are all found.
        assert_eq!(c["fn"], 0, "{c}");
        assert!(c["tp"].as_u64().unwrap() > 0, "{c}");
    }
    assert_eq!(v["pending"], 0);
    assert_eq!(model.requests(), 3);
    let again = kerf(&["eval", "resume", "--json"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert_eq!(stdout_json(&again)["pending"], 0);
    assert_eq!(model.requests(), 3, "a resume bought a measured cell again");
}

#[test]
fn a_killed_eval_resumes_without_buying_a_finished_cell_again() {
    let rows = rows();
    // Two in flight, and from the fifth request on the server holds its replies: the kill
    // lands with four cells done and two in flight, however fast or busy the machine.
    let model = Model::start(rows.clone(), Duration::ZERO);
    model.hold_from(4);
    let (dir, data) = setup(&model, &rows);
    let mut args = vec!["eval".to_string(), data.display().to_string()];
    // Two in flight instead of four.
    args.extend(
        EVAL.iter()
            .map(|s| if *s == "4" { "2" } else { s })
            .map(String::from),
    );
    let spawn = |args: &[String]| {
        Command::new(env!("CARGO_BIN_EXE_kerf"))
            .args(args)
            .current_dir(repo())
            .env("KERF_CONFIG_DIR", dir.path())
            .env("KERF_DATA_DIR", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut child = spawn(&args);
    // Killed once some cells are done and others are in flight.
    model.wait_held(2);
    // While it runs, a resume would buy the same cells twice: refused, naming why.
    let twice = kerf_in(dir.path(), &["eval", "resume"]);
    assert_eq!(twice.status.code(), Some(4), "{}", stderr(&twice));
    assert!(
        stderr(&twice).contains("error[conflict]") && stderr(&twice).contains("still running"),
        "{}",
        stderr(&twice)
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = model.requests();
    assert!(
        (1..12).contains(&before),
        "{before} requests before the kill"
    );
    // The held replies go to a process that is gone; later requests are answered at once, after
    // the same 300 ms a reply took before.
    model.release();
    model.set_delay(Duration::from_millis(300));
    // Then resumes killed at random moments: while opening the history, taking the eval over,
    // with cells in flight, or while writing a finished one (the whole eval takes ~2 s). A
    // resume that ended before its moment is simply not counted as a kill.
    let mut moments = super::Moments::new("a_killed_eval_resumes");
    let seed = moments.seed;
    let mut kills = 1;
    let resume = vec!["eval".to_string(), "resume".to_string()];
    for _ in 0..4 {
        let mut child = spawn(&resume);
        std::thread::sleep(Duration::from_millis(moments.below(1200)));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            kills += 1;
        }
        child.wait().unwrap();
        let store = kerf_store::Store::open(&dir.path().join(kerf_store::FILE_NAME)).unwrap();
        assert_eq!(store.integrity_check().unwrap(), "ok", "seed {seed}");
    }
    let o = kerf_in(dir.path(), &["eval", "resume", "--json"]);
    assert_eq!(o.status.code(), Some(0), "seed {seed}: {}", stderr(&o));
    let v = stdout_json(&o);
    let cells = v["cells"].as_array().unwrap();
    // Every cell exactly once, every one measured.
    assert_eq!(cells.len(), 12, "seed {seed}");
    let mut keys: Vec<String> = cells
        .iter()
        .map(|c| format!("{}|{}|{}", c["prompt"], c["max_tokens"], c["row"]))
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 12, "seed {seed}");
    assert!(
        cells
            .iter()
            .all(|c| c["finish_reason"] == "stop" || c["finish_reason"] == "length"),
        "seed {seed}"
    );
    assert_eq!(v["pending"], 0, "seed {seed}");
    // What finished before a kill was not bought again: at most the two in flight at each kill
    // were.
    let after = model.requests();
    assert!(
        after <= 12 + 2 * kills,
        "seed {seed}: {kills} kills, {before} requests before the first, {after} in all"
    );
    // The same figures as an eval never interrupted (the other tests' hand-worked ones).
    assert_eq!(v["summary"][1]["tp"], 9, "seed {seed}: {}", v["summary"][1]);
    let store = kerf_store::Store::open(&dir.path().join(kerf_store::FILE_NAME)).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    // Each cell points at a run of its own.
    let runs: std::collections::BTreeSet<i64> =
        cells.iter().map(|c| c["run"].as_i64().unwrap()).collect();
    assert_eq!(runs.len(), 12, "seed {seed}");
}

/// A history written before every cell named its provider (schema 4; how it was made:
/// `fixtures/README.md`) holds an eval killed after 8 of its 12 cells and a compare. This Kerf
/// opens it, lists both, shows the eval as it stood, holds a resume to the server the eval ran
/// on, and, told to go on, buys exactly the 4 cells without a finished run: the 8 keep their
/// runs and figures.
#[test]
fn a_history_from_before_cells_named_their_provider_opens_lists_and_resumes() {
    let kg: Vec<Value> = std::fs::read_to_string(repo().join("datasets/knowledge-graph.jsonl"))
        .unwrap()
        .lines()
        .take(3)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let model = Model::start(kg, Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo().join("crates/kerf-cli/tests/kerf-cli/fixtures/v4-killed-eval.sqlite"),
        dir.path().join(kerf_store::FILE_NAME),
    )
    .unwrap();
    add_server(dir.path(), "srv", &model.url(), "loopback");
    let list = kerf_in(dir.path(), &["history", "experiments"]);
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    let list = String::from_utf8_lossy(&list.stdout).to_string();
    let lines: Vec<Vec<&str>> = list
        .lines()
        .map(|l| l.split_whitespace().take(3).collect())
        .collect();
    assert_eq!(
        lines,
        vec![
            vec!["e2", "compare", "ok"],
            vec!["e1", "eval", "interrupted"]
        ],
        "{list}"
    );
    let shown = kerf_in(dir.path(), &["eval", "show", "1", "--json"]);
    let before = stdout_json(&shown);
    assert_eq!(before["pending"], 4, "{before}");
    let finished = |v: &Value| -> Vec<(String, Value, Value)> {
        let mut cells: Vec<_> = v["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["finish_reason"] == "stop" || c["finish_reason"] == "length")
            .map(|c| {
                (
                    format!("{}|{}|{}", c["prompt"], c["max_tokens"], c["row"]),
                    c["run"].clone(),
                    c["f1"].clone(),
                )
            })
            .collect();
        cells.sort_by(|a, b| a.0.cmp(&b.0));
        cells
    };
    let kept = finished(&before);
    assert_eq!(kept.len(), 8, "{before}");
    // The provider's name now points at another server: refused, naming both, nothing sent.
    let refused = kerf_in(dir.path(), &["eval", "resume", "1"]);
    assert_ne!(refused.status.code(), Some(0));
    let why = stderr(&refused);
    assert!(
        why.contains("http://127.0.0.1:47311/v1") && why.contains(&model.url()),
        "{why}"
    );
    assert_eq!(model.requests(), 0);
    let resumed = kerf_in(
        dir.path(),
        &["eval", "resume", "1", "--allow-endpoint-change", "--json"],
    );
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let after = stdout_json(&resumed);
    assert_eq!(model.requests(), 4, "a resume bought a finished cell again");
    assert_eq!(after["pending"], 0);
    assert_eq!(after["cells"].as_array().unwrap().len(), 12);
    let all = finished(&after);
    assert_eq!(all.len(), 12);
    for k in &kept {
        assert!(all.contains(k), "{k:?} changed by the resume");
    }
    // Every cell is kept under the provider and model it ran on.
    let store = kerf_store::Store::open(&dir.path().join(kerf_store::FILE_NAME)).unwrap();
    let cells = store.cells(1).unwrap();
    assert_eq!(cells.len(), 12);
    assert!(
        cells
            .iter()
            .all(|c| c.cell.provider == "srv" && c.cell.model == "loopback"),
        "{cells:?}"
    );
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn a_malformed_dataset_is_refused_before_any_call_and_leaves_no_trace() {
    let mut rows = rows();
    rows[1]["expected"]["agent-kg-extract"][0] = json!({"type": "definition", "entity": 3});
    rows[2]["vars"] = json!({"colour": "blue"});
    let model = Model::start(rows.clone(), Duration::ZERO);
    let (dir, data) = setup(&model, &rows);
    std::fs::write(
        &data,
        format!("{}\nnot json\n{}\n{}\n", rows[0], rows[1], rows[2]),
    )
    .unwrap();
    let o = eval(dir.path(), &data, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("error[dataset]"), "{err}");
    assert!(err.contains(":2: not valid JSON"), "{err}");
    // Loading stops at the structural problem; fixed, the next problems are all named.
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&data, text).unwrap();
    let o = eval(dir.path(), &data, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("row `rubisco`: /expected/agent-kg-extract/0/entity"),
        "{err}"
    );
    assert!(
        err.contains("row `thylakoid`: /vars/colour: unknown variable"),
        "{err}"
    );
    // A 100 MB row: refused by its size, unread, with its line.
    {
        use std::io::Write as _;
        let mut f = std::fs::File::create(&data).unwrap();
        writeln!(f, "{}", rows[0]).unwrap();
        let mut huge = rows[1].clone();
        huge["input"] = json!("x".repeat(100 << 20));
        writeln!(f, "{huge}").unwrap();
    }
    let o = eval(dir.path(), &data, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(":2: the row is 100.0 MiB, over the limit of 16 MiB"),
        "{err}"
    );
    assert_eq!(model.requests(), 0);
    let h = kerf_in(dir.path(), &["history", "experiments", "--json"]);
    assert_eq!(stdout_json(&h), json!([]), "nothing written to the history");
}

#[test]
fn rescore_takes_the_prompts_current_match_settings_and_calls_no_model() {
    let rows = rows();
    // The model writes every name in lower case; the dataset does not.
    let lower = |v: &Value| -> Value {
        let mut v = v.clone();
        for records in v["expected"].as_object_mut().unwrap().values_mut() {
            for r in records.as_array_mut().unwrap() {
                for k in ["entity", "subject", "object"] {
                    if let Some(s) = r[k].as_str() {
                        r[k] = json!(s.to_lowercase());
                    }
                }
            }
        }
        v
    };
    let model = Model::start(rows.iter().map(lower).collect(), Duration::ZERO);
    let (dir, data) = setup(&model, &rows);
    // A copy of the prompt that compares names exactly, case and all.
    let prompt = dir.path().join("agent-kg-extract.json");
    let mut file: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("prompts/agent-kg-extract.json")).unwrap(),
    )
    .unwrap();
    file["match"]["normalize"] = json!(false);
    std::fs::write(&prompt, file.to_string()).unwrap();
    let args = [
        "eval",
        data.to_str().unwrap(),
        "--prompt",
        prompt.to_str().unwrap(),
        "--provider",
        "srv",
        "--constrain",
        "none",
        "--json",
    ];
    let o = kerf_in(dir.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let strict = stdout_json(&o);
    // Every record has a capitalised name in its identity: none matches.
    assert_eq!(strict["summary"][0]["tp"], 0, "{}", strict["summary"][0]);
    // The prompt normalises again: the same stored replies now score in full.
    file["match"]["normalize"] = json!(true);
    std::fs::write(&prompt, file.to_string()).unwrap();
    let o = kerf_in(dir.path(), &["eval", "rescore", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("agent-kg-extract: scored with the `match` settings its file has now"),
        "{}",
        stderr(&o)
    );
    let v = stdout_json(&o);
    assert_eq!(
        (v["summary"][0]["tp"].clone(), v["summary"][0]["f1"].clone()),
        (json!(9), json!(1.0))
    );
    assert_eq!(v["experiment"], strict["experiment"]);
    assert_eq!(model.requests(), 3, "rescore calls no model");
    // The file gone: rescore names it.
    std::fs::remove_file(&prompt).unwrap();
    let o = kerf_in(dir.path(), &["eval", "rescore"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("agent-kg-extract.json"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_cache_reuses_only_replies_that_ended_on_their_own_for_the_same_cell() {
    let rows = rows();
    let model = Model::start(rows.clone(), Duration::ZERO);
    let (dir, data) = setup(&model, &rows);
    let first = eval(dir.path(), &data, &["--json"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(model.requests(), 12);
    // Again with the cache: the roomy cells' replies ended on their own and are reused; the
    // tight ones were cut by their budget and are bought again.
    let o = eval(dir.path(), &data, &["--cache", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(model.requests(), 12 + 6);
    let v = stdout_json(&o);
    assert_eq!(v["cached"], 6);
    for c in v["cells"].as_array().unwrap() {
        assert_eq!(c["cached"], c["max_tokens"] == 1000, "{c}");
    }
    // The same figures as the eval that bought them.
    let f = stdout_json(&first);
    for (a, b) in f["summary"]
        .as_array()
        .unwrap()
        .iter()
        .zip(v["summary"].as_array().unwrap())
    {
        for k in ["tp", "fp", "fn", "f1", "lost_to_cut"] {
            assert_eq!(a[k], b[k], "{k}: {a} vs {b}");
        }
    }
    let table = String::from_utf8_lossy(&kerf_in(dir.path(), &["eval", "show"]).stdout).to_string();
    assert!(
        table.contains("6 cell(s) measured by replies earlier evals bought"),
        "{table}"
    );
    // Anything that shaped the reply differs — a parameter, the repeat index — and nothing is
    // reused: a second repeat is bought whole, its first repeat comes from the cache.
    let o = eval(
        dir.path(),
        &data,
        &["--cache", "--temperature", "0.5", "--json"],
    );
    assert_eq!(stdout_json(&o)["cached"], 0, "{}", stderr(&o));
    assert_eq!(model.requests(), 18 + 12);
    let o = eval(dir.path(), &data, &["--cache", "--repeat", "2", "--json"]);
    assert_eq!(stdout_json(&o)["cached"], 6, "{}", stderr(&o));
    assert_eq!(model.requests(), 30 + 18);
}

/// Issue 36, item 15: the cache matched on the provider's name, so a provider re-pointed at
/// another server was served the old server's replies. The endpoint is part of the key.
#[test]
fn the_cache_does_not_serve_another_servers_replies_under_the_same_name() {
    let rows = rows();
    let old = Model::start(rows.clone(), Duration::ZERO);
    let (dir, data) = setup(&old, &rows);
    let first = eval(dir.path(), &data, &["--json"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(old.requests(), 12);
    // The same name, model and everything else, now pointing at another server.
    let new = Model::start(rows.clone(), Duration::ZERO);
    add_server(dir.path(), "srv", &new.url(), "loopback");
    let o = eval(dir.path(), &data, &["--cache", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["cached"], 0);
    assert_eq!(
        new.requests(),
        12,
        "every cell was bought from the new server"
    );
    assert_eq!(old.requests(), 12);
    // Its own replies that ended on their own are reused from then on.
    let o = eval(dir.path(), &data, &["--cache", "--json"]);
    assert_eq!(stdout_json(&o)["cached"], 6, "{}", stderr(&o));
    assert_eq!(new.requests(), 18);
}

/// Issue 36, item 15: a local server restarted with another model under the same URL and model
/// name is another endpoint: evals record what `GET /models` says the server serves (asked once
/// per eval, not per cell), and the cache reuses only replies of the same served model.
#[test]
fn the_cache_does_not_serve_another_models_replies_from_the_same_server() {
    let rows = rows();
    let model = Model::start(rows.clone(), Duration::ZERO);
    model.serve("qwen2.5-0.5b-instruct-q4_k_m.gguf");
    let (dir, data) = setup(&model, &rows);
    let first = eval(dir.path(), &data, &["--json"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(model.requests(), 12);
    assert_eq!(model.counts.model_lists.load(Ordering::SeqCst), 1);
    // The same server, restarted with another model.
    model.serve("llama-3.2-1b-instruct-q4_k_m.gguf");
    let o = eval(dir.path(), &data, &["--cache", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["cached"], 0);
    assert_eq!(
        model.requests(),
        24,
        "every cell was bought from the new model"
    );
    // Its own replies that ended on their own are reused from then on (the list's `created`
    // changes with every answer, and is not part of what is compared).
    let o = eval(dir.path(), &data, &["--cache", "--json"]);
    assert_eq!(stdout_json(&o)["cached"], 6, "{}", stderr(&o));
    assert_eq!(model.requests(), 30);
    let shown = kerf_in(dir.path(), &["history", "list", "--json"]);
    let runs = stdout_json(&shown);
    let id = runs[0]["id"].as_i64().unwrap().to_string();
    let detail = stdout_json(&kerf_in(dir.path(), &["history", "show", &id, "--json"]));
    assert!(
        detail
            .to_string()
            .contains("llama-3.2-1b-instruct-q4_k_m.gguf"),
        "the run records the served model: {detail}"
    );
}

/// The shipped `agent-kg-extract` as a prompt of one's own in `dir`, changed by `edit`.
fn own_kg_prompt(dir: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut prompt: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("prompts/agent-kg-extract.json")).unwrap(),
    )
    .unwrap();
    edit(&mut prompt);
    let path = dir.join("agent-kg-extract.json");
    std::fs::write(&path, prompt.to_string()).unwrap();
    path
}

/// `kerf eval DATA --prompt PROMPT` on the loopback server at one roomy budget, then `extra`.
fn eval_one(dir: &Path, data: &Path, prompt: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "eval",
        data.to_str().unwrap(),
        "--prompt",
        prompt.to_str().unwrap(),
        "--provider",
        "srv",
        "--max-tokens",
        "1000",
    ];
    args.extend_from_slice(extra);
    kerf_in(dir, &args)
}

#[test]
fn an_eval_prints_its_prompts_warnings_on_a_dry_run_and_a_start() {
    let rows = rows();
    let model = Model::start(rows.clone(), Duration::ZERO);
    let (dir, data) = setup(&model, &rows);
    // The shipped prompt with a key Kerf does not know.
    let path = own_kg_prompt(dir.path(), |p| p["colour"] = json!("blue"));
    for extra in [&["--dry-run"][..], &["--json"][..]] {
        let o = eval_one(dir.path(), &data, &path, extra);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("kerf: warning:") && stderr(&o).contains("unknown key `colour`"),
            "{extra:?}: {}",
            stderr(&o)
        );
    }
    // The dry run sent nothing; the start sent its 3 rows.
    assert_eq!(model.requests(), 3);
}

#[test]
fn a_variable_set_with_var_reaches_every_row_and_is_kept_with_the_eval() {
    let rows = rows();
    let model = Model::start(rows.clone(), Duration::ZERO);
    let (dir, data) = setup(&model, &rows);
    // The shipped prompt, reading a variable no row gives.
    let path = own_kg_prompt(dir.path(), |p| {
        p["prompt"] = json!(format!(
            "Subject area: {{{{ area }}}}.\n{}",
            p["prompt"].as_str().unwrap()
        ))
    });
    let run = |extra: &[&str]| eval_one(dir.path(), &data, &path, extra);
    // Without it, every row misses it, each named.
    let o = run(&["--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    for row in ["stroma", "rubisco", "thylakoid"] {
        assert!(
            stderr(&o).contains(&format!("row `{row}`: missing variable `area`")),
            "{}",
            stderr(&o)
        );
    }
    // A name the prompt does not read is refused, naming those it reads.
    let o = run(&["--dry-run", "--var", "aera=botany"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("variable `aera` is read by no prompt")
            && stderr(&o).contains("`area`"),
        "{}",
        stderr(&o)
    );
    assert_eq!(model.requests(), 0);

    let o = run(&["--var", "area=botany", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report = stdout_json(&o);
    assert_eq!(report["vars"]["agent-kg-extract"]["area"], "botany");
    assert_eq!(report["summary"][0]["f1"], 1.0, "{report}");
    assert_eq!(model.requests(), 3);
    // `show` says it under the eval's heading.
    let o = kerf_in(dir.path(), &["eval", "show"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("agent-kg-extract: every row with area=botany"),
        "{out}"
    );
}

/// Review 2, item 4: an error line quotes what came from outside (here a dataset's row id) with
/// its control characters escaped, on any stream: an escape sequence in a row id cannot set the
/// terminal's title or write its clipboard.
#[test]
fn an_error_line_escapes_the_control_characters_it_quotes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("hostile.jsonl");
    let id = "\u{1b}]0;pwned\u{7}\u{1b}]52;c;ZXZpbA==\u{7}";
    let row = json!({"id": id, "input": "Ada wrote notes."}).to_string();
    std::fs::write(&data, format!("{row}\n{row}\n")).unwrap();
    let o = kerf_in(
        dir.path(),
        &[
            "eval",
            data.to_str().unwrap(),
            "--prompt",
            "prompts/agent-kg-extract.json",
            "--dry-run",
        ],
    );
    // Bad input: exit 1.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("kerf: error["), "{err}");
    assert!(err.contains("\\x1b]0;pwned\\x07"), "{err}");
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
}

/// The window's eval, as its Evaluate form sends it (`eval_start` runs this): the run panel's
/// defaults from `meta` with the provider picked, over the same history and providers file the
/// CLI uses.
fn window_eval(dir: &Path, data: &Path, cache: bool) -> kerf_api::eval::Report {
    use kerf_api::eval::{self, wire::EvalInput};
    let mut options = serde_json::to_value(kerf_api::meta::meta().run_defaults).unwrap();
    options["provider"] = json!("srv");
    let input: EvalInput = serde_json::from_value(json!({
        "dataset": data,
        "prompts": [
            repo().join("prompts/agent-kg-extract.json"),
            repo().join("prompts/agent-kg-extract-array.json"),
        ],
        "options": options,
        "budgets": [40, 1000],
        "constrain": "none",
        "cache": cache,
        "concurrency": 4,
    }))
    .unwrap();
    let wb = kerf_api::workbench::Workbench::at(dir, dir, &dir.join("models"), None);
    let store = wb.store_required().unwrap();
    let finished = eval::flow::run(
        &wb,
        &store,
        &kerf_api::eval::StartInput::of(&input).unwrap(),
        &kerf_llm::CancelToken::new(),
        eval::Options::default(),
        &mut |_| {},
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(finished.ending, eval::Ending::Whole);
    finished.report
}

#[test]
fn an_eval_cache_hits_across_the_window_and_the_cli() {
    let rows = rows();
    let model = Model::start(rows.clone(), Duration::ZERO);
    let (dir, data) = setup(&model, &rows);
    // The window buys every cell.
    let first = window_eval(dir.path(), &data, false);
    assert_eq!((first.cached, model.requests()), (0, 12));
    // The CLI, with the cache, reuses the window's roomy cells: the same prompt versions, input,
    // provider, model and parameters, whichever front end bought them.
    let o = eval(dir.path(), &data, &["--cache", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["cached"], 6, "{}", stderr(&o));
    assert_eq!(model.requests(), 12 + 6);
    // And the window reuses the CLI's.
    let third = window_eval(dir.path(), &data, true);
    assert_eq!((third.cached, model.requests()), (6, 18 + 6));
    // The same figures whichever front end measured them.
    for (a, b) in first.summary.iter().zip(&third.summary) {
        assert_eq!((a.micro, a.lost_to_cut), (b.micro, b.lost_to_cut));
    }
}

#[test]
fn kerf_test_runs_a_prompt_files_tests_and_holds_them_to_their_minimums() {
    let rows = rows();
    let model = Model::start(rows.clone(), Duration::ZERO);
    let (dir, _) = setup(&model, &rows);
    let mut file: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("prompts/agent-kg-extract.json")).unwrap(),
    )
    .unwrap();
    let test = |name: &str, row: &Value, max_tokens: u64| {
        json!({"name": name, "input": row["input"], "expected": row["expected"]["agent-kg-extract"],
               "min": {"recall": 0.9}, "max-tokens": max_tokens})
    };
    file["tests"] = json!([
        test("stroma", &rows[0], 1000),
        test("rubisco, tight", &rows[1], 15)
    ]);
    let prompt = dir.path().join("agent-kg-extract.json");
    std::fs::write(&prompt, file.to_string()).unwrap();
    let junit = dir.path().join("tests.xml");
    let args = [
        "test",
        prompt.to_str().unwrap(),
        "--provider",
        "srv",
        "--junit",
        junit.to_str().unwrap(),
    ];
    let o = kerf_in(dir.path(), &[&args[..], &["--json"]].concat());
    // 15 tokens (60 bytes) cut the first record: nothing found, the minimum missed.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(
        (
            v["passed"].clone(),
            v["failed"].clone(),
            v["errors"].clone()
        ),
        (json!(1), json!(1), json!(0))
    );
    let t = &v["tests"];
    assert_eq!(t[0]["verdict"], "passed");
    assert_eq!(t[0]["scores"]["recall"], 1.0);
    assert_eq!(t[1]["verdict"], "failed");
    assert_eq!(t[1]["finish_reason"], "length");
    assert_eq!(t[1]["missed"], json!(["recall 0.000 < 0.9"]));
    assert!(t[1]["run"].as_i64().is_some(), "kept in the history");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(r#"failures="1""#)
            && xml.contains(r#"<testcase name="rubisco, tight">"#)
            && xml.contains(r#"message="recall 0.000 &lt; 0.9""#),
        "{xml}"
    );
    // The table for people.
    let o = kerf_in(dir.path(), &args);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        out.contains("pass  agent-kg-extract / stroma") && out.contains("1 passed, 1 failed"),
        "{out}"
    );
    // A test whose expected record breaks the schema is refused before any run, named.
    let before = model.requests();
    file["tests"][1]["expected"][0]["entity"] = json!(7);
    std::fs::write(&prompt, file.to_string()).unwrap();
    let o = kerf_in(dir.path(), &args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("agent-kg-extract.json#/tests/1, row `rubisco, tight`: /expected/0/entity"),
        "{}",
        stderr(&o)
    );
    assert_eq!(model.requests(), before);
    // Tests run many at once on a server (which answers none until three are in flight, so
    // they are seen to overlap), and the results still come in the file's order.
    let slow = Model::start(rows.clone(), Duration::ZERO);
    slow.together(3);
    add_server(dir.path(), "slow", &slow.url(), "loopback");
    file["tests"] = json!([
        test("stroma", &rows[0], 1000),
        test("rubisco", &rows[1], 1000),
        test("thylakoid", &rows[2], 1000)
    ]);
    std::fs::write(&prompt, file.to_string()).unwrap();
    let o = kerf_in(
        dir.path(),
        &[
            "test",
            prompt.to_str().unwrap(),
            "--provider",
            "slow",
            "--concurrency",
            "3",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    let names: Vec<&str> = v["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["stroma", "rubisco", "thylakoid"]);
    assert!(slow.peak() >= 2, "{} requests at once at most", slow.peak());
    // A provider that cannot be reached: the tests could not run, exit 2.
    file["tests"][1]["expected"][0]["entity"] = json!("RuBisCO");
    std::fs::write(&prompt, file.to_string()).unwrap();
    // A port bound but not listening: every connection refused, and no other test can take it.
    let (_refusing, port) = super::server::refused_port();
    add_server(
        dir.path(),
        "dead",
        &format!("http://127.0.0.1:{port}/v1"),
        "m",
    );
    let o = kerf_in(
        dir.path(),
        &[
            "test",
            prompt.to_str().unwrap(),
            "--provider",
            "dead",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["errors"], 3, "{v}");
    assert_eq!(v["tests"][0]["verdict"], "error");
}

/// The shipped dataset through a real OpenAI-compatible server on the bundled model (the test
/// command starts llama-cpp-python's and sets the URL): every cell measured and kept, the
/// figures adding up to the dataset's records, and every figure read again from the raw
/// replies bit for bit.
#[test]
#[ignore = "needs a real server: KERF_TEST_OPENAI_BASE_URL (the test command starts one)"]
fn a_real_openai_compatible_server_evaluates_the_shipped_dataset() {
    let url = std::env::var("KERF_TEST_OPENAI_BASE_URL")
        .expect("KERF_TEST_OPENAI_BASE_URL: the server's /v1 URL");
    let dir = tempfile::tempdir().unwrap();
    add_server(dir.path(), "srv", &url, "smollm2");
    // As a user would: probe what the server honours (it refuses `json_schema`; the probe
    // finds the schema-held `json_object` it does honour).
    let probe = kerf_in(dir.path(), &["providers", "probe", "srv"]);
    assert!(probe.status.success(), "{}", stderr(&probe));
    let o = kerf_in(
        dir.path(),
        &[
            "eval",
            "datasets/knowledge-graph.jsonl",
            "--prompt",
            "prompts/agent-kg-extract.json",
            "--prompt",
            "prompts/agent-kg-extract-array.json",
            "--provider",
            "srv",
            "--max-tokens",
            "48,200",
            "--limit",
            "2",
            "--concurrency",
            "2",
            "--json",
        ],
    );
    // llama-cpp-python's server cancels a streaming reply when the next request arrives (its
    // `interrupt_requests`, on by default): with two in flight, cells end cut off or failed.
    // The eval says it is not whole (exit 2, naming the resume), and a resume one at a time
    // finishes it.
    let mut v = stdout_json(&o);
    if o.status.code() == Some(2) {
        assert!(v["pending"].as_u64().unwrap() > 0, "{v}");
        assert!(stderr(&o).contains("is not whole"), "{}", stderr(&o));
        let r = kerf_in(
            dir.path(),
            &[
                "eval",
                "resume",
                "--concurrency",
                "1",
                "--retry-errors",
                "--json",
            ],
        );
        assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
        v = stdout_json(&r);
    } else {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2 * 2 * 2, "{v}");
    for c in cells {
        assert!(c["run"].as_i64().is_some(), "{c}");
        assert!(
            c["finish_reason"] == "stop" || c["finish_reason"] == "length",
            "{c}"
        );
    }
    // Every line accounts for the first two documents' expected records: found or missed.
    let dataset = std::fs::read_to_string(repo().join("datasets/knowledge-graph.jsonl")).unwrap();
    let expected: u64 = dataset
        .lines()
        .take(2)
        .map(|l| {
            let row: Value = serde_json::from_str(l).unwrap();
            row["expected"]["agent-kg-extract"]
                .as_array()
                .unwrap()
                .len() as u64
        })
        .sum();
    for l in v["summary"].as_array().unwrap() {
        assert_eq!(l["cells"], 2, "{l}");
        assert_eq!(
            l["tp"].as_u64().unwrap() + l["fn"].as_u64().unwrap(),
            expected,
            "{l}"
        );
    }
    assert_eq!(v["pending"], 0);
    let e = v["experiment"].to_string();
    let again = kerf_in(dir.path(), &["eval", "rescore", &e, "--json"]);
    assert_eq!(stdout_json(&again), v);
}

#[test]
fn a_rate_limited_provider_is_waited_for_and_no_row_is_lost() {
    let rows = rows();
    // The first five requests hit the limit: the limiter waits as told, and every cell ends
    // measured, none failed.
    let model = Model::start_with(rows.clone(), Duration::ZERO, Again::Limited(5));
    let (dir, data) = setup(&model, &rows);
    let o = eval(dir.path(), &data, &["--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["pending"], 0);
    for l in v["summary"].as_array().unwrap() {
        assert_eq!(
            (l["cells"].clone(), l["failed"].clone()),
            (json!(3), json!(0)),
            "{l}"
        );
    }
    assert_eq!(model.requests(), 12 + 5);
    // Each wait is kept with its run.
    let runs: Vec<i64> = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["run"].as_i64().unwrap())
        .collect();
    let waited: usize = runs
        .iter()
        .map(|id| {
            let r = stdout_json(&kerf_in(
                dir.path(),
                &["history", "show", &id.to_string(), "--json"],
            ));
            r["details"]["retries"].as_array().map_or(0, Vec::len)
        })
        .sum();
    assert_eq!(waited, 5, "every 429 retried once it was allowed");
}

/// The eval, one request at a time, stopping after 6 refusals in a row.
fn eval_stopped_after_6_refusals(dir: &Path, data: &Path) -> Output {
    let mut args = vec!["eval", data.to_str().unwrap()];
    args.extend_from_slice(EVAL);
    let args: Vec<&str> = args
        .into_iter()
        .map(|a| if a == "4" { "1" } else { a })
        .collect();
    Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(&args)
        .current_dir(repo())
        .env("KERF_CONFIG_DIR", dir)
        .env("KERF_DATA_DIR", dir)
        .env("KERF_KEYRING", "kernel")
        .env("KERF_MAX_REFUSALS", "6")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A server that refuses everything (429 forever) is not retried for hours: after
/// KERF_MAX_REFUSALS refusals in a row (retries included) no more requests go out, the eval
/// stops with what finished kept, says why and how to go on, and its plan line said that
/// retries are not counted.
#[test]
fn a_provider_that_refuses_everything_stops_the_eval_after_refusals_in_a_row() {
    let rows = rows();
    let model = Model::start_with(rows.clone(), Duration::ZERO, Again::Limited(usize::MAX));
    let (dir, data) = setup(&model, &rows);
    let o = eval_stopped_after_6_refusals(dir.path(), &data);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("retries not counted (stops after 6 refusals in a row)"),
        "{e}"
    );
    assert!(
        e.contains("error[refused]: eval 1 stopped: srv refused the last 8 requests in a row")
            && e.contains("`kerf eval resume 1` runs the rest"),
        "{e}"
    );
    // Two runs of four attempts each (the first and three retries); the third is not sent.
    assert_eq!(model.requests(), 8);
    // What was kept: nothing finished, every cell still to run.
    let show = kerf_in(dir.path(), &["eval", "show", "--json"]);
    let v = stdout_json(&show);
    assert_eq!(v["pending"], 12, "{v}");
}

/// A server that is down (nothing listening: every connection refused) stops the eval the same
/// way: a refused connection is a refusal, counted toward KERF_MAX_REFUSALS with the retries, so
/// a dead URL fails fast with one error that says so rather than every cell spending its
/// retries.
#[test]
fn a_server_that_refuses_connections_stops_the_eval_after_refusals_in_a_row() {
    let rows = rows();
    let dir = tempfile::tempdir().unwrap();
    // Bound, never listening: connections to it are refused for as long as it lives.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    let port = socket.local_addr().unwrap().as_socket().unwrap().port();
    add_server(
        dir.path(),
        "srv",
        &format!("http://127.0.0.1:{port}/v1"),
        "loopback",
    );
    let data = dir.path().join("d.jsonl");
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&data, text).unwrap();
    let o = eval_stopped_after_6_refusals(dir.path(), &data);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("error[refused]: eval 1 stopped: srv refused the last 8 requests in a row")
            && e.contains("connection refused or unreachable")
            && e.contains("`kerf eval resume 1` runs the rest"),
        "{e}"
    );
    let show = kerf_in(dir.path(), &["eval", "show", "--json"]);
    assert_eq!(stdout_json(&show)["pending"], 12);
}

/// A reply a server broke off mid-stream (a router's error event for a server killed while it
/// decodes) is sent again at once on a provider without a price: the eval ends whole in one go,
/// the broken runs kept beside the cells' own. On a priced model the same break is a failed cell
/// (sending it again would buy it twice): the eval exits 2 and `--retry-errors` is left to the
/// person.
#[test]
fn a_reply_broken_off_by_a_server_is_sent_again_unless_it_is_bought() {
    let rows = rows();
    for (model, priced) in [("loopback", false), ("gpt-4o-mini", true)] {
        let server = Model::start_with(rows.clone(), Duration::ZERO, Again::Broken(2));
        let dir = tempfile::tempdir().unwrap();
        add_server(dir.path(), "srv", &server.url(), model);
        let data = dir.path().join("d.jsonl");
        let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&data, text).unwrap();
        let o = eval(dir.path(), &data, &["--json"]);
        let e = stderr(&o);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let runs = stdout_json(&kerf_in(
            dir.path(),
            &["history", "list", "--limit", "0", "--json"],
        ));
        let runs = runs.as_array().unwrap();
        let broken = runs.iter().filter(|r| r["status"] == "error").count();
        assert_eq!(broken, 2, "{model}: {runs:?}");
        if priced {
            assert_eq!(o.status.code(), Some(2), "{e}");
            assert_eq!(v["providers"][0]["failed"], 2, "{v}");
            assert_eq!(server.requests(), 12);
            assert_eq!(runs.len(), 12);
        } else {
            assert_eq!(o.status.code(), Some(0), "{e}");
            assert_eq!(v["pending"], 0, "{v}");
            assert_eq!(v["providers"][0]["failed"], 0, "{v}");
            assert_eq!(server.requests(), 14);
            assert_eq!(runs.len(), 14, "the broken runs are kept");
            // Each cell's run is one that finished.
            let show = stdout_json(&kerf_in(dir.path(), &["eval", "show", "--json"]));
            assert!(
                show["cells"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|c| c["status"] != "error"),
                "{show}"
            );
        }
    }
}

/// A resume goes through the same bounds as a start (2,396 requests left once started 2,400
/// once needed no `--yes`), and refuses to send the rest to where the provider's name points
/// now when that is another server (it once sent them without a word, one summary line mixing
/// two servers) — each naming why, nothing sent.
#[test]
fn a_resume_is_held_to_the_plan_limits_and_to_the_server_the_eval_ran_on() {
    let rows = rows();
    let old = Model::start(rows.clone(), Duration::ZERO);
    old.hold_from(4);
    let (dir, data) = setup(&old, &rows);
    let mut args: Vec<String> = [
        "eval",
        data.to_str().unwrap(),
        "--prompt",
        "prompts/agent-kg-extract.json",
        "--prompt",
        "prompts/agent-kg-extract-array.json",
        "--provider",
        "srv",
        "--constrain",
        "none",
        "--max-tokens",
        "40,80,160,1000",
        "--repeat",
        "100",
        "--concurrency",
        "2",
        "--yes",
    ]
    .map(String::from)
    .to_vec();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(&args)
        .current_dir(repo())
        .env("KERF_CONFIG_DIR", dir.path())
        .env("KERF_DATA_DIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    old.wait_held(2);
    child.kill().unwrap();
    child.wait().unwrap();
    old.release();
    let before = old.requests();
    args.clear();

    // Over the limit without a word: refused, as a start would be.
    let o = kerf_in(dir.path(), &["eval", "resume"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("error[plan_too_large]") && e.contains("needs --allow-requests 2396 (or --yes)"),
        "{e}"
    );
    let o = kerf_in(dir.path(), &["eval", "resume", "--allow-requests", "100"]);
    assert!(
        stderr(&o).contains("more than --allow-requests 100"),
        "{}",
        stderr(&o)
    );
    // A dry run says what it would send and sends nothing.
    let o = kerf_in(dir.path(), &["eval", "resume", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("kerf: eval plan: 2,396 cell(s) · 2,396 request(s) at most"),
        "{}",
        stderr(&o)
    );
    assert_eq!(old.requests(), before, "nothing sent");

    // The provider's name re-pointed at another server: refused, naming both.
    let new = Model::start(rows.clone(), Duration::ZERO);
    add_server(dir.path(), "srv", &new.url(), "loopback");
    let o = kerf_in(dir.path(), &["eval", "resume", "--yes"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{e}");
    assert!(
        e.contains("error[conflict]")
            && e.contains(&format!("ran on openai at {}", old.url()))
            && e.contains(&format!("now points at openai at {}", new.url()))
            && e.contains("--allow-endpoint-change"),
        "{e}"
    );
    assert_eq!(new.requests(), 0, "nothing sent to the new server");
    // Told to go on, it would (a dry run, to keep the test short).
    let o = kerf_in(
        dir.path(),
        &["eval", "resume", "--allow-endpoint-change", "--dry-run"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(new.requests(), 0);
}

/// `kerf eval` of the three rows with both prompts on the server, with `extra` flags.
fn eval_with(dir: &Path, data: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "eval",
        data.to_str().unwrap(),
        "--prompt",
        "prompts/agent-kg-extract.json",
        "--prompt",
        "prompts/agent-kg-extract-array.json",
        "--provider",
        "srv",
        "--constrain",
        "none",
    ];
    args.extend_from_slice(extra);
    kerf_in(dir, &args)
}

#[test]
fn a_plan_past_a_limit_is_refused_by_its_flag_before_any_request_and_leaves_nothing() {
    let rows = rows();
    let model = Model::start(rows.clone(), Duration::ZERO);
    let (dir, data) = setup(&model, &rows);
    let refused = |o: &Output, says: &str| {
        let err = stderr(o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            (err.contains("error[usage]") || err.contains("error[plan_too_large]"))
                && err.contains(says),
            "{says}: {err}"
        );
    };
    // The run-away plans of the issue: each refused by the flag that would make it.
    refused(
        &eval_with(dir.path(), &data, &["--repeat", "4294967295"]),
        "--repeat 4294967295: give 1 to 100 runs of each cell",
    );
    refused(
        &eval_with(dir.path(), &data, &["--concurrency", "10000"]),
        "--concurrency 10000: give 1 to 256 requests in flight at once",
    );
    // 3 rows × 2 prompts × 4 budgets × 100 repeats: 2,400 requests need to be allowed.
    let big = ["--max-tokens", "40,80,160,1000", "--repeat", "100"];
    refused(
        &eval_with(dir.path(), &data, &big),
        "the plan may send 2,400 requests (2,400 cell(s) · 2,400 request(s) at most",
    );
    let o = eval_with(dir.path(), &data, &big);
    refused(&o, "needs --allow-requests 2400 (or --yes) to start");
    assert!(
        stderr(&o).contains("error[plan_too_large]"),
        "{}",
        stderr(&o)
    );
    let mut low = big.to_vec();
    low.extend(["--allow-requests", "2000"]);
    refused(
        &eval_with(dir.path(), &data, &low),
        "more than --allow-requests 2,000",
    );
    refused(
        &eval_with(dir.path(), &data, &["--max-tokens", "200000"]),
        "--max-tokens 200000 is above --max-run-tokens 100000",
    );
    // Allowed, a dry run says what it would send, and sends and stores nothing.
    let mut dry = big.to_vec();
    dry.extend(["--allow-requests", "2400", "--dry-run"]);
    let o = eval_with(dir.path(), &data, &dry);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("kerf: eval plan: 2,400 cell(s) · 2,400 request(s) at most · ≤ ")
            && stderr(&o).contains(" input and ≤ 768,000 output tokens"),
        "{}",
        stderr(&o)
    );
    // compare and test are held to the same limits.
    let o = kerf_in(
        dir.path(),
        &[
            "compare",
            "prompts/agent-kg-extract.json",
            "prompts/agent-kg-extract-array.json",
            "--sample",
            "--provider",
            "srv",
            "--concurrency",
            "300",
        ],
    );
    refused(&o, "--concurrency 300");
    let many = dir.path().join("many.json");
    let tests: Vec<Value> = (0..1001)
        .map(|i| json!({"name": format!("t{i}"), "input": "x", "expected": []}))
        .collect();
    std::fs::write(
        &many,
        json!({"prompt": "{{ text }}", "response-type": "jsonl", "tests": tests}).to_string(),
    )
    .unwrap();
    let o = kerf_in(
        dir.path(),
        &["test", many.to_str().unwrap(), "--provider", "srv"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1001 tests, more than the 1000 one prompt file may hold"),
        "{}",
        stderr(&o)
    );
    assert_eq!(model.requests(), 0, "no request before a plan is accepted");
    let h = kerf_in(dir.path(), &["history", "experiments", "--json"]);
    assert_eq!(
        stdout_json(&h),
        json!([]),
        "a refused plan leaves nothing behind"
    );
}

#[test]
fn an_eval_announces_its_plan_before_its_first_request() {
    let rows = rows();
    let model = Model::start(rows.clone(), Duration::ZERO);
    // The first request waits: what the eval said by then, it said before sending anything.
    model.hold_from(0);
    let (dir, data) = setup(&model, &rows);
    let mut child = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["eval", data.to_str().unwrap()])
        .args(&EVAL[..EVAL.len() - 2])
        .args(["--concurrency", "1"])
        .current_dir(repo())
        .env("KERF_CONFIG_DIR", dir.path())
        .env("KERF_DATA_DIR", dir.path())
        .env("KERF_KEYRING", "kernel")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    model.wait_held(1);
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    model.release();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{line}{rest}");
    // 3 rows × 2 prompts × 2 budgets; the output bound is every request's budget.
    assert!(
        line.starts_with("kerf: eval plan: 12 cell(s) · 12 request(s) at most · ≤ ")
            && line.ends_with(
                " input and ≤ 6,240 output tokens · retries not counted (stops after 20 refusals in a row)\n"
            ),
        "{line}"
    );
    assert_eq!(model.requests(), 12);
    // The spec keeps it: `show --json` and the window read it back.
    let store = kerf_store::Store::open(&dir.path().join(kerf_store::FILE_NAME)).unwrap();
    let e = store
        .latest_experiment(kerf_store::ExperimentKind::Eval)
        .unwrap()
        .unwrap();
    let spec = store.experiment(e).unwrap().spec;
    assert_eq!(spec["plan"]["requests"], 12, "{spec}");
    assert_eq!(spec["plan"]["output_tokens_max"], 6_240, "{spec}");
    assert_eq!(spec["kind"], "eval", "{spec}");
    // A resume announces what remains: here nothing, and nothing is sent.
    let o = kerf_in(dir.path(), &["eval", "resume"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("kerf: eval plan: 0 cell(s) · 0 request(s) at most"),
        "{}",
        stderr(&o)
    );
    assert_eq!(model.requests(), 12);
}
