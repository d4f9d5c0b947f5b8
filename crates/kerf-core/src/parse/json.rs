//! `json`: one JSON value.
//!
//! *Strict* is TrustGraph's behaviour: the first fenced block (```` ``` ```` or ```` ```json ````,
//! here any language tag) or else the whole text, parsed and validated as a whole; any failure
//! fails the reply.
//!
//! *Salvage* finds the value inside prose and fences (an opening fence with no closing one: all
//! that follows it), validates array elements one by one so one bad element is dropped rather than
//! the whole array, and when the value is cut off recovers every complete element of the top-level
//! array, and of arrays under the top-level keys of an object. An element whose text is incomplete
//! is dropped as `truncated`; nothing is closed or repaired into a valid-looking shorter value.

use serde_json::{Map, Value};

use super::lines::{
    LineIndex, excerpt, floor_char_boundary, line_end, line_of, line_start, next_line_start,
};
use serde::de::DeserializeSeed;

use super::value::{Compact, Elements, Skim, Top};
use super::{Acceptor, Parser, coerce};
use crate::error::strip_position;
use crate::objects::{Ends, Objects};
use crate::report::{DropKind, ParseReport};
use crate::schema::{self, CompiledSchema};

mod sweep;

pub(crate) use sweep::salvage_curve;

/// A fenced block: (offset of its content, its content, whether a closing fence was found).
fn first_fence(text: &str) -> Option<(usize, &str, bool)> {
    let open = text.find("```")?;
    let content_start = next_line_start(text, open);
    match text[content_start..].find("```") {
        Some(close) => Some((
            content_start,
            &text[content_start..content_start + close],
            true,
        )),
        None => Some((content_start, &text[content_start..], false)),
    }
}

pub(crate) fn strict(text: &str, parser: &Parser, vars: &Map<String, Value>) -> ParseReport {
    let mut report = ParseReport::default();
    let (offset, body) = match first_fence(text) {
        Some((start, content, true)) => (start, content),
        _ => (0, text),
    };
    let lead = body.len() - body.trim_start().len();
    // A line or two is all strict mode names: counted when needed, no index of every line.
    let body_line = line_of(text, offset + lead);
    let acceptor = Acceptor {
        schema: None,
        post: &parser.post,
        vars,
    };
    let end = offset + lead + body.trim().len();
    // Every object counts from the whole value's text.
    let span = (offset + lead, end);
    let read = if parser.schema.is_none() {
        // No schema judges the value as a whole: an array's elements go into the report as they
        // are read (the whole array is never built), and stay there only if the value parses.
        let mut accepted = ParseReport::default();
        let mut de = serde_json::Deserializer::from_str(body.trim());
        let top = Elements(|v| acceptor.finish(&mut accepted, body_line, span, v))
            .deserialize(&mut de)
            .and_then(|top| de.end().map(|()| top));
        top.map(|top| match top {
            Top::Array => {
                report = accepted;
                None
            }
            Top::Value(v) => Some(v),
        })
    } else {
        serde_json::from_str::<Compact>(body.trim()).map(|c| Some(c.0))
    };
    let mut value: Value = match read {
        Ok(Some(v)) => v,
        Ok(None) => return report,
        Err(e) => {
            let line = body_line + e.line().saturating_sub(1);
            let at = line_start(text, line);
            let body_end = offset + body.len();
            let err_at = floor_char_boundary(
                text,
                if e.line() <= 1 { offset + lead } else { at } + e.column().saturating_sub(1),
            );
            let err_at = super::break_at(&text[..body_end], err_at, &e);
            // Broken only by the end of the body (a cut string then a newline) is cut off too.
            if e.is_eof()
                || text
                    .get(err_at..body_end)
                    .is_some_and(|rest| rest.trim().is_empty())
            {
                report.drop(
                    body_line,
                    DropKind::Truncated,
                    format!(
                        "the JSON value is cut off: {}",
                        strip_position(&e.to_string())
                    ),
                );
                report.truncated = true;
            } else {
                report.drop(
                    line,
                    DropKind::InvalidJson,
                    format!(
                        "{} (column {}): {}",
                        strip_position(&e.to_string()),
                        e.column(),
                        excerpt(&text[at..line_end(text, at)])
                    ),
                );
            }
            return report;
        }
    };
    if let Some(schema) = &parser.schema {
        if parser.post.coerce {
            let coerced = match &mut value {
                Value::Array(items) => {
                    let item_schema =
                        schema::items_schema(schema.raw()).unwrap_or(Value::Bool(true));
                    items.iter_mut().try_for_each(|v| coerce(v, &item_schema))
                }
                v => coerce(v, schema.raw()),
            };
            if let Err(detail) = coerced {
                report.drop(body_line, DropKind::Coerce, detail);
                return report;
            }
        }
        if let Err(violations) = schema.validate(&value) {
            report.drop(
                body_line,
                schema::drop_kind(&violations),
                schema::describe(&violations),
            );
            return report;
        }
    }
    match value {
        Value::Array(items) => acceptor.finish_all(&mut report, body_line, span, items),
        v => acceptor.finish(&mut report, body_line, span, v),
    }
    report
}

