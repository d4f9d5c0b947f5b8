//! The providers' batch APIs: the same request bodies as online runs (structured outputs
//! included, nothing streamed) handed over in one batch, followed up, and read back later —
//! OpenAI's Batch API (chat completions or the Responses API; also what a LiteLLM proxy
//! offers), Anthropic's Message Batches and Gemini's batch mode, and the lines of a
//! `vllm run-batch` file. Each answer is read by the protocol's own whole-reply reader, so a
//! batch reply is taken exactly as the same reply online would be (its finish reason
//! included: a reply cut by its budget is cut here too).

use std::time::Duration;

pub use kerf_core::run::{BatchApi, BatchCounts, BatchState};

use super::*;

/// What one batch may hold at most (a plan over it is split).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    pub requests: usize,
    pub bytes: u64,
}

/// The documented limits of `api` (OpenAI: 50,000 requests and 200 MB a file; Anthropic:
/// 100,000 requests or 256 MB; Gemini: 2 GB, inline under 20 MB and a file past it), lowered by
/// `KERF_BATCH_MAX_REQUESTS` where set (smaller batches end sooner). A file for `vllm
/// run-batch` has no limit but that one.
pub fn limits(api: BatchApi) -> BatchLimits {
    let documented = match api {
        BatchApi::Openai => BatchLimits {
            requests: 50_000,
            bytes: 200 * 1000 * 1000,
        },
        BatchApi::Anthropic => BatchLimits {
            requests: 100_000,
            bytes: 256 * 1000 * 1000,
        },
        // A batch past the inline limit goes as a file (`gemini_inline_bytes`), up to 2 GB.
        BatchApi::Gemini => BatchLimits {
            requests: usize::MAX,
            bytes: 2 * 1000 * 1000 * 1000,
        },
        BatchApi::File => BatchLimits {
            requests: usize::MAX,
            bytes: u64::MAX,
        },
    };
    let cap = std::env::var("KERF_BATCH_MAX_REQUESTS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0);
    BatchLimits {
        requests: cap.map_or(documented.requests, |c| c.min(documented.requests)),
        ..documented
    }
}

/// The largest Gemini create request sent with its requests inline: under the documented 20 MB,
/// with room for the envelope; `KERF_GEMINI_INLINE_BYTES` lowers it (a larger batch is uploaded
/// as a file instead).
fn gemini_inline_bytes() -> usize {
    const DOCUMENTED: usize = 19 * 1000 * 1000;
    std::env::var("KERF_GEMINI_INLINE_BYTES")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(DOCUMENTED, |n| n.min(DOCUMENTED))
}

/// Whether `id` is a custom id every batch API takes: 1–64 characters of `[A-Za-z0-9_-]`
/// (Anthropic's rule, the strictest).
pub fn valid_custom_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Where a batch went, once its provider holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The provider's id for the batch.
    pub remote_id: String,
    /// The uploaded input file's id (OpenAI).
    pub input_file: Option<String>,
}

/// A batch as its provider reports it now.
#[derive(Debug, Clone, PartialEq)]
pub struct Polled {
    /// Running, ended (results readable), or failed whole.
    pub state: BatchState,
    /// The provider's own word (`in_progress`, `ended`, `BATCH_STATE_SUCCEEDED`, …).
    pub remote_state: String,
    pub counts: BatchCounts,
    /// Why the provider refused it whole.
    pub error: Option<String>,
    outputs: Outputs,
}

/// Where an ended batch's results are.
#[derive(Debug, Clone, PartialEq)]
enum Outputs {
    None,
    /// OpenAI: the output and error files (either may be absent).
    Files(Vec<String>),
    /// Anthropic: the batch's results stream.
    Results(String),
    /// Gemini: answers inline, in input order.
    Inline(Vec<Value>),
    /// Gemini: a results file.
    GeminiFile(String),
}

/// One request's answer in a batch's results.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub custom_id: String,
    pub outcome: Outcome,
}

/// What a request of a batch came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The reply, as the online API would have answered it whole.
    Reply(Value),
    /// No reply: why.
    Failed { failure: Failure, message: String },
}

/// Why a request of a batch has no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The provider answered it with an error.
    Errored,
    /// The batch's window closed before it ran.
    Expired,
    /// The batch was cancelled before it ran.
    Canceled,
}

