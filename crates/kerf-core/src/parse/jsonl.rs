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
//!
//! Waiting stays linear in the reply's length. An object still open when the text so far ends is
//! not re-read from its start on every feed: a structural lexer ([`Pending`]) follows it over the
//! bytes as they arrive, and serde_json reads it again only once its closing brace may have
//! arrived, or once its text has doubled since the last read (so a syntax error the lexer cannot
//! see, `{"a": x` followed by more lines, is still reported while the reply streams). Reading
//! later than possible only commits the same steps later: a coarser chunking of the same text.

use serde_json::Value;

use super::Acceptor;
use super::lines::{
    LineCounter, at_line_start, excerpt, floor_char_boundary, is_fence, line_end, list_marker_len,
};
use super::value::Compact;
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
    /// The object at `pos` that the scan waits on, as lexed so far.
    pending: Option<Pending>,
    /// `(from, to)`: no newline in `text[from..to]` (a line the scan waits on to complete).
    no_newline: (usize, usize),
    /// Bytes handed to serde_json so far (the tests check that waiting stays linear).
    #[cfg(test)]
    read_bytes: usize,
}

/// An object whose value has not ended by the end of the text so far: its brackets and strings
/// followed as the text grows, each byte once, so that serde_json is not asked to re-read it from
/// its start on every feed (which made one long object cost time quadratic in its length).
#[derive(Debug, Default, Clone)]
struct Pending {
    /// Offset of its `{`.
    start: usize,
    /// Bytes before this offset are lexed.
    lexed: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The lexer has seen the top-level closing bracket.
    closed: bool,
    /// Once the text is this long, serde_json reads the object again even if it looks open.
    retry_at: usize,
}

impl Pending {
    fn new(start: usize) -> Self {
        Pending {
            start,
            lexed: start,
            ..Default::default()
        }
    }