/// JSON's four blanks (RFC 8259 `ws`). Not `is_ascii_whitespace`, which also takes a form feed:
/// serde breaks on one, and a walk that stepped over it would read a member the read before it
/// called broken (a salvage sweep's choice of value then changed where no settle point said).
fn is_json_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The ranges of the elements a strict parse of `text` accepted, when its value is an array
/// (the value's own range when it is not): each element read again and put through `acceptor`
/// (the post rules, which decide per element; the schema judged the value as a whole, and a
/// report with objects passed it). `None` when the value is not where a strict parse finds it.
pub(crate) fn strict_spans(text: &str, acceptor: &Acceptor<'_>) -> Option<Vec<(usize, usize)>> {
    let (offset, body) = match first_fence(text) {
        Some((start, content, true)) => (start, content),
        _ => (0, text),
    };
    let start = offset + (body.len() - body.trim_start().len());
    let end = start + body.trim().len();
    let bytes = text.as_bytes();
    if bytes.get(start) != Some(&b'[') {
        return (start < end).then(|| vec![(start, end)]);
    }
    let skip_ws = |mut p: usize| {
        while p < end && is_json_blank(bytes[p]) {
            p += 1;
        }
        p
    };
    let mut spans = Vec::new();
    let mut pos = start + 1;
    loop {
        pos = skip_ws(pos);
        match bytes.get(pos) {
            Some(b']') => return Some(spans),
            Some(b',') => {
                pos += 1;
                continue;
            }
            Some(_) if pos < end => {}
            _ => return None,
        }
        let mut stream = serde_json::Deserializer::from_str(&text[pos..end]).into_iter::<Compact>();
        let Some(Ok(Compact(value))) = stream.next() else {
            return None;
        };
        let next = pos + stream.byte_offset();
        let mut one = ParseReport::default();
        acceptor.finish(&mut one, 0, (pos, next), value);
        if !one.objects.is_empty() {
            spans.push((pos, next));
        }
        pos = next;
    }
}

pub(crate) fn salvage(text: &str, parser: &Parser, vars: &Map<String, Value>) -> ParseReport {
    let mut report = ParseReport::default();
    let lines = LineIndex::new(text);
    let (region_start, region) = match first_fence(text) {
        Some((start, content, closed)) => {
            if !closed {
                report.truncated = true;
            }
            (start, content)
        }
        None => (0, text),
    };
    let mut salvager = Salvager {
        text,
        lines: &lines,
        report: &mut report,
        parser,
        vars,
        scalar_reads: None,
        resyncs: Vec::new(),
    };
    salvager.find_and_take(region_start, region_start + region.len());
    report
}