impl Failure {
    /// The error code a run it leaves unanswered is kept with.
    pub fn code(self) -> &'static str {
        match self {
            Failure::Errored => "batch_errored",
            Failure::Expired => "batch_expired",
            Failure::Canceled => "batch_canceled",
        }
    }
}

/// The endpoint of OpenAI-style batch lines for a provider that speaks `responses` (the
/// Responses API) or chat completions.
pub fn endpoint(responses: bool) -> &'static str {
    if responses {
        "/v1/responses"
    } else {
        "/v1/chat/completions"
    }
}

impl CloudProvider {
    /// The batch API this provider offers, if any: OpenAI's own service, Anthropic and Gemini
    /// always; another OpenAI-compatible server when configured to (`"batch_api": true`: a
    /// LiteLLM proxy, or vLLM started with its batch API).
    pub fn batch_api(&self) -> Option<BatchApi> {
        match self.def.kind {
            Kind::Anthropic => Some(BatchApi::Anthropic),
            Kind::Gemini => Some(BatchApi::Gemini),
            Kind::Openai if self.def.batch_api || self.def.is_openai_itself() => {
                Some(BatchApi::Openai)
            }
            Kind::Openai => None,
        }
    }

    /// The body the online run of `request` sends, without streaming: what a batch line carries.
    pub fn batch_body(&self, request: &Request) -> Result<Value> {
        let (built, _) = self.built(request)?;
        let mut body: Value = serde_json::from_slice(&built.http.body)
            .map_err(|e| Error::Protocol(format!("{}: the request body: {e}", self.def.name)))?;
        if let Value::Object(m) = &mut body {
            m.remove("stream");
            m.remove("stream_options");
        }
        Ok(body)
    }

    /// The request `request` as this provider's protocol sends it, and the protocol (a
    /// constraint it cannot hold is refused): what an online run posts and a batch line
    /// carries.
    pub(super) fn built(&self, request: &Request) -> Result<(Built, Protocol)> {
        if !self.supports(&request.constraint) {
            return Err(Error::Constraint(format!(
                "{} (a {} provider) cannot hold output to a {} grammar; grammars run on the local engine",
                self.def.name,
                self.def.kind.as_str(),
                request.constraint.name()
            )));
        }
        let (mode, why) = self.mode_for(&request.constraint);
        let protocol = Protocol::of(&self.def);
        let built = (protocol.build)(self, request, mode, &why)?;
        Ok((built, protocol))
    }

    /// One request of a batch as `api` takes it, under `custom_id`: an OpenAI (or `vllm
    /// run-batch`) line, an Anthropic request, a Gemini inline request.
    pub fn batch_line(&self, api: BatchApi, custom_id: &str, request: &Request) -> Result<Value> {
        let body = self.batch_body(request)?;
        Ok(match api {
            BatchApi::Openai | BatchApi::File => json!({
                "custom_id": custom_id,
                "method": "POST",
                "url": endpoint(self.def.responses_api()),
                "body": body,
            }),
            BatchApi::Anthropic => json!({"custom_id": custom_id, "params": body}),
            BatchApi::Gemini => json!({"request": body, "metadata": {"key": custom_id}}),
        })
    }

    /// How the reply `body` (as a batch answered it) is taken for `request`: its text and its
    /// finish, read by the same reader an online reply that came whole is.
    pub fn batch_finish(&self, request: &Request, body: &Value) -> Result<(String, Finish)> {
        self.batch_reader(request)?.finish(self, body)
    }

    /// What reads the answers to requests like `request` (the same prompt, schema and mode;
    /// rows and budgets may differ): made once, it reads many.
    pub fn batch_reader(&self, request: &Request) -> Result<BatchReader> {
        let (built, protocol) = self.built(request)?;
        let mut details = built.details;
        details.key_source = self.key_source();
        details.streamed = Some(false);
        Ok(BatchReader {
            details,
            read_whole: protocol.read_whole,
        })
    }
}

/// Reads a batch's answers to requests of one prompt, schema and structured mode.
pub struct BatchReader {
    details: CloudDetails,
    read_whole: fn(&Value, &mut Reply) -> std::result::Result<(), String>,
}

impl BatchReader {
    /// What a run sent by this batch records of how it went (its protocol, endpoint and
    /// structured-output mode): kept with a request the batch gave no answer for.
    pub fn details(&self) -> RunDetails {
        RunDetails::Cloud(self.details.clone())
    }

