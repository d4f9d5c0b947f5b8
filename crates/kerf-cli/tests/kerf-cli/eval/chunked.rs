//! `kerf eval --chunk-size`: long documents cut into chunks, a request each, against a
//! loopback model that "extracts" only the records whose texts are in the chunk it was sent
//! (and its context), cut at the budget. Every document's figures are worked out here on their
//! own — each chunk's reply, what its cut keeps, the union over the chunks — and must be what
//! Kerf reports; a killed chunked eval resumes without buying a chunk again.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Again, Model, eval, kerf_in, reply_text, repo, setup, stderr, stdout_json};

/// Invented names, found in no prompt's text.
const NAMES: [&str; 16] = [
    "Quorvex", "Maltrine", "Zephlor", "Brindock", "Clavune", "Dorquin", "Eskaly", "Frumble",
    "Glisset", "Harvoke", "Istrel", "Jovanite", "Kestrum", "Lomvar", "Mirravel", "Nuxtor",
];

/// Two documents of eight sentences, a paragraph each: every name defined, and every second one
/// (from the third) fed by the one before (a relation whose two ends are in different
/// sentences; chunks of 100 characters hold two sentences, so these fall across a boundary).
fn documents() -> Vec<Value> {
    NAMES
        .chunks(8)
        .enumerate()
        .map(|(d, names)| {
            let mut text = Vec::new();
            let mut expected = Vec::new();
            for (i, n) in names.iter().enumerate() {
                let definition = format!("A part made in plant {}", d * 8 + i);
                text.push(format!("{n} is a part made in plant {}.", d * 8 + i));
                expected.push(json!({"type": "definition", "entity": n, "definition": definition}));
                if i % 2 == 0 && i > 0 {
                    expected.push(json!({"type": "relationship", "subject": names[i - 1],
                        "predicate": "feeds", "object": n, "object-entity": true}));
                }
            }
            json!({"id": format!("doc{d}"), "input": text.join("\n\n"),
                   "expected": {"agent-kg-extract": expected}})
        })
        .collect()
}

/// `doc` cut as `kerf chunk` cuts it.
fn chunks(dir: &std::path::Path, doc: &str, size: u32, overlap: u32) -> Vec<String> {
    let (size, overlap) = (size.to_string(), overlap.to_string());
    chunk_lines(
        dir,
        doc,
        &["--chunk-size", &size, "--chunk-overlap", &overlap],
    )
    .iter()
    .map(|c| c["text"].as_str().unwrap().to_string())
    .collect()
}

/// The lines `kerf chunk --json` writes of `doc`, cut with `settings` (its flags).
fn chunk_lines(dir: &std::path::Path, doc: &str, settings: &[&str]) -> Vec<Value> {
    let file = dir.join("doc.txt");
    std::fs::write(&file, doc).unwrap();
    let mut args = vec!["chunk", file.to_str().unwrap(), "--json"];
    args.extend_from_slice(settings);
    let o = kerf_in(dir, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What one document's chunks give at `budget`, worked out here: each chunk's reply (the
/// records whose texts its request holds, `context` characters of the chunk before
/// included), what the cut keeps of it (JSONL: its whole lines; an unclosed array: nothing),
/// and the union over the chunks. Returns the records found and the chunks cut.
fn worked_out(
    expected: &[Value],
    chunks: &[String],
    jsonl: bool,
    budget: u64,
    context: usize,
) -> (BTreeSet<String>, usize) {
    let mut found = BTreeSet::new();
    let mut cut = 0;
    for (i, c) in chunks.iter().enumerate() {
        let text = match i {
            0 => c.clone(),
            _ if context == 0 => c.clone(),
            _ => {
                let before: Vec<char> = chunks[i - 1].chars().collect();
                let tail: String = before[before.len().saturating_sub(context)..]
                    .iter()
                    .collect();
                format!("{tail}\n\n{c}")
            }
        };
        let records = super::read_in(&json!({"expected": {"agent-kg-extract": expected}}), &text);
        let (_, finish) = reply_text(&records, jsonl, budget);
        let kept: Vec<&Value> = if finish == "stop" {
            records.iter().collect()
        } else {
            cut += 1;
            if jsonl {
                // A line is kept when it ends within the budget's bytes.
                let mut end = 0;
                records
                    .iter()
                    .enumerate()
                    .take_while(|(k, r)| {
                        end += r.to_string().len() + usize::from(*k > 0);
                        end <= budget as usize * 4
                    })
                    .map(|(_, r)| r)
                    .collect()
            } else {
                Vec::new()
            }
        };
        found.extend(kept.iter().map(|r| r.to_string()));
    }
    (found, cut)
}

/// The document lines of a report, keyed `row|prompt|budget|size|context`.
fn lines(v: &Value) -> Vec<(String, Value)> {
    v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                format!(
                    "{}|{}|{}|{}|{}",
                    c["row"], c["prompt"], c["max_tokens"], c["chunk_size"], c["context_chars"]
                ),
                c.clone(),
            )
        })
        .collect()
}

