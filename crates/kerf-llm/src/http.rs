//! The transport every cloud provider shares: one POST, streamed, with the behaviour a run
//! needs — timeouts for connecting, for the first byte and for idle gaps between chunks; bounded
//! retries with exponential backoff and jitter on connect errors, 429 and 5xx (honouring
//! `Retry-After`); cancellation at any moment; and error bodies turned into a message that names
//! the HTTP status and what the provider said.
//!
//! It runs on reqwest over the process's tokio runtime ([`crate::runtime`]): one pooled client
//! per process (keep-alive connections reused across runs, HTTP/2 where the server offers it,
//! rustls), every wait raced against the cancel token, and dropping the future closes the
//! request. Retries (the `backon` crate) happen only before any reply byte has been taken: a
//! reply that started and then failed is the caller's to report, never silently re-bought.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use tokio::time::Instant;

use crate::{CancelToken, Error, Result};

/// Timeouts and retry policy; the defaults suit hosted APIs and local servers alike.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpConfig {
    pub connect_timeout: Duration,
    /// From sending the request to the response's headers (a long prompt takes a while).
    pub first_byte_timeout: Duration,
    /// The longest gap between two chunks of a streamed reply.
    pub idle_timeout: Duration,
    /// Retries after the first attempt (so `max_retries + 1` attempts at most).
    pub max_retries: u32,
    /// The first retry's delay; each next one doubles, up to `backoff_max`, and each gets up to
    /// as much again of random jitter, so clients that failed together do not retry together.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// A `Retry-After` longer than this is not waited out: the error says what the server asked.
    pub retry_after_max: Duration,
    /// The most reply bytes read: past it the reply is cut there, as a broken stream with what
    /// arrived kept. `KERF_MAX_REPLY_MIB` (default 64).
    pub max_reply_bytes: u64,
    /// The longest a run may take, from its first attempt to its reply's last byte, retries
    /// and their waits included: past it the reply is cut there (a server sending one byte a
    /// minute would otherwise hold a run forever; one trickling a 503 would hold it that long
    /// on every attempt). `KERF_MAX_RUN_SECONDS` (default 600).
    pub max_duration: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(60),
            max_retries: 3,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(20),
            retry_after_max: Duration::from_secs(60),
            max_reply_bytes: kerf_core::limits::from_env("KERF_MAX_REPLY_MIB", 64)
                .saturating_mul(1 << 20),
            max_duration: Duration::from_secs(kerf_core::limits::from_env(
                "KERF_MAX_RUN_SECONDS",
                600,
            )),
        }
    }
}

/// A request to send. Header values may hold secrets: they are never logged or echoed.
#[derive(Clone)]
pub struct HttpRequest {
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// Cheap to clone: a retry sends the same bytes again.
    pub body: Bytes,
}

impl std::fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRequest")
            .field("url", &self.url)
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// What happened on the way to a response, for the run's warnings and record.
#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    pub attempt: u32,
    pub delay: Duration,
    pub why: String,
    /// The server refused the attempt: a status that says "not now" (see [`is_refusal`]), or
    /// its connection refused (a server down or at its accept limit). Counted toward
    /// `KERF_MAX_REFUSALS`, and an adaptive concurrency backs off on it.
    pub refused: bool,
}

/// A status that says "not now" rather than "not this request": 429 (rate limited), 503 (over
/// capacity), 529 (Anthropic's overloaded). A provider that answers only these is refusing.
pub fn is_refusal(status: u16) -> bool {
    matches!(status, 429 | 503 | 529)
}

/// A successful (2xx) response whose body is still arriving.
pub struct Response {
    pub status: u16,
    pub content_type: String,
    /// The response's headers, lower-case names (rate-limit headers are read from here).
    pub headers: Vec<(String, String)>,
    /// The retries it took to get here.
    pub retries: Vec<Retry>,
    inner: reqwest::Response,
    idle: Duration,
    /// When the reply must be over (`HttpConfig::max_duration` from the run's first attempt).
    deadline: Instant,
    max_duration: Duration,
    /// Bytes still allowed (`HttpConfig::max_reply_bytes`).
    room: u64,
    max_bytes: u64,
    /// What the next read returns without reading: the break after a reply cut at its limit.
    after: Option<Chunk>,
}

