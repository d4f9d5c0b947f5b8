//! `kerf eval --batch`, `status`, `collect` and `resume` against a loopback server that speaks
//! the three providers' documented batch APIs — OpenAI's files and batches (chat completions
//! and the Responses API), Anthropic's Message Batches, Gemini's batch mode — with their
//! quirks: results shuffled and split across an output and an error file, part of a batch
//! expired, a 403 and a 500 on the results download, Anthropic's counts held at `processing`
//! until the batch ends, Gemini's int64 counts as strings. Every reply is the one the online
//! loopback model gives the same request, so a batch eval must equal the online eval cell by
//! cell.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Model, kerf_in, reply_text, rows};
use crate::{stderr, stdout_json};

/// What the batch server holds and has seen.
#[derive(Default)]
struct State {
    next: usize,
    files: HashMap<String, Vec<u8>>,
    /// Every batch by id: its API, its requests (custom id, body), polls so far, and (ended)
    /// its results.
    batches: HashMap<String, Held>,
    /// Batches created, in order: (API, custom ids).
    created: Vec<(String, Vec<String>)>,
    /// Online completion requests (a batch eval must send none).
    online: usize,
    /// Results downloads answered (any status).
    downloads: usize,
    /// The first results download answers 403, the second 500 (each once).
    refused_download: usize,
    /// Requests of the first batch of each API left to expire (or error, for Anthropic).
    expire_first: usize,
    /// Hold every results download this long (a collect killed while it waits).
    download_delay: Duration,
    /// Hold every OpenAI batch's create answer this long, the batch already made (a submit
    /// killed before it hears the batch's id).
    create_delay: Duration,
}

struct Held {
    endpoint: String,
    requests: Vec<(String, Value)>,
    polls: usize,
    /// The first batch of its API: where requests expire.
    first: bool,
    failed: Option<String>,
    /// The name the batch was given (OpenAI's `metadata.kerf`), and when it was made (the
    /// order of the list).
    tag: String,
    made: usize,
}

struct BatchServer {
    port: u16,
    state: Arc<Mutex<State>>,
}

