//! Server-sent events, decoded incrementally from whatever byte chunks the network delivers
//! (a line, a character or an event may be split anywhere).
//!
//! Follows the WHATWG event-stream rules (`data:` lines joined by `\n`, `event:`, `id:`,
//! comments, CR/LF/CRLF line ends, one leading space stripped), with one deliberate strictness:
//! a line that is not a field (no `:` and not a known field name) is an error naming its line,
//! because an LLM API that sends one is not speaking SSE (an HTML error page, a proxy's banner).

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty means the default `message`.
    pub event: String,
    pub data: String,
    /// The stream line where the event's first field was.
    pub line: usize,
}

#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// A CR ended the last line; an LF right after it belongs to the same line end.
    after_cr: bool,
    line: usize,
    event: String,
    data: Option<String>,
    event_line: usize,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes, appending the events they complete to `out`; stops at the first malformed
    /// line (the events before it are kept).
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), String> {
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.buf);
                    self.line += 1;
                    if let Some(e) = self.take_line(&line)? {
                        out.push(e);
                    }
                }
                _ => self.buf.push(b),
            }
        }
        Ok(())
    }

    /// The end of the stream: a final event without its blank line is dispatched (servers that
    /// close right after the last `data:` line are common); an unfinished line is fed first.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, String> {
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.line += 1;
            if let Some(e) = self.take_line(&line)? {
                return Ok(Some(e));
            }
        }
        Ok(self.dispatch())
    }

    /// Bytes received but not yet part of a whole line.
    pub fn pending(&self) -> &[u8] {
        &self.buf
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        self.data.take().map(|data| SseEvent {
            event,
            data,
            line: self.event_line,
        })
    }

    fn take_line(&mut self, raw: &[u8]) -> Result<Option<SseEvent>, String> {
        if raw.is_empty() {
            return Ok(self.dispatch());
        }
        let line = std::str::from_utf8(raw)
            .map_err(|_| format!("line {} of the event stream is not UTF-8", self.line))?;
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line, ""),
        };
        if self.data.is_none() && self.event.is_empty() {
            self.event_line = self.line;
        }
        match field {
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "event" => self.event = value.to_string(),
            "id" | "retry" => {}
            _ => {
                let shown: String = line.chars().take(80).collect();
                return Err(format!(
                    "line {} of the event stream is not an SSE field: `{shown}`",
                    self.line
                ));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out).unwrap();
        }
        out.extend(d.finish().unwrap());
        out
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
        for cut in 0..text.len() {
            let (a, b) = text.as_bytes().split_at(cut);
            assert_eq!(all(&[a, b]), whole, "split at {cut}");
        }
    }

    #[test]
    fn a_last_event_without_its_blank_line_still_counts() {
        assert_eq!(all(&[b"data: x"])[0].data, "x");
    }

    #[test]
    fn html_is_not_an_event_stream() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        let err = d.feed(b"data: ok\n\n<html>\n", &mut out).unwrap_err();
        assert!(err.contains("line 3") && err.contains("<html>"), "{err}");
        assert_eq!(out[0].data, "ok", "the event before the bad line is kept");
    }
}
