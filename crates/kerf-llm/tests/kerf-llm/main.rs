//! Cloud providers against a loopback HTTP server that replays transcripts in each provider's
//! documented streaming format: complete replies, budget cut-offs, streams cut mid-chunk, 429s
//! with `Retry-After`, 500s, a first byte too slow, malformed event streams, HTML error bodies.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

mod concurrency;
mod server;

use std::time::{Duration, Instant};

use kerf_llm::cloud::CloudProvider;
use kerf_llm::http::HttpConfig;
use kerf_llm::providers::{Kind, ProviderDef, Structured};
use kerf_llm::secrets::{Key, KeySource};
use kerf_llm::{CancelToken, Constraint, Event, Finish, FinishReason, Provider, Request};
use serde_json::{Value, json};

use server::{Act, Server};

const PLANTED_KEY: &str = "sk-kerf-PLANTED-a1b2c3d4e5f6g7h8";

fn transcript(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kerf-llm/transcripts")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// How long a loopback test waits on its server before calling it broken: never reached by a
/// server that answers, however busy the machine (a thread off the CPU for a second or two must
/// not turn a success into a timeout).
const PATIENT: Duration = Duration::from_secs(30);

/// The timeout of the tests about timeouts, against a server that never sends what is awaited
/// (so only the timeout can end the wait).
const SHORT: Duration = Duration::from_millis(800);

/// A provider of `kind` pointed at the server, with the planted key, quick retries and patient
/// timeouts (the tests of timeouts set their own, short).
fn provider(server: &Server, kind: Kind) -> CloudProvider {
    let def = ProviderDef::new("replay", kind, Some(&server.base_url()), "test-model");
    let key = Key::new(PLANTED_KEY, KeySource::Env("KERF_TEST_KEYVAR".into()));
    let mut p = CloudProvider::with_key(def, Some(key));
    p.http = HttpConfig {
        connect_timeout: PATIENT,
        first_byte_timeout: PATIENT,
        idle_timeout: PATIENT,
        max_retries: 2,
        backoff_base: Duration::from_millis(50),
        backoff_max: Duration::from_millis(200),
        retry_after_max: Duration::from_secs(5),
        ..HttpConfig::default()
    };
    p
}

fn json_request() -> Request {
    let mut r = Request::new(Some("Extract."), "Chlorophyll is a green pigment.");
    r.max_tokens = 64;
    r.constraint = Constraint::Json(json!({
        "type": "array",
        "items": {"type": "object", "properties": {"entity": {"type": "string"}}, "required": ["entity"]}
    }));
    r
}

struct Ran {
    result: kerf_llm::Result<Finish>,
    text: String,
    warnings: Vec<String>,
}

fn run(p: &CloudProvider, req: &Request) -> Ran {
    run_with(p, req, &CancelToken::new())
}

fn run_with(p: &CloudProvider, req: &Request, cancel: &CancelToken) -> Ran {
    let mut text = String::new();
    let mut warnings = Vec::new();
    let result = p.run_blocking(req, cancel, &mut |e| match e {
        Event::Text(t) => text.push_str(t),
        Event::Warning(w) => warnings.push(w.to_string()),
    });
    Ran {
        result,
        text,
        warnings,
    }
}

/// Nothing a user can see carries the key: not the text, the warnings, the finish, the error.
fn assert_no_key(r: &Ran) {
    let all = format!(
        "{}\n{:?}\n{}",
        r.text,
        r.warnings,
        match &r.result {
            Ok(f) => serde_json::to_string(f).unwrap(),
            Err(e) => e.to_string(),
        }
    );
    assert!(!all.contains("PLANTED"), "the key leaked: {all}");
}

#[test]
fn a_complete_streamed_reply_arrives_whole_whatever_the_chunking() {
    let body = transcript("openai-complete.sse");
    // Chunks of 7 bytes: events, lines and UTF-8 characters split everywhere.
    let server = Server::start(vec![Act::sse(
        200,
        body.chunks(7).map(<[u8]>::to_vec).collect(),
    )]);
    let p = provider(&server, Kind::Openai);
    let r = run(&p, &json_request());
    let f = r.result.as_ref().unwrap();
    assert_eq!(f.reason, FinishReason::Stop);
    assert_eq!(
        r.text,
        "{\"type\":\"definition\",\"entity\":\"chlorophyll\",\"definition\":\"a green pigment — naïve café\"}\n{\"type\":\"definition\",\"entity\":\"glucose\",\"definition\":\"a sugar\"}\n"
    );
    assert_eq!(f.usage.prompt_tokens, 412);
    assert_eq!(f.usage.completion_tokens, 38);
    assert_eq!(f.usage.reasoning_tokens, Some(0));
    assert_eq!(shown(&f.details)["usage_source"], "provider");

    // What was sent: the strict json_schema (array root wrapped under `items`), the budget, the key.
    let sent = server.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/chat/completions");
    assert_eq!(
        sent[0].header("authorization").as_deref(),
        Some(format!("Bearer {PLANTED_KEY}").as_str())
    );
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 64);
    assert_eq!(body["response_format"]["type"], "json_schema");
    let js = &body["response_format"]["json_schema"];
    assert_eq!(js["strict"], true);
    assert_eq!(js["schema"]["required"], json!(["items"]));
    assert_eq!(js["schema"]["additionalProperties"], false);
    assert_eq!(shown(&f.details)["wrapped_in"], "items");
    assert_no_key(&r);
}

#[test]
fn a_budget_cut_is_length_and_keeps_the_text() {
    let server = Server::start(vec![Act::sse(200, vec![transcript("openai-length.sse")])]);
    let r = run(&provider(&server, Kind::Openai), &json_request());
    let f = r.result.unwrap();
    assert_eq!(f.reason, FinishReason::Length);
    assert!(r.text.ends_with("\"subject\":\"chloro"), "{}", r.text);
    assert_eq!(f.usage.completion_tokens, 32);
    assert_eq!(f.usage.reasoning_tokens, Some(12));
}

#[test]
fn refusals_and_content_filters_are_reported_as_such() {
    let server = Server::start(vec![
        Act::sse(200, vec![transcript("openai-refusal.sse")]),
        Act::sse(200, vec![transcript("openai-content-filter.sse")]),
    ]);
    let p = provider(&server, Kind::Openai);
    let r = run(&p, &json_request());
    assert_eq!(r.result.unwrap().reason, FinishReason::Refusal);
    assert_eq!(r.text, "I'm sorry, I can't help with that.");
    let r = run(&p, &json_request());
    assert_eq!(r.result.unwrap().reason, FinishReason::ContentFilter);
    assert_eq!(r.text, "{\"type\":\"definition\",");
}

