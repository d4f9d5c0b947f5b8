//! A prompt as every front end runs it: loaded once, with the text the history keeps for it.

use std::path::Path;

use kerf_core::Prompt;

use super::{Chosen, PromptSource, Rendering, RunJob, RunParams};
use crate::error::Result;

/// A prompt to run (alone, or as one of an experiment's subjects): compiled, and as the
/// history keeps it.
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
        rendering: &'a Rendering,
        provider: &'a Chosen,
        params: &'a RunParams,
    ) -> RunJob<'a> {
        RunJob::new(&self.prompt, &self.source, rendering, provider, params)
    }
}