/// `kerf eval report --html` of the eval `v` reports, read back.
fn html_report(dir: &std::path::Path, v: &Value) -> String {
    let page = dir.join(format!("report-{}.html", v["experiment"]));
    let id = v["experiment"].to_string();
    let o = kerf_in(
        dir,
        &["eval", "report", &id, "--html", page.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::read_to_string(&page).unwrap()
}

/// What a report's document lines found: `key: tp fp fn, chunks cut`.
fn figures(v: &Value) -> Vec<String> {
    lines(v)
        .into_iter()
        .map(|(k, c)| {
            format!(
                "{k}: {} {} {}, {} cut",
                c["tp"], c["fp"], c["fn"], c["chunks"]["cut"]
            )
        })
        .collect()
}

/// `kerf eval` of one prompt on the loopback server at a budget of 1,000 tokens, unconstrained,
/// with `extra` (the chunking, `--json`).
fn eval_one(
    dir: &std::path::Path,
    data: &std::path::Path,
    prompt: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "eval",
        data.to_str().unwrap(),
        "--prompt",
        prompt,
        "--provider",
        "srv",
        "--max-tokens",
        "1000",
        "--constrain",
        "none",
    ];
    args.extend_from_slice(extra);
    kerf_in(dir, &args)
}

#[test]
fn a_chunked_eval_scores_each_document_as_its_chunks_merged_give_it() {
    let docs = documents();
    let model = Model::start_with(docs.clone(), Duration::ZERO, Again::ByText);
    let (dir, data) = setup(&model, &docs);
    let o = eval(
        dir.path(),
        &data,
        &["--chunk-size", "100,400", "--chunk-overlap", "50", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    let mut requests = 0;
    for doc in &docs {
        let expected = doc["expected"]["agent-kg-extract"].as_array().unwrap();
        let text = doc["input"].as_str().unwrap();
        for size in [100u32, 400] {
            let cut_into = chunks(dir.path(), text, size, 50);
            for (prompt, jsonl) in [
                ("agent-kg-extract", true),
                ("agent-kg-extract-array", false),
            ] {
                for budget in [40u64, 1000] {
                    requests += cut_into.len();
                    let (found, cut) = worked_out(expected, &cut_into, jsonl, budget, 0);
                    let line = v["cells"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|c| {
                            c["row"] == doc["id"]
                                && c["prompt"] == prompt
                                && c["max_tokens"] == budget
                                && c["chunk_size"] == size
                        })
                        .unwrap_or_else(|| {
                            panic!("no line for {} {prompt} {budget} {size}", doc["id"])
                        });
                    let here = format!(
                        "{} {prompt} at {budget}, chunk size {size}: {line}",
                        doc["id"]
                    );
                    assert_eq!(line["tp"], found.len(), "{here}");
                    assert_eq!(line["fp"], 0, "{here}");
                    assert_eq!(line["fn"], expected.len() - found.len(), "{here}");
                    let c = &line["chunks"];
                    assert_eq!(c["chunks"], cut_into.len(), "{here}");
                    assert_eq!(c["requests"], cut_into.len(), "{here}");
                    assert_eq!(c["cut"], cut, "{here}");
                    assert_eq!(
                        line["finish_reason"],
                        if cut > 0 { "length" } else { "stop" }
                    );
                    // Every merged record placed, each definition on its own name.
                    let none = Vec::new();
                    let spans = line["spans"].as_array().unwrap_or(&none);
                    assert_eq!(spans.len(), found.len(), "{here}");
                    let chars: Vec<char> = text.chars().collect();
                    for s in spans {
                        assert_eq!(s["status"], "exact", "{here}: {s}");
                        let at: String = chars[s["start"].as_u64().unwrap() as usize
                            ..s["end"].as_u64().unwrap() as usize]
                            .iter()
                            .collect();
                        let name = s["identity"]
                            .as_str()
                            .unwrap()
                            .rsplit(" · ")
                            .next()
                            .unwrap();
                        assert!(at.to_lowercase().ends_with(name), "{here}: `{at}` for {s}");
                    }
                }
            }
        }
    }
    assert_eq!(model.requests(), requests);
    // The text report's provider line counts chunk requests, and times whole documents.
    let shown = kerf_in(dir.path(), &["eval", "show"]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains(&format!(
            "{requests} of {requests} chunk request(s) measured"
        )) && text.contains("run time per document p50"),
        "{text}"
    );
    // A line per prompt, budget and chunk size, with what its chunks cost and lost.
    let summary = v["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 8);
    let tight = summary
        .iter()
        .find(|l| {
            l["prompt"] == "agent-kg-extract-array"
                && l["max_tokens"] == 40
                && l["chunk_size"] == 400
        })
        .unwrap();
    assert!(tight["chunks"]["cut"].as_u64().unwrap() > 0, "{tight}");
    assert!(
        tight["chunks"]["missed_in_cut"].as_u64().unwrap() > 0,
        "{tight}"
    );
    let small = summary
        .iter()
        .find(|l| {
            l["prompt"] == "agent-kg-extract" && l["max_tokens"] == 1000 && l["chunk_size"] == 100
        })
        .unwrap();
    let large = summary
        .iter()
        .find(|l| {
            l["prompt"] == "agent-kg-extract" && l["max_tokens"] == 1000 && l["chunk_size"] == 400
        })
        .unwrap();
    // The smaller chunk costs more requests per document; records in an overlap are folded.
    assert!(
        small["chunks"]["requests_per_document"].as_f64()
            > large["chunks"]["requests_per_document"].as_f64(),
        "{small} {large}"
    );
    assert!(small["chunks"]["folded"].as_u64().unwrap() > 0, "{small}");
    // The advice names a chunk size.
    assert!(
        v["advice"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["chunk_size"].is_u64()),
        "{}",
        v["advice"]
    );

    // The HTML report draws the chunk-size study: recall and tokens per document against the
    // chunk size, a curve per prompt and budget.
    let html = html_report(dir.path(), &v);
    for title in [
        "Recall against the chunk size",
        "Tokens per document against the chunk size",
        "agent-kg-extract-array @ 40",
        "agent-kg-extract ✂400",
    ] {
        assert!(html.contains(title), "no `{title}` in the report");
    }

    // Without overlap, some relations fall across a chunk boundary. With context, each chunk
    // also reads the end of the one before, so such a relation is found, placed from the
    // context; the figures are still those worked out here.
    let o = eval(
        dir.path(),
        &data,
        &[
            "--chunk-size",
            "100",
            "--chunk-overlap",
            "0",
            "--context-chars",
            "0,60",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    for doc in &docs {
        let expected = doc["expected"]["agent-kg-extract"].as_array().unwrap();
        let cut_into = chunks(dir.path(), doc["input"].as_str().unwrap(), 100, 0);
        for context in [0usize, 60] {
            let (found, _) = worked_out(expected, &cut_into, true, 1000, context);
            let (_, line) = lines(&v)
                .into_iter()
                .find(|(k, _)| {
                    *k == format!("{}|\"agent-kg-extract\"|1000|100|{context}", doc["id"])
                })
                .unwrap();
            assert_eq!(line["tp"], found.len(), "context {context}: {line}");
            assert_eq!(line["fp"], 0, "context {context}: {line}");
        }
    }
    let with = |c: u64| {
        v["summary"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| {
                l["prompt"] == "agent-kg-extract"
                    && l["max_tokens"] == 1000
                    && l["context_chars"] == c
            })
            .unwrap()
            .clone()
    };
    let (none, some) = (with(0), with(60));
    assert!(
        some["chunks"]["spans"]["context"].as_u64().unwrap() > 0,
        "{some}"
    );
    assert_eq!(none["chunks"]["spans"]["context"], 0, "{none}");
    assert!(
        some["recall"].as_f64() > none["recall"].as_f64(),
        "{none} {some}"
    );
    assert!(
        some["chunks"]["prompt_tokens_per_document"].as_f64()
            > none["chunks"]["prompt_tokens_per_document"].as_f64()
    );
    assert!(
        some["chunks"]["boundary_recall"].as_f64() > none["chunks"]["boundary_recall"].as_f64(),
        "{none} {some}"
    );

    // The HTML report: the chunk figures, and each document under its chunks, numbered.
    let html = html_report(dir.path(), &v);
    assert!(html.contains("<h2>Chunks</h2>"), "no chunk table");
    let documents = v["cells"].as_array().unwrap().len();
    let marks: usize = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["chunks"]["chunks"].as_u64().unwrap() as usize)
        .sum();
    assert_eq!(
        html.matches("<span class=\"mark").count(),
        marks,
        "{documents} documents"
    );
    assert!(html.contains("cut at 100 with 60 characters of context"));
}

#[test]
fn a_killed_chunked_eval_resumes_without_sending_a_chunk_again() {
    let docs = documents();
    let whole = Model::start_with(docs.clone(), Duration::ZERO, Again::ByText);
    let (first, first_data) = setup(&whole, &docs);
    let args = ["--chunk-size", "100,400", "--json"];
    let o = eval(first.path(), &first_data, &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let cells = whole.requests();
    let want = figures(&stdout_json(&o));

    // The same eval against a server that holds every request from the tenth: killed then.
    let model = Model::start_with(docs.clone(), Duration::ZERO, Again::ByText);
    let (dir, data) = setup(&model, &docs);
    model.hold_from(10);
    let mut cmd = vec!["eval", data.to_str().unwrap()];
    cmd.extend_from_slice(super::EVAL);
    cmd.extend_from_slice(&args);
    let mut child = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(&cmd)
        .current_dir(repo())
        .env("KERF_CONFIG_DIR", dir.path())
        .env("KERF_DATA_DIR", dir.path())
        .env("KERF_KEYRING", "kernel")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    model.wait_held(1);
    child.kill().unwrap();
    child.wait().unwrap();
    model.release();
    let before = model.requests();
    assert!(before < cells, "{before} of {cells}");
    // Read now, a document with chunks never sent is not measured, however its sent chunks
    // ended: its figures wait for the rest.
    let requests = |v: &Value| -> std::collections::BTreeMap<String, u64> {
        lines(v)
            .into_iter()
            .map(|(k, c)| (k, c["chunks"]["requests"].as_u64().unwrap_or(0)))
            .collect()
    };
    let o = kerf_in(dir.path(), &["eval", "show", "--json"]);
    let partial = stdout_json(&o);
    let all = requests(&stdout_json(&super::kerf_in(
        first.path(),
        &["eval", "show", "--json"],
    )));
    let mut waiting = 0;
    for (k, line) in lines(&partial) {
        let sent = line["chunks"]["requests"].as_u64().unwrap_or(0);
        if sent < all[&k] {
            waiting += 1;
            assert!(
                line["tp"].is_null() && line["status"] != "ok" && line["status"] != "truncated",
                "{k}: {sent} of {} requests, scored: {line}",
                all[&k]
            );
        }
    }
    assert!(waiting > 0, "some document was stopped between its chunks");

    let o = kerf_in(dir.path(), &["eval", "resume", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The first ten requests were answered; of those, only the ones still being kept when the
    // kill came (at most the 4 in flight) are sent again, with every chunk never answered.
    let again = model.requests() - before;
    assert!(
        again >= cells - 10 && again <= cells - 10 + 4,
        "{again} sent again of {cells}"
    );
    assert_eq!(figures(&stdout_json(&o)), want);
}

#[test]
fn passes_over_a_chunk_merge_and_the_report_gives_recall_by_passes() {
    let docs = documents();
    // Each chunk's first request misses its last record; the second pass finds it.
    let model = Model::start_with(docs.clone(), Duration::ZERO, Again::ByTextForgetful);
    let (dir, data) = setup(&model, &docs);
    let o = eval_one(
        dir.path(),
        &data,
        "prompts/agent-kg-extract.json",
        &[
            // One at a time: a chunk's first pass is its first request.
            "--concurrency",
            "1",
            "--chunk-size",
            "100",
            "--chunk-overlap",
            "0",
            "--passes",
            "2",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    let mut chunk_count = 0;
    let mut first_pass = 0;
    let mut whole = 0;
    for doc in &docs {
        let expected = doc["expected"]["agent-kg-extract"].as_array().unwrap();
        let cut_into = chunks(dir.path(), doc["input"].as_str().unwrap(), 100, 0);
        chunk_count += cut_into.len();
        let (found, _) = worked_out(expected, &cut_into, true, 1000, 0);
        whole += found.len();
        // The first pass alone: each chunk's records but its last.
        let mut once = BTreeSet::new();
        for c in &cut_into {
            let mut records = super::read_in(doc, c);
            records.pop();
            once.extend(records.iter().map(Value::to_string));
        }
        first_pass += once.len();
        let line = v["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["row"] == doc["id"])
            .unwrap();
        assert_eq!(line["tp"], found.len(), "{line}");
        assert_eq!(line["fp"], 0, "{line}");
        assert_eq!(line["chunks"]["requests"], cut_into.len() * 2, "{line}");
    }
    assert_eq!(model.requests(), chunk_count * 2);
    let line = &v["summary"][0];
    let passes = line["chunks"]["by_passes"].as_array().unwrap();
    assert_eq!(passes.len(), 2, "{line}");
    assert_eq!(passes[0]["passes"], 1);
    assert_eq!(passes[0]["tp"], first_pass, "{line}");
    assert_eq!(passes[1]["tp"], whole, "{line}");
    assert!(passes[0]["recall"].as_f64() < passes[1]["recall"].as_f64());
    assert_eq!(
        passes[1]["requests_per_document"],
        2.0 * passes[0]["requests_per_document"].as_f64().unwrap()
    );
    // What the second pass found again was folded into the first's, never counted twice.
    assert_eq!(line["chunks"]["folded"], first_pass, "{line}");
}

/// A chunked eval by batch: every chunk of every document is a line of the vLLM batch file
/// (nothing is sent), and the answers, folded back from the output file, give each document
/// what the same eval run online gives it — figures, cuts and places.
#[test]
fn a_chunked_eval_by_batch_file_folds_back_as_the_online_one() {
    let docs = documents();
    let model = Model::start_with(docs.clone(), Duration::ZERO, Again::ByText);
    let (online_dir, online_data) = setup(&model, &docs);
    let args = ["--chunk-size", "100,400", "--chunk-overlap", "50", "--json"];
    let o = eval(online_dir.path(), &online_data, &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let online = stdout_json(&o);
    let chunk_requests = model.requests();
    // Where each document's records were placed: `row|prompt|budget|size|context: spans`.
    let places = |v: &Value| -> Vec<String> {
        lines(v)
            .into_iter()
            .map(|(k, c)| format!("{k}: {}", c["spans"]))
            .collect()
    };

    // The same eval in a history of its own (no reply to take from the online one's).
    let (dir, data) = setup(&model, &docs);
    let input = dir.path().join("in.jsonl");
    let mut batch_args = args.to_vec();
    batch_args.extend_from_slice(&["--batch-file", input.to_str().unwrap()]);
    let o = eval(dir.path(), &data, &batch_args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout_json(&o)["experiment"].as_i64().unwrap();
    assert_eq!(
        model.requests(),
        chunk_requests,
        "nothing sent to the server"
    );
    let requests: Vec<Value> = std::fs::read_to_string(&input)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(requests.len(), chunk_requests, "a line for every chunk");
    // Each line holds one chunk, not its document.
    for r in &requests {
        let sent = r["body"]["messages"].to_string();
        assert!(
            !docs
                .iter()
                .any(|d| sent.contains(d["input"].as_str().unwrap())),
            "a whole document in one request: {sent}"
        );
    }

    // The answers, as the loopback model gives them online, in reverse order.
    let mut out = String::new();
    for (i, r) in requests.iter().enumerate().rev() {
        let body = &r["body"];
        let sent = body["messages"].to_string();
        let records: Vec<Value> = docs.iter().flat_map(|d| super::read_in(d, &sent)).collect();
        let (text, finish) = reply_text(
            &records,
            sent.contains("one JSON object per line"),
            body["max_tokens"].as_u64().unwrap(),
        );
        let reply = json!({"id": format!("chatcmpl-{i}"), "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": sent.len() / 4, "completion_tokens": text.len().div_ceil(4), "total_tokens": 0}});
        out.push_str(&format!(
            "{}\n",
            json!({"id": format!("vllm-{i}"), "custom_id": r["custom_id"],
                   "response": {"status_code": 200, "request_id": format!("req-{i}"), "body": reply}, "error": null})
        ));
    }
    let output = dir.path().join("out.jsonl");
    std::fs::write(&output, out).unwrap();
    let id = id.to_string();
    let o = kerf_in(
        dir.path(),
        &[
            "eval",
            "collect",
            &id,
            "--results",
            output.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let batch = stdout_json(&o);
    assert_eq!(batch["pending"], 0, "{batch}");
    assert_eq!(figures(&batch), figures(&online));
    assert_eq!(places(&batch), places(&online));
    assert!(
        figures(&batch).iter().any(|f| !f.ends_with(" 0 cut")),
        "some chunks are cut by their budget: {:?}",
        figures(&batch)
    );
    // The summary lines' chunk figures are the online eval's too.
    let chunk_lines = |v: &Value| -> Vec<Value> {
        v["summary"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                json!([
                    l["prompt"],
                    l["max_tokens"],
                    l["chunk_size"],
                    l["recall"],
                    l["chunks"]["requests_per_document"],
                    l["chunks"]["cut"],
                    l["chunks"]["missed_in_cut"],
                    l["chunks"]["folded"]
                ])
            })
            .collect()
    };
    assert_eq!(chunk_lines(&batch), chunk_lines(&online));
}

/// Evals compared line by line pair a chunk size with the same chunk size, and whole documents
/// with every chunk size: what cutting cost, per prompt and budget.
#[test]
fn comparing_evals_pairs_chunk_sizes_and_whole_documents_with_each() {
    let docs = documents();
    let model = Model::start_with(docs.clone(), Duration::ZERO, Again::ByText);
    let (dir, data) = setup(&model, &docs);
    let run = |extra: &[&str]| {
        let o = eval(dir.path(), &data, extra);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout_json(&o)
    };
    let whole = run(&["--json"]);
    let cut = run(&["--chunk-size", "100,400", "--json"]);
    let (whole_id, cut_id) = (
        whole["experiment"].to_string(),
        cut["experiment"].to_string(),
    );
    let compare = |a: &str, b: &str| {
        let o = kerf_in(dir.path(), &["eval", "compare", a, b, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let v = stdout_json(&o);
        v.get("comparisons").cloned().unwrap_or(v)
    };
    let line_f1 = |v: &Value, c: &Value| {
        v["summary"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| {
                l["prompt"] == c["prompt"]
                    && l["max_tokens"] == c["max_tokens"]
                    && l["chunk_size"] == c["chunk_size"]
            })
            .unwrap_or_else(|| panic!("no line for {c}"))["f1"]
            .clone()
    };
    // Whole documents against each chunk size: 2 prompts × 2 budgets × 2 sizes.
    let against_whole = compare(&whole_id, &cut_id);
    let lines = against_whole.as_array().unwrap();
    assert_eq!(lines.len(), 8, "{against_whole}");
    let mut sizes = BTreeSet::new();
    for c in lines {
        assert!(c["a"].get("chunk_size").is_none(), "{c}");
        assert_eq!(c["a"]["prompt"], c["b"]["prompt"]);
        sizes.insert(c["b"]["chunk_size"].as_u64().unwrap());
        assert_eq!(c["a"]["f1"], line_f1(&whole, &c["a"]), "{c}");
        assert_eq!(c["b"]["f1"], line_f1(&cut, &c["b"]), "{c}");
    }
    assert_eq!(sizes, BTreeSet::from([100, 400]));
    // A cut eval against itself: each line with its own size, no difference.
    let itself = compare(&cut_id, &cut_id);
    let lines = itself.as_array().unwrap();
    assert_eq!(lines.len(), 8, "{itself}");
    for c in lines {
        assert_eq!(c["a"]["chunk_size"], c["b"]["chunk_size"], "{c}");
        assert_eq!(c["a"]["f1"], c["b"]["f1"], "{c}");
    }
    // A threshold missed, and a JUnit case, name the chunk size: one case per size.
    let junit = dir.path().join("junit.xml");
    let o = eval(
        dir.path(),
        &data,
        &[
            "--chunk-size",
            "100,400",
            "--fail-under",
            "recall=0.99",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("agent-kg-extract-array at 40 tokens, chunk size 400: recall"),
        "{}",
        stderr(&o)
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    for size in [100, 400] {
        assert_eq!(
            xml.matches(&format!(" at 40 tokens, chunk size {size}\""))
                .count(),
            2,
            "{xml}"
        );
    }

    // The text names the chunk size.
    let o = kerf_in(dir.path(), &["eval", "compare", &whole_id, &cut_id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("agent-kg-extract (whole documents) vs eval 2 agent-kg-extract (chunk size 100) at 40 tokens: F1"),
        "{text}"
    );
    let o = kerf_in(dir.path(), &["eval", "compare", &cut_id, &cut_id]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("agent-kg-extract vs agent-kg-extract at 40 tokens, chunk size 400: F1"),
        "{text}"
    );
}

/// A record named again far on in a document is found by two chunks, at two places: two
/// mentions, the second spurious by default; with the prompt's `match.repeats: once`, not
/// scored again — the same matches, no false positive, both mentions still placed.
#[test]
fn a_record_found_again_elsewhere_is_spurious_unless_the_prompt_scores_repeats_once() {
    let mut docs = documents();
    docs.truncate(1);
    let text = format!(
        "{}\n\n{}",
        docs[0]["input"].as_str().unwrap(),
        "Quorvex is a part made in plant 0."
    );
    docs[0]["input"] = json!(text);
    let model = Model::start_with(docs.clone(), Duration::ZERO, Again::ByText);
    let (dir, data) = setup(&model, &docs);
    let mut once: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("prompts/agent-kg-extract.json")).unwrap(),
    )
    .unwrap();
    once["match"]["repeats"] = json!("once");
    let once_path = dir.path().join("kg-once.json");
    std::fs::write(&once_path, once.to_string()).unwrap();
    let run = |prompt: &str| {
        let o = eval_one(
            dir.path(),
            &data,
            prompt,
            &["--chunk-size", "100", "--chunk-overlap", "0", "--json"],
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout_json(&o)["cells"][0].clone()
    };
    let quorvex = |line: &Value| -> Vec<u64> {
        line["spans"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["identity"] == "definition · quorvex")
            .map(|s| s["start"].as_u64().unwrap())
            .collect()
    };
    let counted = run("prompts/agent-kg-extract.json");
    assert_eq!(counted["fp"], 1, "{counted}");
    let at_end = text.rfind("Quorvex").unwrap() as u64;
    assert_eq!(
        quorvex(&counted),
        [0, at_end],
        "two mentions, each at its place"
    );
    let scored_once = run(once_path.to_str().unwrap());
    assert_eq!(scored_once["fp"], 0, "{scored_once}");
    assert_eq!(scored_once["tp"], counted["tp"]);
    assert_eq!(scored_once["fn"], counted["fn"]);
    assert_eq!(quorvex(&scored_once), [0, at_end]);
}

/// A document of only whitespace gives no chunk: with records expected of it the eval is
/// refused before anything is sent, the row named; without, it is simply not scored.
#[test]
fn a_document_with_no_text_to_cut_is_refused_when_records_are_expected_of_it() {
    let mut docs = documents();
    docs.truncate(1);
    docs.push(
        json!({"id": "blank", "input": " \n\n \t", "expected": {"agent-kg-extract": [
        {"type": "definition", "entity": "Quorvex", "definition": "A part"}]}}),
    );
    let model = Model::start_with(docs.clone(), Duration::ZERO, Again::ByText);
    let (dir, data) = setup(&model, &docs);
    let o = eval(dir.path(), &data, &["--chunk-size", "100"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("d.jsonl:2, row `blank`")
            && err.contains("no text to cut")
            && err.contains("1 record(s) at /expected/agent-kg-extract"),
        "{err}"
    );
    assert_eq!(model.requests(), 0, "nothing sent");
    // A later row with a problem of its own: the dataset's problems are said first, as they
    // are what is fixed first, and then the blank document.
    let mut broken = docs.clone();
    broken.push(json!({"id": "late", "expected": {"agent-kg-extract": []}}));
    let (dir, data) = setup(&model, &broken);
    let o = eval(dir.path(), &data, &["--chunk-size", "100"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("error[dataset]")
            && err.contains("d.jsonl:3, row `late`: missing variable")
            && !err.contains("no text to cut"),
        "{err}"
    );
    // Nothing expected of it: the rest is scored.
    docs[1]["expected"] = json!({"agent-kg-extract": []});
    let (dir, data) = setup(&model, &docs);
    let o = eval(dir.path(), &data, &["--chunk-size", "100", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert!(
        v["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["row"] == "doc0"),
        "{v}"
    );
}

/// A Japanese document cut by the token chunker: its words have no spaces between them and its
/// characters take several tokens, so windows split some. Every city is placed at its own
/// characters, found as written (not reported ungrounded), and one found by two windows'
/// overlap is counted once.
#[test]
fn a_document_written_without_spaces_is_placed_and_folded_under_the_token_chunker() {
    let cities = [
        ("東京", "日本の首都"),
        ("大阪", "関西地方の中心都市"),
        ("京都", "かつての都"),
        ("名古屋", "中部地方の工業都市"),
        ("札幌", "北海道の中心都市"),
        ("福岡", "九州の玄関口"),
    ];
    let text = "東京は日本の首都であり、世界有数の大都市である。大阪は関西地方の中心都市で、商業の町として知られる。京都はかつての都で、多くの寺院が残っている。名古屋は中部地方の工業都市で、自動車産業が盛んである。札幌は北海道の中心都市で、雪まつりが有名である。福岡は九州の玄関口として栄えている。";
    let expected: Vec<Value> = cities
        .iter()
        .map(|(n, d)| json!({"type": "definition", "entity": n, "definition": d}))
        .collect();
    let docs =
        vec![json!({"id": "cities", "input": text, "expected": {"agent-kg-extract": expected}})];
    let model = Model::start_with(docs.clone(), Duration::ZERO, Again::ByText);
    let (dir, data) = setup(&model, &docs);
    let token = [
        "--chunker",
        "token",
        "--chunk-size",
        "24",
        "--chunk-overlap",
        "8",
    ];
    let o = eval_one(
        dir.path(),
        &data,
        "prompts/agent-kg-extract.json",
        &[&token[..], &["--json"]].concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    // Some window splits a character (it has no place of its own).
    let windows = chunk_lines(dir.path(), text, &token);
    assert!(
        windows.iter().any(|w| w.get("start").is_none()),
        "{windows:?}"
    );
    let line = &v["cells"][0];
    assert_eq!(
        (line["tp"].clone(), line["fp"].clone(), line["fn"].clone()),
        (json!(6), json!(0), json!(0)),
        "{line}"
    );
    let chars: Vec<char> = text.chars().collect();
    let spans = line["spans"].as_array().unwrap();
    assert_eq!(spans.len(), cities.len(), "{spans:?}");
    for (s, (name, _)) in spans.iter().zip(cities) {
        assert_eq!(s["status"], "exact", "{s}");
        let (a, b) = (
            s["start"].as_u64().unwrap() as usize,
            s["end"].as_u64().unwrap() as usize,
        );
        assert_eq!(chars[a..b].iter().collect::<String>(), name, "{s}");
    }
    assert!(
        spans.iter().any(|s| s["merged"] == 1),
        "a city in an overlap is folded: {spans:?}"
    );
    let summary = &v["summary"][0];
    assert_eq!(summary["ungrounded"], 0.0, "{summary}");
    assert_eq!(summary["chunks"]["spans"]["exact"], 6, "{summary}");
    // The HTML report draws every window's band, those that split a character included.
    let html = html_report(dir.path(), &v);
    for w in &windows {
        let mark = format!("<span class=\"mark\">{}</span>", w["index"]);
        assert!(html.contains(&mark), "no band for window {}", w["index"]);
    }
}
