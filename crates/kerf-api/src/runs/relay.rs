//! A run relayed to the window: its text and the objects each completed line yields,
//! coalesced to what the window can draw.

use kerf_core::parse::StreamParser;
use kerf_llm::CancelToken;
use kerf_store::Store;
use serde_json::Value;

use super::wire::{Drop, RunDone, RunMessage};
use super::{RunEvent, RunJob};
use crate::error::Result;

/// Streams a run's events as [`RunMessage`]s, with the objects each completed line yields.
///
/// Messages are coalesced: a fast server sends hundreds of pieces a second (bench/desktop/run
/// streams ~600 a second) and each message is a callback in the window, so text and objects are
/// held and sent together at most every [`Relay::EVERY`] (about two frames: as fast as the
/// window can draw them) and whenever another event (a warning, a repair, the end) comes.
struct Relay<'a> {
    parser: StreamParser<'a>,
    sent_objects: usize,
    sent_drops: usize,
    text: String,
    objects: Vec<Value>,
    dropped: Vec<Drop>,
    flushed: std::time::Instant,
    on_message: &'a mut dyn FnMut(RunMessage),
}

impl<'a> Relay<'a> {
    const EVERY: std::time::Duration = std::time::Duration::from_millis(33);

    fn new(parser: StreamParser<'a>, on_message: &'a mut dyn FnMut(RunMessage)) -> Self {
        Relay {
            parser,
            sent_objects: 0,
            sent_drops: 0,
            text: String::new(),
            objects: Vec::new(),
            dropped: Vec::new(),
            flushed: std::time::Instant::now(),
            on_message,
        }
    }

    /// Send what is held: the text first, so a line's objects never arrive before the line.
    fn flush(&mut self) {
        if !self.text.is_empty() {
            let text = std::mem::take(&mut self.text);
            (self.on_message)(RunMessage::Text { text });
        }
        if !self.objects.is_empty() || !self.dropped.is_empty() {
            let (objects, dropped) = (
                std::mem::take(&mut self.objects),
                std::mem::take(&mut self.dropped),
            );
            (self.on_message)(RunMessage::Objects { objects, dropped });
        }
        self.flushed = std::time::Instant::now();
    }

    fn event(&mut self, e: RunEvent<'_>) {
        match e {
            RunEvent::Text(t) => {
                self.parser.feed(t);
                self.text.push_str(t);
                let committed = self.parser.committed();
                self.objects
                    .extend(committed.objects.iter_from(self.sent_objects));
                self.dropped
                    .extend(committed.dropped[self.sent_drops..].iter().map(Drop::from));
                self.sent_objects = committed.objects.len();
                self.sent_drops = committed.dropped.len();
                if self.flushed.elapsed() >= Self::EVERY {
                    self.flush();
                }
            }
            RunEvent::Repair { .. } => {
                self.flush();
                // The next reply starts over: its objects replace the failed one's.
                let (parser, vars) = (self.parser.parser(), self.parser.vars().clone());
                self.parser = StreamParser::new(parser, vars);
                self.sent_objects = 0;
                self.sent_drops = 0;
                (self.on_message)(e.into());
            }
            other => {
                self.flush();
                (self.on_message)(other.into())
            }
        }
    }
}

/// `job` run (and recorded in `history`), its events relayed as the window takes them: text
/// and objects coalesced as lines complete, the rest as they come.
pub fn relay_run(
    job: &RunJob<'_>,
    history: Option<&Store>,
    cancel: &CancelToken,
    on_message: &mut dyn FnMut(RunMessage),
) -> Result<RunDone> {
    let (prompt, rendering, provider) = (job.prompt, job.meta.rendering, job.provider);
    let mut relay = Relay::new(
        StreamParser::new(&prompt.parser, rendering.vars.clone()),
        on_message,
    );
    let result = kerf_llm::runtime::block_on(crate::runs::run(history, job, cancel, &mut |e| {
        relay.event(e)
    }));
    relay.flush();
    let result = result?;
    // A reply parsed as a whole (a JSON array) yields its objects only now.
    let objects: Vec<_> = result
        .out
        .report
        .objects
        .iter_from(relay.sent_objects)
        .collect();
    let dropped: Vec<Drop> = result.out.report.dropped
        [relay.sent_drops.min(result.out.report.dropped.len())..]
        .iter()
        .map(Drop::from)
        .collect();
    if !objects.is_empty() || !dropped.is_empty() {
        (relay.on_message)(RunMessage::Objects { objects, dropped });
    }
    Ok(RunDone::of(&result, provider))
}
