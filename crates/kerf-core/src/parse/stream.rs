//! Incremental parsing: feed a reply in chunks as it streams; after any chunk, ask what the reply
//! so far yields. Feeding a reply in any chunking gives exactly the report of parsing it whole.
//!
//! `jsonl` and `delimited` are truly incremental: their scanners resume where they stopped and
//! commit only steps that more text cannot change; a snapshot adds what the uncommitted tail
//! (at most the current line or object) yields if the reply ended there. `json` cannot yield an
//! object before its value completes (strict) or is re-examined as a whole (salvage), so its
//! snapshot parses the text so far.

use serde_json::{Map, Value};

use super::{Acceptor, Parser, delimited, jsonl};
use crate::prompt::ResponseType;
use crate::report::ParseReport;

const BOM: char = '\u{feff}';

/// A parse in progress.
pub struct StreamParser<'p> {
    parser: &'p Parser,
    vars: Map<String, Value>,
    buf: String,
    /// Bytes of a leading BOM (decided once the first character arrives).
    bom: Option<usize>,
    committed: ParseReport,
    state: State,
}

#[derive(Clone)]
enum State {
    Jsonl(jsonl::Scanner),
    Delimited(delimited::Scanner),
    /// `text` and `json`: parsed as a whole.
    Whole,
}

impl<'p> StreamParser<'p> {
    pub fn new(parser: &'p Parser, vars: Map<String, Value>) -> Self {
        let state = match parser.response_type {
            ResponseType::Jsonl => State::Jsonl(jsonl::Scanner::default()),
            ResponseType::Delimited => State::Delimited(delimited::Scanner::default()),
            ResponseType::Text | ResponseType::Json => State::Whole,
        };
        StreamParser {
            parser,
            vars,
            buf: String::new(),
            bom: None,
            committed: ParseReport::default(),
            state,
        }
    }

    /// The parser this stream feeds.
    pub fn parser(&self) -> &'p Parser {
        self.parser
    }

    /// The run's variables (post-processing rules read them).
    pub fn vars(&self) -> &Map<String, Value> {
        &self.vars
    }

    /// The text received so far.
    pub fn text(&self) -> &str {
        &self.buf
    }

    /// Take the next chunk of the reply.
    pub fn feed(&mut self, chunk: &str) {
        self.buf.push_str(chunk);
        if self.bom.is_none() && !self.buf.is_empty() {
            self.bom = Some(if self.buf.starts_with(BOM) {
                BOM.len_utf8()
            } else {
                0
            });
        }
        let body_from = self.bom.unwrap_or(0);
        let acceptor = Acceptor {
            schema: self.parser.schema.as_ref(),
            post: &self.parser.post,
            vars: &self.vars,
        };
        let body = &self.buf[body_from..];
        let before = self.committed.ends.len();
        match &mut self.state {
            State::Jsonl(scan) => scan.run(body, false, &acceptor, &mut self.committed),
            State::Delimited(scan) => scan.run(
                body,
                &self.parser.delimited,
                false,
                &acceptor,
                &mut self.committed,
            ),
            State::Whole => {}
        }
        self.committed.ends.shift_from(before, body_from);
        self.committed.starts.shift_from(before, body_from);
    }

    /// Objects accepted from committed steps only (they can no longer change).
    pub fn committed(&self) -> &ParseReport {
        &self.committed
    }

    /// What the reply received so far yields if it ended here: exactly `parse(text so far)`.
    pub fn snapshot(&self) -> ParseReport {
        let mut state = self.state.clone();
        let mut report = self.committed.clone();
        self.run_to_end(&mut state, &mut report);
        report
    }

    /// The reply is complete: the final report, exactly `parse(whole text)`.
    pub fn finish(mut self) -> ParseReport {
        let mut state = std::mem::replace(&mut self.state, State::Whole);
        let mut report = std::mem::take(&mut self.committed);
        self.run_to_end(&mut state, &mut report);
        report
    }

    fn run_to_end(&self, state: &mut State, report: &mut ParseReport) {
        let body_from = self.bom.unwrap_or(0);
        let body = &self.buf[body_from..];
        let acceptor = Acceptor {
            schema: self.parser.schema.as_ref(),
            post: &self.parser.post,
            vars: &self.vars,
        };
        let before = report.ends.len();
        match state {
            State::Jsonl(scan) => {
                scan.run(body, true, &acceptor, report);
                scan.finish(report);
            }
            State::Delimited(scan) => {
                scan.run(body, &self.parser.delimited, true, &acceptor, report);
                scan.finish(report);
            }
            State::Whole => {
                *report = self.parser.parse(&self.buf, &self.vars);
                return;
            }
        }
        report.ends.shift_from(before, body_from);
        report.starts.shift_from(before, body_from);
    }
}
