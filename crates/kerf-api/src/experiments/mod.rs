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
//! - [`spec`] — what an experiment was asked, one typed record for every kind
//!   ([`spec::ExperimentSpec`]).

pub mod cells;
pub mod plan;
pub mod spec;
pub mod sweep;

use kerf_core::Prompt;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::runs::Chosen;

pub use spec::ExperimentSpec;

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
    pub const ALL: [ExperimentKind; 4] = [Self::Compare, Self::Eval, Self::Sweep, Self::Test];

    /// The kind the history keeps under `name` (`None`: not one).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

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

/// Which passes each prompt gets: an axis of every plan that runs prompts on a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "lowercase")]
pub enum ConstrainMode {
    /// With and without its schema constraint (where it has one).
    Both,
    /// Constrained where it can be.
    Auto,
    None,
}

impl ConstrainMode {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "both" => Some(Self::Both),
            "auto" => Some(Self::Auto),
            "none" => Some(Self::None),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Both => "both",
            Self::Auto => "auto",
            Self::None => "none",
        }
    }
}

/// The passes a prompt gets: constrained and/or not, as asked and as the provider allows. A
/// cloud provider with no structured mode for the prompt's format gets only the unconstrained
/// pass: a "constrained" row would be the same request under a false label.
pub fn variants(mode: ConstrainMode, prompt: &Prompt, provider: &Chosen) -> Vec<bool> {
    let can = provider.can_constrain(prompt);
    match mode {
        ConstrainMode::Both if can => vec![true, false],
        ConstrainMode::Auto if can => vec![true],
        _ => vec![false],
    }
}

/// One prompt of an experiment (kept with the runs: a single run loads its prompt the same way).
pub use crate::runs::Subject;