#[test]
fn a_stream_cut_mid_chunk_is_interrupted_and_keeps_what_arrived() {
    let body = transcript("openai-complete.sse");
    // The connection drops inside the fourth event (chunked encoding never finished).
    let cut = String::from_utf8_lossy(&body).find("glucose").unwrap();
    let server = Server::start(vec![Act::sse(200, vec![body[..cut].to_vec()]).cut_off()]);
    let r = run(&provider(&server, Kind::Openai), &json_request());
    let f = r.result.unwrap();
    assert_eq!(f.reason, FinishReason::Interrupted);
    assert!(
        f.error.as_deref().unwrap().contains("broke off"),
        "{:?}",
        f.error
    );
    // The complete first object arrived and is kept.
    assert!(r.text.contains("\"entity\":\"chlorophyll\""), "{}", r.text);
    assert!(!r.text.contains("glucose"));
}

#[test]
fn a_429_with_retry_after_is_waited_out_then_succeeds() {
    let server = Server::start(vec![
        Act::status(
            429,
            "{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\"}}",
        )
        .header("retry-after", "1"),
        Act::sse(200, vec![transcript("openai-length.sse")]),
    ]);
    let t = Instant::now();
    let r = run(&provider(&server, Kind::Openai), &json_request());
    let f = r.result.unwrap();
    assert!(
        t.elapsed() >= Duration::from_secs(1),
        "Retry-After was not honoured"
    );
    assert_eq!(f.reason, FinishReason::Length);
    assert_eq!(shown(&f.details)["retries"].as_array().unwrap().len(), 1);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.starts_with("retry 1 in 1.0 s after HTTP 429: Rate limit reached")),
        "{:?}",
        r.warnings
    );
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn server_errors_are_retried_a_bounded_number_of_times() {
    let err = "{\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\"}}";
    let server = Server::start(vec![Act::status(500, err); 3]);
    let r = run(&provider(&server, Kind::Openai), &json_request());
    let e = r.result.unwrap_err();
    assert_eq!(e.code(), "http");
    let msg = e.to_string();
    assert!(
        msg.contains("HTTP 500")
            && msg.contains("The server had an error")
            && msg.contains("after 2 retries"),
        "{msg}"
    );
    assert_eq!(server.requests().len(), 3);
}

/// Security review, finding 3: a redirect carried `x-api-key` / `x-goog-api-key` to another host
/// (only `Authorization` was stripped), and that host's answer was recorded as the model's reply.
#[test]
fn a_redirect_is_not_followed_and_no_key_goes_to_another_host() {
    for kind in [Kind::Openai, Kind::Anthropic, Kind::Gemini] {
        let elsewhere = Server::start(vec![Act::sse(200, vec![transcript("openai-complete.sse")])]);
        let server = Server::start(vec![
            Act::status(307, "{}")
                .header("location", &format!("{}/v1/steal", elsewhere.base_url())),
        ]);
        let r = run(&provider(&server, kind), &json_request());
        let err = r.result.as_ref().map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("307"), "{kind:?}: {err}");
        assert!(
            r.text.is_empty(),
            "{kind:?}: another host's reply was taken: {}",
            r.text
        );
        assert_eq!(
            elsewhere.requests().len(),
            0,
            "{kind:?}: the redirect was followed"
        );
        assert_eq!(server.requests().len(), 1, "{kind:?}: a 3xx is not retried");
        assert_no_key(&r);
    }
}

/// Security review, finding 12: a `Retry-After` too large for a Duration (`1e20`) panicked.
#[test]
fn a_huge_retry_after_is_an_error_not_a_panic() {
    for asked in ["1e20", "18446744073709551616", "1e308"] {
        let server = Server::start(vec![
            Act::status(429, "{\"error\":{\"message\":\"Slow down\"}}")
                .header("retry-after", asked),
        ]);
        let r = run(&provider(&server, Kind::Openai), &json_request());
        let err = r.result.unwrap_err().to_string();
        assert!(
            err.contains("HTTP 429") && err.contains("longer than Kerf waits"),
            "{asked}: {err}"
        );
        assert_eq!(server.requests().len(), 1, "{asked}: it was retried");
    }
}

/// Security review, finding 13: a connection that failed after the request was sent was
/// retried, and the provider may have billed (and answered) the first one.
#[test]
fn a_request_that_may_have_been_received_is_not_sent_again() {
    let server = Server::start(vec![
        Act::hang_up(),
        Act::sse(200, vec![transcript("openai-complete.sse")]),
    ]);
    let r = run(&provider(&server, Kind::Openai), &json_request());
    let e = r.result.unwrap_err();
    assert_eq!(e.code(), "network", "{e}");
    assert_eq!(server.requests().len(), 1, "the request was sent twice");
    assert!(
        r.warnings.iter().all(|w| !w.starts_with("retry")),
        "{:?}",
        r.warnings
    );

    // Nothing listening: the request never left, so retrying is safe and happens. (The port
    // stays bound, not listening, until the test ends: no other test's server can take it.)
    let (_refusing, port) = server::refused_port();
    let mut p = provider(&server, Kind::Openai);
    p.def.base_url = format!("http://127.0.0.1:{port}");
    let r = run(&p, &json_request());
    let e = r.result.unwrap_err();
    assert!(e.to_string().contains("after 2 retries"), "{e}");
}

/// Security review, finding 12: usage counts past `u32::MAX` overflowed when summed
/// (Anthropic's cache counts, Gemini's thoughts) and panicked.
#[test]
fn usage_counts_past_u32_are_held_at_the_maximum() {
    let huge = 9_007_199_254_740_991u64; // the largest integer JSON numbers carry exactly
    let anthropic = format!(
        "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":{huge},\"cache_read_input_tokens\":{huge},\"output_tokens\":1}}}}}}\n\n\
         event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n\
         event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"[]\"}}}}\n\n\
         event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\"}},\"usage\":{{\"output_tokens\":{huge}}}}}\n\n\
         event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
    );
    let gemini = format!(
        "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"[]\"}}],\"role\":\"model\"}},\"finishReason\":\"STOP\"}}],\"usageMetadata\":{{\"promptTokenCount\":{huge},\"candidatesTokenCount\":{huge},\"thoughtsTokenCount\":{huge}}}}}\n\n"
    );
    let openai = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"[]\"}},\"finish_reason\":\"stop\"}}]}}\n\n\
         data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":{huge},\"completion_tokens\":{huge},\"completion_tokens_details\":{{\"reasoning_tokens\":{huge}}}}}}}\n\n\
         data: [DONE]\n\n"
    );
    for (kind, body) in [
        (Kind::Anthropic, anthropic),
        (Kind::Gemini, gemini),
        (Kind::Openai, openai),
    ] {
        let server = Server::start(vec![Act::sse(200, vec![body.into_bytes()])]);
        let r = run(&provider(&server, kind), &json_request());
        let f = r.result.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(r.text, "[]", "{kind:?}");
        assert_eq!(
            (f.usage.prompt_tokens, f.usage.completion_tokens),
            (u32::MAX, u32::MAX),
            "{kind:?}"
        );
    }
}

