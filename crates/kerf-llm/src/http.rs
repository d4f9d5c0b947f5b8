//! The transport every cloud provider shares: one POST, streamed, with the behaviour a run
//! needs — timeouts for connecting, for the first byte and for idle gaps between chunks; bounded
//! retries with exponential backoff and jitter on connect errors, 429 and 5xx (honouring
//! `Retry-After`); cancellation at any moment; and error bodies turned into a message that names
//! the HTTP status and what the provider said.
//!
//! The request runs on a worker thread that hands body chunks over a channel, so the caller can
//! stop waiting the moment a run is cancelled or a gap outlasts the idle timeout, whatever the
//! socket is doing. Retries happen only before any reply byte has been taken: a reply that
//! started and then failed is the caller's to report, never silently re-bought.

use std::io::Read;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

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
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// A `Retry-After` longer than this is not waited out: the error says what the server asked.
    pub retry_after_max: Duration,
    /// The most reply bytes read (after decompression): past it the reply is cut there, as a
    /// broken stream with what arrived kept. `KERF_MAX_REPLY_MIB` (default 64).
    pub max_reply_bytes: u64,
    /// The longest a reply may take from its first byte: past it the reply is cut there (a
    /// server sending one byte a minute would otherwise hold a run forever).
    /// `KERF_MAX_RUN_SECONDS` (default 600).
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
    pub body: Vec<u8>,
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
}

/// A successful (2xx) response whose body is still arriving.
pub struct Response {
    pub status: u16,
    pub content_type: String,
    /// The retries it took to get here.
    pub retries: Vec<Retry>,
    body: Body,
}

/// The next piece of a streamed body.
#[derive(Debug, PartialEq)]
pub enum Chunk {
    Bytes(Vec<u8>),
    /// The body ended normally.
    End,
    Cancelled,
    /// No byte for longer than the idle timeout.
    Idle(Duration),
    /// The connection broke mid-body.
    Broken(String),
}

enum Msg {
    Head {
        status: u16,
        content_type: String,
        retry_after: Option<String>,
    },
    Bytes(Vec<u8>),
    End,
    Failed(String, bool),
}

struct Body {
    rx: Receiver<Msg>,
    idle: Duration,
    /// When the reply must be over (`HttpConfig::max_duration` from its head).
    deadline: Instant,
    max_duration: Duration,
}

/// How often a wait looks at the cancel token.
const POLL: Duration = Duration::from_millis(25);

impl Body {
    fn next(&mut self, cancel: &CancelToken) -> Chunk {
        let start = Instant::now();
        loop {
            if cancel.is_cancelled() {
                return Chunk::Cancelled;
            }
            if Instant::now() >= self.deadline {
                return Chunk::Broken(format!(
                    "the reply passed its time limit of {} s (KERF_MAX_RUN_SECONDS); what arrived is kept",
                    self.max_duration.as_secs()
                ));
            }
            match self.rx.recv_timeout(POLL) {
                Ok(Msg::Bytes(b)) => return Chunk::Bytes(b),
                Ok(Msg::End) => return Chunk::End,
                Ok(Msg::Failed(e, _)) => return Chunk::Broken(e),
                Ok(Msg::Head { .. }) => return Chunk::Broken("a second response head".into()),
                Err(RecvTimeoutError::Disconnected) => return Chunk::End,
                Err(RecvTimeoutError::Timeout) if start.elapsed() >= self.idle => {
                    return Chunk::Idle(self.idle);
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// The rest of the body (an error body), at most `limit` bytes and within the idle timeout.
    fn read_all(&mut self, cancel: &CancelToken, limit: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while out.len() < limit {
            match self.next(cancel) {
                Chunk::Bytes(b) => out.extend(b),
                _ => break,
            }
        }
        out.truncate(limit);
        out
    }
}

impl Response {
    pub fn next_chunk(&mut self, cancel: &CancelToken) -> Chunk {
        self.body.next(cancel)
    }

    /// The whole body (a non-streamed reply), failing on a cut, a gap or a cancellation.
    pub fn read_to_end(&mut self, cancel: &CancelToken) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            match self.next_chunk(cancel) {
                Chunk::Bytes(b) => out.extend(b),
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
            }
        }
    }
}

fn agent(config: &HttpConfig) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(config.connect_timeout))
        .timeout_recv_response(Some(config.first_byte_timeout))
        // The socket's own limit, so an abandoned worker thread ends; the caller's idle wait
        // (same length) is what the user sees.
        .timeout_per_read(Some(config.idle_timeout + Duration::from_secs(1)))
        .user_agent(concat!("kerf/", env!("CARGO_PKG_VERSION")))
        // Redirects are not followed: the request carries the key (in `Authorization`,
        // `x-api-key` or `x-goog-api-key`), and another host's answer is not the model's reply.
        // A 3xx comes back as an HTTP error naming its status.
        .max_redirects(0)
        .build()
        .new_agent()
}