    /// Lex the bytes that arrived since the last call; true when this call meets the top-level
    /// closing bracket (where a valid value would end: serde_json's strings and brackets are
    /// these). Invalid JSON can mislead the lexer, never the parse: it only decides when
    /// serde_json looks again, and the doubling rule bounds how long that waits.
    fn lex(&mut self, bytes: &[u8]) -> bool {
        if self.closed {
            return false;
        }
        let mut i = self.lexed;
        while i < bytes.len() {
            let b = bytes[i];
            i += 1;
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                } else if let Some(j) = memchr::memchr2(b'"', b'\\', &bytes[i..]) {
                    // Skip the string's plain run at once.
                    i += j;
                } else {
                    i = bytes.len();
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        self.closed = true;
                        self.lexed = i;
                        return true;
                    }
                }
                _ => {}
            }
        }
        self.lexed = i;
        false
    }
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
                match self.next_line_from_pos(text, pos, at_eof) {
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
                    _ if !at_eof && self.next_line_from_pos(text, pos, false).is_none() => {
                        Step::Wait
                    }
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

    /// [`next_line`] for the line at the scan's position, remembering how far a line that is
    /// still open was searched, so that waiting on a long line costs each byte once.
    fn next_line_from_pos(&mut self, text: &str, pos: usize, at_eof: bool) -> Option<usize> {
        let (from, to) = self.no_newline;
        let start = if pos >= from { to.max(pos) } else { pos };
        let next = next_line(text, start, at_eof);
        if next.is_none() {
            self.no_newline = (pos, text.len());
        }
        next
    }

    /// Read one object starting at `pos` (a `{`), or wait for more text. While more may come,
    /// serde_json reads it only when [`Pending`] says it may be complete or has doubled.
    fn take_object(
        &mut self,
        text: &str,
        pos: usize,
        at_eof: bool,
        acceptor: &Acceptor<'_>,
        report: &mut ParseReport,
    ) -> Step {
        if !at_eof {
            let pending = match &mut self.pending {
                Some(p) if p.start == pos => p,
                slot => slot.insert(Pending::new(pos)),
            };
            let closed_now = pending.lex(text.as_bytes());
            if !closed_now && text.len() < pending.retry_at {
                return Step::Wait;
            }
        }
        #[cfg(test)]
        {
            self.read_bytes += text.len() - pos;
        }
        let step = self.read_object(text, pos, at_eof, acceptor, report);
        match step {
            Step::Wait => {
                if let Some(p) = &mut self.pending {
                    // Read again once the object's text so far has doubled (or it closes).
                    p.retry_at = text.len().saturating_add((text.len() - pos).max(1));
                }
            }
            Step::To(_) => self.pending = None,
        }
        step
    }

    /// serde_json's reading of the object at `pos`, and the step it decides.
    fn read_object(
        &mut self,
        text: &str,
        pos: usize,
        at_eof: bool,
        acceptor: &Acceptor<'_>,
        report: &mut ParseReport,
    ) -> Step {
        let mut stream = serde_json::Deserializer::from_str(&text[pos..]).into_iter::<Compact>();
        match stream.next() {
            Some(Ok(Compact(value))) => {
                let end = pos + stream.byte_offset();
                let line = self.lines.line_at(text, pos);
                acceptor.accept(report, line, (pos, end), value);
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
                let err_at = super::break_at(text, err_at, &e);
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
                // A string with a `{` in it is read as prose: whether its closing quote comes
                // can depend on text not yet written, and a reply cut before it would find an
                // object in it that the whole reply then hides (`"{}` yields `{}`, `"{}"` would
                // yield nothing), so a sweep's count at a cut would not be what that cut parses
                // to. Read as prose, its objects are the same at every cut.
                let hides_object = value.is_string() && text[pos..end].contains('{');
                if !hides_object && matches!(next, None | Some(b',') | Some(b']')) {
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

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;
    use crate::prompt::PostRules;

    /// Feed `text` in `size`-byte pieces; the bytes serde_json was handed in all.
    fn work(text: &str, size: usize) -> (usize, ParseReport) {
        let (post, vars) = (PostRules::default(), Map::new());
        let acceptor = Acceptor {
            schema: None,
            post: &post,
            vars: &vars,
        };
        let mut scan = Scanner::default();
        let mut report = ParseReport::default();
        let mut end = 0;
        while end < text.len() {
            end = (end + size).min(text.len());
            scan.run(&text[..end], false, &acceptor, &mut report);
        }
        scan.run(text, true, &acceptor, &mut report);
        scan.finish(&mut report);
        assert_eq!(report, parse(text, &acceptor));
        (scan.read_bytes, report)
    }

    #[test]
    fn an_open_object_is_read_a_bounded_number_of_times() {
        let mut text = String::from("{\"a\": [");
        while text.len() < 100_000 {
            text.push_str("{\"s\": \"} ] \\\" {\"}, ");
        }
        text.push_str("{}]}\n{\"b\": 1}\n");
        let (read, report) = work(&text, 4);
        assert_eq!(report.objects.len(), 2);
        // Re-read only as it doubles, plus once when it closes (it was 25,000 reads of up to
        // 100 KB each).
        assert!(
            read < 4 * text.len(),
            "{read} bytes read for {}",
            text.len()
        );
    }

    #[test]
    fn a_broken_open_object_is_reported_before_the_end() {
        let mut text = String::from("{\"a\": x\n");
        while text.len() < 100_000 {
            text.push_str("{\"b\": 1}\n");
        }
        let (read, report) = work(&text, 4);
        assert_eq!(report.dropped.len(), 1);
        assert!(
            read < 4 * text.len(),
            "{read} bytes read for {}",
            text.len()
        );
        // Fed up to the last line, the drop is already committed.
        let (post, vars) = (PostRules::default(), Map::new());
        let acceptor = Acceptor {
            schema: None,
            post: &post,
            vars: &vars,
        };
        let mut scan = Scanner::default();
        let mut committed = ParseReport::default();
        for end in (4..text.len() - 10).step_by(4) {
            scan.run(&text[..end], false, &acceptor, &mut committed);
        }
        assert_eq!(committed.dropped.len(), 1);
    }
}