#[test]
fn a_truncated_reply_is_never_retried() {
    let server = Server::start(vec![Act::sse(200, vec![transcript("openai-length.sse")])]);
    let r = run(&provider(&server, Kind::Openai), &json_request());
    assert_eq!(r.result.unwrap().reason, FinishReason::Length);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_first_byte_past_the_timeout_is_a_timeout_error() {
    // The server never answers: only the first-byte timeout can end the wait.
    let server = Server::start(vec![
        Act::sse(200, vec![transcript("openai-complete.sse")]).hold_head(),
    ]);
    let mut p = provider(&server, Kind::Openai);
    p.http.first_byte_timeout = SHORT;
    let t = Instant::now();
    let e = run(&p, &json_request()).result.unwrap_err();
    let waited = t.elapsed();
    assert_eq!(e.code(), "timeout", "{e}");
    // It waited the timeout, and not much more (the server would hold it for minutes).
    assert!(waited >= SHORT && waited < PATIENT, "waited {waited:?}");
    // The client then closed the connection, and the request (which may have been received)
    // was not sent again. (Once the server has seen the close, it has logged the request,
    // however late its thread ran.)
    assert!(
        server.clients_gone(1, PATIENT),
        "the connection stayed open"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_stalled_stream_is_interrupted_by_the_idle_timeout() {
    // The first event, then nothing (the reply stays open): only the idle timeout can end it.
    let body = transcript("openai-complete.sse");
    let first = String::from_utf8_lossy(&body).find("\n\n").unwrap() + 2;
    let server = Server::start(vec![
        Act::sse(200, vec![body[..first].to_vec()]).hold_open(),
    ]);
    let mut p = provider(&server, Kind::Openai);
    p.http.idle_timeout = SHORT;
    let r = run(&p, &json_request());
    let f = r.result.unwrap();
    assert_eq!(f.reason, FinishReason::Interrupted);
    assert!(
        f.error.as_deref().unwrap().contains("stalled"),
        "{:?}",
        f.error
    );
}

/// Security review, finding 6: no bound on a reply's size (a 509 KB gzip body became a 524 MB
/// reply, 2.6 GB of memory) or on a run's duration (one byte every < 60 s kept a run alive
/// forever). Both now cut the reply there, keeping what arrived, with a reason naming the limit.
#[test]
fn a_reply_past_its_size_or_time_limit_is_cut_there_keeping_what_arrived() {
    // Size: a stream far larger than the limit.
    let piece = json!({"choices": [{"index": 0, "delta": {"content": "x".repeat(1000)}, "finish_reason": null}]});
    let event = format!("data: {piece}\n\n").into_bytes();
    let server = Server::start(vec![Act::sse(200, vec![event; 200])]);
    let mut p = provider(&server, Kind::Openai);
    p.http.max_reply_bytes = 20_000;
    let r = run(&p, &json_request());
    let f = r.result.unwrap();
    // Issue 36, item 14: Kerf's own limit is a finished (truncated) measurement with its own
    // reason, not a broken stream a resume would buy again.
    assert_eq!(f.reason, FinishReason::SizeLimit);
    assert!(f.reason.cut_short());
    assert_eq!(f.error, None);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("MiB limit") && w.contains("KERF_MAX_REPLY_MIB")),
        "{:?}",
        r.warnings
    );
    assert!(
        !r.text.is_empty() && r.text.len() < 20_000,
        "{}",
        r.text.len()
    );

    // Time: a steady trickle, each gap far inside the idle timeout, of a reply that never
    // ends (its finish never comes; the server then holds it open): only the time limit can
    // end the run, however fast or slow the machine.
    let body = transcript("openai-complete.sse");
    let unfinished = String::from_utf8_lossy(&body)
        .find("\"finish_reason\":\"stop\"")
        .unwrap();
    let unfinished = &body[..unfinished];
    let unfinished = &unfinished[..String::from_utf8_lossy(unfinished).rfind("\n\n").unwrap() + 2];
    let pieces: Vec<Vec<u8>> = unfinished.chunks(40).map(<[u8]>::to_vec).collect();
    let server = Server::start(vec![
        Act::sse(200, pieces)
            .gap(Duration::from_millis(150))
            .hold_open(),
    ]);
    let mut p = provider(&server, Kind::Openai);
    let limit = Duration::from_millis(700);
    p.http.max_duration = limit;
    let t = Instant::now();
    let r = run(&p, &json_request());
    let took = t.elapsed();
    let f = r.result.unwrap();
    assert_eq!(f.reason, FinishReason::Interrupted);
    let why = f.error.unwrap_or_default();
    assert!(
        why.contains("time limit") && why.contains("KERF_MAX_RUN_SECONDS"),
        "{why}"
    );
    // What arrived is kept: a start of the reply's text.
    assert!(
        format!("{CHLOROPHYLL}{GLUCOSE}").starts_with(&r.text),
        "{}",
        r.text
    );
    // Cut at the limit, not by the idle timeout (PATIENT, which would say "stalled").
    assert!(took >= limit && took < PATIENT, "{took:?}");
}

/// Issue 36, item 16: a 503 whose body trickles in was read for the whole time limit on every
/// attempt (26 s at a 5 s limit). The limit is the run's, across its retries.
#[test]
fn retries_share_the_runs_one_time_limit() {
    let err = b"{\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}";
    // Each attempt's error body arrives a byte at a time, for longer than the run's limit.
    let trickle = || {
        Act::sse(503, err.chunks(1).map(<[u8]>::to_vec).collect())
            .header("content-type", "application/json")
            .gap(Duration::from_millis(100))
    };
    let server = Server::start(vec![trickle(), trickle(), trickle()]);
    let mut p = provider(&server, Kind::Openai);
    p.http.max_duration = Duration::from_millis(1500);
    let r = run(&p, &json_request());
    let e = r.result.unwrap_err();
    assert_eq!(e.code(), "timeout", "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("time limit of 1.5 s") && msg.contains("KERF_MAX_RUN_SECONDS"),
        "{msg}"
    );
    // The first attempt used up the run's time: no second one was sent (on a machine too busy
    // to send even the first within the limit, none was).
    assert!(server.requests().len() <= 1, "{}", server.requests().len());
}

#[test]
fn malformed_event_streams_and_html_bodies_are_clear_errors() {
    let server = Server::start(vec![
        Act::sse(200, vec![b"data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\n<html><body>Proxy error</body></html>\n".to_vec()]),
        Act::sse(200, vec![b"data: {not json\n\n".to_vec()]),
        Act::status(403, "<html><head><title>403 Forbidden</title></head><body><h1>Forbidden</h1></body></html>")
            .header("content-type", "text/html"),
    ]);
    let p = provider(&server, Kind::Openai);
    let r = run(&p, &json_request());
    let f = r.result.unwrap();
    assert_eq!(f.reason, FinishReason::Interrupted);
    assert_eq!(r.text, "ok");
    let e = f.error.unwrap();
    assert!(
        e.contains("malformed event stream") && e.contains("line 3") && e.contains("<html>"),
        "{e}"
    );

    let f = run(&p, &json_request()).result.unwrap();
    assert_eq!(f.reason, FinishReason::Interrupted);
    assert!(
        f.error.as_deref().unwrap().contains("data is not JSON"),
        "{:?}",
        f.error
    );

    let e = run(&p, &json_request()).result.unwrap_err();
    assert_eq!(e.code(), "http");
    assert_eq!(
        e.to_string(),
        "HTTP 403: (not JSON) 403 Forbidden Forbidden"
    );
}

#[test]
fn a_key_the_server_echoes_back_is_redacted() {
    let echo = format!(
        "{{\"error\":{{\"message\":\"Incorrect API key provided: {PLANTED_KEY}. You can find your API key at …\",\"type\":\"invalid_request_error\"}}}}"
    );
    let server = Server::start(vec![Act::status(401, &echo)]);
    let r = run(&provider(&server, Kind::Openai), &json_request());
    let e = r.result.as_ref().unwrap_err();
    assert!(
        e.to_string()
            .contains("Incorrect API key provided: [redacted]"),
        "{e}"
    );
    assert_no_key(&r);
    assert!(!format!("{:?}", provider(&server, Kind::Openai)).contains("PLANTED"));
}

/// A server that echoes the key into the reply itself, split across stream events, and into
/// its `GET /models` answer (kept with each eval run): the text shown and kept, and the served
/// model, hold `[redacted]` where the key was — never six characters of it.
#[test]
fn a_key_echoed_into_the_reply_or_the_model_list_is_redacted() {
    let reply = format!("{{\"entity\": \"{PLANTED_KEY}\"}}\n");
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    for piece in reply.as_bytes().chunks(5) {
        let ev = json!({"choices": [{"index": 0, "delta": {"content": String::from_utf8_lossy(piece)}, "finish_reason": null}]});
        pieces.push(format!("data: {ev}\n\n").into_bytes());
    }
    let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 9}});
    pieces.push(format!("data: {end}\n\ndata: [DONE]\n\n").into_bytes());
    let models = json!({"object": "list", "data": [{"id": "test-model", "owned_by": PLANTED_KEY}]});
    let server = Server::start(vec![
        Act::sse(200, pieces),
        Act::status(200, &models.to_string()),
    ]);
    let p = provider(&server, Kind::Openai);
    let mut r = json_request();
    r.constraint = Constraint::None;
    let ran = run(&p, &r);
    assert!(ran.result.is_ok(), "{:?}", ran.result.as_ref().err());
    assert_eq!(ran.text, "{\"entity\": \"[redacted]\"}\n");
    assert_no_key(&ran);
    let served = kerf_llm::runtime::block_on(p.served_model()).unwrap();
    assert!(
        served.contains("[redacted]") && !served.contains("PLANTED"),
        "{served}"
    );
}

