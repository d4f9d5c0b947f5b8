//! llama.cpp's log lines go to `tracing` (never straight to the terminal). [`Capture`] is a
//! tracing layer that keeps the recent ones, so a run can report what llama.cpp said it did —
//! how many layers it really offloaded — instead of what was asked for.

use std::collections::VecDeque;
use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// The tracing target llama-cpp-2 logs under.
pub const TARGET: &str = "llama-cpp-2";

static RECENT: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
const KEEP: usize = 400;

/// Keeps llama.cpp's recent log lines. Install it in the process's subscriber.
#[derive(Debug, Default, Clone, Copy)]
pub struct Capture;

struct Message(Option<String>);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = Some(value.trim_end().to_string());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}").trim_end().to_string());
        }
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() != TARGET {
            return;
        }
        let mut m = Message(None);
        event.record(&mut m);
        if let (Some(line), Ok(mut recent)) = (m.0, RECENT.lock()) {
            if recent.len() == KEEP {
                recent.pop_front();
            }
            recent.push_back(line);
        }
    }
}

/// Forget what was captured (before a load whose lines matter).
pub fn clear() {
    if let Ok(mut r) = RECENT.lock() {
        r.clear();
    }
}

/// The most recent captured line containing `needle`.
pub fn last_containing(needle: &str) -> Option<String> {
    RECENT
        .lock()
        .ok()?
        .iter()
        .rev()
        .find(|l| l.contains(needle))
        .cloned()
}

/// Every captured line containing `needle`, oldest first.
pub fn all_containing(needle: &str) -> Vec<String> {
    RECENT.lock().map_or_else(
        |_| Vec::new(),
        |r| r.iter().filter(|l| l.contains(needle)).cloned().collect(),
    )
}

/// `(offloaded, total)` from llama.cpp's "offloaded N/M layers to GPU" line, if it said so.
pub fn offloaded_layers() -> Option<(u32, u32)> {
    let line = last_containing("layers to GPU")?;
    let frac = line.split("offloaded ").nth(1)?.split_whitespace().next()?;
    let (a, b) = frac.split_once('/')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}
