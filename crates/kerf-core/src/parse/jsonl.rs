//! JSONL: everything TrustGraph's line parser does (skip blank lines and fence lines, skip lines
//! that fail to parse or fail the per-line schema) — every skip reported — plus what models really
//! emit: CRLF and a BOM, fences with any language tag, an object pretty-printed over several
//! lines, several objects on one line, a JSON array instead of lines (`[`/`]` lines and a comma
//! after an object are array punctuation), list markers and prose.
//!
//! The scanner walks the text once. At each value start it lets serde_json read exactly one JSON
//! value; objects go to the acceptor, anything else is reported. An object that runs into the end
//! of the text is the cut-off last piece: dropped as `truncated`, never repaired.

use serde_json::Value;

use super::Acceptor;
use super::lines::{LineCounter, at_line_start, excerpt, is_fence, line_end, list_marker_len, next_line_start};
use crate::error::strip_position;
use crate::report::{DropKind, ParseReport};

pub(crate) fn parse(text: &str, acceptor: &Acceptor<'_>) -> ParseReport {
    let mut report = ParseReport::default();
    let mut lines = LineCounter::new(text);
    let bytes = text.as_bytes();
    let len = bytes.len();
    let mut pos = 0;
    let mut open_arrays: usize = 0;
    let mut open_fence = false;

    while pos < len {
        let c = bytes[pos];
        if c.is_ascii_whitespace() {
            pos += 1;
            continue;
        }
        let line_start = at_line_start(text, pos);
        if line_start && is_fence(&text[pos..]) {
            open_fence = !open_fence;
            pos = next_line_start(text, pos);
            continue;
        }
        match c {
            b'{' => pos = take_object(text, pos, &mut lines, acceptor, &mut report),
            b'[' => {
                open_arrays += 1;
                pos += 1;
            }
            b']' => {
                open_arrays = open_arrays.saturating_sub(1);
                pos += 1;
            }
            b',' => pos += 1,
            _ => {
                if line_start {
                    if let Some(n) = list_marker_len(&text[pos..]) {
                        pos += n;
                        continue;
                    }
                }
                pos = take_other(text, pos, &mut lines, &mut report);
            }
        }
    }
    if open_arrays > 0 || open_fence {
        report.truncated = true;
    }
    report
}

/// Read one object starting at `pos` (a `{`); returns where scanning resumes.
fn take_object(text: &str, pos: usize, lines: &mut LineCounter<'_>, acceptor: &Acceptor<'_>, report: &mut ParseReport) -> usize {
    let line = lines.line_at(pos);
    let mut stream = serde_json::Deserializer::from_str(&text[pos..]).into_iter::<Value>();
    match stream.next() {
        Some(Ok(value)) => {
            let end = pos + stream.byte_offset();
            acceptor.accept(report, line, end, value);
            end
        }
        Some(Err(e)) if e.is_eof() => {
            report.drop(line, DropKind::Truncated, format!("cut off: {}", excerpt(&text[pos..])));
            report.truncated = true;
            text.len()
        }
        Some(Err(e)) => {
            let err_line_start = if e.line() <= 1 { pos } else { nth_line_start(text, pos, e.line() - 1) };
            let err_at = (err_line_start + e.column().saturating_sub(1)).min(text.len());
            if text[err_at..].trim().is_empty() {
                // Broken only by the end of the text (e.g. a cut string then a newline): cut off.
                report.drop(line, DropKind::Truncated, format!("cut off: {}", excerpt(&text[pos..])));
                report.truncated = true;
                return text.len();
            }
            report.drop(line, DropKind::InvalidJson, format!("{}: {}", strip_position(&e.to_string()), excerpt(&text[pos..line_end(text, pos)])));
            if e.line() <= 1 {
                return next_line_start(text, pos);
            }
            // The value ran over several lines before breaking. If the break is where a new
            // value starts on its line (an unterminated object followed by the next one), resume
            // there; otherwise after the broken line.
            let first_non_blank = text[err_line_start..]
                .find(|c: char| !c.is_ascii_whitespace())
                .map(|i| err_line_start + i)
                .unwrap_or(text.len());
            if err_at <= first_non_blank { err_line_start } else { next_line_start(text, err_line_start) }
        }
        None => text.len(),
    }
}

/// Something at `pos` that does not start an object: a scalar (dropped as `not_object`) or prose
/// (dropped as `prose`, up to an object that starts later on the same line).
fn take_other(text: &str, pos: usize, lines: &mut LineCounter<'_>, report: &mut ParseReport) -> usize {
    let line = lines.line_at(pos);
    let eol = line_end(text, pos);
    if matches!(text.as_bytes()[pos], b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n') {
        let mut stream = serde_json::Deserializer::from_str(&text[pos..eol]).into_iter::<Value>();
        if let Some(Ok(value)) = stream.next() {
            let end = pos + stream.byte_offset();
            let next = text[end..eol].trim_start().bytes().next();
            if matches!(next, None | Some(b',') | Some(b']')) {
                report.drop(line, DropKind::NotObject, format!("a {} where an object was expected: {}", kind(&value), excerpt(&text[pos..end])));
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

/// Offset of the start of the `n`th line after the one containing `pos`.
fn nth_line_start(text: &str, pos: usize, n: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[pos..]).nth(n - 1).map(|i| pos + i + 1).unwrap_or(text.len())
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