/// The usage event after a finished reply cannot be decoded (a count of `1e400`, usage nested
/// 100,000 deep): the reply and its finish reason stand (it once ended `interrupted`, and every
/// resume bought it again), its usage is unknown, with a warning. Counts written `10.0` or
/// `"10"` are 10 tokens (they were silently 0); `"ten"` is unknown, not 0.
#[test]
fn usage_that_cannot_be_read_is_unknown_and_the_reply_stands() {
    let data = |v: &Value| format!("data: {v}\n\n").into_bytes();
    let text = json!({"choices": [{"index": 0, "delta": {"content": "{\"entity\": \"x\"}"}, "finish_reason": null}]});
    let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    let nested = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let unreadable_events = [
        "data: {\"choices\": [], \"usage\": {\"prompt_tokens\": 5, \"completion_tokens\": 1e400}}\n\n".to_string(),
        format!("data: {{\"choices\": [], \"usage\": {{\"prompt_tokens\": {nested}}}}}\n\n"),
        String::from_utf8(data(
            &json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": "ten"}}),
        ))
        .unwrap(),
    ];
    for usage in unreadable_events {
        let body = vec![
            data(&text),
            data(&end),
            usage.into_bytes(),
            b"data: [DONE]\n\n".to_vec(),
        ];
        let server = Server::start(vec![Act::sse(200, body)]);
        let ran = run(&provider(&server, Kind::Openai), &json_request());
        let f = ran.result.as_ref().unwrap();
        assert_eq!(f.reason, FinishReason::Stop, "{:?}", f.error);
        assert_eq!(ran.text, "{\"entity\": \"x\"}");
        assert!(!f.usage_reported());
        assert!(
            shown(&f.details)["usage_source"]
                .as_str()
                .unwrap()
                .starts_with("unreadable ("),
            "{}",
            shown(&f.details)
        );
        assert!(
            ran.warnings
                .iter()
                .any(|w| w.contains("token usage could not be read")),
            "{:?}",
            ran.warnings
        );
    }
    for (prompt, completion) in [(json!(5.0), json!(10.0)), (json!("5"), json!("10"))] {
        let usage = json!({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}});
        let body = vec![
            data(&text),
            data(&end),
            data(&usage),
            b"data: [DONE]\n\n".to_vec(),
        ];
        let server = Server::start(vec![Act::sse(200, body)]);
        let ran = run(&provider(&server, Kind::Openai), &json_request());
        let f = ran.result.unwrap();
        assert!(f.usage_reported());
        assert_eq!((f.usage.prompt_tokens, f.usage.completion_tokens), (5, 10));
    }
}

/// The two records of `openai-complete.sse`'s reply.
const CHLOROPHYLL: &str = "{\"type\":\"definition\",\"entity\":\"chlorophyll\",\"definition\":\"a green pigment — naïve café\"}\n";
const GLUCOSE: &str =
    "{\"type\":\"definition\",\"entity\":\"glucose\",\"definition\":\"a sugar\"}\n";

/// The OpenAI transcript up to its chlorophyll record, one event per chunk, and then nothing:
/// the reply stays open, mid-stream, until the client goes away (glucose never comes). A run
/// against it ends only when the client ends it (or at the idle timeout, [`PATIENT`]).
fn chlorophyll_then_silence() -> Server {
    let body = transcript("openai-complete.sse");
    let body = String::from_utf8_lossy(&body);
    let before = &body[..body.find("glucose").unwrap()];
    let before = &before[..before.rfind("\n\n").unwrap() + 2];
    let parts: Vec<Vec<u8>> = before
        .split_inclusive("\n\n")
        .map(|s| s.as_bytes().to_vec())
        .collect();
    Server::start(vec![Act::sse(200, parts).hold_open()])
}

#[test]
fn cancellation_mid_stream_keeps_the_text() {
    let server = chlorophyll_then_silence();
    let p = provider(&server, Kind::Openai);
    let cancel = CancelToken::new();
    // Another thread cancels (as the user's click would) once the chlorophyll record has been
    // shown: the reply is open and waiting on the network then, and only the cancel ends it.
    let (shown, seen) = std::sync::mpsc::channel();
    let c = cancel.clone();
    let canceller = std::thread::spawn(move || {
        seen.recv_timeout(server::HOLD_AT_MOST).ok()?;
        let at = Instant::now();
        c.cancel();
        Some(at)
    });
    let mut text = String::new();
    let result = p.run_blocking(&json_request(), &cancel, &mut |e| {
        if let Event::Text(t) = e {
            text.push_str(t);
            if text.contains(CHLOROPHYLL) {
                let _ = shown.send(());
            }
        }
    });
    let returned = Instant::now();
    drop(shown);
    let cancelled_at = canceller.join().unwrap();
    let f = result.unwrap();
    assert_eq!(f.reason, FinishReason::Cancelled, "{:?}", f.error);
    let cancelled_at = cancelled_at.expect("cancelled before the chlorophyll record arrived");
    // At once: a generous bound, which only a cancel that did nothing (the run then waits for
    // the idle timeout, PATIENT, or the server's hold) breaks.
    let took = returned.duration_since(cancelled_at);
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(text, CHLOROPHYLL);
    assert!(!text.contains("glucose"));
}

