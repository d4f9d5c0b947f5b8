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

use std::path::Path;

use kerf_core::Prompt;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::error::Result;
use crate::runs::{PromptSource, RunJob};

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

/// One prompt of an experiment: compiled, and as the history keeps it.
pub struct Subject {
    pub prompt: Prompt,
    pub source: PromptSource,
}

impl Subject {
    /// A prompt file as every front end runs it: read once, compiled (its warnings kept on the
    /// prompt, for the caller to show), its exact text kept as the prompt version.
    pub fn load(path: &Path) -> Result<Subject> {
        let (loaded, text) = kerf_core::PromptFile::load_with_text(path)?;
        let prompt = Prompt::from_loaded(loaded, path)?;
        Ok(Subject {
            source: PromptSource {
                name: prompt.id().to_string(),
                path: Some(path.display().to_string()),
                text,
            },
            prompt,
        })
    }

    /// A compiled prompt (the window's draft, or a file's), kept as [`Subject::load`] would
    /// keep its file when it is that file unchanged — so a prompt run from the window and from
    /// the CLI is one prompt version — and as its composed text otherwise (what ran).
    pub fn of(prompt: Prompt, path: Option<&str>) -> Subject {
        let saved = path.and_then(|p| Subject::load(Path::new(p)).ok());
        let source = match saved {
            Some(s) if s.prompt.file == prompt.file => s.source,
            _ => PromptSource::of(&prompt, path),
        };
        Subject { prompt, source }
    }

    /// A run of this subject, rendered as `rendering`, on `provider` with `params` (recorded on
    /// its own, with its repair loop; see [`RunJob::new`]).
    pub fn job<'a>(
        &'a self,
        rendering: &'a crate::runs::Rendering,
        provider: &'a crate::runs::Chosen,
        params: &'a crate::runs::RunParams,
    ) -> RunJob<'a> {
        RunJob::new(&self.prompt, &self.source, rendering, provider, params)
    }
}