    /// The reply `body` as `p`'s online reader takes a whole reply: its text and its finish.
    pub fn finish(&self, p: &CloudProvider, body: &Value) -> Result<(String, Finish)> {
        let start = Instant::now();
        let details = self.details.clone();
        let mut reply = Reply::default();
        (self.read_whole)(body, &mut reply)
            .map_err(|e| Error::Protocol(format!("{}: {e}", p.def.name)))?;
        if !reply.refusal.is_empty() {
            let refusal = std::mem::take(&mut reply.refusal);
            reply.text.push_str(&refusal);
            reply.finish = Some(FinishReason::Refusal);
        }
        let text = p.redact(&std::mem::take(&mut reply.text));
        let (reason, error) = match (reply.finish, &reply.error) {
            (_, Some(e)) => (FinishReason::Error, Some(p.redact(e))),
            (Some(r), None) => (r, None),
            (None, None) => (
                FinishReason::Interrupted,
                Some("the batch's reply has no finish reason".to_string()),
            ),
        };
        Ok((text, finish(reason, reply, start, None, error, details)))
    }
}

impl CloudProvider {
    /// Hand `lines` (made by [`batch_line`](Self::batch_line) for `api`) to the provider as one
    /// batch, named `tag` where the API keeps a name (OpenAI's metadata, Gemini's display
    /// name).
    pub async fn batch_send(&self, api: BatchApi, lines: &[Value], tag: &str) -> Result<Sent> {
        match api {
            BatchApi::Openai => {
                let mut jsonl = Vec::new();
                for l in lines {
                    jsonl.extend_from_slice(l.to_string().as_bytes());
                    jsonl.push(b'\n');
                }
                let (body, content_type) = multipart_file("batch", "kerf-batch.jsonl", &jsonl);
                let file = self
                    .call(Call::post(&self.at("files"), body, &content_type))
                    .await?;
                let input_file = string_at(&file, "/id", "the uploaded file")?;
                let endpoint = lines
                    .first()
                    .and_then(|l| l.get("url"))
                    .and_then(Value::as_str)
                    .unwrap_or("/v1/chat/completions");
                let created = self
                    .call(Call::post_json(
                        &self.at("batches"),
                        &json!({"input_file_id": input_file, "endpoint": endpoint,
                               "completion_window": "24h", "metadata": {"kerf": tag}}),
                    ))
                    .await?;
                Ok(Sent {
                    remote_id: string_at(&created, "/id", "the batch")?,
                    input_file: Some(input_file),
                })
            }
            BatchApi::Anthropic => {
                let created = self
                    .call(Call::post_json(
                        &self.at("messages/batches"),
                        &json!({ "requests": lines }),
                    ))
                    .await?;
                Ok(Sent {
                    remote_id: string_at(&created, "/id", "the batch")?,
                    input_file: None,
                })
            }
            BatchApi::Gemini => {
                let inline = json!({"requests": {"requests": lines}});
                // Inline while the create request stays under its 20 MB; past that, a JSONL file
                // through the Files API, its lines keyed as the file format wants.
                let (input_config, input_file) = if inline.to_string().len() < gemini_inline_bytes()
                {
                    (inline, None)
                } else {
                    let mut jsonl = Vec::new();
                    for l in lines {
                        let line =
                            json!({"key": l.pointer("/metadata/key"), "request": l.get("request")});
                        jsonl.extend_from_slice(line.to_string().as_bytes());
                        jsonl.push(b'\n');
                    }
                    let name = self.gemini_upload(jsonl, tag).await?;
                    (json!({"file_name": name}), Some(name))
                };
                let created = self
                    .call(Call::post_json(
                        &self.at(&format!("models/{}:batchGenerateContent", self.def.model)),
                        &json!({"batch": {"display_name": tag, "input_config": input_config}}),
                    ))
                    .await?;
                Ok(Sent {
                    remote_id: string_at(&created, "/name", "the batch")?,
                    input_file,
                })
            }
            BatchApi::File => Err(Error::Protocol(
                "a batch file is written, not sent".to_string(),
            )),
        }
    }