#[test]
fn a_rate_limit_the_api_announces_holds_back_the_next_requests() {
    // The API says: 1 request a minute. The first run learns it from its reply; the second
    // takes the minute's one request; the third waits its turn (here: until it is cancelled),
    // and the server never sees it.
    let announced = |a: Act| a.header("x-ratelimit-limit-requests", "1");
    let body = transcript("openai-complete.sse");
    let server = Server::start(vec![
        announced(Act::sse(200, vec![body.clone()])),
        announced(Act::sse(200, vec![body.clone()])),
        announced(Act::sse(200, vec![body])),
    ]);
    let mut p = provider(&server, Kind::Openai);
    // A name of its own: the learned limit is kept per (name, base URL) for the whole process,
    // and another test's server may get this port later (this one's listener is gone once its
    // acts are played): a "replay" provider there must not inherit a request a minute.
    p.def.name = "announces-a-limit".into();
    for _ in 0..2 {
        let f = run(&p, &json_request()).result.unwrap();
        assert_eq!(f.reason, FinishReason::Stop);
    }
    let cancel = CancelToken::new();
    let c = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        c.cancel();
    });
    let t = Instant::now();
    let f = run_with(&p, &json_request(), &cancel).result.unwrap();
    assert_eq!(f.reason, FinishReason::Cancelled);
    // The cancel ended the wait, not the minute's refill: a bound only a minute's wait breaks.
    assert!(t.elapsed() < PATIENT, "{:?}", t.elapsed());
    assert_eq!(
        server.requests().len(),
        2,
        "the held request was never sent"
    );
}

#[test]
fn dropping_a_run_stops_it_where_it_is() {
    // The caller stops waiting (a timeout of its own, a window closed): the future is dropped,
    // the request closed, and the text that arrived before is what the caller saw. Here the
    // caller stops once the chlorophyll record is shown, while the reply is still open.
    let server = chlorophyll_then_silence();
    let p = provider(&server, Kind::Openai);
    let req = json_request();
    let cancel = CancelToken::new();
    let shown = tokio::sync::Notify::new();
    let mut text = String::new();
    let t = Instant::now();
    let mut on_event = |e: Event<'_>| {
        if let Event::Text(t) = e {
            text.push_str(t);
            if text.contains(CHLOROPHYLL) {
                shown.notify_one();
            }
        }
    };
    let outcome = kerf_llm::runtime::block_on(async {
        let run = p.run(&req, &cancel, &mut on_event);
        tokio::select! {
            finish = run => Some(finish),
            () = shown.notified() => None,
        }
    });
    assert!(
        outcome.is_none(),
        "the run ended by itself before it was dropped: {outcome:?}"
    );
    // A safety net: by itself, the run would end only at the idle timeout (PATIENT).
    assert!(t.elapsed() < PATIENT, "{:?}", t.elapsed());
    assert_eq!(text, CHLOROPHYLL);
    // The request was closed: the server sees its client go.
    assert!(
        server.clients_gone(1, PATIENT),
        "the connection stayed open after the run was dropped"
    );
}

#[test]
fn a_server_that_ignores_stream_is_read_whole() {
    let whole = json!({
        "id": "chatcmpl-5", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"entity\":\"x\"}"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 5}
    });
    let server = Server::start(vec![
        Act::status(200, &whole.to_string()).header("content-type", "application/json"),
    ]);
    let r = run(&provider(&server, Kind::Openai), &json_request());
    let f = r.result.unwrap();
    assert_eq!(
        (f.reason, r.text.as_str()),
        (FinishReason::Stop, "{\"entity\":\"x\"}")
    );
    assert_eq!(shown(&f.details)["streamed"], false);
    assert_eq!(f.usage.completion_tokens, 5);
}

#[test]
fn modes_follow_the_configuration_and_the_probe() {
    let server = Server::start(vec![
        Act::sse(200, vec![transcript("openai-length.sse")]),
        Act::sse(200, vec![transcript("openai-length.sse")]),
    ]);
    let mut p = provider(&server, Kind::Openai);
    p.def.structured = Structured::JsonObject;
    p.def.max_completion_tokens = true;
    run(&p, &json_request()).result.unwrap();
    p.def.structured = Structured::None;
    run(&p, &json_request()).result.unwrap();
    let sent = server.requests();
    let a: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(a["response_format"], json!({"type": "json_object"}));
    assert_eq!(a["max_completion_tokens"], 64);
    assert!(a.get("max_tokens").is_none());
    let b: Value = serde_json::from_slice(&sent[1].body).unwrap();
    assert!(b.get("response_format").is_none());
}

#[test]
fn no_key_is_a_clear_error_naming_where_kerf_looked() {
    let mut def = ProviderDef::new("nokey", Kind::Anthropic, None, "m");
    def.key_env = Some("KERF_TEST_SURELY_UNSET".into());
    // Nothing in this test binary sets ANTHROPIC_API_KEY or stores a key for `nokey`.
    let e = CloudProvider::new(def).unwrap_err();
    assert_eq!(e.code(), "auth");
    let m = e.to_string();
    assert!(
        m.contains("kerf providers set-key nokey")
            && m.contains("$KERF_TEST_SURELY_UNSET or $ANTHROPIC_API_KEY"),
        "{m}"
    );
}

