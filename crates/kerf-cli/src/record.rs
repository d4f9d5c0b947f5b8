//! The history a command records into: every `kerf run`, `compare` and `sweep` is kept in Kerf's SQLite
//! history (`kerf history`) unless `--no-history` is given.

use anyhow::Result;
use kerf_api::history::Store;
use kerf_api::workbench::Workbench;

/// Options every command accepts (before or after the subcommand).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Globals {
    /// Kerf's data directory (models, history): instead of KERF_DATA_DIR or the platform's
    /// (~/.local/share/kerf on Linux).
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,
    /// Do not record runs, compares or sweeps in the history.
    #[arg(long, global = true)]
    pub no_history: bool,
}

/// The history a command records into (`None` with --no-history).
pub fn open(wb: &Workbench, globals: &Globals) -> Result<Option<Store>> {
    let path = match &wb.history {
        Some(path) if !globals.no_history => path,
        _ => return Ok(None),
    };
    match kerf_api::history::open(path) {
        Ok(store) => Ok(Some(store)),
        // Say how to go on without it; the error keeps its code (the chain prints both).
        Err(e) => Err(anyhow::Error::new(e)
            .context("the history cannot be recorded (pass --no-history to run without it)")),
    }
}

/// The history `kerf history` reads and edits.
pub fn open_for_reading(wb: &Workbench) -> Result<Store> {
    match &wb.history {
        Some(path) => Ok(kerf_api::history::open(path)?),
        None => Ok(wb.store_required()?),
    }
}