impl BatchServer {
    fn start(expire_first: usize) -> BatchServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            expire_first,
            ..State::default()
        }));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &state);
                });
            }
        });
        BatchServer { port, state }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    fn created(&self) -> Vec<(String, Vec<String>)> {
        self.state.lock().unwrap().created.clone()
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(());
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut length = 0;
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        if h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let (status, reply) = route(state, &method, &path, &headers, &body);
    let delay = state.lock().unwrap().download_delay;
    if path.contains("/content") || path.ends_with("/results") {
        std::thread::sleep(delay);
    }
    if method == "POST" && path == "/v1/batches" {
        let hold = state.lock().unwrap().create_delay;
        std::thread::sleep(hold);
    }
    let (ctype, text, extra) = match reply {
        Reply::Json(v) => ("application/json", v.to_string(), String::new()),
        Reply::Lines(t) => ("application/binary", t, String::new()),
        Reply::UploadAt(path) => (
            "application/json",
            "{}".to_string(),
            format!(
                "x-goog-upload-url: http://{}{path}\r\nx-goog-upload-status: active\r\n",
                headers.get("host").map_or("", String::as_str)
            ),
        ),
    };
    write!(
        out,
        "HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    )?;
    out.flush()
}

enum Reply {
    Json(Value),
    Lines(String),
    /// A resumable upload's start: where to send the bytes (Gemini's `x-goog-upload-url`).
    UploadAt(String),
}

fn route(
    state: &Mutex<State>,
    method: &str,
    path: &str,
    headers: &HashMap<String, String>,
    body: &[u8],
) -> (u16, Reply) {
    let content_type = headers.get("content-type").map_or("", String::as_str);
    let header = |name: &str| headers.get(name).map_or("", String::as_str);
    let mut s = state.lock().unwrap();
    let not_found = (
        404,
        Reply::Json(json!({"error": {"message": "no such thing"}})),
    );
    let json_body = || serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
    match (method, path) {
        ("POST", "/v1/files") => {
            let boundary = content_type.split("boundary=").nth(1).unwrap_or("");
            let text = String::from_utf8_lossy(body).into_owned();
            let start = text
                .find("name=\"file\"")
                .and_then(|i| text[i..].find("\r\n\r\n").map(|j| i + j + 4));
            let end = text.rfind(&format!("\r\n--{boundary}--"));
            let (Some(a), Some(b)) = (start, end) else {
                return (
                    400,
                    Reply::Json(json!({"error": {"message": "no file part"}})),
                );
            };
            assert!(
                text.contains("name=\"purpose\"\r\n\r\nbatch"),
                "purpose=batch"
            );
            s.next += 1;
            let id = format!("file-{}", s.next);
            s.files.insert(id.clone(), text.as_bytes()[a..b].to_vec());
            (
                200,
                Reply::Json(
                    json!({"id": id, "object": "file", "bytes": b - a, "purpose": "batch"}),
                ),
            )
        }
        ("POST", "/v1/batches") => {
            let req = json_body();
            let file = s
                .files
                .get(req["input_file_id"].as_str().unwrap_or(""))
                .cloned()
                .unwrap_or_default();
            let endpoint = req["endpoint"].as_str().unwrap_or("").to_string();
            let mut requests = Vec::new();
            let mut failed = None;
            for (i, l) in String::from_utf8_lossy(&file).lines().enumerate() {
                let v: Value = serde_json::from_str(l).unwrap();
                if v["url"] != endpoint.as_str() || v["body"].get("stream").is_some() {
                    failed = Some(
                        json!([{"code": "invalid_request", "message": "mixed url or stream", "line": i + 1}]),
                    );
                }
                requests.push((
                    v["custom_id"].as_str().unwrap().to_string(),
                    v["body"].clone(),
                ));
            }
            s.next += 1;
            let id = format!("batch_{}", s.next);
            let first = !s.created.iter().any(|(a, _)| a == "openai");
            s.created.push((
                "openai".into(),
                requests.iter().map(|r| r.0.clone()).collect(),
            ));
            let made = s.next;
            s.batches.insert(
                id.clone(),
                Held {
                    endpoint,
                    requests,
                    polls: 0,
                    first,
                    failed: failed.as_ref().map(Value::to_string),
                    tag: req
                        .pointer("/metadata/kerf")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    made,
                },
            );
            (
                200,
                Reply::Json(
                    json!({"id": id, "object": "batch", "status": "validating", "errors": failed.map(|d| json!({"object": "list", "data": d}))}),
                ),
            )
        }
        // The list, newest first (one page: the test makes few).
        ("GET", p) if p.starts_with("/v1/batches?") => {
            let mut all: Vec<(&String, &Held)> = s
                .batches
                .iter()
                .filter(|(id, _)| id.starts_with("batch_"))
                .collect();
            all.sort_by_key(|(_, b)| std::cmp::Reverse(b.made));
            let data: Vec<Value> = all
                .iter()
                .map(|(id, b)| json!({"id": id, "object": "batch", "status": "in_progress", "metadata": {"kerf": b.tag}}))
                .collect();
            (
                200,
                Reply::Json(json!({"object": "list", "data": data, "has_more": false})),
            )
        }
        ("GET", p) if p.starts_with("/v1/batches/") => {
            let id = &p["/v1/batches/".len()..];
            let expire = s.expire_first;
            let Some(b) = s.batches.get_mut(id) else {
                return not_found;
            };
            b.polls += 1;
            if let Some(errors) = &b.failed {
                let data: Value = serde_json::from_str(errors).unwrap();
                return (
                    200,
                    Reply::Json(
                        json!({"id": id, "object": "batch", "status": "failed", "errors": {"object": "list", "data": data}, "request_counts": {"total": b.requests.len(), "completed": 0, "failed": 0}}),
                    ),
                );
            }
            let n = b.requests.len();
            if b.polls < 2 {
                return (
                    200,
                    Reply::Json(
                        json!({"id": id, "object": "batch", "status": "in_progress", "output_file_id": null, "error_file_id": null, "request_counts": {"total": n, "completed": 0, "failed": 0}}),
                    ),
                );
            }
            let expired = if b.first { expire.min(n) } else { 0 };
            let mut out = String::new();
            let mut err = String::new();
            for (cid, body) in shuffled(&b.requests) {
                let index = b.requests.iter().position(|r| &r.0 == cid).unwrap();
                if index < expired {
                    err.push_str(&format!("{}\n", json!({"id": format!("batch_req_{index}"), "custom_id": cid, "response": null,
                        "error": {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}})));
                } else {
                    let reply = if b.endpoint == "/v1/responses" {
                        responses_reply(body)
                    } else {
                        chat_reply(body)
                    };
                    out.push_str(&format!("{}\n", json!({"id": format!("batch_req_{index}"), "custom_id": cid,
                        "response": {"status_code": 200, "request_id": "r", "body": reply}, "error": null})));
                }
            }
            let (o, e) = (format!("file-{id}-out"), format!("file-{id}-err"));
            s.files.insert(o.clone(), out.into_bytes());
            s.files.insert(e.clone(), err.into_bytes());
            (
                200,
                Reply::Json(
                    json!({"id": id, "object": "batch", "status": "completed", "output_file_id": o,
                "error_file_id": if expired > 0 { json!(e) } else { Value::Null },
                "request_counts": {"total": n, "completed": n - expired, "failed": expired}}),
                ),
            )
        }
        ("GET", p) if p.starts_with("/v1/files/") && p.ends_with("/content") => {
            s.downloads += 1;
            s.refused_download += 1;
            match s.refused_download {
                1 => {
                    return (
                        403,
                        Reply::Json(json!({"error": {"message": "not ready yet"}})),
                    );
                }
                2 => return (500, Reply::Json(json!({"error": {"message": "try again"}}))),
                _ => {}
            }
            let id = &p["/v1/files/".len()..p.len() - "/content".len()];
            match s.files.get(id) {
                Some(f) => (200, Reply::Lines(String::from_utf8_lossy(f).into_owned())),
                None => not_found,
            }
        }
        ("POST", "/v1/messages/batches") => {
            let req = json_body();
            let requests: Vec<(String, Value)> = req["requests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    let cid = r["custom_id"].as_str().unwrap().to_string();
                    assert!(
                        (1..=64).contains(&cid.len())
                            && cid
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                        "{cid}"
                    );
                    assert!(r["params"].get("stream").is_none());
                    (cid, r["params"].clone())
                })
                .collect();
            s.next += 1;
            let id = format!("msgbatch_{}", s.next);
            let first = !s.created.iter().any(|(a, _)| a == "anthropic");
            s.created.push((
                "anthropic".into(),
                requests.iter().map(|r| r.0.clone()).collect(),
            ));
            let n = requests.len();
            let made = s.next;
            s.batches.insert(
                id.clone(),
                Held {
                    endpoint: String::new(),
                    requests,
                    polls: 0,
                    first,
                    failed: None,
                    tag: String::new(),
                    made,
                },
            );
            (
                200,
                Reply::Json(
                    json!({"id": id, "type": "message_batch", "processing_status": "in_progress",
                "request_counts": {"processing": n, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}}),
                ),
            )
        }
        ("GET", p) if p.starts_with("/v1/messages/batches/") => {
            let rest = &p["/v1/messages/batches/".len()..];
            let (id, results) = match rest.strip_suffix("/results") {
                Some(id) => (id, true),
                None => (rest, false),
            };
            let expire = s.expire_first;
            if results {
                s.downloads += 1;
            }
            let Some(b) = s.batches.get_mut(id) else {
                return not_found;
            };
            let n = b.requests.len();
            let bad = if b.first { expire.min(n) } else { 0 };
            if !results {
                b.polls += 1;
                // Every count stays at `processing` until the whole batch has ended.
                return if b.polls < 2 {
                    (
                        200,
                        Reply::Json(
                            json!({"id": id, "type": "message_batch", "processing_status": "in_progress",
                        "request_counts": {"processing": n, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}}),
                        ),
                    )
                } else {
                    (
                        200,
                        Reply::Json(
                            json!({"id": id, "type": "message_batch", "processing_status": "ended",
                        "results_url": format!("https://elsewhere.example/{id}/results"),
                        "request_counts": {"processing": 0, "succeeded": n - bad, "errored": bad.min(1), "canceled": 0, "expired": bad.saturating_sub(1)}}),
                        ),
                    )
                };
            }
            if b.polls < 2 {
                return not_found;
            }
            let mut lines = String::new();
            for (cid, params) in shuffled(&b.requests) {
                let index = b.requests.iter().position(|r| &r.0 == cid).unwrap();
                let result = match index {
                    0 if bad > 0 => {
                        json!({"type": "errored", "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}})
                    }
                    i if i < bad => json!({"type": "expired"}),
                    _ => json!({"type": "succeeded", "message": anthropic_reply(params)}),
                };
                lines.push_str(&format!(
                    "{}\n",
                    json!({"custom_id": cid, "result": result})
                ));
            }
            (200, Reply::Lines(lines))
        }
        // Gemini's resumable Files API: a start that says where to send the bytes, then the
        // bytes with `upload, finalize`.
        ("POST", "/upload/v1beta/files") => {
            assert_eq!(header("x-goog-upload-protocol"), "resumable");
            assert_eq!(header("x-goog-upload-command"), "start");
            assert_eq!(
                header("x-goog-upload-header-content-type"),
                "application/jsonl"
            );
            s.next += 1;
            let upload = format!("/upload/v1beta/files?upload_id=u{}", s.next);
            s.files.insert(
                upload.clone(),
                header("x-goog-upload-header-content-length")
                    .as_bytes()
                    .to_vec(),
            );
            (200, Reply::UploadAt(upload))
        }
        ("POST", p) if p.starts_with("/upload/v1beta/files?upload_id=") => {
            assert_eq!(header("x-goog-upload-command"), "upload, finalize");
            assert_eq!(header("x-goog-upload-offset"), "0");
            let announced = s.files.remove(p).expect("an upload that was started");
            assert_eq!(
                String::from_utf8_lossy(&announced),
                body.len().to_string(),
                "the length announced at the start"
            );
            s.next += 1;
            let name = format!("files/in-{}", s.next);
            s.files.insert(name.clone(), body.to_vec());
            (
                200,
                Reply::Json(
                    json!({"file": {"name": name, "mimeType": "application/jsonl", "sizeBytes": body.len().to_string(), "state": "ACTIVE"}}),
                ),
            )
        }
        ("GET", p)
            if p.starts_with("/download/v1beta/files/") && p.ends_with(":download?alt=media") =>
        {
            s.downloads += 1;
            let name = &p["/download/v1beta/".len()..p.len() - ":download?alt=media".len()];
            match s.files.get(name) {
                Some(f) => (200, Reply::Lines(String::from_utf8_lossy(f).into_owned())),
                None => not_found,
            }
        }
        ("POST", p) if p.starts_with("/v1beta/models/") && p.ends_with(":batchGenerateContent") => {
            let req = json_body();
            // Inline requests, or a file of keyed lines.
            let (requests, from_file): (Vec<(String, Value)>, bool) = match req
                .pointer("/batch/input_config/file_name")
                .and_then(Value::as_str)
            {
                Some(name) => (
                    String::from_utf8_lossy(&s.files[name])
                        .lines()
                        .map(|l| {
                            let v: Value = serde_json::from_str(l).unwrap();
                            (v["key"].as_str().unwrap().to_string(), v["request"].clone())
                        })
                        .collect(),
                    true,
                ),
                None => (
                    req.pointer("/batch/input_config/requests/requests")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                        .iter()
                        .map(|r| {
                            (
                                r["metadata"]["key"].as_str().unwrap().to_string(),
                                r["request"].clone(),
                            )
                        })
                        .collect(),
                    false,
                ),
            };
            s.next += 1;
            let id = format!("batches/{}", s.next);
            s.created.push((
                if from_file { "gemini-file" } else { "gemini" }.into(),
                requests.iter().map(|r| r.0.clone()).collect(),
            ));
            let n = requests.len();
            let made = s.next;
            s.batches.insert(
                id.clone(),
                Held {
                    endpoint: if from_file { "file" } else { "" }.to_string(),
                    requests,
                    polls: 0,
                    first: false,
                    failed: None,
                    tag: String::new(),
                    made,
                },
            );
            (
                200,
                Reply::Json(
                    json!({"name": id, "metadata": {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
                "state": "BATCH_STATE_PENDING", "batchStats": {"requestCount": n.to_string(), "pendingRequestCount": n.to_string()}}}),
                ),
            )
        }
        ("GET", p) if p.starts_with("/v1beta/batches/") => {
            let id = &p["/v1beta/".len()..];
            let Some(b) = s.batches.get_mut(id) else {
                return not_found;
            };
            b.polls += 1;
            let n = b.requests.len().to_string();
            if b.polls < 2 {
                return (
                    200,
                    Reply::Json(
                        json!({"name": id, "metadata": {"state": "BATCH_STATE_RUNNING",
                    "batchStats": {"requestCount": n, "pendingRequestCount": n}}}),
                    ),
                );
            }
            if b.endpoint == "file" {
                // A file's results: keyed lines, in any order.
                let lines: String = shuffled(&b.requests)
                    .into_iter()
                    .map(|(cid, req)| {
                        format!("{}\n", json!({"key": cid, "response": gemini_reply(req)}))
                    })
                    .collect();
                let out = format!("files/out-{}", &id["batches/".len()..]);
                s.files.insert(out.clone(), lines.into_bytes());
                return (
                    200,
                    Reply::Json(
                        json!({"name": id, "done": true, "metadata": {"state": "BATCH_STATE_SUCCEEDED",
                    "batchStats": {"requestCount": n, "successfulRequestCount": n}},
                    "response": {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
                        "responsesFile": out}}),
                    ),
                );
            }
            // Inline answers come in input order.
            let answers: Vec<Value> = b
                .requests
                .iter()
                .map(|(cid, req)| json!({"response": gemini_reply(req), "metadata": {"key": cid}}))
                .collect();
            (
                200,
                Reply::Json(
                    json!({"name": id, "done": true, "metadata": {"state": "BATCH_STATE_SUCCEEDED",
                "batchStats": {"requestCount": n, "successfulRequestCount": n}},
                "response": {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
                    "inlinedResponses": {"inlinedResponses": answers}}}),
                ),
            )
        }
        _ => {
            s.online += 1;
            not_found
        }
    }
}

/// The requests in another order than sent (results come back unordered).
fn shuffled(requests: &[(String, Value)]) -> Vec<(&String, &Value)> {
    let mut v: Vec<(&String, &Value)> = requests.iter().map(|(c, b)| (c, b)).collect();
    v.sort_by_key(|(c, _)| c.bytes().rev().collect::<Vec<u8>>());
    v
}

/// The text the loopback model replies to a request whose turns are `turns` at `budget`, as
/// the online model does, with its usage figures.
fn canned(turns: &Value, budget: u64) -> (String, &'static str, usize, usize) {
    let prompt = turns.to_string();
    let row = rows()
        .into_iter()
        .find(|r| prompt.contains(r["input"].as_str().unwrap()))
        .unwrap_or(Value::Null);
    let records = row["expected"]["agent-kg-extract"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let (text, finish) = reply_text(
        &records,
        prompt.contains("one JSON object per line"),
        budget,
    );
    let usage = (prompt.len() / 4, text.len().div_ceil(4));
    (text, finish, usage.0, usage.1)
}

fn chat_reply(body: &Value) -> Value {
    let budget = body["max_tokens"]
        .as_u64()
        .or(body["max_completion_tokens"].as_u64())
        .unwrap();
    let (text, finish, p, c) = canned(&body["messages"], budget);
    json!({"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}})
}

fn responses_reply(body: &Value) -> Value {
    let (text, finish, p, c) = canned(
        &json!([body["instructions"], body["input"]]),
        body["max_output_tokens"].as_u64().unwrap(),
    );
    let cut = finish == "length";
    json!({"id": "resp_1", "object": "response", "status": if cut { "incomplete" } else { "completed" },
        "incomplete_details": if cut { json!({"reason": "max_output_tokens"}) } else { Value::Null },
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}],
        "usage": {"input_tokens": p, "output_tokens": c, "total_tokens": p + c}})
}

fn anthropic_reply(params: &Value) -> Value {
    let (text, finish, p, c) = canned(
        &json!([params["system"], params["messages"]]),
        params["max_tokens"].as_u64().unwrap(),
    );
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": params["model"],
        "content": [{"type": "text", "text": text}],
        "stop_reason": if finish == "length" { "max_tokens" } else { "end_turn" },
        "usage": {"input_tokens": p, "output_tokens": c}})
}

fn gemini_reply(req: &Value) -> Value {
    let budget = req
        .pointer("/generationConfig/maxOutputTokens")
        .and_then(Value::as_u64)
        .unwrap();
    let (text, finish, p, c) = canned(&json!([req["systemInstruction"], req["contents"]]), budget);
    json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"},
        "finishReason": if finish == "length" { "MAX_TOKENS" } else { "STOP" }}],
        "usageMetadata": {"promptTokenCount": p, "candidatesTokenCount": c, "totalTokenCount": p + c}})
}