#[test]
fn anthropic_forced_tool_streams_the_tool_input_as_the_reply() {
    let body = transcript("anthropic-tool.sse");
    let server = Server::start(vec![Act::sse(
        200,
        body.chunks(11).map(<[u8]>::to_vec).collect(),
    )]);
    let mut p = provider(&server, Kind::Anthropic);
    p.def.structured = Structured::Tool;
    let r = run(&p, &json_request());
    let f = r.result.as_ref().unwrap();
    assert_eq!(f.reason, FinishReason::Stop);
    let v: Value = serde_json::from_str(&r.text).unwrap();
    assert_eq!(v["items"][0]["entity"], "chlorophyll");
    assert_eq!(shown(&f.details)["wrapped_in"], "items");
    assert_eq!(
        (f.usage.prompt_tokens, f.usage.completion_tokens),
        (472, 41)
    );

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/messages");
    assert_eq!(sent.header("x-api-key").as_deref(), Some(PLANTED_KEY));
    assert_eq!(
        sent.header("anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    let b: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(b["system"], "Extract.");
    assert_eq!(
        b["messages"],
        json!([{"role": "user", "content": "Chlorophyll is a green pigment."}])
    );
    assert_eq!(
        b["tool_choice"],
        json!({"type": "tool", "name": "kerf_reply"})
    );
    // A strict tool, its schema in Anthropic's subset: the array root wrapped, objects closed.
    let tool = &b["tools"][0];
    assert_eq!(tool["strict"], true);
    assert_eq!(tool["input_schema"]["properties"]["items"]["type"], "array");
    assert_eq!(tool["input_schema"]["additionalProperties"], false);
    assert_eq!(
        tool["input_schema"]["properties"]["items"]["items"]["additionalProperties"],
        false
    );
    assert_eq!(b["max_tokens"], 64);
    // No sampling parameter was set, so none was sent.
    assert!(
        b.get("temperature").is_none() && b.get("top_p").is_none(),
        "{b}"
    );
    assert!(b.get("output_config").is_none());
    assert_no_key(&r);
}

/// Issue 19: native structured outputs are `output_config.format` (generally available: no beta
/// header), with the schema rewritten into Anthropic's subset — rejected keywords moved into the
/// description where the model still reads them, `oneOf` as `anyOf`, objects closed, an array
/// root wrapped — and `auto` picks them on a current model.
#[test]
fn anthropic_native_outputs_send_output_config_with_the_schema_in_its_subset() {
    let server = Server::start(vec![Act::sse(
        200,
        vec![transcript("anthropic-native.sse")],
    )]);
    let mut p = provider(&server, Kind::Anthropic);
    p.def.model = "claude-sonnet-4-5".into();
    let mut req = json_request();
    req.temperature = Some(0.2);
    req.constraint = Constraint::Json(json!({
        "type": "array", "maxItems": 50,
        "items": {"oneOf": [
            {"type": "object", "description": "A term.", "properties": {
                "type": {"const": "definition"},
                "entity": {"type": "string", "minLength": 1, "maxLength": 80}},
             "required": ["type", "entity"]},
            {"type": "object", "properties": {
                "type": {"const": "relationship"},
                "weight": {"type": "number", "minimum": 0, "maximum": 1}},
             "required": ["type"]}
        ]}
    }));
    let r = run(&p, &req);
    let f = r.result.as_ref().unwrap();
    assert_eq!(f.reason, FinishReason::Stop);
    let v: Value = serde_json::from_str(&r.text).unwrap();
    assert_eq!(v["items"][0]["entity"], "chlorophyll");
    let d = shown(&f.details);
    assert_eq!(d["structured"]["mode"], "json_schema");
    assert!(
        d["structured"]["why"].as_str().unwrap().contains("native"),
        "{d}"
    );
    assert_eq!(d["wrapped_in"], "items");

    let sent = &server.requests()[0];
    assert_eq!(sent.header("anthropic-beta"), None);
    let b: Value = serde_json::from_slice(&sent.body).unwrap();
    assert!(b.get("output_format").is_none() && b.get("tools").is_none());
    assert_eq!(b["temperature"], json!(0.2f32));
    let format = &b["output_config"]["format"];
    assert_eq!(format["type"], "json_schema");
    let items = &format["schema"]["properties"]["items"];
    assert_eq!(items["description"], "Constraints: maxItems: 50.");
    let branches = items["items"]["anyOf"].as_array().unwrap();
    assert!(items["items"].get("oneOf").is_none());
    assert_eq!(
        branches[0]["properties"]["entity"],
        json!({"type": "string", "description": "Constraints: minLength: 1; maxLength: 80."})
    );
    assert_eq!(branches[0]["description"], "A term.");
    assert_eq!(branches[0]["additionalProperties"], false);
    assert_eq!(
        branches[1]["properties"]["weight"]["description"],
        "Constraints: minimum: 0; maximum: 1."
    );
    // What was relaxed was said before sending.
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("minLength") && w.contains("description")),
        "{:?}",
        r.warnings
    );
}

/// Models from before native structured outputs keep the forced (strict) tool under `auto`.
#[test]
fn anthropic_auto_prefers_native_outputs_and_falls_back_to_the_tool_on_older_models() {
    let def = |model: &str| {
        let d = ProviderDef::new("a", Kind::Anthropic, None, model);
        CloudProvider::with_key(d, None).mode_for(&json_request().constraint)
    };
    assert_eq!(def("claude-opus-4-5").0, Structured::JsonSchema);
    assert_eq!(def("claude-haiku-4-5-20251001").0, Structured::JsonSchema);
    assert_eq!(def("claude-3-5-haiku-latest").0, Structured::Tool);
    assert_eq!(def("claude-sonnet-4-20250514").0, Structured::Tool);
}

#[test]
fn anthropic_max_tokens_is_length_and_stream_errors_keep_the_text() {
    let server = Server::start(vec![
        Act::sse(200, vec![transcript("anthropic-max-tokens.sse")]),
        Act::sse(200, vec![transcript("anthropic-overloaded.sse")]),
    ]);
    let mut p = provider(&server, Kind::Anthropic);
    p.def.structured = Structured::JsonSchema;
    let r = run(&p, &json_request());
    let f = r.result.unwrap();
    assert_eq!(f.reason, FinishReason::Length);
    assert!(r.text.ends_with("{\"type\":\"relation"));
    assert_eq!(
        (f.usage.prompt_tokens, f.usage.completion_tokens),
        (500, 32)
    );
    let sent = server.requests();
    assert_eq!(sent[0].header("anthropic-beta"), None);
    let b: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(b["output_config"]["format"]["type"], "json_schema");

    let r = run(&p, &json_request());
    let f = r.result.unwrap();
    assert_eq!(f.reason, FinishReason::Error);
    assert_eq!(r.text, "{\"type\":");
    assert!(f.error.unwrap().contains("Overloaded (overloaded_error)"));
}