struct Salvager<'a, 'r> {
    text: &'a str,
    lines: &'a LineIndex,
    report: &'r mut ParseReport,
    parser: &'a Parser,
    vars: &'a Map<String, Value>,
    /// When set, `walk_array` records where each bare scalar element (one that starts like a
    /// number, `true`, `false` or `null`) was read: (its offset, the last prefix end at which a
    /// shorter read may be a value there — `1` of `12`, `true` of `truex`, which whole breaks —
    /// and the first prefix end at which the walk reaches it: later than the offset after a
    /// resync, below).
    scalar_reads: Option<Vec<(usize, usize, usize)>>,
    /// When set (with `scalar_reads`, by sweeps), `walk_array` records each resync after a
    /// broken element: (how many element ends were recorded before it, the first prefix end at
    /// which that element reads as broken rather than cut off). The resync goes back to the line
    /// after the broken element's start, so elements it recovers can end before the break: a
    /// shorter prefix sees the broken element cut off, drops it and never gets to them.
    resyncs: Vec<(usize, usize)>,
}

/// Where [`Salvager::walk_array`] puts the elements it accepts.
enum Sink<'s> {
    /// The report's objects, and where each one's text ends and starts (a top-level array).
    Report(&'s mut Objects, &'s mut Ends, &'s mut Ends),
    /// As values (an array under a key of the recovered object).
    Values(&'s mut Vec<Value>),
    /// Only where each one's text ends (sweeps).
    Ends(&'s mut Vec<usize>),
}

/// How one element read went.
enum Read {
    Value(Value, usize),
    CutOff,
    /// Does not parse: the message, and the offset where parsing failed.
    Broken(String, usize),
}

/// The value salvage takes: the `{` or `[` at an offset, or a bare scalar (no opening at all).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Choice {
    At(usize),
    Bare,
}

/// At most this many candidate openings are tried when looking for the value inside prose.
const MAX_CANDIDATES: usize = 64;

impl Salvager<'_, '_> {
    fn read(&self, pos: usize, end: usize) -> Read {
        self.read_as::<Compact>(pos, end, |c| c.0)
    }

    /// [`Salvager::read`] keeping nothing of the value (`Read::Value` holds `null`): the same
    /// verdict and the same offsets, without building the value.
    fn skim(&self, pos: usize, end: usize) -> Read {
        self.read_as::<Skim>(pos, end, |_| Value::Null)
    }

    fn read_as<T: serde::de::DeserializeOwned>(
        &self,
        pos: usize,
        end: usize,
        value: impl FnOnce(T) -> Value,
    ) -> Read {
        let mut stream = serde_json::Deserializer::from_str(&self.text[pos..end]).into_iter::<T>();
        match stream.next() {
            Some(Ok(v)) => Read::Value(value(v), pos + stream.byte_offset()),
            Some(Err(e)) if e.is_eof() => Read::CutOff,
            Some(Err(e)) => {
                let at = if e.line() <= 1 {
                    pos + e.column().saturating_sub(1)
                } else {
                    let line = self.lines.line_of(pos) + e.line() - 1;
                    self.lines.start_of(line, self.text.len()) + e.column().saturating_sub(1)
                };
                let at = floor_char_boundary(self.text, at.min(end));
                let at = super::break_at(&self.text[..end], at, &e);
                if self.text[at..end].trim().is_empty() {
                    // Broken only by the end of the text (a cut string then a newline): cut off.
                    return Read::CutOff;
                }
                Read::Broken(strip_position(&e.to_string()), at)
            }
            None => Read::CutOff,
        }
    }

    fn skip_ws(&self, mut pos: usize, end: usize) -> usize {
        let b = self.text.as_bytes();
        while pos < end && is_json_blank(b[pos]) {
            pos += 1;
        }
        pos
    }

    /// Find the JSON value in `[start, end)` and take it.
    fn find_and_take(&mut self, start: usize, end: usize) {
        match self.choose(start, end, |_, _| {}) {
            Choice::At(at) => self.take(at, end),
            Choice::Bare => self.take_bare(start, end),
        }
    }

    /// Which value salvage takes from `[start, end)`. Candidates are the `{` and `[` openings;
    /// the first whose value is complete and valid wins at once, otherwise the one that reaches
    /// furthest (complete, cut off at the end, or broken part-way — salvage handles the last two),
    /// so a stray `[1]` in the prose does not hide the real answer. `seen` is told each candidate
    /// tried and how its read went (sweeps use it to find where the choice can change).
    fn choose(&self, start: usize, end: usize, mut seen: impl FnMut(usize, &Read)) -> Choice {
        let bytes = self.text.as_bytes();
        let mut pos = start;
        let mut best: Option<(usize, usize)> = None; // (reach, opening offset)
        for _ in 0..MAX_CANDIDATES {
            let Some(i) = memchr::memchr2(b'{', b'[', &bytes[pos..end]) else {
                break;
            };
            let at = pos + i;
            // Without a schema the value is only looked at, never judged: skimmed, not built
            // (a reply's whole array would be held as values at once).
            let read = if self.parser.schema.is_some() {
                self.read(at, end)
            } else {
                self.skim(at, end)
            };
            seen(at, &read);
            let reach = match read {
                Read::Value(v, next) => {
                    if self.parser.schema.as_ref().is_some_and(|s| s.is_valid(&v)) {
                        return Choice::At(at);
                    }
                    pos = next;
                    next
                }
                Read::CutOff => {
                    pos = end;
                    end
                }
                Read::Broken(_, failed_at) => {
                    pos = at + 1;
                    // A value that breaks after at least one complete element is salvageable
                    // and counts as reaching the end; a stray bracket in prose does not.
                    if self.first_member_parses(at, end) {
                        end
                    } else {
                        failed_at
                    }
                }
            };
            if best.is_none_or(|(r, _)| reach > r) {
                best = Some((reach, at));
            }
            if pos >= end {
                break;
            }
        }
        best.map_or(Choice::Bare, |(_, at)| Choice::At(at))
    }

    /// No object or array in `[start, end)`: perhaps a bare scalar.
    fn take_bare(&mut self, start: usize, end: usize) {
        let region = &self.text[start..end];
        let body = region.trim();
        // The value's own text: from its first character to the region's end.
        let span = (start + (region.len() - region.trim_start().len()), end);
        match serde_json::from_str::<Value>(body) {
            Ok(v) => Acceptor {
                schema: self.parser.schema.as_ref(),
                post: &self.parser.post,
                vars: self.vars,
            }
            .accept(self.report, self.lines.line_of(start), span, v),
            Err(_) => self.report.drop(
                self.lines.line_of(start),
                DropKind::InvalidJson,
                format!("no JSON value found: {}", excerpt(body)),
            ),
        }
    }

    /// Whether the first element (of an array) or first member (of an object) at `at` parses.
    fn first_member_parses(&self, at: usize, end: usize) -> bool {
        let mut pos = self.skip_ws(at + 1, end);
        if self.text.as_bytes()[at] == b'{' {
            let Read::Value(Value::String(_), next) = self.read(pos, end) else {
                return false;
            };
            pos = self.skip_ws(next, end);
            if self.text.as_bytes().get(pos) != Some(&b':') {
                return false;
            }
            pos = self.skip_ws(pos + 1, end);
        }
        matches!(self.read(pos, end), Read::Value(..))
    }

    fn take(&mut self, at: usize, end: usize) {
        let line = self.lines.line_of(at);
        if self.text.as_bytes()[at] == b'[' {
            let items = self.parser.items.as_ref();
            // The elements go straight into the report (no second vector of them).
            let mut objects = std::mem::take(&mut self.report.objects);
            let mut ends = std::mem::take(&mut self.report.ends);
            let mut starts = std::mem::take(&mut self.report.starts);
            self.walk_array(
                at,
                end,
                items,
                Sink::Report(&mut objects, &mut ends, &mut starts),
            );
            self.report.objects = objects;
            self.report.ends = ends;
            self.report.starts = starts;
            return;
        }
        let drops_before = self.report.dropped.len();
        let Some(object) = self.walk_object(at, end) else {
            return;
        };
        if object.is_empty() && self.report.dropped.len() > drops_before {
            // Nothing complete was recovered: report the drops, not an empty object.
            return;
        }
        let acceptor = Acceptor {
            schema: None,
            post: &self.parser.post,
            vars: self.vars,
        };
        acceptor.finish(self.report, line, (at, end), Value::Object(object));
    }

    /// Walk the array at `pos` element by element: the accepted elements go to `sink`; returns,
    /// when the array was closed, the offset after its `]`. Each element goes through the
    /// acceptor with `items` as its schema; a cut-off element is `truncated`.
    fn walk_array(
        &mut self,
        pos: usize,
        end: usize,
        items: Option<&CompiledSchema>,
        mut sink: Sink<'_>,
    ) -> Option<usize> {
        let mut closed_at = None;
        let mut elements = ParseReport::default();
        let acceptor = Acceptor {
            schema: items,
            post: &self.parser.post,
            vars: self.vars,
        };
        let mut pos = pos + 1;
        loop {
            pos = self.skip_ws(pos, end);
            if pos >= end {
                self.report.truncated = true;
                break;
            }
            if self.text.as_bytes()[pos] == b']' {
                closed_at = Some(pos + 1);
                break;
            }
            let line = self.lines.line_of(pos);
            let read = self.read(pos, end);
            if let Some(reads) = self.scalar_reads.as_mut()
                && matches!(
                    self.text.as_bytes()[pos],
                    b'-' | b'0'..=b'9' | b't' | b'f' | b'n'
                )
            {
                let last = match &read {
                    Read::Value(_, next) => next - 1,
                    Read::Broken(_, failed_at) => *failed_at,
                    Read::CutOff => end,
                };
                let reached = self.resyncs.iter().map(|r| r.1).max().unwrap_or(0);
                reads.push((pos, last, reached));
            }
            match read {
                Read::Value(v, next) => {
                    if let Some(v) = acceptor.check(&mut elements, line, v) {
                        match &mut sink {
                            Sink::Report(objects, ends, starts) => {
                                objects.push(&v);
                                ends.push(next);
                                starts.push(pos);
                            }
                            Sink::Values(values) => values.push(v),
                            Sink::Ends(ends) => ends.push(next),
                        }
                    }
                    pos = self.skip_ws(next, end);
                    match self.text.as_bytes().get(pos) {
                        Some(b',') if pos < end => pos += 1,
                        Some(b']') if pos < end => {
                            closed_at = Some(pos + 1);
                            break;
                        }
                        None => {
                            self.report.truncated = true;
                            break;
                        }
                        Some(_) if pos >= end => {
                            self.report.truncated = true;
                            break;
                        }
                        Some(_) => {
                            elements.drop(
                                self.lines.line_of(pos),
                                DropKind::InvalidJson,
                                format!(
                                    "expected `,` or `]` after an element: {}",
                                    excerpt(&self.text[pos..line_end(self.text, pos)])
                                ),
                            );
                            match self.resync(pos, end) {
                                Some(p) => pos = p,
                                None => break,
                            }
                        }
                    }
                }
                Read::CutOff => {
                    elements.drop(
                        line,
                        DropKind::Truncated,
                        format!("cut off: {}", excerpt(&self.text[pos..end])),
                    );
                    self.report.truncated = true;
                    break;
                }
                Read::Broken(msg, failed_at) => {
                    elements.drop(
                        line,
                        DropKind::InvalidJson,
                        format!(
                            "{msg}: {}",
                            excerpt(&self.text[pos..line_end(self.text, pos)])
                        ),
                    );
                    if self.scalar_reads.is_some() {
                        let broken_from = broken_from(self.text, failed_at, end);
                        let found = match &sink {
                            Sink::Report(objects, ..) => objects.len(),
                            Sink::Values(values) => values.len(),
                            Sink::Ends(ends) => ends.len(),
                        };
                        self.resyncs.push((found, broken_from));
                    }
                    match self.resync(pos, end) {
                        Some(p) => pos = p,
                        None => break,
                    }
                }
            }
        }
        self.report.dropped.append(&mut elements.dropped);
        closed_at
    }

    /// After a broken element, continue at the next line that starts an element.
    fn resync(&self, pos: usize, end: usize) -> Option<usize> {
        let mut p = next_line_start(self.text, pos);
        while p < end {
            let q = self.skip_ws(p, end);
            match self.text.as_bytes().get(q) {
                Some(b'{') | Some(b'[') => return Some(q),
                Some(b']') => return Some(q),
                _ => p = next_line_start(self.text, q.max(p)),
            }
        }
        None
    }

    /// Walk a top-level object key by key: arrays under keys are salvaged element by element,
    /// other values are kept when complete and valid. Returns the recovered object.
    fn walk_object(&mut self, pos: usize, end: usize) -> Option<Map<String, Value>> {
        let root = self.parser.schema.as_ref().map(|s| s.raw().clone());
        let mut out = Map::new();
        let mut pos = pos + 1;
        let start_line = self.lines.line_of(pos);
        let complete = loop {
            match self.object_step(pos, end, root.as_ref(), &mut out) {
                Step::Next(next) => pos = next,
                Step::Closed => break true,
                Step::Ended => break false,
                Step::Stopped => return Some(out),
            }
        };
        self.object_end(complete, start_line, root.as_ref(), |k| out.contains_key(k));
        Some(out)
    }

    /// One step of an object walk from `pos`: a separator, or one member (key, `:`, value) put
    /// into `out` when complete and valid. Each step's outcome depends only on the text from
    /// `pos` to where the step ends, which is what lets a sweep resume a walk at any step.
    fn object_step(
        &mut self,
        pos: usize,
        end: usize,
        root: Option<&Value>,
        out: &mut Map<String, Value>,
    ) -> Step {
        let mut pos = self.skip_ws(pos, end);
        if pos >= end {
            return Step::Ended;
        }
        match self.text.as_bytes()[pos] {
            b'}' => return Step::Closed,
            b',' => return Step::Next(pos + 1),
            _ => {}
        }
        let line = self.lines.line_of(pos);
        let key = match self.read(pos, end) {
            Read::Value(Value::String(k), next) => {
                pos = next;
                k
            }
            Read::CutOff => return Step::Ended,
            _ => {
                self.report.drop(
                    line,
                    DropKind::InvalidJson,
                    format!(
                        "expected a key: {}",
                        excerpt(&self.text[pos..line_end(self.text, pos)])
                    ),
                );
                return Step::Stopped;
            }
        };
        pos = self.skip_ws(pos, end);
        if pos >= end {
            return Step::Ended;
        }
        if self.text.as_bytes()[pos] != b':' {
            self.report.drop(
                line,
                DropKind::InvalidJson,
                format!("expected `:` after key `{key}`"),
            );
            return Step::Stopped;
        }
        pos = self.skip_ws(pos + 1, end);
        if pos >= end {
            return Step::Ended;
        }
        let prop = root.and_then(|r| schema::property_schema(r, &key));
        if self.text.as_bytes()[pos] == b'[' {
            let items = prop.as_ref().and_then(schema::items_schema).and_then(|s| {
                CompiledSchema::compile(&s, &format!("schema /properties/{key}/items")).ok()
            });
            let mut elements = Vec::new();
            let closed_at = self.walk_array(pos, end, items.as_ref(), Sink::Values(&mut elements));
            elements.shrink_to_fit();
            out.insert(key, Value::Array(elements));
            return match closed_at {
                Some(next) => Step::Next(next),
                None => {
                    self.report.truncated = true;
                    Step::Ended
                }
            };
        }
        match self.read(pos, end) {
            Read::Value(v, next) => {
                let compiled = prop
                    .as_ref()
                    .and_then(|p| CompiledSchema::compile(p, "schema").ok());
                match compiled.map(|c| c.validate(&v)) {
                    Some(Err(violations)) => {
                        let detail = violations
                            .iter()
                            .map(|x| format!("/{key}{}: {}", x.pointer, x.message))
                            .collect::<Vec<_>>()
                            .join("; ");
                        self.report
                            .drop(line, schema::drop_kind(&violations), detail);
                    }
                    _ => {
                        out.insert(key, v);
                    }
                }
                Step::Next(next)
            }
            Read::CutOff => {
                self.report.drop(
                    line,
                    DropKind::Truncated,
                    format!("value of `{key}` cut off"),
                );
                self.report.truncated = true;
                Step::Stopped
            }
            Read::Broken(msg, _) => {
                self.report.drop(
                    line,
                    DropKind::InvalidJson,
                    format!("value of `{key}`: {msg}"),
                );
                Step::Stopped
            }
        }
    }

    /// After an object walk that was not stopped by an error: an object without its `}` is
    /// truncated, and the keys the schema requires that never arrived are reported.
    fn object_end(
        &mut self,
        complete: bool,
        start_line: usize,
        root: Option<&Value>,
        has: impl Fn(&str) -> bool,
    ) {
        if !complete {
            self.report.truncated = true;
        }
        if let Some(required) = root
            .and_then(|r| r.get("required"))
            .and_then(Value::as_array)
        {
            let missing: Vec<String> = required
                .iter()
                .filter_map(Value::as_str)
                .filter(|k| !has(k))
                .map(|k| format!("`{k}`"))
                .collect();
            if !missing.is_empty() {
                let kind = if complete {
                    DropKind::Schema
                } else {
                    DropKind::Truncated
                };
                self.report.drop(
                    start_line,
                    kind,
                    format!(
                        "required key(s) {} missing from the recovered object",
                        missing.join(", ")
                    ),
                );
            }
        }
    }
}

/// How one step of an object walk ended.
enum Step {
    /// A separator or a member was read; the walk goes on at this offset.
    Next(usize),
    /// The object's `}`.
    Closed,
    /// The text ended (or a key or value was cut off) before the `}`.
    Ended,
    /// A key or value that does not parse: the walk stops where it is.
    Stopped,
}

/// The first prefix end at which a value that breaks at `failed_at` reads as broken rather than
/// cut off: once a non-blank (to `trim`) character follows the break, that character whole.
fn broken_from(text: &str, failed_at: usize, end: usize) -> usize {
    text[failed_at..end]
        .char_indices()
        .find(|(_, ch)| !ch.is_whitespace())
        .map_or(end + 1, |(i, ch)| failed_at + i + ch.len_utf8())
}

/// Where a read that went as `read` over a longer text settles for shorter prefixes: prefixes
/// ending before these points read it as cut off; from them on, as it went.
fn settle_points(text: &str, read: &Read, end: usize) -> Vec<usize> {
    match read {
        Read::Value(_, next) => vec![*next],
        Read::Broken(_, failed_at) => {
            let mut points = vec![*failed_at, failed_at + 1];
            let from = broken_from(text, *failed_at, end);
            if from <= end {
                points.push(from);
            }
            points
        }
        Read::CutOff => Vec::new(),
    }
}

/// Offsets (prefix ends) where an object's recovered content can change: the start and end of
/// each of its top-level tokens, where each string or nested value settles (a key that is cut
/// off ends the walk quietly, a broken one drops), every character of bare tokens (numbers,
/// literals), up to its closing brace or `hi`.
fn object_probes(salvager: &Salvager<'_, '_>, a: usize, hi: usize) -> Vec<usize> {
    let text = salvager.text;
    let b = text.as_bytes();
    let hi = hi.min(b.len());
    let mut probes = vec![a + 1];
    let mut i = a + 1;
    while i < hi {
        match b[i] {
            open @ (b'"' | b'{' | b'[') => {
                probes.push(i + 1);
                probes.extend(settle_points(text, &salvager.read(i, hi), hi));
                i = if open == b'"' {
                    string_end(b, i)
                } else {
                    container_end(b, i)
                };
                probes.push(i);
            }
            b'}' | b']' => {
                probes.push(i + 1);
                break;
            }
            // JSON's blanks only: a form feed is blank to `trim` but breaks a read, so a cut
            // after it can change the count.
            blank if is_json_blank(blank) => i += 1,
            _ => {
                i += 1;
                probes.push(i);
            }
        }
    }
    probes
}

/// Offset after the string literal opening at `i` (or the end of the text).
fn string_end(b: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'"' => return j + 1,
            b'\\' => j += 2,
            _ => j += 1,
        }
    }
    b.len()
}

