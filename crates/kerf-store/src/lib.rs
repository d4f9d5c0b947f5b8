//! # kerf-store
//!
//! Kerf's history: every run and experiment, kept in one SQLite file so a prompt engineer can
//! compare today's attempt with yesterday's.
//!
//! - [`Store`] — `open(path)` (WAL, a busy timeout, migrations applied) or `in_memory()`; the
//!   clock is injected ([`Clock`]) so tests are deterministic.
//! - Content-addressed [`PromptVersion`]s and [`Input`]s: an edited prompt is a new version, and
//!   old runs keep pointing at what they ran.
//! - Runs: [`Store::begin_run`] writes the run as `running` before the first token and returns a
//!   [`RunWriter`] that appends the reply as it streams (a transaction per batch of chunks, not
//!   per token) and ends it `ok`, `truncated`, `interrupted` or `error`. If the process dies
//!   mid-run, the next open finds the run's [`owner`] gone and marks it `interrupted`, keeping the
//!   text received; the caller parses that text ([`Store::runs_without_report`],
//!   [`Store::set_report`]), since the store compiles no prompt.
//! - Experiments: a `compare`, `sweep`, `eval` or `test` ([`ExperimentKind`]) as one record
//!   grouping its runs and its result; every kind that runs cells keeps one [`CellKey`] per
//!   point of its matrix, and an eval its dataset rows too.
//! - Queries: [`Filter`] for lists, [`RunRecord`] for one run in full; tags and notes.
//!
//! No API key or other secret is stored: callers pass only what a run is (texts, parameters,
//! what the provider reported), and the CLI's tests grep the database file for a planted key.

//!
//! The code is split by concern: [`store`](Store) opens the file; `content` keeps prompt versions
//! and inputs; `writer` streams a run in; `recovery` ends the runs of dead processes; `read`
//! lists and shows runs; `annotate` tags, notes and deletes; `experiments`; `model_hashes`.

mod annotate;
mod batches;
mod content;
pub mod error;
mod eval;
mod experiments;
pub mod migrate;
mod model_hashes;
pub mod owner;
mod read;
mod recovery;
mod status;
mod store;
mod writer;

pub use batches::{
    Batch, BatchApi, BatchState, Counts, NewBatch, Submission, SubmittedRun, counts_json,
};
pub use content::{Input, PromptVersion, sha256_hex};
pub use error::{Error, Result};
pub use eval::{CellKey, Endpoint, EvalRowsWriter, ReplyBody, StoredCell, StoredReply};
pub use experiments::{Experiment, ExperimentKind, ExperimentSummary, FigureLine, Figures};
pub use read::{Filter, RunRecord, RunSummary};
pub use status::Status;
pub use store::{Clock, Store};
pub use writer::{NewRun, RunEnd, RunWriter};

/// The history file's name in Kerf's data directory.
pub const FILE_NAME: &str = "history.sqlite";

/// What the unit tests share.
#[cfg(test)]
mod testing {
    #![allow(clippy::unwrap_used)]
    use crate::{NewRun, Store};
    use serde_json::json;

    /// A run of a one-line JSONL prompt on the input `t`.
    pub(crate) fn new_run(store: &Store) -> NewRun {
        let prompt = r#"{"prompt": "{{text}}", "response-type": "jsonl"}"#;
        NewRun {
            prompt_version: store
                .put_prompt_version("p", None, "jsonl", prompt)
                .unwrap(),
            input: store.put_input(&json!({"text": "t"}), &json!({})).unwrap(),
            experiment: None,
            rerun_of: None,
            cell: None,
            provider: "local".into(),
            model: "m".into(),
            model_sha256: None,
            params: json!({}),
            system: None,
            user: "t".into(),
        }
    }
}
