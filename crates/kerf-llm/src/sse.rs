//! Server-sent events from a streamed reply body, decoded by the `sse-stream` crate (the WHATWG
//! rules: `data:` lines joined by `\n`, `event:`, comments, CR/LF/CRLF line ends, a line or a
//! character split anywhere across chunks). Its `strict-fields` feature refuses a line that is
//! no SSE field, because an LLM API that sends one is not speaking SSE (an HTML error page, a
//! proxy's banner). Kerf adds two things around it:
//!
//! - a final event the server closed without its blank line is still dispatched (servers that
//!   close right after the last `data:` line are common; the spec would drop it);
//! - a refused line is named by its line number and text, found as the lines go by (the crate
//!   says only "unknown field").

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;
use futures_util::{Stream, StreamExt, TryStreamExt, stream};

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty means the default `message`.
    pub event: String,
    pub data: String,
    /// Its place in the stream: 1 for the first event.
    pub number: usize,
}

/// Why the events stopped before the body ended.
#[derive(Debug)]
pub enum SseError<E> {
    /// The body itself failed (the transport's error, as it was).
    Body(E),
    /// The bytes are not an event stream; says where.
    Malformed(String),
}

/// How much of a line is kept to name it.
const HEAD: usize = 128;

/// Lines as they arrive, to name the line the decoder refuses. Everything before that line was
/// accepted (the decoder stops at its first bad line), so it is the first line of the stream
/// that is no SSE field: kept, with its number, as the bytes go by. Each byte is looked at once
/// and only a line's first [`HEAD`] bytes are held, whatever the chunk sizes or line lengths (a
/// window of recent bytes lost the line when one chunk carried it and far more after it, and
/// rescanned a line that outgrew it).
#[derive(Default)]
struct Lines {
    /// The 0-based number of the line being read.
    current: usize,
    /// Its first bytes.
    head: Vec<u8>,
    /// The last line ended with CR: an LF first in what comes next completes that CRLF.
    after_cr: bool,
    /// The first line that is no SSE field: its 1-based number and its start.
    refused: Option<(usize, String)>,
}

impl Lines {
    fn push(&mut self, mut b: &[u8]) {
        while !b.is_empty() {
            if std::mem::take(&mut self.after_cr) && b[0] == b'\n' {
                b = &b[1..];
                continue;
            }
            let end = memchr::memchr2(b'\n', b'\r', b);
            let piece = &b[..end.unwrap_or(b.len())];
            let room = HEAD.saturating_sub(self.head.len());
            self.head.extend_from_slice(&piece[..piece.len().min(room)]);
            let Some(end) = end else { return };
            self.end_line();
            self.after_cr = b[end] == b'\r';
            b = &b[end + 1..];
        }
    }

    fn end_line(&mut self) {
        if self.refused.is_none() && !is_field(&self.head, self.current == 0) {
            self.refused = Some((self.current + 1, shown(&self.head)));
        }
        self.current += 1;
        self.head.clear();
    }

    /// The first line that is no SSE field, counting the last one even without its end.
    fn refused_line(&self) -> Option<(usize, String)> {
        self.refused.clone().or_else(|| {
            (!is_field(&self.head, self.current == 0))
                .then(|| (self.current + 1, shown(&self.head)))
        })
    }
}

/// Whether a line (its start) is something an event stream may hold: blank, a comment, or one
/// of the four fields (the first line may start with a byte-order mark).
fn is_field(line: &[u8], first: bool) -> bool {
    let line = match first {
        true => line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line),
        false => line,
    };
    let field = line.split(|&c| c == b':').next().unwrap_or_default();
    line.is_empty() || line[0] == b':' || matches!(field, b"data" | b"event" | b"id" | b"retry")
}

fn shown(head: &[u8]) -> String {
    String::from_utf8_lossy(head).chars().take(80).collect()
}

/// The events of `body`, in order. The stream ends after the first error.
pub fn events<S, E>(body: S) -> impl Stream<Item = Result<SseEvent, SseError<E>>>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    let recent = Rc::new(RefCell::new(Lines::default()));
    let tap = recent.clone();
    let body = body
        .inspect_ok(move |b| tap.borrow_mut().push(b))
        // After a clean end, a blank line closes a final event the server left open (and is
        // nothing after one it closed).
        .chain(stream::once(async { Ok(Bytes::from_static(b"\n\n")) }));
    let mut number = 0usize;
    sse_stream::SseByteStream::new(body).filter_map(move |item| {
        let out = match item {
            // A block without data (only `event:` or `id:`) dispatches nothing.
            Ok(sse) => sse.data.map(|data| {
                number += 1;
                Ok(SseEvent {
                    event: sse.event.unwrap_or_default(),
                    data,
                    number,
                })
            }),
            Err(sse_stream::Error::Body(e)) => Some(match e.downcast::<E>() {
                Ok(e) => Err(SseError::Body(*e)),
                Err(other) => Err(SseError::Malformed(other.to_string())),
            }),
            Err(sse_stream::Error::UnknownField) => Some(Err(SseError::Malformed(
                match recent.borrow().refused_line() {
                    Some((n, text)) => {
                        format!("line {n} of the event stream is not an SSE field: `{text}`")
                    }
                    None => "a line of the event stream is not an SSE field".into(),
                },
            ))),
            Err(e) => Some(Err(SseError::Malformed(format!(
                "the event stream is not UTF-8 text ({e})"
            )))),
        };
        std::future::ready(out)
    })
}