/// Offset after the bracket closing the container opening at `i` (or the end of the text).
fn container_end(b: &[u8], i: usize) -> usize {
    let mut depth = 0usize;
    let mut j = i;
    while j < b.len() {
        match b[j] {
            b'"' => {
                j = string_end(b, j);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    b.len()
}

/// Offsets where a bare scalar in `[start, end)` can become (or stop being) the whole region:
/// each character of a number, the end of a string or literal, and the next non-blank character.
/// Where the JSON value at `s` in `text[..end]` ends, read as the prefix that ends there reads
/// it. A bare literal ends after its word: serde's value stream refuses `null` followed by a
/// character that cannot follow a value (`nullé`), but the prefix that ends at the word never
/// sees that character. `None` when no value is read there.
pub(crate) fn value_end(text: &str, s: usize, end: usize) -> Option<usize> {
    let body = &text[s..end];
    if let Some(word) = ["true", "false", "null"]
        .into_iter()
        .find(|w| body.starts_with(w))
    {
        return Some(s + word.len());
    }
    let mut stream = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    matches!(stream.next(), Some(Ok(_))).then(|| s + stream.byte_offset())
}

fn bare_probes(text: &str, start: usize, end: usize) -> Vec<usize> {
    let Some((i, ch)) = text[start..end]
        .char_indices()
        .find(|(_, ch)| !ch.is_whitespace())
    else {
        return Vec::new();
    };
    let s = start + i;
    let mut probes = vec![s + ch.len_utf8()];
    let run = text[s..end]
        .bytes()
        .take_while(|b| b"-+.eE0123456789".contains(b))
        .count();
    probes.extend(s + 1..=s + run);
    let value_end = value_end(text, s, end).unwrap_or(s + run);
    probes.push(value_end);
    if let Some((j, ch)) = text[value_end..end]
        .char_indices()
        .find(|(_, ch)| !ch.is_whitespace())
    {
        probes.push(value_end + j + ch.len_utf8());
    }
    probes
}

/// One walk of the object salvage chose, over the longest prefix. Its steps (separators and
/// members) come out the same for every prefix that contains them, so a prefix's walk is the
/// longest one's up to the last step starting within it; what that shared part recovered is
/// kept per step as "from which step on": a key at all, a drop at all, each watched key (those
/// the schema requires and `ensure` names — the only keys the count depends on).
struct ObjectWalk {
    at: usize,
    root: Option<Value>,
    /// Where each step starts, in order; the first is just after the `{`.
    marks: Vec<usize>,
    /// The first step whose start sees a recovered key (`usize::MAX`: none ever).
    first_key: usize,
    /// The first step whose start sees a drop.
    first_drop: usize,
    /// Watched keys, sorted, each with the first step whose start sees it.
    watched: Vec<(String, usize)>,
}

/// One walk of the array salvage chose: where it starts, the ends of its accepted elements, and
/// where its bare scalar elements were read (`(start, last byte read)`).
struct ArrayWalk {
    at: usize,
    ends: Vec<usize>,
    reads: Vec<(usize, usize, usize)>,
}