/// Start one attempt on a worker thread; it reads at most `max_bytes` of the body.
fn start(agent: &ureq::Agent, req: &HttpRequest, max_bytes: u64) -> Receiver<Msg> {
    let (tx, rx) = mpsc::sync_channel(64);
    let agent = agent.clone();
    let req = req.clone();
    thread::spawn(move || {
        let mut r = agent.post(&req.url);
        for (k, v) in &req.headers {
            r = r.header(k.as_str(), v.as_str());
        }
        let resp = match r.send(&req.body[..]) {
            Ok(resp) => resp,
            Err(e) => {
                let _ = tx.send(Msg::Failed(describe(&e), never_sent(&e)));
                return;
            }
        };
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let head = Msg::Head {
            status: resp.status().as_u16(),
            content_type: header("content-type").unwrap_or_default(),
            retry_after: header("retry-after"),
        };
        if tx.send(head).is_err() {
            return;
        }
        // Unlimited in ureq: the limit is Kerf's (`max_bytes`), and crossing it keeps what
        // arrived (a cut reply) instead of failing the read.
        let mut reader = resp.into_body().into_reader();
        let mut buf = vec![0u8; 16 * 1024];
        let mut total = 0u64;
        loop {
            match reader.read(&mut buf) {
                Ok(0) => {
                    let _ = tx.send(Msg::End);
                    return;
                }
                Ok(n) => {
                    let room = max_bytes.saturating_sub(total);
                    let take = (n as u64).min(room) as usize;
                    total += take as u64;
                    if take > 0 && tx.send(Msg::Bytes(buf[..take].to_vec())).is_err() {
                        return;
                    }
                    if take < n {
                        let _ = tx.send(Msg::Failed(
                            format!(
                                "the reply passed the {} MiB limit (KERF_MAX_REPLY_MIB); what arrived before it is kept",
                                max_bytes >> 20
                            ),
                            false,
                        ));
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Msg::Failed(e.to_string(), false));
                    return;
                }
            }
        }
    });
    rx
}

fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(t) => format!("timed out ({t})"),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::ConnectionFailed => "connection refused or unreachable".into(),
        other => other.to_string(),
    }
}

/// Sleep `d`, waking early for a cancellation.
fn wait(d: Duration, cancel: &CancelToken) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if cancel.is_cancelled() {
            return false;
        }
        thread::sleep(POLL.min(end.saturating_duration_since(Instant::now())));
    }
    !cancel.is_cancelled()
}