/// Issue 19: Gemini takes JSON Schema itself through `responseJsonSchema` (`oneOf`, type arrays,
/// `additionalProperties` as written; only `const` becomes a one-value `enum`); the older
/// `responseSchema` rewrite is the `response_schema` mode. No temperature unless set; the
/// thinking budget goes in `thinkingConfig`.
#[test]
fn gemini_json_schema_by_default_and_response_schema_as_the_fallback() {
    let server = Server::start(vec![
        Act::sse(200, vec![transcript("gemini-json.sse")]),
        Act::sse(200, vec![transcript("gemini-max-tokens.sse")]),
    ]);
    let mut p = provider(&server, Kind::Gemini);
    let mut req = json_request();
    req.thinking_budget = Some(128);
    req.constraint = Constraint::Json(json!({
        "type": "array",
        "items": {"oneOf": [
            {"type": "object", "properties": {"type": {"const": "definition"}, "entity": {"type": "string"}, "note": {"type": ["string", "null"]}}, "required": ["type", "entity"], "additionalProperties": false}
        ]}
    }));
    let r = run(&p, &req);
    let f = r.result.as_ref().unwrap();
    assert_eq!(f.reason, FinishReason::Stop);
    let v: Value = serde_json::from_str(&r.text).unwrap();
    assert_eq!(v[0]["entity"], "chlorophyll");
    assert_eq!(f.usage.prompt_tokens, 455);
    assert_eq!(
        (f.usage.completion_tokens, f.usage.reasoning_tokens),
        (144, Some(120))
    );
    assert_eq!(shown(&f.details)["structured"]["mode"], "json_schema");
    // The one rewrite was said before sending.
    assert!(
        r.warnings.iter().any(|w| w.contains("const")),
        "{:?}",
        r.warnings
    );

    let sent = &server.requests()[0];
    assert_eq!(
        sent.path,
        "/models/test-model:streamGenerateContent?alt=sse"
    );
    assert_eq!(sent.header("x-goog-api-key").as_deref(), Some(PLANTED_KEY));
    let b: Value = serde_json::from_slice(&sent.body).unwrap();
    let g = &b["generationConfig"];
    assert_eq!(g["responseMimeType"], "application/json");
    assert_eq!(g["maxOutputTokens"], 64);
    assert_eq!(g["thinkingConfig"], json!({"thinkingBudget": 128}));
    assert!(
        g.get("temperature").is_none() && g.get("topP").is_none(),
        "{g}"
    );
    assert!(g.get("responseSchema").is_none());
    let branch = &g["responseJsonSchema"]["items"]["oneOf"][0];
    assert_eq!(
        branch["properties"]["type"],
        json!({"enum": ["definition"]})
    );
    assert_eq!(
        branch["properties"]["note"],
        json!({"type": ["string", "null"]})
    );
    assert_eq!(branch["additionalProperties"], false);
    assert_eq!(b["systemInstruction"]["parts"][0]["text"], "Extract.");

    // The fallback: `responseSchema`, rewritten into the OpenAPI subset.
    p.def.structured = Structured::ResponseSchema;
    let r = run(&p, &req);
    assert_eq!(r.result.as_ref().unwrap().reason, FinishReason::Length);
    assert!(r.text.ends_with("\"defin"));
    let b: Value = serde_json::from_slice(&server.requests()[1].body).unwrap();
    let g = &b["generationConfig"];
    assert!(g.get("responseJsonSchema").is_none());
    let branch = &g["responseSchema"]["items"]["anyOf"][0];
    assert_eq!(
        branch["properties"]["type"],
        json!({"enum": ["definition"]})
    );
    assert_eq!(
        branch["properties"]["note"],
        json!({"type": "string", "nullable": true})
    );
    assert!(branch.get("additionalProperties").is_none());
    assert_no_key(&r);
}

/// A run's details as the history and `--json` keep them (the shape other tools read).
fn shown(d: &kerf_llm::RunDetails) -> serde_json::Value {
    serde_json::to_value(d).unwrap()
}

/// Issue 19: sampling parameters go only when set (OpenAI's reasoning models refuse
/// `temperature` and `top_p`); reasoning effort goes as `reasoning_effort`; and a model that
/// refuses a parameter anyway gets an error naming it and the flag that set it.
#[test]
fn openai_sends_sampling_only_when_set_and_names_a_rejected_parameter() {
    let rejected = r#"{"error": {"message": "Unsupported parameter: 'temperature' is not supported with this model.", "type": "invalid_request_error", "param": "temperature", "code": "unsupported_parameter"}}"#;
    let server = Server::start(vec![
        Act::sse(200, vec![transcript("openai-complete.sse")]),
        Act::status(400, rejected),
    ]);
    let p = provider(&server, Kind::Openai);
    let mut req = json_request();
    req.reasoning_effort = Some(kerf_llm::ReasoningEffort::Low);
    let r = run(&p, &req);
    assert_eq!(r.result.unwrap().reason, FinishReason::Stop);
    let b: Value = serde_json::from_slice(&server.requests()[0].body).unwrap();
    assert!(
        b.get("temperature").is_none() && b.get("top_p").is_none(),
        "{b}"
    );
    assert_eq!(b["reasoning_effort"], "low");
    // A compatible server still gets `max_tokens`, what most of them read.
    assert_eq!(b["max_tokens"], 64);

    req.temperature = Some(0.0);
    let e = run(&p, &req).result.unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("rejected the parameter `temperature`") && m.contains("without --temperature"),
        "{m}"
    );
    let b: Value = serde_json::from_slice(&server.requests()[1].body).unwrap();
    assert_eq!(b["temperature"], 0.0);
}

/// OpenAI's own API gets `max_completion_tokens` without being told (its reasoning models refuse
/// `max_tokens`); a compatible server keeps `max_tokens` unless configured.
#[test]
fn max_completion_tokens_is_the_default_on_openais_own_api() {
    let own = ProviderDef::new("o", Kind::Openai, None, "gpt-5");
    assert!(own.is_openai_itself());
    let other = ProviderDef::new("v", Kind::Openai, Some("http://127.0.0.1:8000/v1"), "m");
    assert!(!other.is_openai_itself());
    let lookalike = ProviderDef::new(
        "x",
        Kind::Openai,
        Some("https://api.openai.com.evil.example/v1"),
        "m",
    );
    assert!(!lookalike.is_openai_itself());
}

/// A reply cut by its budget with no content, from a model that reasoned, says where the budget
/// went.
#[test]
fn a_length_finish_with_no_content_says_the_budget_went_to_reasoning() {
    let server = Server::start(vec![Act::sse(
        200,
        vec![transcript("openai-reasoning-length.sse")],
    )]);
    let p = provider(&server, Kind::Openai);
    let r = run(&p, &json_request());
    let f = r.result.as_ref().unwrap();
    assert_eq!(f.reason, FinishReason::Length);
    assert_eq!(f.usage.reasoning_tokens, Some(64));
    assert!(
        r.warnings
            .iter()
            .any(|w| w.starts_with("the budget went to reasoning: 64 of 64 tokens")),
        "{:?}",
        r.warnings
    );
}

