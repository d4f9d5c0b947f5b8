//! A loopback HTTP/1.1 server that plays one scripted act per connection and records each
//! request, so tests see exactly what a provider sent and exactly how it reacted.
#![allow(dead_code)] // shared by the kerf-llm and kerf-cli tests; each uses part of it

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// One response: status, headers, the body in chunks (chunked transfer encoding), timing.
#[derive(Clone)]
pub struct Act {
    status: u16,
    headers: Vec<(String, String)>,
    chunks: Vec<Vec<u8>>,
    /// Drop the connection before the final chunk (a stream cut mid-way).
    cut: bool,
    delay_head: Duration,
    /// Pause between body chunks.
    gap: Duration,
    /// Read the request, then close without answering (the request may have been acted on).
    hang_up: bool,
}

impl Act {
    /// A streamed event-stream reply.
    pub fn sse(status: u16, chunks: Vec<Vec<u8>>) -> Self {
        Act {
            status,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks,
            cut: false,
            delay_head: Duration::ZERO,
            gap: Duration::ZERO,
            hang_up: false,
        }
    }

    /// A plain reply (an error body, or a whole JSON completion).
    pub fn status(status: u16, body: &str) -> Self {
        Act {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![body.as_bytes().to_vec()],
            cut: false,
            delay_head: Duration::ZERO,
            gap: Duration::ZERO,
            hang_up: false,
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.retain(|(name, _)| name != k);
        self.headers.push((k.into(), v.into()));
        self
    }

    /// Take the whole request, then close the connection without a response.
    pub fn hang_up() -> Self {
        let mut a = Act::status(200, "");
        a.hang_up = true;
        a
    }

    pub fn cut_off(mut self) -> Self {
        self.cut = true;
        self
    }

    pub fn delay_head(mut self, d: Duration) -> Self {
        self.delay_head = d;
        self
    }

    pub fn gap(mut self, d: Duration) -> Self {
        self.gap = d;
        self
    }
}

/// A request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }
}

pub struct Server {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Server {
    pub fn start(acts: Vec<Act>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        thread::spawn(move || {
            for act in acts {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                let log = log.clone();
                // Each connection on its own thread: a slow act must not hold up the next.
                thread::spawn(move || {
                    let _ = play(stream, &act, &log);
                });
            }
        });
        Server { port, received }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

fn play(stream: TcpStream, act: &Act, log: &Mutex<Vec<Received>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_string(), v.trim().to_string());
            if k.eq_ignore_ascii_case("content-length") {
                length = v.parse().unwrap_or(0);
            }
            headers.push((k, v));
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    log.lock().unwrap().push(Received {
        path,
        headers,
        body,
    });

    thread::sleep(act.delay_head);
    let mut out = stream;
    if act.hang_up {
        return out.shutdown(std::net::Shutdown::Both);
    }
    let mut head = format!("HTTP/1.1 {} Scripted\r\n", act.status);
    for (k, v) in &act.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    out.write_all(head.as_bytes())?;
    out.flush()?;
    for (i, c) in act.chunks.iter().enumerate() {
        if i > 0 {
            thread::sleep(act.gap);
        }
        if c.is_empty() {
            continue;
        }
        out.write_all(format!("{:x}\r\n", c.len()).as_bytes())?;
        out.write_all(c)?;
        out.write_all(b"\r\n")?;
        out.flush()?;
    }
    if act.cut {
        // Close without the terminating chunk: the body is cut mid-stream.
        return out.shutdown(std::net::Shutdown::Both);
    }
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}