    /// The batch named `tag` at the provider, if it has one: a batch whose process died after
    /// sending it and before keeping the provider's id is found here rather than sent (and
    /// bought) again. OpenAI's list (newest first, a few pages) by `metadata.kerf`; Gemini's by
    /// display name. Anthropic's batches carry no name: `None`, and the batch is sent again.
    pub async fn batch_find(&self, api: BatchApi, tag: &str) -> Result<Option<Sent>> {
        // The batch sought was made moments before its process died: among the newest.
        const PAGES: usize = 5;
        // Per API: the list's first page and the next (by the cursor), where its batches are,
        // where a batch keeps its name, its id and its input file.
        let (first, next, items, names, id, file): (&str, &str, &str, &[&str], &str, &str) =
            match api {
                BatchApi::Openai => (
                    "batches?limit=100",
                    "batches?limit=100&after=",
                    "/data",
                    &["/metadata/kerf"],
                    "/id",
                    "/input_file_id",
                ),
                BatchApi::Gemini => (
                    "batches?pageSize=100",
                    "batches?pageSize=100&pageToken=",
                    "/operations",
                    &["/metadata/displayName", "/metadata/display_name"],
                    "/name",
                    "/metadata/inputConfig/fileName",
                ),
                BatchApi::Anthropic | BatchApi::File => return Ok(None),
            };
        let mut at = self.at(first);
        for _ in 0..PAGES {
            let v = self.call(Call::get(&at)).await?;
            let listed = v.pointer(items).and_then(Value::as_array);
            let named = |b: &&Value| {
                names
                    .iter()
                    .any(|n| b.pointer(n).and_then(Value::as_str) == Some(tag))
            };
            if let Some(b) = listed.and_then(|l| l.iter().find(named)) {
                return Ok(Some(Sent {
                    remote_id: string_at(b, id, "the batch")?,
                    input_file: b.pointer(file).and_then(Value::as_str).map(str::to_string),
                }));
            }
            // OpenAI pages after the last id while `has_more`; Gemini by `nextPageToken`.
            let cursor = match api {
                BatchApi::Openai if v.get("has_more").and_then(Value::as_bool) == Some(true) => {
                    listed
                        .and_then(|l| l.last())
                        .and_then(|b| b.get("id"))
                        .and_then(Value::as_str)
                }
                BatchApi::Gemini => v.get("nextPageToken").and_then(Value::as_str),
                _ => None,
            };
            match cursor.filter(|c| !c.is_empty()) {
                Some(c) => at = self.at(&format!("{next}{c}")),
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Batch `remote_id` as its provider reports it now.
    pub async fn batch_poll(&self, api: BatchApi, remote_id: &str) -> Result<Polled> {
        match api {
            BatchApi::Openai => {
                let v = self
                    .call(Call::get(&self.at(&format!("batches/{remote_id}"))))
                    .await?;
                Ok(openai_polled(&v))
            }
            BatchApi::Anthropic => {
                let v = self
                    .call(Call::get(
                        &self.at(&format!("messages/batches/{remote_id}")),
                    ))
                    .await?;
                let mut p = anthropic_polled(&v);
                if p.state == BatchState::Ended {
                    // The results stream at the API's own address (never `results_url` taken
                    // as given: the request carries the key).
                    p.outputs =
                        Outputs::Results(self.at(&format!("messages/batches/{remote_id}/results")));
                }
                Ok(p)
            }
            BatchApi::Gemini => {
                let v = self.call(Call::get(&self.at(remote_id))).await?;
                Ok(gemini_polled(&v))
            }
            BatchApi::File => Err(Error::Protocol(
                "a batch file is read from its output file, not polled".to_string(),
            )),
        }
    }

    /// The answers of an ended batch (any order), its output downloads retried as they fail
    /// (OpenAI's output file can answer 403 for a moment after the batch completes). `order`:
    /// the batch's custom ids as sent, for inline answers that carry no key.
    pub async fn batch_results(&self, polled: &Polled, order: &[String]) -> Result<Vec<Answer>> {
        let mut answers = Vec::new();
        match &polled.outputs {
            Outputs::None => {}
            Outputs::Files(files) => {
                for f in files {
                    let body = self
                        .call_raw(Call::get(&self.at(&format!("files/{f}/content"))).download())
                        .await?;
                    read_lines(&body, read_openai_line, &mut answers)?;
                }
            }
            Outputs::Results(url) => {
                let body = self.call_raw(Call::get(url).download()).await?;
                read_lines(&body, read_anthropic_line, &mut answers)?;
            }
            Outputs::Inline(items) => {
                for (i, item) in items.iter().enumerate() {
                    let key = item
                        .pointer("/metadata/key")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .or_else(|| order.get(i).cloned())
                        .ok_or_else(|| {
                            Error::Protocol(format!(
                                "{}: inline answer {} has no key and no request in its place",
                                self.def.name,
                                i + 1
                            ))
                        })?;
                    answers.push(gemini_answer(key, item));
                }
            }
            Outputs::GeminiFile(name) => {
                let download = self.gemini_media("download", &format!("{name}:download?alt=media"));
                let body = self.call_raw(Call::get(&download).download()).await?;
                read_lines(
                    &body,
                    |v| {
                        let key = v
                            .get("key")
                            .and_then(Value::as_str)
                            .ok_or("a result line has no `key`")?;
                        Ok(gemini_answer(key.to_string(), v))
                    },
                    &mut answers,
                )?;
            }
        }
        Ok(answers)
    }

    fn at(&self, path: &str) -> String {
        url(self, path)
    }

    /// Gemini's media paths sit beside the API's version, not under it:
    /// `https://…/v1beta` → `https://…/{kind}/v1beta/{path}` (`upload`, `download`).
    fn gemini_media(&self, kind: &str, path: &str) -> String {
        let base = self.def.base_url.trim_end_matches('/');
        match base.rsplit_once('/') {
            Some((host, version)) => format!("{host}/{kind}/{version}/{path}"),
            None => format!("{base}/{path}"),
        }
    }

    /// Upload `jsonl` through Gemini's resumable Files API (start, then upload and finalize in
    /// one step): the file's name (`files/…`).
    async fn gemini_upload(&self, jsonl: Vec<u8>, tag: &str) -> Result<String> {
        let start = self.gemini_media("upload", "files");
        let (_, headers) = self
            .call_answered(
                Call::post_json(&start, &json!({"file": {"display_name": tag}}))
                    .header("x-goog-upload-protocol", "resumable")
                    .header("x-goog-upload-command", "start")
                    .header(
                        "x-goog-upload-header-content-length",
                        jsonl.len().to_string(),
                    )
                    .header("x-goog-upload-header-content-type", "application/jsonl"),
            )
            .await?;
        let to = headers
            .get("x-goog-upload-url")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                Error::Protocol(format!(
                    "{}: the upload's start gave no `x-goog-upload-url`",
                    self.def.name
                ))
            })?
            .to_string();
        let uploaded = self
            .call(
                Call::post(&to, jsonl, "application/jsonl")
                    .header("x-goog-upload-command", "upload, finalize")
                    .header("x-goog-upload-offset", "0"),
            )
            .await?;
        string_at(&uploaded, "/file/name", "the uploaded file")
    }

    fn auth(&self) -> Vec<(String, String)> {
        let (header, bearer) = match self.def.kind {
            Kind::Openai => ("authorization", true),
            Kind::Anthropic => ("x-api-key", false),
            Kind::Gemini => ("x-goog-api-key", false),
        };
        let mut h: Vec<(String, String)> = headers(self, header, bearer)
            .into_iter()
            .filter(|(k, _)| k != "content-type" && k != "accept")
            .collect();
        if self.def.kind == Kind::Anthropic {
            h.push(("anthropic-version".into(), anthropic::VERSION.into()));
        }
        h
    }

    async fn call(&self, call: Call<'_>) -> Result<Value> {
        let what = format!("{} {}", call.method, call.url);
        let body = self.call_raw(call).await?;
        serde_json::from_slice(&body).map_err(|e| {
            Error::Protocol(self.redact(&format!(
                "{what}: the answer is not JSON ({e}): {}",
                http::error_message(&body)
            )))
        })
    }

    /// Send `call` (see [`call_answered`](Self::call_answered)): the answer's body.
    async fn call_raw(&self, call: Call<'_>) -> Result<Vec<u8>> {
        Ok(self.call_answered(call).await?.0)
    }

    /// Send `call`, retrying what is safe to retry: any failed download or poll, and a create
    /// the server refused with 429 or 5xx (it made nothing) or never received. The answer's
    /// body and headers.
    async fn call_answered(&self, call: Call<'_>) -> Result<(Vec<u8>, reqwest::header::HeaderMap)> {
        const ATTEMPTS: u32 = 5;
        let client = http::client(&self.http)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut r = client.request(call.method.clone(), call.url);
            for (k, v) in self.auth() {
                r = r.header(k, v);
            }
            for (k, v) in &call.headers {
                r = r.header(*k, v.as_str());
            }
            if let Some((body, content_type)) = &call.body {
                r = r
                    .header("content-type", content_type.as_str())
                    .body(body.clone());
            }
            let failed = match r.send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let header = |name: &str| {
                        resp.headers()
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string)
                    };
                    let wait = header("retry-after-ms")
                        .as_deref()
                        .and_then(http::retry_after_ms)
                        .or_else(|| header("retry-after").as_deref().and_then(http::retry_after));
                    let headers = resp.headers().clone();
                    let body = resp
                        .bytes()
                        .await
                        .map_err(|e| Error::Network(self.redact(&e.to_string())));
                    match body {
                        Ok(b) if (200..300).contains(&status) => return Ok((b.to_vec(), headers)),
                        Ok(b) => {
                            let retry = matches!(status, 429 | 500 | 502 | 503 | 504)
                                || (status == 403 && call.download);
                            let e = Error::Http {
                                status,
                                message: self.redact(&format!(
                                    "{} {}: {}",
                                    call.method,
                                    call.url,
                                    http::error_message(&b)
                                )),
                            };
                            (e, retry, wait)
                        }
                        Err(e) => (e, call.method == reqwest::Method::GET, None),
                    }
                }
                Err(e) => {
                    let never_sent = e.is_connect();
                    let e =
                        Error::Network(self.redact(&format!("{} {}: {e}", call.method, call.url)));
                    (e, never_sent || call.method == reqwest::Method::GET, None)
                }
            };
            let (error, retry, wait) = failed;
            if !retry || attempt >= ATTEMPTS {
                return Err(error);
            }
            let backoff = Duration::from_millis(200 << (attempt - 1));
            tokio::time::sleep(wait.map_or(backoff, |w| w.min(Duration::from_secs(60)))).await;
        }
    }
}

