//! Experiments: many runs planned as one matrix and kept as one record — a compare, an eval, a
//! prompt file's tests. Each kind is a *plan* (which cells, which post-step: sweep, score,
//! verdict); every plan's cells run through the one cell runner ([`cells::run_cells`]), which
//! drives [`crate::runs::run`] many at a time (one at a time on the local engine).
//!
//! - [`Subject`] — a prompt as an experiment runs it, loaded once ([`Subject::load`]) by both
//!   front ends, so the same file has the same prompt version wherever it runs.
//! - [`cells`] — the cell runner and its in-flight driver; every cell keyed ([`CellKey`]) and
//!   kept with its run. [`cache`] — the reply cache, a layer a plan opts into.
//! - [`plan`] — what a plan will cost before its first request ([`plan::Size`]) and the limits
//!   every plan is held to.
//! - [`lifecycle`] — the one lifecycle: begin, take up again, settle, for every kind.
//! - [`pass`] — one pass over a kind's [`pass::Plan`]: cells measured before read back, the
//!   rest run a lane per provider, every result handed over as it comes.
//! - [`batch`] — the second driver: a plan's cells handed to providers' batch APIs (or a
//!   batch file) and folded back into the same cell records later.
//! - [`stages`] — cells that depend on cells: groups run stage by stage, then merged.
//! - [`spec`] — what an experiment was asked, one typed record for every kind
//!   ([`spec::ExperimentSpec`]).

pub mod batch;
pub mod cache;
pub mod cells;
pub mod lifecycle;
pub mod pass;
pub mod plan;
pub mod spec;
pub mod stages;
pub mod sweep;

use kerf_core::Prompt;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::runs::Chosen;

pub use kerf_store::CellKey;
pub use spec::ExperimentSpec;

/// What an experiment is (kept typed in the history).
pub use kerf_store::ExperimentKind;

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
