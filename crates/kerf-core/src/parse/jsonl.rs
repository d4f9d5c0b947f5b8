//! JSONL: everything TrustGraph's line parser does (skip blank lines and fence lines, skip lines
//! that fail to parse or fail the per-line schema) — every skip reported — plus what models really
//! emit: CRLF and a BOM, fences with any language tag, an object pretty-printed over several
//! lines, several objects on one line, a JSON array instead of lines (`[`/`]` lines and a comma
//! after an object are array punctuation), list markers and prose.
//!
//! The scanner walks the text once. At each value start it lets serde_json read exactly one JSON
//! value; objects go to the acceptor, anything else is reported. An object that runs into the end
//! of the text is the cut-off last piece: dropped as `truncated`, never repaired.
//!
//! The scanner is resumable: given text that may still grow, it stops before any step whose
//! outcome could change with more text, so streaming (see [`crate::stream`]) and whole-text
//! parsing run the same code and give the same report.

use serde_json::Value;

use super::Acceptor;
use super::lines::{
    LineCounter, at_line_start, excerpt, floor_char_boundary, is_fence, line_end, list_marker_len,
};
use crate::error::strip_position;
use crate::report::{DropKind, ParseReport};

pub(crate) fn parse(text: &str, acceptor: &Acceptor<'_>) -> ParseReport {
    let mut scan = Scanner::default();
    let mut report = ParseReport::default();
    scan.run(text, true, acceptor, &mut report);
    scan.finish(&mut report);
    report
}

/// Where a JSONL scan stands; feed it the whole text so far each time.
#[derive(Debug, Default, Clone)]
pub(crate) struct Scanner {
    pos: usize,
    open_arrays: usize,
    open_fence: bool,
    lines: LineCounter,
}

/// What one step decided.
enum Step {
    /// Continue at this offset.
    To(usize),
    /// The outcome depends on text not received yet.
    Wait,
}

impl Scanner {
    /// Scan `text` from where the last call stopped. With `at_eof` false, stops before any step
    /// whose outcome could change if `text` grew.
    pub fn run(
        &mut self,
        text: &str,
        at_eof: bool,
        acceptor: &Acceptor<'_>,
        report: &mut ParseReport,
    ) {
        let bytes = text.as_bytes();
        while self.pos < bytes.len() {
            let pos = self.pos;
            let c = bytes[pos];
            if c.is_ascii_whitespace() {
                self.pos += 1;
                continue;
            }
            let step = if at_line_start(text, pos)
                && (is_fence(&text[pos..]) || (!at_eof && "```".starts_with(&text[pos..])))
            {
                // A fence line (or what may become one): skip the whole line once it is complete.
                match next_line(text, pos, at_eof) {
                    Some(next) => {
                        self.open_fence = !self.open_fence;
                        Step::To(next)
                    }
                    None => Step::Wait,
                }
            } else {
                match c {
                    b'{' => self.take_object(text, pos, at_eof, acceptor, report),
                    b'[' => {
                        self.open_arrays += 1;
                        Step::To(pos + 1)
                    }
                    b']' => {
                        self.open_arrays = self.open_arrays.saturating_sub(1);
                        Step::To(pos + 1)
                    }
                    b',' => Step::To(pos + 1),
                    // Anything else is judged on its whole line.
                    _ if !at_eof && next_line(text, pos, false).is_none() => Step::Wait,
                    _ => match at_line_start(text, pos)
                        .then(|| list_marker_len(&text[pos..]))
                        .flatten()
                    {
                        Some(n) => Step::To(pos + n),
                        None => Step::To(self.take_other(text, pos, report)),
                    },
                }
            };
            match step {
                Step::To(next) => self.pos = next,
                Step::Wait => return,
            }
        }
    }

    /// The end of the text: an unclosed array or fence means the reply stopped early.
    pub fn finish(&self, report: &mut ParseReport) {
        if self.open_arrays > 0 || self.open_fence {
            report.truncated = true;
        }
    }