/// One management call of a batch API.
struct Call<'a> {
    method: reqwest::Method,
    url: &'a str,
    body: Option<(Vec<u8>, String)>,
    /// A results download: a 403 is retried too.
    download: bool,
    /// Headers beyond the key's (Gemini's resumable upload protocol).
    headers: Vec<(&'static str, String)>,
}

impl<'a> Call<'a> {
    fn get(url: &'a str) -> Self {
        Call {
            method: reqwest::Method::GET,
            url,
            body: None,
            download: false,
            headers: Vec::new(),
        }
    }

    fn post(url: &'a str, body: Vec<u8>, content_type: &str) -> Self {
        Call {
            method: reqwest::Method::POST,
            url,
            body: Some((body, content_type.to_string())),
            download: false,
            headers: Vec::new(),
        }
    }

    fn post_json(url: &'a str, v: &Value) -> Self {
        Self::post(url, v.to_string().into_bytes(), "application/json")
    }

    fn download(mut self) -> Self {
        self.download = true;
        self
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

/// A `multipart/form-data` body with `purpose` and one file (OpenAI's `POST /files`).
fn multipart_file(purpose: &str, name: &str, bytes: &[u8]) -> (Vec<u8>, String) {
    // Not in the JSONL (whose lines are JSON objects), so never a part boundary by accident.
    let boundary = "kerf-batch-boundary-7d1f3a";
    let mut body = Vec::with_capacity(bytes.len() + 400);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\ncontent-disposition: form-data; name=\"purpose\"\r\n\r\n{purpose}\r\n\
             --{boundary}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
             content-type: application/jsonl\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (body, format!("multipart/form-data; boundary={boundary}"))
}

fn string_at(v: &Value, pointer: &str, what: &str) -> Result<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| Error::Protocol(format!("{what}: the answer has no `{pointer}`: {v}")))
}

