//! A loopback HTTP/1.1 server that plays one scripted act per connection and records each
//! request, so tests see exactly what a provider sent and exactly how it reacted.
#![allow(dead_code)] // shared by the kerf-llm, kerf-api and kerf-cli tests; each uses part of it

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
    /// After the last chunk, keep the connection open until the client goes away (a reply
    /// still streaming whenever the client is killed, however fast the machine).
    hold: bool,
    /// Send the last chunk only once this latch opens: the reply is provably still streaming
    /// until the test says so.
    last_waits_for: Option<Latch>,
    /// Send no head at all: after the request, wait for the client to go away (a server that
    /// never answers, however long the client waits).
    hold_head: bool,
}

/// A gate a test opens once: acts waiting on it go on. Waits end at [`HOLD_AT_MOST`] at the
/// latest, so a test that forgets to open it still ends (and fails on what it sees).
#[derive(Clone, Default)]
pub struct Latch(Arc<(Mutex<bool>, std::sync::Condvar)>);

impl Latch {
    pub fn open(&self) {
        *self.0.0.lock().unwrap() = true;
        self.0.1.notify_all();
    }

    fn wait(&self) {
        let (open, changed) = &*self.0;
        let guard = open.lock().unwrap();
        let _ = changed
            .wait_timeout_while(guard, HOLD_AT_MOST, |open| !*open)
            .unwrap();
    }
}

/// A loopback port that refuses every connection for as long as the returned socket lives: bound
/// but never listening, so no other socket can take it (unlike a listener bound and dropped,
/// whose port the next test may get).
pub fn refused_port() -> (socket2::Socket, u16) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    let port = socket.local_addr().unwrap().as_socket().unwrap().port();
    (socket, port)
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
            hold: false,
            last_waits_for: None,
            hold_head: false,
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
            hold: false,
            last_waits_for: None,
            hold_head: false,
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

    /// Never end the reply: after the last chunk, wait for the client to close the connection
    /// (for at most [`HOLD_AT_MOST`], so a test that forgets its client still ends).
    pub fn hold_open(mut self) -> Self {
        self.hold = true;
        self
    }

    /// Never answer: take the request, then wait for the client to close the connection (for at
    /// most [`HOLD_AT_MOST`]) without sending a byte.
    pub fn hold_head(mut self) -> Self {
        self.hold_head = true;
        self
    }

    /// Send the last chunk only once `latch` opens.
    pub fn last_waits_for(mut self, latch: &Latch) -> Self {
        self.last_waits_for = Some(latch.clone());
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

/// The longest a held-open reply waits for its client to go away.
pub const HOLD_AT_MOST: Duration = Duration::from_secs(120);

pub struct Server {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    /// Held replies (`hold_open`, `hold_head`) whose client closed the connection.
    client_gone: Count,
}

/// A count that can be waited on.
#[derive(Clone, Default)]
struct Count(Arc<(Mutex<usize>, std::sync::Condvar)>);

impl Count {
    fn add(&self) {
        *self.0.0.lock().unwrap() += 1;
        self.0.1.notify_all();
    }

    /// Wait until the count reaches `n`, for at most `within`; the count then.
    fn wait_for(&self, n: usize, within: Duration) -> usize {
        let (count, changed) = &*self.0;
        let guard = count.lock().unwrap();
        *changed
            .wait_timeout_while(guard, within, |c| *c < n)
            .unwrap()
            .0
    }
}

impl Server {
    pub fn start(acts: Vec<Act>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        let client_gone = Count::default();
        let gone = client_gone.clone();
        thread::spawn(move || {
            for act in acts {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                let (log, gone) = (log.clone(), gone.clone());
                // Each connection on its own thread: a slow act must not hold up the next.
                thread::spawn(move || {
                    let _ = play(stream, &act, &log, &gone);
                });
            }
        });
        Server {
            port,
            received,
            client_gone,
        }
    }

    /// Wait (for at most `within`) until the clients of `n` held replies (`hold_open`,
    /// `hold_head`) have closed their connections; whether they have.
    pub fn clients_gone(&self, n: usize, within: Duration) -> bool {
        self.client_gone.wait_for(n, within) >= n
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// Wait, sending nothing, until the client closes the connection (0 bytes read, or a reset) or
/// [`HOLD_AT_MOST`] passes; whether the client closed it.
fn until_client_goes(reader: &mut BufReader<TcpStream>) -> std::io::Result<bool> {
    // The client sends nothing more: a read returns when it closes, or at the deadline.
    reader.get_ref().set_read_timeout(Some(HOLD_AT_MOST))?;
    let mut rest = Vec::new();
    Ok(match reader.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    })
}

fn play(
    stream: TcpStream,
    act: &Act,
    log: &Mutex<Vec<Received>>,
    client_gone: &Count,
) -> std::io::Result<()> {
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

    if act.hold_head {
        if until_client_goes(&mut reader)? {
            client_gone.add();
        }
        return Ok(());
    }
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
        if i + 1 == act.chunks.len()
            && let Some(latch) = &act.last_waits_for
        {
            latch.wait();
        }
        if c.is_empty() {
            continue;
        }
        out.write_all(format!("{:x}\r\n", c.len()).as_bytes())?;
        out.write_all(c)?;
        out.write_all(b"\r\n")?;
        out.flush()?;
    }
    if act.hold {
        if until_client_goes(&mut reader)? {
            client_gone.add();
        }
        return Ok(());
    }
    if act.cut {
        // Close without the terminating chunk: the body is cut mid-stream.
        return out.shutdown(std::net::Shutdown::Both);
    }
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}
