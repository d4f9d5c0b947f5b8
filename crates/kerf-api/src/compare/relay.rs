//! Where a compare's progress goes while its cells run: starts and ends at once, each cell's
//! text as it streams (coalesced), with the objects its format accepts placed in it.

use std::collections::HashMap;
use std::time::Instant;

use kerf_core::StreamParser;
use serde_json::Value;

use super::Contender;
use super::Row;
use super::sides;
use super::wire::{CellEnded, CellText, CompareProgress, PlacedObject};
use crate::text::Utf16Cursor;

/// Where a compare's progress goes: each start and end at once, the text of the cells as it
/// streams coalesced (at most one message every [`TEXT_EVERY`], and one before any other), with
/// the objects each cell's format accepts as they are accepted.
pub(super) struct Relay<'p, 'c> {
    pub(super) done: u32,
    label: String,
    on_progress: &'p mut dyn FnMut(CompareProgress),
    /// Text not yet sent, and the cell it belongs to.
    pending: Option<CellText>,
    sent: Instant,
    /// Each cell in flight, parsed as it streams.
    streams: HashMap<usize, LiveParse<'c>>,
}

/// A cell's reply parsed as it streams (kerf-core's incremental parser: what it has committed
/// is exactly what parsing the whole reply yields first), and how many of its objects were sent.
struct LiveParse<'c> {
    stream: StreamParser<'c>,
    sent: usize,
    units: Utf16Cursor,
}

impl<'c> LiveParse<'c> {
    fn new(contender: &'c Contender) -> Self {
        LiveParse {
            stream: StreamParser::new(
                &contender.subject.prompt.parser,
                contender.rendering.vars.clone(),
            ),
            sent: 0,
            units: Utf16Cursor::default(),
        }
    }

    /// `text` taken in; the objects it completed.
    fn feed(&mut self, text: &str) -> Vec<PlacedObject> {
        self.stream.feed(text);
        let committed = self.stream.committed();
        // From where the last feed left off (never a walk over every object so far).
        let spans: Vec<(usize, usize)> = committed
            .starts
            .iter_from(self.sent)
            .zip(committed.ends.iter_from(self.sent))
            .collect();
        let values: Vec<Value> = committed.objects.iter_from(self.sent).collect();
        self.sent += values.len();
        place(&mut self.units, self.stream.text(), spans, values)
    }

    /// The reply has ended: the objects the whole of it yields that were not yet sent, and how
    /// many it yields in all.
    fn end(self) -> (Vec<PlacedObject>, usize) {
        let LiveParse {
            stream,
            sent,
            mut units,
        } = self;
        let (parser, vars, text) = (
            stream.parser(),
            stream.vars().clone(),
            stream.text().to_string(),
        );
        let report = stream.finish();
        let spans = parser.spans(&text, &vars, &report);
        // Those sent while streaming are the whole reply's first: committed steps never change.
        let from = sent.min(spans.len());
        let placed = place(
            &mut units,
            &text,
            spans[from..].to_vec(),
            report.objects.iter_from(from),
        );
        (placed, report.objects.len())
    }
}

/// Objects at byte `spans` of `text`, as the window places and names them.
fn place(
    units: &mut Utf16Cursor,
    text: &str,
    spans: Vec<(usize, usize)>,
    values: impl IntoIterator<Item = Value>,
) -> Vec<PlacedObject> {
    spans
        .into_iter()
        .zip(values)
        .map(|((start, end), value)| PlacedObject {
            start: units.at(text, start),
            end: units.at(text, end),
            label: sides::label(&value),
        })
        .collect()
}

/// A window takes a message as a callback: a fast provider's pieces are sent together.
const TEXT_EVERY: std::time::Duration = std::time::Duration::from_millis(33);

impl<'p, 'c> Relay<'p, 'c> {
    /// A relay to `on_progress`, nothing sent yet.
    pub(super) fn new(on_progress: &'p mut dyn FnMut(CompareProgress)) -> Self {
        Relay {
            done: 0,
            label: String::new(),
            on_progress,
            pending: None,
            sent: Instant::now(),
            streams: HashMap::new(),
        }
    }

    pub(super) fn tell(&mut self, done: u32, total: u32, label: String) {
        self.flush(total);
        self.done = done;
        self.label = label.clone();
        (self.on_progress)(CompareProgress {
            done,
            total,
            label,
            text: None,
            ended: None,
        });
    }

    pub(super) fn text(
        &mut self,
        total: u32,
        at: usize,
        text: &str,
        contender: &'c Contender,
        cell: impl Fn(usize) -> CellText,
    ) {
        if self.pending.as_ref().is_some_and(|p| p.cell != at as u32) {
            self.flush(total);
        }
        let objects = self
            .streams
            .entry(at)
            .or_insert_with(|| LiveParse::new(contender))
            .feed(text);
        let pending = self.pending.get_or_insert_with(|| cell(at));
        pending.text.push_str(text);
        pending.objects.extend(objects);
        if self.sent.elapsed() >= TEXT_EVERY {
            self.flush(total);
        }
    }

    /// Cell `at` ended as `row`: its last text, then its end with the objects not yet named.
    pub(super) fn ended(&mut self, total: u32, at: usize, row: &Row) {
        self.flush(total);
        let (objects, whole) = match self.streams.remove(&at) {
            Some(live) => live.end(),
            None => (Vec::new(), 0),
        };
        (self.on_progress)(CompareProgress {
            done: self.done,
            total,
            label: self.label.clone(),
            text: None,
            ended: Some(CellEnded {
                cell: at as u32,
                prompt: row.subject as u32,
                provider: row.provider as u32,
                history_id: row.run_id,
                objects,
                total: whole as u32,
                finish_reason: row.out.finish.reason,
                truncated: row.truncated(),
            }),
        });
    }

    fn flush(&mut self, total: u32) {
        if let Some(text) = self.pending.take() {
            self.sent = Instant::now();
            (self.on_progress)(CompareProgress {
                done: self.done,
                total,
                label: self.label.clone(),
                text: Some(text),
                ended: None,
            });
        }
    }
}