/// The events of a body that arrives in `pieces`, and the error that stopped them, if any: for
/// tests and the fuzz target (the split must never change the events).
pub fn decode(pieces: &[&[u8]]) -> (Vec<SseEvent>, Result<(), String>) {
    let body = stream::iter(
        pieces
            .iter()
            .map(|p| Ok::<_, std::io::Error>(Bytes::copy_from_slice(p)))
            .collect::<Vec<_>>(),
    );
    crate::runtime::block_on(async {
        let mut out = Vec::new();
        let mut events = std::pin::pin!(events(body));
        while let Some(e) = events.next().await {
            match e {
                Ok(e) => out.push(e),
                Err(SseError::Malformed(m)) => return (out, Err(m)),
                Err(SseError::Body(e)) => return (out, Err(e.to_string())),
            }
        }
        (out, Ok(()))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let (events, end) = decode(chunks);
        end.unwrap();
        events
    }

    #[test]
    fn events_survive_any_split() {
        let text = "event: message_start\r\ndata: {\"a\":\n: keep-alive\n\ndata: caf\u{e9}\ndata: two\r\rdata: [DONE]\n\n";
        let whole = all(&[text.as_bytes()]);
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0].event, "message_start");
        assert_eq!(whole[0].data, "{\"a\":");
        assert_eq!(whole[1].data, "caf\u{e9}\ntwo");
        assert_eq!(whole[2].data, "[DONE]");
        assert_eq!(whole[2].number, 3);
        for cut in 0..text.len() {
            let (a, b) = text.as_bytes().split_at(cut);
            assert_eq!(all(&[a, b]), whole, "split at {cut}");
        }
    }

    #[test]
    fn a_last_event_without_its_blank_line_still_counts() {
        assert_eq!(all(&[b"data: x"])[0].data, "x");
        assert_eq!(all(&[b"data: x\r"])[0].data, "x");
        assert_eq!(all(&[b"data: x\n\n"]).len(), 1, "and a closed one once");
    }

    #[test]
    fn html_is_not_an_event_stream_and_the_line_is_named() {
        let (events, end) = decode(&[b"data: ok\n\n<html>\n"]);
        let err = end.unwrap_err();
        assert!(err.contains("line 3") && err.contains("<html>"), "{err}");
        assert_eq!(
            events[0].data, "ok",
            "the event before the bad line is kept"
        );
    }

    #[test]
    fn a_refused_line_far_into_a_long_stream_is_still_named() {
        let mut body = Vec::new();
        for i in 0..5000 {
            body.extend(format!("data: {i}\r\n\r\n").as_bytes());
        }
        body.extend(b"Bad Gateway\n");
        let pieces: Vec<&[u8]> = body.chunks(1000).collect();
        let (events, end) = decode(&pieces);
        assert_eq!(events.len(), 5000);
        let err = end.unwrap_err();
        assert!(
            err.contains("line 10001") && err.contains("Bad Gateway"),
            "{err}"
        );
    }

    #[test]
    fn a_line_longer_than_the_window_is_decoded_and_named_in_any_pieces() {
        // A data line without a newline for far longer than the window: the window keeps its
        // head, so the events and the refused line after it are the same in any pieces.
        const WINDOW: usize = 16 * 1024;
        let long = "x".repeat(5 * WINDOW + 17);
        let body = format!("data: {long}\n\nBad Gateway\n");
        for step in [1000, 4096, 2 * WINDOW + 1, body.len()] {
            let pieces: Vec<&[u8]> = body.as_bytes().chunks(step).collect();
            let (events, end) = decode(&pieces);
            assert_eq!(events.len(), 1);
            assert_eq!(events[0].data, long);
            let err = end.unwrap_err();
            assert!(
                err.contains("line 3") && err.contains("Bad Gateway"),
                "{step}: {err}"
            );
        }
        // The long line is itself the refused one: named by its first bytes.
        let body = format!("data: ok\n\n<html>{long}\n");
        let pieces: Vec<&[u8]> = body.as_bytes().chunks(3000).collect();
        let err = decode(&pieces).1.unwrap_err();
        assert!(
            err.contains("line 3") && err.contains("`<html>xxx"),
            "{err}"
        );
        // CR-only line ends are lines too, however long the stream.
        let mut body = String::new();
        for i in 0..3000 {
            body.push_str(&format!("data: {i}\r\r"));
        }
        body.push_str("oops\r");
        let pieces: Vec<&[u8]> = body.as_bytes().chunks(700).collect();
        let err = decode(&pieces).1.unwrap_err();
        assert!(err.contains("line 6001") && err.contains("oops"), "{err}");
    }

    /// Found by the fuzz target `sse_long_lines`: a bad first line carried in one chunk with
    /// 64 KiB after it was named as line 2 (the window of recent bytes had already dropped it),
    /// but as line 1 when the same bytes came in 128-byte pieces.
    #[test]
    fn fuzz_crash_sse_long_lines_a_refused_line_is_named_however_big_the_chunk() {
        let mut body = b"\0\n".to_vec();
        body.resize(2 + 64 * 1024, b'x');
        for step in [128, body.len()] {
            let pieces: Vec<&[u8]> = body.chunks(step).collect();
            let err = decode(&pieces).1.unwrap_err();
            assert!(err.contains("line 1 of the event stream"), "{step}: {err}");
        }
    }
}