/// The next piece of a streamed body.
#[derive(Debug, PartialEq)]
pub enum Chunk {
    Bytes(Bytes),
    /// The body ended normally.
    End,
    Cancelled,
    /// No byte for longer than the idle timeout.
    Idle(Duration),
    /// The connection broke mid-body.
    Broken(String),
    /// The body passed Kerf's own size limit (`HttpConfig::max_reply_bytes`, in MiB here): the
    /// bytes before it were delivered; the rest is not read.
    TooLarge(u64),
}

impl std::fmt::Display for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Chunk::Bytes(b) => write!(f, "{} bytes", b.len()),
            Chunk::End => f.write_str("the end of the body"),
            Chunk::Cancelled => f.write_str("cancelled"),
            Chunk::Idle(d) => write!(f, "no byte for {} s", d.as_secs_f64()),
            Chunk::Broken(e) => f.write_str(e),
            Chunk::TooLarge(mib) => write!(
                f,
                "the reply passed the {mib} MiB limit (KERF_MAX_REPLY_MIB); what arrived before it is kept"
            ),
        }
    }
}

/// A chunk that ends a body early, as an error a byte stream can carry.
impl std::error::Error for Chunk {}

impl Response {
    /// The next piece of the body: bytes, its end, or why it stopped (cancelled, stalled,
    /// broken, past the size or time limit).
    pub async fn next_chunk(&mut self, cancel: &CancelToken) -> Chunk {
        if let Some(after) = self.after.take() {
            return after;
        }
        let read = tokio::time::timeout(self.idle, self.inner.chunk());
        tokio::select! {
            biased;
            () = cancel.cancelled() => Chunk::Cancelled,
            () = tokio::time::sleep_until(self.deadline) => Chunk::Broken(format!(
                "the reply passed its time limit of {} s (KERF_MAX_RUN_SECONDS); what arrived is kept",
                self.max_duration.as_secs()
            )),
            r = read => match r {
                Err(_) => Chunk::Idle(self.idle),
                Ok(Err(e)) => Chunk::Broken(describe(&e)),
                Ok(Ok(None)) => Chunk::End,
                Ok(Ok(Some(mut b))) => {
                    let len = b.len() as u64;
                    if len > self.room {
                        // Kerf's limit, not the transport's: crossing it keeps what arrived (a
                        // cut reply) instead of failing the read.
                        b.truncate(self.room as usize);
                        self.after = Some(Chunk::TooLarge(self.max_bytes >> 20));
                    }
                    self.room -= b.len() as u64;
                    if b.is_empty() {
                        return self.after.take().unwrap_or(Chunk::End);
                    }
                    Chunk::Bytes(b)
                }
            },
        }
    }

    /// The body as a stream of byte chunks, ending at its end; a cancellation, a stall or a
    /// break ends it with that [`Chunk`] as the error.
    pub fn into_stream(
        self,
        cancel: &CancelToken,
    ) -> impl futures_util::Stream<Item = std::result::Result<Bytes, Chunk>> + '_ {
        futures_util::stream::unfold(Some(self), move |state| async move {
            let mut resp = state?;
            match resp.next_chunk(cancel).await {
                Chunk::Bytes(b) => Some((Ok(b), Some(resp))),
                Chunk::End => None,
                stop => Some((Err(stop), None)),
            }
        })
    }

    /// The whole body (a non-streamed reply), failing on a cut, a gap or a cancellation.
    pub async fn read_to_end(&mut self, cancel: &CancelToken) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            match self.next_chunk(cancel).await {
                Chunk::Bytes(b) => out.extend_from_slice(&b),
                Chunk::End => return Ok(out),
                Chunk::Cancelled => return Err(Error::Cancelled),
                Chunk::Idle(d) => {
                    return Err(Error::Timeout(format!(
                        "the reply stalled: no byte for {} s",
                        d.as_secs_f64()
                    )));
                }
                Chunk::Broken(e) => {
                    return Err(Error::Network(format!("the reply broke off: {e}")));
                }
                // A whole (non-streamed) body cut short cannot be read as JSON at all.
                too_large @ Chunk::TooLarge(_) => {
                    return Err(Error::Protocol(too_large.to_string()));
                }
            }
        }
    }
}