/// The configured providers: `srv` online, and one per batch API on the batch server.
fn providers(dir: &Path, online: &Model, batch: &BatchServer) {
    let add = |args: &[&str]| {
        let mut all = vec!["providers", "add"];
        all.extend_from_slice(args);
        all.push("--no-key");
        let o = kerf_in(dir, &all);
        assert!(o.status.success(), "{}", stderr(&o));
    };
    let openai = batch.url("v1");
    let gemini = batch.url("v1beta");
    add(&[
        "srv",
        "--kind",
        "openai",
        "--base-url",
        &online.url(),
        "--model",
        "gpt-4o-mini",
    ]);
    add(&[
        "oai",
        "--kind",
        "openai",
        "--base-url",
        &openai,
        "--model",
        "gpt-4o-mini",
        "--batch-api",
    ]);
    add(&[
        "resp",
        "--kind",
        "openai",
        "--base-url",
        &openai,
        "--model",
        "gpt-4o-mini",
        "--batch-api",
        "--api",
        "responses",
    ]);
    add(&[
        "ant",
        "--kind",
        "anthropic",
        "--base-url",
        &openai,
        "--model",
        "claude-haiku-4-5",
    ]);
    add(&[
        "gem",
        "--kind",
        "gemini",
        "--base-url",
        &gemini,
        "--model",
        "gemini-2.5-flash",
    ]);
    add(&[
        "vllm",
        "--kind",
        "openai",
        "--base-url",
        &online.url(),
        "--model",
        "gpt-4o-mini",
    ]);
}