/// A count the provider reports as a number or (Gemini's int64s) as a string of one.
fn count(v: &Value, pointer: &str) -> u64 {
    match v.pointer(pointer) {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
        _ => 0,
    }
}

fn openai_polled(v: &Value) -> Polled {
    let status = v["status"].as_str().unwrap_or("").to_string();
    let state = match status.as_str() {
        "completed" | "expired" | "cancelled" => BatchState::Ended,
        "failed" => BatchState::Failed,
        _ => BatchState::Running,
    };
    let total = count(v, "/request_counts/total");
    let succeeded = count(v, "/request_counts/completed");
    let errored = count(v, "/request_counts/failed");
    let error = v
        .pointer("/errors/data")
        .and_then(Value::as_array)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.iter()
                .map(|e| {
                    let line = e["line"]
                        .as_u64()
                        .map(|l| format!("line {l}: "))
                        .unwrap_or_default();
                    format!(
                        "{line}{} ({})",
                        e["message"].as_str().unwrap_or("?"),
                        e["code"].as_str().unwrap_or("error")
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        });
    let files: Vec<String> = ["output_file_id", "error_file_id"]
        .iter()
        .filter_map(|k| v[*k].as_str().map(str::to_string))
        .collect();
    Polled {
        state,
        counts: BatchCounts {
            total,
            processing: total.saturating_sub(succeeded + errored),
            succeeded,
            errored,
            ..BatchCounts::default()
        },
        error,
        outputs: if state == BatchState::Ended {
            Outputs::Files(files)
        } else {
            Outputs::None
        },
        remote_state: status,
    }
}

fn anthropic_polled(v: &Value) -> Polled {
    let status = v["processing_status"].as_str().unwrap_or("").to_string();
    let c = |k: &str| count(v, &format!("/request_counts/{k}"));
    let counts = BatchCounts {
        processing: c("processing"),
        succeeded: c("succeeded"),
        errored: c("errored"),
        expired: c("expired"),
        canceled: c("canceled"),
        total: ["processing", "succeeded", "errored", "expired", "canceled"]
            .iter()
            .map(|k| c(k))
            .sum(),
    };
    Polled {
        state: if status == "ended" {
            BatchState::Ended
        } else {
            BatchState::Running
        },
        remote_state: status,
        counts,
        error: None,
        outputs: Outputs::None,
    }
}

fn gemini_polled(v: &Value) -> Polled {
    let meta = v.get("metadata").unwrap_or(v);
    let state_word = meta
        .get("state")
        .or_else(|| v.get("state"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let bare = state_word
        .trim_start_matches("BATCH_STATE_")
        .trim_start_matches("JOB_STATE_");
    let done = v["done"].as_bool().unwrap_or(false);
    let state = match bare {
        "SUCCEEDED" | "CANCELLED" | "EXPIRED" => BatchState::Ended,
        "FAILED" => BatchState::Failed,
        _ if done && v.get("error").is_some() => BatchState::Failed,
        _ => BatchState::Running,
    };
    let total = count(meta, "/batchStats/requestCount");
    let succeeded = count(meta, "/batchStats/successfulRequestCount");
    let errored = count(meta, "/batchStats/failedRequestCount");
    let pending = count(meta, "/batchStats/pendingRequestCount");
    let outputs = match (
        state,
        v.pointer("/response/inlinedResponses/inlinedResponses")
            .and_then(Value::as_array),
        v.pointer("/response/responsesFile").and_then(Value::as_str),
    ) {
        (BatchState::Ended, Some(items), _) => Outputs::Inline(items.clone()),
        (BatchState::Ended, None, Some(file)) => Outputs::GeminiFile(file.to_string()),
        _ => Outputs::None,
    };
    Polled {
        state,
        remote_state: state_word,
        counts: BatchCounts {
            total,
            processing: pending,
            succeeded,
            errored,
            ..BatchCounts::default()
        },
        error: v
            .pointer("/error/message")
            .and_then(Value::as_str)
            .map(str::to_string),
        outputs,
    }
}

fn gemini_answer(custom_id: String, item: &Value) -> Answer {
    let outcome = match (item.get("response"), item.get("error")) {
        (Some(r), _) if r.is_object() => Outcome::Reply(r.clone()),
        (_, Some(e)) => Outcome::Failed {
            failure: Failure::Errored,
            message: format!(
                "{} ({})",
                e["message"].as_str().unwrap_or("error"),
                e["code"]
            ),
        },
        _ => Outcome::Failed {
            failure: Failure::Errored,
            message: "the answer has neither `response` nor `error`".into(),
        },
    };
    Answer { custom_id, outcome }
}

/// Every line of a JSONL results file, read by `read` (blank lines skipped; a line that is not
/// JSON or not a result is an error naming it).
fn read_lines(
    body: &[u8],
    read: impl Fn(&Value) -> std::result::Result<Answer, String>,
    out: &mut Vec<Answer>,
) -> Result<()> {
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: Value = serde_json::from_slice(line)
            .map_err(|e| Error::Protocol(format!("results line {}: not JSON ({e})", i + 1)))?;
        out.push(read(&v).map_err(|e| Error::Protocol(format!("results line {}: {e}", i + 1)))?);
    }
    Ok(())
}

/// One line of an OpenAI Batch output or error file, or of a `vllm run-batch` output file: a
/// reply, or an error given as `error` (a string or an object) or as a response whose status is
/// 400 or more.
pub fn read_openai_line(v: &Value) -> std::result::Result<Answer, String> {
    let custom_id = v
        .get("custom_id")
        .and_then(Value::as_str)
        .ok_or("the line has no `custom_id`")?
        .to_string();
    let failed = |failure, message: String| Outcome::Failed { failure, message };
    let outcome = match (v.get("error"), v.get("response")) {
        (Some(Value::String(e)), _) => failed(Failure::Errored, e.clone()),
        (Some(e @ Value::Object(_)), _) => {
            let code = e["code"].as_str().unwrap_or("error");
            let message = e["message"].as_str().unwrap_or("");
            let failure = match code {
                "batch_expired" => Failure::Expired,
                "batch_cancelled" | "batch_canceled" => Failure::Canceled,
                _ => Failure::Errored,
            };
            failed(failure, format!("{message} ({code})"))
        }
        (_, Some(r)) if r.is_object() => {
            let status = r["status_code"].as_u64().unwrap_or(200);
            if status >= 400 {
                let body = r.get("body").map(|b| b.to_string()).unwrap_or_default();
                failed(
                    Failure::Errored,
                    format!("HTTP {status}: {}", http::error_message(body.as_bytes())),
                )
            } else {
                Outcome::Reply(r.get("body").cloned().ok_or("the response has no `body`")?)
            }
        }
        _ => return Err("the line has neither `response` nor `error`".into()),
    };
    Ok(Answer { custom_id, outcome })
}

/// One line of an Anthropic batch's results.
fn read_anthropic_line(v: &Value) -> std::result::Result<Answer, String> {
    let custom_id = v
        .get("custom_id")
        .and_then(Value::as_str)
        .ok_or("the line has no `custom_id`")?
        .to_string();
    let r = v.get("result").ok_or("the line has no `result`")?;
    let failed = |failure, message: &str| Outcome::Failed {
        failure,
        message: message.to_string(),
    };
    let outcome = match r["type"].as_str() {
        Some("succeeded") => Outcome::Reply(r.get("message").cloned().ok_or("no `message`")?),
        Some("errored") => {
            let e = r.pointer("/error/error").unwrap_or(&r["error"]);
            Outcome::Failed {
                failure: Failure::Errored,
                message: format!(
                    "{} ({})",
                    e["message"].as_str().unwrap_or("error"),
                    e["type"].as_str().unwrap_or("error")
                ),
            }
        }
        Some("canceled") => failed(Failure::Canceled, "the batch was cancelled before it ran"),
        Some("expired") => failed(Failure::Expired, "the batch expired before it ran"),
        other => return Err(format!("unknown result type {other:?}")),
    };
    Ok(Answer { custom_id, outcome })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    /// Both forms of a failed OpenAI line, vLLM's string error, and a reply.
    #[test]
    fn an_output_line_is_a_reply_or_says_why_not() {
        let reply = read_openai_line(&json!({"custom_id": "a", "response":
            {"status_code": 200, "body": {"choices": []}}, "error": null}))
        .unwrap();
        assert_eq!(reply.outcome, Outcome::Reply(json!({"choices": []})));
        let expired = read_openai_line(&json!({"custom_id": "b", "response": null,
            "error": {"code": "batch_expired", "message": "not run"}}))
        .unwrap();
        assert!(matches!(
            expired.outcome,
            Outcome::Failed {
                failure: Failure::Expired,
                ..
            }
        ));
        let http = read_openai_line(&json!({"custom_id": "c", "response":
            {"status_code": 400, "body": {"error": {"message": "bad schema"}}}}))
        .unwrap();
        assert!(
            matches!(&http.outcome, Outcome::Failed { failure: Failure::Errored, message } if message.contains("400") && message.contains("bad schema"))
        );
        let vllm = read_openai_line(&json!({"custom_id": "d", "response":
            {"status_code": 400, "body": null}, "error": "Request must not be sent in stream mode"}))
        .unwrap();
        assert!(
            matches!(&vllm.outcome, Outcome::Failed { message, .. } if message.contains("stream mode"))
        );
        assert!(read_openai_line(&json!({"response": {}})).is_err());
    }

    #[test]
    fn custom_ids_follow_the_strictest_rule() {
        assert!(valid_custom_id("e12-0f3a_b"));
        assert!(!valid_custom_id(""));
        assert!(!valid_custom_id("a.b"));
        assert!(!valid_custom_id(&"a".repeat(65)));
    }
}
