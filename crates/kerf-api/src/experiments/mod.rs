//! Experiments: many runs planned as one matrix and kept as one record — a compare, an eval, a
//! prompt file's tests. Each kind is a *plan* (which cells, which post-step: sweep, score,
//! verdict); every plan's cells run through the one cell runner ([`cells::run_cells`]), which
//! drives [`crate::runs::run`] many at a time (one at a time on the local engine).
//!
//! - [`Subject`] — a prompt as an experiment runs it, loaded once ([`Subject::load`]) by both
//!   front ends, so the same file has the same prompt version wherever it runs.
//! - [`cells`] — the cell runner and its in-flight driver.
//! - [`plan`] — what a plan will cost before its first request ([`plan::Size`]) and the limits
//!   every plan is held to.

pub mod cells;
pub mod plan;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// What an experiment is: how its cells are planned and what is made of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ExperimentKind {
    /// Formats side by side under real budgets, each format's best reply swept.
    Compare,
    /// Prompts over a dataset, scored against its expected records.
    Eval,
    /// Replies cut at every offset.
    Sweep,
    /// A prompt file's own tests, held to their minimums.
    Test,
}

impl ExperimentKind {
    /// The name the history keeps it under.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Compare => "compare",
            Self::Eval => "eval",
            Self::Sweep => "sweep",
            Self::Test => "test",
        }
    }
}

/// One prompt of an experiment (kept with the runs: a single run loads its prompt the same way).
pub use crate::runs::Subject;