/// The online model, the batch server (its first batches with `expire` requests unanswered),
/// a data directory with every provider configured, and the dataset.
fn servers(expire: usize) -> (Model, BatchServer, tempfile::TempDir, std::path::PathBuf) {
    let rows = rows();
    let online = Model::start(rows.clone(), Duration::ZERO);
    let batch = BatchServer::start(expire);
    let dir = tempfile::tempdir().unwrap();
    providers(dir.path(), &online, &batch);
    let data = dir.path().join("d.jsonl");
    std::fs::write(
        &data,
        rows.iter().map(|r| format!("{r}\n")).collect::<String>(),
    )
    .unwrap();
    (online, batch, dir, data)
}

const MATRIX: &[&str] = &[
    "--prompt",
    "prompts/agent-kg-extract.json",
    "--prompt",
    "prompts/agent-kg-extract-array.json",
    "--max-tokens",
    "40,1000",
    "--constrain",
    "none",
];

fn eval_args<'a>(data: &'a Path, provider: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["eval", data.to_str().unwrap()];
    args.extend_from_slice(MATRIX);
    args.extend_from_slice(&["--provider", provider]);
    args.extend_from_slice(extra);
    args
}

/// A cell as the report shows it, without what names the run: (row, prompt, budget) → its
/// finish reason, objects, figures and whether the cut lost records.
fn cells(report: &Value, provider: &str) -> Vec<(String, Value)> {
    let mut v: Vec<(String, Value)> = report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["provider"] == provider)
        .map(|c| {
            (
                format!("{}|{}|{}", c["row"], c["prompt"], c["max_tokens"]),
                json!({"finish_reason": c["finish_reason"], "objects": c["objects"], "tp": c["tp"],
                       "fp": c["fp"], "fn": c["fn"], "f1": c["f1"], "lost_to_cut": c["lost_to_cut"]}),
            )
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn a_batch_eval_equals_the_online_eval_cell_by_cell_on_every_batch_api() {
    // The first OpenAI batch has two requests expire; Anthropic's first has one errored and
    // one expired.
    let (_online, batch, dir, data) = servers(2);

    let want = kerf_in(dir.path(), &eval_args(&data, "srv", &["--json"]));
    assert!(want.status.success(), "{}", stderr(&want));
    let want = stdout_json(&want);
    let want_cells = cells(&want, "srv");
    assert_eq!(want_cells.len(), 12);
    assert!(
        want_cells
            .iter()
            .any(|(_, c)| c["finish_reason"] == "length"),
        "some cells are cut by their budget"
    );

    // Submitted: every request stored, in batches of at most 5, and nothing bought online.
    let mut submit = std::process::Command::new(env!("CARGO_BIN_EXE_kerf"));
    submit
        .args(eval_args(&data, "oai,resp,ant,gem", &["--batch", "--json"]))
        .current_dir(crate::repo())
        .env("KERF_CONFIG_DIR", dir.path())
        .env("KERF_DATA_DIR", dir.path())
        .env("KERF_KEYRING", "kernel")
        .env("KERF_BATCH_MAX_REQUESTS", "5");
    let sent = submit.output().unwrap();
    assert!(sent.status.success(), "{}", stderr(&sent));
    assert!(
        stderr(&sent).contains("oai: 12 request(s) by batch")
            && stderr(&sent).contains("gem: 12 request(s) by batch"),
        "the plan line says how each provider goes: {}",
        stderr(&sent)
    );
    let sent = stdout_json(&sent);
    let id = sent["experiment"].as_i64().unwrap();
    let batches = sent["batches"].as_array().unwrap();
    assert_eq!(
        batches.len(),
        12,
        "12 cells a provider, 5 a batch: 3 batches each: {sent}"
    );
    assert!(
        batches
            .iter()
            .all(|b| b["id"].is_string() && b["state"] == "running"),
        "{sent}"
    );
    assert_eq!(sent["ways"]["oai"], "batch");
    let created = batch.created();
    let ids: Vec<&String> = created.iter().flat_map(|(_, ids)| ids).collect();
    let unique: std::collections::BTreeSet<&String> = ids.iter().copied().collect();
    assert_eq!(
        (ids.len(), unique.len()),
        (48, 48),
        "every request once, under its own id"
    );
    assert_eq!(
        batch.state.lock().unwrap().online,
        0,
        "no ordinary completion request"
    );

    // Status: each batch as its provider reports it, Anthropic's counts all at processing.
    let status = kerf_in(dir.path(), &["eval", "status", &id.to_string(), "--json"]);
    assert!(status.status.success(), "{}", stderr(&status));
    let status = stdout_json(&status);
    let ant: Vec<&Value> = status["batches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["provider"] == "ant")
        .collect();
    assert!(
        ant.iter()
            .all(|b| b["counts"]["processing"] == b["requests"] && b["counts"]["succeeded"] == 0),
        "{status}"
    );
    assert!(
        status["batches"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["remote_state"] == "BATCH_STATE_RUNNING"),
        "{status}"
    );

    // Collect: every batch ends on this poll; the downloads' 403 and 500 are retried; the
    // expired and errored requests are listed, and the eval is not whole.
    let first = kerf_in(dir.path(), &["eval", "collect", &id.to_string(), "--json"]);
    assert_eq!(first.status.code(), Some(2), "{}", stderr(&first));
    let err = stderr(&first);
    assert_eq!(err.matches("no result for row").count(), 4, "{err}");
    assert!(
        err.contains("batch_expired")
            && err.contains("max_tokens: too large")
            && err.contains("kerf eval resume"),
        "{err}"
    );
    let report = stdout_json(&first);
    assert_eq!(report["pending"], 4, "{report}");
    let downloads = batch.state.lock().unwrap().downloads;

    // Collecting again changes nothing and buys nothing.
    let again = kerf_in(dir.path(), &["eval", "collect", &id.to_string(), "--json"]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(stdout_json(&again)["cells"], report["cells"]);
    assert_eq!(batch.created().len(), 12);
    assert_eq!(
        batch.state.lock().unwrap().downloads,
        downloads,
        "a folded batch is not downloaded again"
    );

    // A dry run of the resume says what it would send, and sends nothing.
    let dry = kerf_in(
        dir.path(),
        &["eval", "resume", &id.to_string(), "--dry-run"],
    );
    assert_eq!(dry.status.code(), Some(0), "{}", stderr(&dry));
    assert!(stderr(&dry).contains("4 cell(s)"), "{}", stderr(&dry));
    assert_eq!(batch.created().len(), 12);
    // Resume: only the four requests without a reply go again, under the same ids.
    let resumed = kerf_in(
        dir.path(),
        &[
            "eval",
            "resume",
            &id.to_string(),
            "--wait",
            "--poll",
            "0.05",
            "--json",
        ],
    );
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let created = batch.created();
    assert_eq!(
        created.len(),
        14,
        "one new batch each for OpenAI and Anthropic"
    );
    let resent: Vec<&String> = created[12..].iter().flat_map(|(_, ids)| ids).collect();
    assert_eq!(resent.len(), 4);
    assert!(
        resent.iter().all(|id| unique.contains(id)),
        "the same ids as before"
    );
    let report = stdout_json(&resumed);
    assert_eq!(report["pending"], 0);

    // Cell by cell, every batch API gave what the online eval got, truncation included.
    for p in ["oai", "resp", "ant", "gem"] {
        assert_eq!(cells(&report, p), want_cells, "{p}");
    }
    // At half the online price.
    let cost = |r: &Value, p: &str| {
        r["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["provider"] == p)
            .unwrap()["cost_usd"]
            .as_f64()
            .unwrap()
    };
    let (online_cost, batch_cost) = (cost(&want, "srv"), cost(&report, "oai"));
    assert!(
        online_cost > 0.0 && (batch_cost - online_cost / 2.0).abs() < 1e-9,
        "{online_cost} vs {batch_cost}"
    );

    let whole = kerf_in(dir.path(), &["eval", "collect", &id.to_string()]);
    assert_eq!(whole.status.code(), Some(0), "{}", stderr(&whole));
    assert_eq!(
        batch.created().len(),
        14,
        "collecting a whole eval sends nothing"
    );
}

/// A Gemini batch past the inline limit goes as a JSONL file of keyed lines through the
/// resumable Files API, and its results come back as a keyed file (`responsesFile`, shuffled):
/// cell by cell what the online eval got.
#[test]
fn a_gemini_batch_past_the_inline_limit_goes_as_a_file_and_folds_back() {
    let (_online, batch, dir, data) = servers(0);
    let want = kerf_in(dir.path(), &eval_args(&data, "srv", &["--json"]));
    assert!(want.status.success(), "{}", stderr(&want));
    let want_cells = cells(&stdout_json(&want), "srv");
    let sent = std::process::Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(eval_args(&data, "gem", &["--batch", "--json"]))
        .current_dir(crate::repo())
        .env("KERF_CONFIG_DIR", dir.path())
        .env("KERF_DATA_DIR", dir.path())
        .env("KERF_KEYRING", "kernel")
        .env("KERF_GEMINI_INLINE_BYTES", "1000")
        .output()
        .unwrap();
    assert!(sent.status.success(), "{}", stderr(&sent));
    let id = stdout_json(&sent)["experiment"].as_i64().unwrap();
    let created = batch.created();
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(created[0].0, "gemini-file");
    assert_eq!(created[0].1.len(), 12);
    let collected = kerf_in(
        dir.path(),
        &[
            "eval",
            "collect",
            &id.to_string(),
            "--wait",
            "--poll",
            "0.05",
            "--json",
        ],
    );
    assert_eq!(collected.status.code(), Some(0), "{}", stderr(&collected));
    let report = stdout_json(&collected);
    assert_eq!(report["pending"], 0, "{report}");
    assert_eq!(cells(&report, "gem"), want_cells);
    assert_eq!(batch.state.lock().unwrap().online, 0);
}

/// A submit killed after the provider made its batch and before it heard the batch's id leaves
/// the batch stored unsent; the next `status` finds it at the provider by its name and keeps it,
/// sending nothing again, and the eval collects whole.
#[test]
fn a_batch_the_provider_made_before_its_submit_died_is_found_not_bought_again() {
    let (_online, batch, dir, data) = servers(0);
    batch.state.lock().unwrap().create_delay = Duration::from_secs(60);
    let mut submit = std::process::Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(eval_args(&data, "oai", &["--batch", "--json"]))
        .current_dir(crate::repo())
        .env("KERF_CONFIG_DIR", dir.path())
        .env("KERF_DATA_DIR", dir.path())
        .env("KERF_KEYRING", "kernel")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let began = std::time::Instant::now();
    while batch.created().is_empty() {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "the batch was never made"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    submit.kill().unwrap(); // SIGKILL, while its create call waits for the answer
    submit.wait().unwrap();
    batch.state.lock().unwrap().create_delay = Duration::ZERO;

    let status = kerf_in(dir.path(), &["eval", "status", "--json"]);
    assert!(status.status.success(), "{}", stderr(&status));
    let status = stdout_json(&status);
    assert_eq!(batch.created().len(), 1, "sent once: {status}");
    let b = &status["batches"][0];
    assert!(
        b["id"].as_str().is_some_and(|id| id.starts_with("batch_")),
        "{status}"
    );
    let collected = kerf_in(
        dir.path(),
        &["eval", "collect", "--wait", "--poll", "0.05", "--json"],
    );
    assert_eq!(collected.status.code(), Some(0), "{}", stderr(&collected));
    assert_eq!(stdout_json(&collected)["pending"], 0);
    assert_eq!(batch.created().len(), 1);
}

/// `--batch-file` writes what `vllm run-batch` reads; its output file (in input order, errors
/// inline, `error` a string) folds back once, whatever is folded twice.
#[test]
fn a_batch_file_for_vllm_folds_back_from_its_output_file() {
    let (online, _batch, dir, data) = servers(0);
    let input = dir.path().join("in.jsonl");
    let sent = kerf_in(
        dir.path(),
        &eval_args(
            &data,
            "vllm",
            &["--batch-file", input.to_str().unwrap(), "--json"],
        ),
    );
    assert!(sent.status.success(), "{}", stderr(&sent));
    let id = stdout_json(&sent)["experiment"].as_i64().unwrap();
    assert_eq!(online.requests(), 0, "nothing sent to the server");
    let lines: Vec<Value> = std::fs::read_to_string(&input)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 12);
    // A tight budget's request fails (a roomy one's result is what a cut is measured against).
    let failing = lines
        .iter()
        .position(|l| l["body"]["max_tokens"] == 40)
        .unwrap();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["url"], "/v1/chat/completions");
        assert_eq!(l["method"], "POST");
        assert!(l["body"].get("stream").is_none());
        let cid = &l["custom_id"];
        out.push_str(&format!("{}\n", if i == failing {
            json!({"id": "vllm-3", "custom_id": cid, "response": {"status_code": 400, "request_id": "vllm-batch-3", "body": null}, "error": "Request must not be sent in stream mode"})
        } else {
            json!({"id": format!("vllm-{i}"), "custom_id": cid, "response": {"status_code": 200, "request_id": "x", "body": chat_reply(&l["body"])}, "error": null})
        }));
    }
    let output = dir.path().join("out.jsonl");
    std::fs::write(&output, out).unwrap();
    let collect = |extra: &[&str]| {
        let mut args = vec!["eval", "collect"];
        let id = id.to_string();
        args.push(&id);
        args.extend_from_slice(extra);
        args.push("--json");
        kerf_in(dir.path(), &args)
    };
    let first = collect(&["--results", output.to_str().unwrap()]);
    assert_eq!(first.status.code(), Some(2), "{}", stderr(&first));
    assert!(stderr(&first).contains("stream mode"), "{}", stderr(&first));
    let report = stdout_json(&first);
    assert_eq!(report["pending"], 1);
    let twice = collect(&["--results", output.to_str().unwrap()]);
    assert!(
        stderr(&twice).contains("12 answer(s) name no request awaited here"),
        "{}",
        stderr(&twice)
    );
    assert_eq!(stdout_json(&twice)["cells"], report["cells"]);
    let want = kerf_in(dir.path(), &eval_args(&data, "srv", &["--json"]));
    let want = cells(&stdout_json(&want), "srv");
    let got = cells(&report, "vllm");
    let differ: Vec<_> = want.iter().zip(&got).filter(|(a, b)| a != b).collect();
    assert_eq!(
        differ.len(),
        1,
        "every cell but the failed one as online: {differ:?}"
    );
}

/// A collect killed while it downloads the results loses nothing and buys nothing: the next
/// one folds the same results whole.
#[test]
fn a_collect_killed_mid_download_is_taken_up_by_the_next() {
    let (_online, batch, dir, data) = servers(0);
    let sent = kerf_in(dir.path(), &eval_args(&data, "oai", &["--batch", "--json"]));
    assert!(sent.status.success(), "{}", stderr(&sent));
    let id = stdout_json(&sent)["experiment"]
        .as_i64()
        .unwrap()
        .to_string();
    batch.state.lock().unwrap().download_delay = Duration::from_secs(30);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["eval", "collect", &id, "--wait", "--poll", "0.05"])
        .current_dir(crate::repo())
        .env("KERF_CONFIG_DIR", dir.path())
        .env("KERF_DATA_DIR", dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while batch.state.lock().unwrap().downloads == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the collect never downloaded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGKILL while the download is held.
    child.kill().unwrap();
    child.wait().unwrap();
    batch.state.lock().unwrap().download_delay = Duration::ZERO;
    let done = kerf_in(dir.path(), &["eval", "collect", &id, "--json"]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let report = stdout_json(&done);
    assert_eq!(report["pending"], 0);
    assert_eq!(batch.created().len(), 1, "nothing bought twice");
    let want = kerf_in(dir.path(), &eval_args(&data, "srv", &["--json"]));
    assert_eq!(cells(&report, "oai"), cells(&stdout_json(&want), "srv"));
}
