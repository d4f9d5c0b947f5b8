//! Many requests in flight, as the evaluation lab sends them: 64 runs polled together on one
//! task against a keep-alive loopback server that holds every answer of a wave until all of
//! that wave's requests have arrived. So the runs must overlap (requests that queued behind one
//! another would never be answered), every reply must be its own request's, and the pooled
//! client must reuse its connections (counted on the server side). Wall times are printed, not
//! judged: they measure the machine as much as Kerf.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use kerf_llm::cloud::CloudProvider;
use kerf_llm::providers::{Kind, ProviderDef, Structured};
use kerf_llm::{CancelToken, Event, FinishReason, Provider, Request};
use serde_json::Value;

const IN_FLIGHT: usize = 64;

/// The most new connections the two later waves (128 requests) may open between them. A
/// client that reuses opens none, or a few where a connection went back to the pool late (0 or
/// 1 in 30 runs on a 2-core machine under twice its load); one that does not, 128; one that
/// keeps fewer than half of its connections, more than this.
const REUSE_SLACK: usize = IN_FLIGHT / 2;

/// How long the gate waits for the rest of a wave before answering that the requests did not
/// overlap: far past any machine's scheduling delay, well short of the client's timeouts.
const GATE_AT_MOST: Duration = Duration::from_secs(30);

/// Holds each request of a wave until all of the wave's requests have arrived.
#[derive(Default)]
struct Gate {
    /// Requests arrived, per wave.
    arrived: Mutex<HashMap<usize, usize>>,
    changed: Condvar,
}

impl Gate {
    /// Count one request of `wave` (`size` requests), then wait until all have arrived: `Ok`,
    /// or after [`GATE_AT_MOST`], `Err` with how many had.
    fn pass(&self, wave: usize, size: usize) -> Result<(), usize> {
        let mut arrived = self.arrived.lock().unwrap();
        *arrived.entry(wave).or_default() += 1;
        self.changed.notify_all();
        let (arrived, _) = self
            .changed
            .wait_timeout_while(arrived, GATE_AT_MOST, |a| a[&wave] < size)
            .unwrap();
        let n = arrived[&wave];
        if n >= size { Ok(()) } else { Err(n) }
    }
}

/// An OpenAI-compatible server that keeps connections open and answers every request, once
/// its whole wave is in flight, with a streamed completion naming the request's own document.
struct KeepAlive {
    port: u16,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

impl KeepAlive {
    fn start() -> KeepAlive {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(Gate::default());
        let (c, r) = (connections.clone(), requests.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                c.fetch_add(1, Ordering::SeqCst);
                let (r, gate) = (r.clone(), gate.clone());
                thread::spawn(move || serve(stream, &r, &gate));
            }
        });
        KeepAlive {
            port,
            connections,
            requests,
        }
    }
}

/// A request's document: `doc-<wave>-<i>-of-<wave size>`.
fn document(wave: usize, i: usize, size: usize) -> String {
    format!("doc-{wave}-{i}-of-{size}")
}

/// The wave and wave size a document names.
fn wave_of(doc: &str) -> Option<(usize, usize)> {
    let parts: Vec<&str> = doc.strip_prefix("doc-")?.split('-').collect();
    match parts[..] {
        [wave, _, "of", size] => Some((wave.parse().ok()?, size.parse().ok()?)),
        _ => None,
    }
}

/// Answer requests on one connection until the client closes it.
fn serve(stream: TcpStream, requests: &AtomicUsize, gate: &Gate) -> Option<()> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return Some(());
        }
        let mut length = 0usize;
        loop {
            line.clear();
            reader.read_line(&mut line).ok()?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.trim().eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().ok()?;
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).ok()?;
        requests.fetch_add(1, Ordering::SeqCst);
        let sent: Value = serde_json::from_slice(&body).ok()?;
        let doc = sent["messages"][0]["content"].as_str()?.to_string();
        let (wave, size) = wave_of(&doc)?;
        if let Err(arrived) = gate.pass(wave, size) {
            // Not retried (a 4xx): the run fails with this message.
            let error = serde_json::json!({"error": {"message": format!(
                "only {arrived} of wave {wave}'s {size} requests were in flight together \
                 after {} s", GATE_AT_MOST.as_secs()
            )}})
            .to_string();
            let reply = format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{error}",
                error.len()
            );
            out.write_all(reply.as_bytes()).ok()?;
            out.flush().ok()?;
            continue;
        }
        let content = serde_json::to_string(&format!("{{\"entity\":\"{doc}\"}}")).ok()?;
        let sse = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{content}}}}}]}}\n\n\
             data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}],\"usage\":{{\"prompt_tokens\":5,\"completion_tokens\":4}}}}\n\n\
             data: [DONE]\n\n"
        );
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
            sse.len()
        );
        // One write: a head and a body in two small writes would meet Nagle's algorithm and
        // the client's delayed ACK (40 ms on Linux), which measures TCP, not Kerf.
        out.write_all(format!("{head}{sse}").as_bytes()).ok()?;
        out.flush().ok()?;
    }
}