/// Issue 19: the Responses API (`/responses`): chosen per provider (`api`) or, under `auto`, for
/// models only it serves; `input` and `instructions`, `max_output_tokens`, `text.format` with
/// the strict schema, `reasoning.effort`, nothing stored at OpenAI. Its events stream the text;
/// `response.completed` carries usage with reasoning tokens; `incomplete` at the budget is
/// `length`.
#[test]
fn the_responses_api_streams_text_format_replies_and_reports_reasoning() {
    let server = Server::start(vec![
        Act::sse(200, vec![transcript("openai-responses.sse")]),
        Act::sse(200, vec![transcript("openai-responses-incomplete.sse")]),
    ]);
    let mut p = provider(&server, Kind::Openai);
    p.def.model = "o3-pro".into();
    // `auto` sends OpenAI's Responses-only models there, on OpenAI's own API only.
    assert!(!p.def.responses_api());
    let own = ProviderDef::new("o", Kind::Openai, None, "o3-pro");
    assert!(own.responses_api());
    assert!(!ProviderDef::new("o", Kind::Openai, None, "gpt-4.1-mini").responses_api());
    p.def.api = kerf_llm::providers::Api::Responses;
    assert!(p.def.responses_api());
    let mut req = json_request();
    req.reasoning_effort = Some(kerf_llm::ReasoningEffort::High);
    let r = run(&p, &req);
    let f = r.result.as_ref().unwrap();
    assert_eq!(f.reason, FinishReason::Stop);
    assert_eq!(r.text, r#"{"items":[{"entity":"chlorophyll"}]}"#);
    assert_eq!(
        (
            f.usage.prompt_tokens,
            f.usage.completion_tokens,
            f.usage.reasoning_tokens
        ),
        (310, 412, Some(396))
    );
    let d = shown(&f.details);
    assert_eq!(
        (d["api"].as_str(), d["wrapped_in"].as_str()),
        (Some("responses"), Some("items"))
    );

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/responses");
    let b: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(b["instructions"], "Extract.");
    assert_eq!(
        b["input"],
        json!([{"role": "user", "content": "Chlorophyll is a green pigment."}])
    );
    assert_eq!(b["max_output_tokens"], 64);
    assert_eq!(b["store"], false);
    assert_eq!(b["reasoning"], json!({"effort": "high"}));
    assert!(
        b.get("temperature").is_none() && b.get("messages").is_none(),
        "{b}"
    );
    let format = &b["text"]["format"];
    assert_eq!(
        (format["type"].as_str(), format["strict"].as_bool()),
        (Some("json_schema"), Some(true))
    );
    assert_eq!(format["schema"]["properties"]["items"]["type"], "array");

    let r = run(&p, &req);
    let f = r.result.as_ref().unwrap();
    assert_eq!(f.reason, FinishReason::Length);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("the budget went to reasoning")),
        "{:?}",
        r.warnings
    );
    assert_no_key(&r);
}

/// `grammar` writes the reply's grammar into llama.cpp's `grammar` and vLLM's
/// `structured_outputs.grammar`; JSONL is held only that way, and only when configured or a
/// probe found the server honours it. (The grammar's writer is injected by the front ends:
/// llama.cpp's converter. The real server runs it in `a_real_llama_server_…`.)
#[test]
fn grammar_mode_sends_the_grammar_both_ways_and_holds_jsonl() {
    fn grammar(_: &Value, jsonl: bool) -> kerf_llm::Result<String> {
        Ok(if jsonl {
            "root ::= (item \"\\n\")+".into()
        } else {
            "root ::= object".into()
        })
    }
    let server = Server::start(vec![Act::sse(200, vec![transcript("openai-complete.sse")])]);
    let mut p = provider(&server, Kind::Openai);
    let mut req = json_request();
    req.constraint = Constraint::Jsonl(json!({"type": "object"}));
    // Not probed, not configured: JSONL runs unconstrained, and says why.
    let (mode, why) = p.mode_for(&req.constraint);
    assert_eq!(mode, Structured::None);
    assert!(why.contains("--structured grammar"), "{why}");
    // Configured without a writer: a clear error, nothing sent.
    p.def.structured = Structured::Grammar;
    let e = run(&p, &req).result.unwrap_err();
    assert!(e.to_string().contains("schema-to-grammar converter"), "{e}");
    assert!(server.requests().is_empty());
    p.grammar = Some(grammar);
    let r = run(&p, &req);
    assert_eq!(r.result.unwrap().reason, FinishReason::Stop);
    let b: Value = serde_json::from_slice(&server.requests()[0].body).unwrap();
    assert_eq!(b["grammar"], "root ::= (item \"\\n\")+");
    assert_eq!(b["structured_outputs"]["grammar"], b["grammar"]);
    assert!(b.get("response_format").is_none());

    // Anthropic and Gemini have no such mode.
    let a = ProviderDef::new("a", Kind::Anthropic, None, "claude-sonnet-4-5");
    let (mode, why) = CloudProvider::with_key(a, None).mode_for(&req.constraint);
    assert_eq!(mode, Structured::None);
    assert!(why.contains("no mode that holds JSONL"), "{why}");
}

/// OpenAI refuses `json_object` requests that never say "JSON": a warning on other servers.
#[test]
fn json_object_without_the_word_json_is_flagged_before_sending() {
    let server = Server::start(vec![Act::sse(200, vec![transcript("openai-complete.sse")])]);
    let mut p = provider(&server, Kind::Openai);
    p.def.structured = Structured::JsonObject;
    let r = run(&p, &json_request());
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("needs the word \"JSON\"")),
        "{:?}",
        r.warnings
    );
    let mut own = provider(&server, Kind::Openai);
    own.def.base_url = "https://api.openai.com/v1".into();
    own.def.structured = Structured::JsonObject;
    let e = run(&own, &json_request()).result.unwrap_err();
    assert!(e.to_string().contains("needs the word \"JSON\""), "{e}");
}

/// An OpenAI-compatible stream whose reply is `text`, ended on its own.
fn openai_reply(text: &str) -> Vec<Vec<u8>> {
    let content = serde_json::to_string(text).unwrap();
    vec![
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{content}}}}}]}}\n\n")
            .into_bytes(),
        b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
            .to_vec(),
    ]
}

/// A connection dropped under one probe request (seen once with llama-server, a kept-alive
/// connection closed as it was reused) says nothing about the mode: the probe asks once more,
/// says so, and judges the second answer. A second drop is judged `failed`.
#[test]
fn a_probe_asks_a_mode_again_once_when_its_connection_drops() {
    let probe_word = r#"{"probe":"kerf"}"#;
    let server = Server::start(vec![
        // none
        Act::sse(200, openai_reply("hello")),
        // json_object: dropped, then answered
        Act::hang_up(),
        Act::sse(200, openai_reply(probe_word)),
        // json_object_schema: dropped twice
        Act::hang_up(),
        Act::hang_up(),
        // json_schema, grammar
        Act::sse(200, openai_reply(probe_word)),
        Act::sse(200, openai_reply(probe_word)),
    ]);
    let mut p = provider(&server, Kind::Openai);
    p.grammar = Some(|_, _| Ok("root ::= \"x\"".into()));
    let probe = kerf_llm::runtime::block_on(kerf_llm::cloud::probe(&p, None, &CancelToken::new()));
    let mode = |m: Structured| {
        probe
            .modes
            .iter()
            .find(|x| x.mode == m)
            .unwrap_or_else(|| panic!("{m:?} not probed: {probe:?}"))
    };
    let asked_again = mode(Structured::JsonObject);
    assert_eq!(asked_again.result, "honoured", "{probe:?}");
    assert!(
        asked_again
            .detail
            .starts_with("asked again after a dropped connection"),
        "{probe:?}"
    );
    assert_eq!(
        mode(Structured::JsonObjectSchema).result,
        "failed",
        "{probe:?}"
    );
    assert_eq!(mode(Structured::JsonSchema).result, "honoured", "{probe:?}");
    assert_eq!(mode(Structured::None).result, "honoured", "{probe:?}");
    assert_eq!(server.requests().len(), 7);
}