/// The delay before retry `attempt` (1-based): exponential, capped, with ±25% jitter so clients
/// that failed together do not retry together.
pub fn backoff(config: &HttpConfig, attempt: u32) -> Duration {
    let exp = config
        .backoff_base
        .saturating_mul(1u32 << (attempt.saturating_sub(1)).min(16));
    let capped = exp.min(config.backoff_max);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    // A cheap, well-mixed fraction in [0.75, 1.25).
    let mix =
        (u64::from(nanos).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as f64 / (1u64 << 24) as f64;
    capped.mul_f64(0.75 + mix / 2.0)
}

/// Whether a failure certainly happened before the request reached the server, so sending it
/// again cannot make a second paid request. A reset, a broken pipe or a closed connection after
/// the request went out may mean the provider received (and bills) it: those are not retried.
fn never_sent(e: &ureq::Error) -> bool {
    use std::io::ErrorKind;
    match e {
        ureq::Error::ConnectionFailed
        | ureq::Error::HostNotFound
        | ureq::Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve) => true,
        ureq::Error::Io(io) => matches!(
            io.kind(),
            ErrorKind::ConnectionRefused
                | ErrorKind::AddrNotAvailable
                | ErrorKind::NetworkUnreachable
                | ErrorKind::HostUnreachable
                | ErrorKind::NotFound
        ),
        _ => false,
    }
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

/// Send `req`, retrying where that is safe, and return the 2xx response with its body still
/// streaming; `on_retry` hears about each retry before its wait.
pub fn post(
    config: &HttpConfig,
    req: &HttpRequest,
    cancel: &CancelToken,
    on_retry: &mut dyn FnMut(&Retry),
) -> Result<Response> {
    let agent = agent(config);
    let mut retries = Vec::new();
    let mut attempt = 0u32;
    loop {
        let rx = start(&agent, req, config.max_reply_bytes);
        // The head: connect + first byte, both bounded by ureq; the wait watches cancellation.
        let head = loop {
            if cancel.is_cancelled() {
                return Err(Error::Cancelled);
            }
            match rx.recv_timeout(POLL) {
                Ok(m) => break m,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    break Msg::Failed("the connection closed without a response".into(), false);
                }
            }
        };
        let mut body = Body {
            rx,
            idle: config.idle_timeout,
            deadline: Instant::now() + config.max_duration,
            max_duration: config.max_duration,
        };
        let (why, delay) = match head {
            Msg::Head {
                status,
                content_type,
                ..
            } if (200..300).contains(&status) => {
                return Ok(Response {
                    status,
                    content_type,
                    retries,
                    body,
                });
            }
            Msg::Head {
                status,
                retry_after: ra,
                ..
            } => {
                let message = error_message(&body.read_all(cancel, 64 * 1024));
                let retryable = status == 429 || status >= 500;
                if !retryable || attempt >= config.max_retries {
                    let tried = if attempt > 0 {
                        format!(" (after {} retries)", attempt)
                    } else {
                        String::new()
                    };
                    return Err(Error::Http {
                        status,
                        message: format!("{message}{tried}"),
                    });
                }
                let asked = ra.as_deref().and_then(retry_after);
                if let Some(a) = asked
                    && a > config.retry_after_max
                {
                    return Err(Error::Http {
                        status,
                        message: format!(
                            "{message} (the server asks to retry after {} s, longer than Kerf waits)",
                            a.as_secs()
                        ),
                    });
                }
                let delay = asked.unwrap_or_else(|| backoff(config, attempt + 1));
                (format!("HTTP {status}: {message}"), delay)
            }
            Msg::Failed(e, connect) => {
                if !connect || attempt >= config.max_retries {
                    let tried = if attempt > 0 {
                        format!(" (after {} retries)", attempt)
                    } else {
                        String::new()
                    };
                    return Err(if e.starts_with("timed out") {
                        Error::Timeout(format!("{}: {e}{tried}", req.url))
                    } else {
                        Error::Network(format!("{}: {e}{tried}", req.url))
                    });
                }
                (e, backoff(config, attempt + 1))
            }
            Msg::Bytes(_) | Msg::End => {
                return Err(Error::Network(format!(
                    "{}: a body before its head",
                    req.url
                )));
            }
        };
        attempt += 1;
        let r = Retry {
            attempt,
            delay,
            why,
        };
        on_retry(&r);
        retries.push(r);
        if !wait(delay, cancel) {
            return Err(Error::Cancelled);
        }
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
    fn backoff_grows_and_is_capped() {
        let c = HttpConfig::default();
        for attempt in 1..10 {
            let d = backoff(&c, attempt);
            let nominal = c
                .backoff_base
                .saturating_mul(1 << (attempt - 1))
                .min(c.backoff_max);
            assert!(
                d >= nominal.mul_f64(0.75) && d < nominal.mul_f64(1.25),
                "{attempt}: {d:?}"
            );
        }
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