    /// Read one object starting at `pos` (a `{`).
    fn take_object(
        &mut self,
        text: &str,
        pos: usize,
        at_eof: bool,
        acceptor: &Acceptor<'_>,
        report: &mut ParseReport,
    ) -> Step {
        let mut stream = serde_json::Deserializer::from_str(&text[pos..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(value)) => {
                let end = pos + stream.byte_offset();
                let line = self.lines.line_at(text, pos);
                acceptor.accept(report, line, end, value);
                Step::To(end)
            }
            Some(Err(e)) if e.is_eof() => {
                if !at_eof {
                    return Step::Wait;
                }
                self.cut_off(text, pos, report)
            }
            Some(Err(e)) => {
                let err_line_start = if e.line() <= 1 {
                    pos
                } else {
                    nth_line_start(text, pos, e.line() - 1)
                };
                let err_at =
                    floor_char_boundary(text, err_line_start + e.column().saturating_sub(1));
                if text[err_at..].trim().is_empty() {
                    // Broken only by the end of the text (e.g. a cut string then a newline): cut off.
                    if !at_eof {
                        return Step::Wait;
                    }
                    return self.cut_off(text, pos, report);
                }
                // The value ran over several lines before breaking. If the break is where a new
                // value starts on its line (an unterminated object followed by the next one),
                // resume there; otherwise after the broken line.
                let resume = if e.line() <= 1 {
                    next_line(text, pos, at_eof)
                } else {
                    let first_non_blank = text[err_line_start..]
                        .find(|c: char| !c.is_ascii_whitespace())
                        .map(|i| err_line_start + i)
                        .unwrap_or(text.len());
                    if err_at <= first_non_blank {
                        Some(err_line_start)
                    } else {
                        next_line(text, err_line_start, at_eof)
                    }
                };
                let Some(resume) = resume else {
                    return Step::Wait;
                };
                let line = self.lines.line_at(text, pos);
                report.drop(
                    line,
                    DropKind::InvalidJson,
                    format!(
                        "{}: {}",
                        strip_position(&e.to_string()),
                        excerpt(&text[pos..line_end(text, pos)])
                    ),
                );
                Step::To(resume)
            }
            None => Step::To(text.len()),
        }
    }

    /// The object at `pos` runs into the end of the text: the reply was cut off there.
    fn cut_off(&mut self, text: &str, pos: usize, report: &mut ParseReport) -> Step {
        let line = self.lines.line_at(text, pos);
        report.drop(
            line,
            DropKind::Truncated,
            format!("cut off: {}", excerpt(&text[pos..])),
        );
        report.truncated = true;
        Step::To(text.len())
    }

    /// Something at `pos` that does not start an object: a scalar (dropped as `not_object`) or
    /// prose (dropped as `prose`, up to an object that starts later on the same line). Only called
    /// with the line complete (or at the end of the text).
    fn take_other(&mut self, text: &str, pos: usize, report: &mut ParseReport) -> usize {
        let line = self.lines.line_at(text, pos);
        let eol = line_end(text, pos);
        if matches!(
            text.as_bytes()[pos],
            b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n'
        ) {
            let mut stream =
                serde_json::Deserializer::from_str(&text[pos..eol]).into_iter::<Value>();
            if let Some(Ok(value)) = stream.next() {
                let end = pos + stream.byte_offset();
                let next = text[end..eol].trim_start().bytes().next();
                if matches!(next, None | Some(b',') | Some(b']')) {
                    report.drop(
                        line,
                        DropKind::NotObject,
                        format!(
                            "a {} where an object was expected: {}",
                            kind(&value),
                            excerpt(&text[pos..end])
                        ),
                    );
                    return end;
                }
            }
        }
        let segment = &text[pos..eol];
        match segment.find('{') {
            Some(i) => {
                report.drop(line, DropKind::Prose, excerpt(&segment[..i]));
                pos + i
            }
            None => {
                report.drop(line, DropKind::Prose, excerpt(segment));
                eol
            }
        }
    }
}

/// The start of the line after `pos`'s; at the end of the text that is its length. `None` while
/// the line is still open and more text may come.
fn next_line(text: &str, pos: usize, at_eof: bool) -> Option<usize> {
    match memchr::memchr(b'\n', &text.as_bytes()[pos..]) {
        Some(i) => Some(pos + i + 1),
        None if at_eof => Some(text.len()),
        None => None,
    }
}

/// Offset of the start of the `n`th line after the one containing `pos`.
fn nth_line_start(text: &str, pos: usize, n: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[pos..])
        .nth(n - 1)
        .map(|i| pos + i + 1)
        .unwrap_or(text.len())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