/// One wave: `n` runs started together and polled on this task; the wall time, and
/// each run's document with the entity its reply named.
fn wave(p: &CloudProvider, wave: usize, n: usize) -> (Duration, Vec<(String, String)>) {
    let requests: Vec<Request> = (0..n)
        .map(|i| Request::new(None, &document(wave, i, n)))
        .collect();
    let cancel = CancelToken::new();
    let start = Instant::now();
    let replies = kerf_llm::runtime::block_on(async {
        let mut in_flight: FuturesUnordered<_> = requests
            .iter()
            .map(|req| async {
                let mut text = String::new();
                let finish = p
                    .run(req, &cancel, &mut |e| {
                        if let Event::Text(t) = e {
                            text.push_str(t);
                        }
                    })
                    .await
                    .unwrap_or_else(|e| panic!("{}: {e}", req.messages[0].content));
                assert_eq!(finish.reason, FinishReason::Stop, "{:?}", finish.error);
                (req.messages[0].content.clone(), text)
            })
            .collect();
        let mut out = Vec::new();
        while let Some(r) = in_flight.next().await {
            out.push(r);
        }
        out
    });
    (start.elapsed(), replies)
}

#[test]
fn sixty_four_requests_in_flight_overlap_on_reused_connections() {
    let server = KeepAlive::start();
    let mut def = ProviderDef::new(
        "many",
        Kind::Openai,
        Some(&format!("http://127.0.0.1:{}", server.port)),
        "test-model",
    );
    def.no_key = true;
    def.structured = Structured::None;
    let p = CloudProvider::with_key(def, None);

    // The process's one-time set-up (the runtime, the client and its TLS roots): one request
    // first.
    let (_, one) = wave(&p, 0, 1);
    assert_eq!(one.len(), 1);
    let mut opened = vec![server.connections.load(Ordering::SeqCst)];
    let mut walls = Vec::new();
    for w in 1..=3 {
        // Every request of the wave was in flight at once, or the gate would not have let any
        // through (each run would have failed naming how many were).
        let (wall, replies) = wave(&p, w, IN_FLIGHT);
        walls.push(wall);
        opened.push(server.connections.load(Ordering::SeqCst));
        // Every reply parsed, and each is its own request's.
        assert_eq!(replies.len(), IN_FLIGHT);
        for (doc, text) in &replies {
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(v["entity"], doc.as_str());
        }
    }
    let requests = server.requests.load(Ordering::SeqCst);
    eprintln!(
        "{IN_FLIGHT} in flight: waves took {walls:?}; {requests} requests; connections opened by the end of each wave: {opened:?}"
    );
    assert_eq!(requests, 3 * IN_FLIGHT + 1);
    // HTTP/1.1 carries one request at a time per connection: the first wave, all in flight
    // together, needs one per request (the warm-up's may be one of them), and opens no more
    // than one per request.
    assert!(
        (IN_FLIGHT..=IN_FLIGHT + 1).contains(&opened[1]),
        "connections opened by the end of each wave: {opened:?}"
    );
    // The later waves reuse them. Not necessarily every one: the client puts a connection back
    // in its pool on a task of its own, and a wave started before that task ran opens a new
    // one instead. But a client that did not reuse would open a connection per request, 128.
    let later = opened[3] - opened[1];
    assert!(
        later <= REUSE_SLACK,
        "the later waves opened {later} connections for {} requests (by the end of each wave: {opened:?})",
        2 * IN_FLIGHT
    );
}
