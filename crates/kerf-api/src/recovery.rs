//! Opening the history as every front end does: the store recovers the runs of dead processes,
//! then their text is parsed here with the prompt version each ran. Below the use cases (the
//! workbench opens stores through it, the history's use cases read through it).

use std::path::Path;

use kerf_core::Prompt;
use kerf_store::{PromptVersion, Store};

use crate::error::Result;

/// Open the history at `path`, as every front end does: the store marks the runs of dead
/// processes interrupted, then their text is parsed here with the prompt version each ran
/// ([`parse_interrupted`]). A parse that cannot be kept (a full disk) is logged, never fatal:
/// the text is safe and the next open tries again.
pub fn open(path: &Path) -> kerf_store::Result<Store> {
    let store = Store::open(path)?;
    if let Err(e) = parse_interrupted(&store) {
        tracing::warn!("the interrupted runs' text could not be parsed yet: {e}");
    }
    Ok(store)
}

/// Parse every interrupted run's text that has no report yet, as its prompt version would, with
/// its variables; keep the report. Returns how many were parsed. A run whose stored prompt no
/// longer compiles (it always did when it ran) keeps its text without a report.
pub fn parse_interrupted(store: &Store) -> kerf_store::Result<usize> {
    let mut parsed = 0;
    for id in store.runs_without_report()? {
        let record = store.run(id)?;
        let version = store.prompt_version(&record.summary.prompt_version)?;
        let Some(prompt) = compile_version(&version, id).ok() else {
            continue;
        };
        let vars = record.input.vars.as_object().cloned().unwrap_or_default();
        if store.set_report(id, &prompt.parse(&record.raw, &vars))? {
            parsed += 1;
        }
    }
    Ok(parsed)
}

/// A stored prompt version compiled, named in errors as run `id`'s prompt.
pub(crate) fn compile_version(version: &PromptVersion, id: i64) -> Result<Prompt> {
    let place = format!("run {id}'s prompt (version {})", &version.id[..12]);
    let loaded = kerf_core::PromptFile::from_json_str(&version.text, &place)?;
    Ok(Prompt::compile(loaded.file, &place)?)
}