/// The process's client for `config`'s connect timeout (in practice one: every provider uses
/// the default). Clients are pools: sharing one is what keeps connections alive across runs.
pub(crate) fn client(config: &HttpConfig) -> Result<reqwest::Client> {
    static CLIENTS: OnceLock<Mutex<HashMap<Duration, reqwest::Client>>> = OnceLock::new();
    let clients = CLIENTS.get_or_init(Default::default);
    let mut clients = clients.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = clients.get(&config.connect_timeout) {
        return Ok(c.clone());
    }
    // rustls on ring (already built for the rest of the tree); installed once per process, and
    // an app that installed its own first keeps it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let c = reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .user_agent(concat!("kerf/", env!("CARGO_PKG_VERSION")))
        // Redirects are not followed: the request carries the key (in `Authorization`,
        // `x-api-key` or `x-goog-api-key`), and another host's answer is not the model's reply.
        // A 3xx comes back as an HTTP error naming its status.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| Error::Network(format!("the HTTP client cannot start: {e}")))?;
    clients.insert(config.connect_timeout, c.clone());
    Ok(c)
}

/// `GET url` with `headers`, once (no retries: what asks is optional), answered within 10 s and
/// 1 MiB, as JSON: a small document a server describes itself with (`/models`).
pub async fn get_json(
    config: &HttpConfig,
    url: &str,
    headers: &[(String, String)],
) -> Result<serde_json::Value> {
    const AT_MOST: usize = 1 << 20;
    let client = client(config)?;
    let mut r = client.get(url);
    for (k, v) in headers {
        if !k.eq_ignore_ascii_case("content-type") {
            r = r.header(k.as_str(), v.as_str());
        }
    }
    let read = async {
        let mut resp = r.send().await.map_err(|e| Error::Network(describe(&e)))?;
        if !resp.status().is_success() {
            return Err(Error::Protocol(format!("GET {url}: {}", resp.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| Error::Network(describe(&e)))?
        {
            if body.len() + chunk.len() > AT_MOST {
                return Err(Error::Protocol(format!("GET {url}: more than 1 MiB")));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| Error::Protocol(format!("GET {url}: {e}")))
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .map_err(|_| Error::Network(format!("GET {url}: no answer within 10 s")))?
}

/// An attempt that got no 2xx response.
#[derive(Debug)]
enum Failure {
    /// The server answered with an error status.
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// No response. `never_sent`: the request certainly did not reach the server (the
    /// connection was never made), so sending it again cannot buy a second reply.
    Transport {
        message: String,
        timeout: bool,
        never_sent: bool,
    },
}

impl Failure {
    fn retryable(&self, config: &HttpConfig) -> bool {
        match self {
            Failure::Status {
                status,
                retry_after,
                ..
            } => retried_status(*status) && retry_after.is_none_or(|a| a <= config.retry_after_max),
            Failure::Transport { never_sent, .. } => *never_sent,
        }
    }

    fn why(&self) -> String {
        match self {
            Failure::Status {
                status, message, ..
            } => format!("HTTP {status}: {message}"),
            Failure::Transport { message, .. } => message.clone(),
        }
    }

    /// The error a caller sees, after `retries` retries.
    fn into_error(self, url: &str, retries: u32, config: &HttpConfig) -> Error {
        let tried = if retries > 0 {
            format!(" (after {retries} retries)")
        } else {
            String::new()
        };
        match self {
            Failure::Status {
                status,
                message,
                retry_after: Some(a),
            } if a > config.retry_after_max && retried_status(status) => Error::Http {
                status,
                message: format!(
                    "{message} (the server asks to retry after {} s, longer than Kerf waits)",
                    a.as_secs()
                ),
            },
            Failure::Status {
                status, message, ..
            } => Error::Http {
                status,
                message: format!("{message}{tried}"),
            },
            Failure::Transport {
                message,
                timeout: true,
                ..
            } => Error::Timeout(format!("{url}: {message}{tried}")),
            Failure::Transport { message, .. } => {
                Error::Network(format!("{url}: {message}{tried}"))
            }
        }
    }
}

/// Statuses worth asking again: rate limited, or the server's own failure.
fn retried_status(status: u16) -> bool {
    status == 429 || status >= 500
}

/// How a connection that was never made reads (the request did not go out).
const UNREACHABLE: &str = "connection refused or unreachable";

/// Whether `e` is a request that never reached the server: its connection refused or the host
/// unreachable, after any retries. A provider that answers only this is down: it counts as a
/// refusal, as a 429 or a 503 does.
pub fn never_reached(e: &Error) -> bool {
    matches!(e, Error::Network(m) if m.contains(UNREACHABLE))
}

/// What reqwest's error means to a user: its source chain (the callers name the URL), or its
/// own text when it has no source.
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return format!("timed out ({})", source_chain(e));
    }
    if e.is_connect() {
        return format!("{UNREACHABLE} ({})", source_chain(e));
    }
    source_chain(e)
}

fn source_chain(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = cur {
        parts.push(s.to_string());
        cur = s.source();
    }
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
    }
}

/// One attempt: the request, and either its 2xx head or why not.
async fn attempt(
    client: &reqwest::Client,
    config: &HttpConfig,
    req: &HttpRequest,
    cancel: &CancelToken,
    deadline: Instant,
) -> std::result::Result<Response, Failure> {
    let mut r = client.post(&req.url).body(req.body.clone());
    for (k, v) in &req.headers {
        r = r.header(k.as_str(), v.as_str());
    }
    // The run's deadline is checked by `post`, which races every attempt and wait against it.
    let resp = match tokio::time::timeout(config.first_byte_timeout, r.send()).await {
        Err(_) => {
            return Err(Failure::Transport {
                message: format!(
                    "timed out (no response within {} s)",
                    config.first_byte_timeout.as_secs_f64()
                ),
                timeout: true,
                never_sent: false,
            });
        }
        Ok(Err(e)) => {
            return Err(Failure::Transport {
                message: describe(&e),
                timeout: e.is_timeout(),
                // A connect error (refused, unreachable, DNS, the TLS handshake) happened
                // before the request went out. A reset or a closed connection after it did may
                // mean the provider received (and bills) it: those are not retried.
                never_sent: e.is_connect(),
            });
        }
        Ok(Ok(resp)) => resp,
    };
    let headers: Vec<(String, String)> = resp
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let status = resp.status().as_u16();
    let content_type = header("content-type").unwrap_or_default();
    // OpenAI's `retry-after-ms` is the finer of the two, where it is sent.
    let asked_wait = header("retry-after-ms")
        .as_deref()
        .and_then(retry_after_ms)
        .or_else(|| header("retry-after").as_deref().and_then(retry_after));
    let mut out = Response {
        status,
        content_type,
        retries: Vec::new(),
        headers,
        inner: resp,
        idle: config.idle_timeout,
        deadline,
        max_duration: config.max_duration,
        room: config.max_reply_bytes,
        max_bytes: config.max_reply_bytes,
        after: None,
    };
    if (200..300).contains(&status) {
        return Ok(out);
    }
    // An error body: at most 64 KiB of it, within the idle timeout.
    out.room = out.room.min(64 * 1024);
    let mut body = Vec::new();
    while let Chunk::Bytes(b) = out.next_chunk(cancel).await {
        body.extend_from_slice(&b);
    }
    Err(Failure::Status {
        status,
        message: error_message(&body),
        retry_after: asked_wait,
    })
}

/// Send `req`, retrying where that is safe, and return the 2xx response with its body still
/// streaming; `on_retry` hears about each retry before its wait. A cancellation at any point
/// (connecting, waiting for the head, between retries) returns [`Error::Cancelled`].
pub async fn post(
    config: &HttpConfig,
    req: &HttpRequest,
    cancel: &CancelToken,
    on_retry: &mut dyn FnMut(&Retry),
) -> Result<Response> {
    let client = client(config)?;
    // One deadline for the whole run: every attempt, every wait between attempts and the reply
    // that finally streams share it, so retries cannot multiply the time limit.
    let deadline = Instant::now() + config.max_duration;
    let retries = RefCell::new(Vec::<Retry>::new());
    let backoff = ExponentialBuilder::default()
        .with_min_delay(config.backoff_base)
        .with_max_delay(config.backoff_max)
        .with_factor(2.0)
        .with_max_times(config.max_retries as usize)
        .with_jitter();
    let sending = (|| attempt(&client, config, req, cancel, deadline))
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(|f: &Failure| f.retryable(config))
        // The server's own `Retry-After` replaces the computed delay; `None` (no retries
        // left) stays `None`.
        .adjust(|f: &Failure, delay: Option<Duration>| {
            delay.map(|d| match f {
                Failure::Status {
                    retry_after: Some(a),
                    ..
                } => *a,
                _ => d,
            })
        })
        .notify(|f: &Failure, delay: Duration| {
            let r = Retry {
                attempt: retries.borrow().len() as u32 + 1,
                delay,
                why: f.why(),
                refused: matches!(f, Failure::Status { status, .. } if is_refusal(*status))
                    || matches!(
                        f,
                        Failure::Transport {
                            never_sent: true,
                            ..
                        }
                    ),
            };
            on_retry(&r);
            retries.borrow_mut().push(r);
        });
    let outcome = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(Error::Cancelled),
        () = tokio::time::sleep_until(deadline) => {
            let retries = retries.borrow();
            let tried = match retries.last() {
                Some(last) => format!(
                    " after {} retries (the last for {})",
                    retries.len(),
                    last.why
                ),
                None => String::new(),
            };
            return Err(Error::Timeout(format!(
                "{}: no reply within the run's time limit of {} s (KERF_MAX_RUN_SECONDS){tried}",
                req.url,
                config.max_duration.as_secs_f64()
            )));
        }
        r = sending => r,
    };
    match outcome {
        Ok(mut resp) => {
            resp.retries = retries.take();
            Ok(resp)
        }
        Err(f) => Err(f.into_error(&req.url, retries.borrow().len() as u32, config)),
    }
}

/// `retry-after-ms` (OpenAI's): milliseconds.
pub fn retry_after_ms(value: &str) -> Option<Duration> {
    let ms = value.trim().parse::<f64>().ok()?;
    (ms.is_finite() && ms >= 0.0)
        .then(|| Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(Duration::MAX))
}

/// `Retry-After` as seconds or an HTTP date.
pub fn retry_after(value: &str) -> Option<Duration> {
    let v = value.trim();
    if let Ok(s) = v.parse::<f64>() {
        // `try_from`: a huge number (`1e20`) does not fit a Duration and must not panic; it
        // reads as "longer than anyone waits", which the caller compares with its own cap.
        return (s.is_finite() && s >= 0.0)
            .then(|| Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// What an error body says: the provider's `error.message` (OpenAI, Anthropic and Gemini all
/// use that shape), else the text with markup stripped, shortened.
pub fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
        let e = v.get("error").unwrap_or(&v);
        let msg = e
            .get("message")
            .and_then(|m| m.as_str())
            .or_else(|| e.as_str())
            .or_else(|| v.get("detail").and_then(|d| d.as_str()));
        if let Some(m) = msg {
            let kind = e
                .get("type")
                .or_else(|| e.get("status"))
                .and_then(|t| t.as_str())
                .map(|t| format!(" ({t})"))
                .unwrap_or_default();
            return format!("{m}{kind}");
        }
        return shorten(&v.to_string());
    }
    // Not JSON: an HTML page from a proxy or gateway, or plain text.
    let mut plain = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                plain.push(' ');
            }
            _ if !in_tag => plain.push(c),
            _ => {}
        }
    }
    let words = plain.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.is_empty() {
        "(empty body)".into()
    } else {
        format!("(not JSON) {}", shorten(&words))
    }
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 300 {
        format!("{}…", s.chars().take(300).collect::<String>())
    } else {
        s.to_string()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        let past = "Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(retry_after(past), Some(Duration::ZERO));
        assert_eq!(retry_after("soon"), None);
    }

    #[test]
    fn error_bodies_become_messages() {
        let openai = br#"{"error":{"message":"Invalid schema","type":"invalid_request_error"}}"#;
        assert_eq!(
            error_message(openai),
            "Invalid schema (invalid_request_error)"
        );
        let gemini = br#"{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}"#;
        assert_eq!(error_message(gemini), "bad (INVALID_ARGUMENT)");
        let html = b"<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>";
        assert_eq!(
            error_message(html),
            "(not JSON) 502 Bad Gateway 502 Bad Gateway"
        );
        assert_eq!(error_message(b""), "(empty body)");
    }
}
