//! What a front end sends to start an eval ([`EvalInput`]) and receives: its progress as it
//! goes, and its report — the very types `kerf eval --json` prints (snake_case: the CLI's
//! `--json` is an interface kept exactly, so the window reads the same names). All exported to
//! TypeScript.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::experiments::ConstrainMode;
use crate::runs::wire::RunOptions;

pub use super::Progress;
pub use super::analysis::{Advice, Comparison, DropBar, Drops, RowDiff, Side};
pub use super::lines::{CellLine, FindRate, ProviderLine, RepeatStats, SummaryLine};
pub use super::report::Report;

/// What the window sends to start an eval: the CLI's `kerf eval` flags, as the run panel and the
/// Evaluate form fill them in. [`StartInput::of`](super::StartInput::of) makes the same
/// `StartInput` the CLI makes, so an eval started in either front end plans, records and caches
/// the same cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct EvalInput {
    /// A `.jsonl` or `.csv` file, or a folder of `.txt` documents.
    pub dataset: String,
    /// The first N rows only.
    #[serde(default)]
    #[ts(optional)]
    pub limit: Option<u32>,
    /// One or more prompt files.
    pub prompts: Vec<String>,
    pub options: RunOptions,
    /// The providers side by side, by name (absent or empty: the run options' provider alone).
    #[serde(default)]
    #[ts(optional)]
    pub providers: Option<Vec<String>>,
    pub budgets: Vec<u32>,
    pub constrain: ConstrainMode,
    /// Runs of each cell (default 1).
    #[serde(default)]
    #[ts(optional)]
    pub repeat: Option<u32>,
    /// Reuse replies earlier evals bought for the same cell (from either front end).
    #[serde(default)]
    pub cache: bool,
    /// Requests in flight at once (default 4; the local engine runs one at a time).
    #[serde(default)]
    #[ts(optional)]
    pub concurrency: Option<u32>,
    /// The person confirmed an eval of more than 2,000 requests.
    #[serde(default)]
    #[ts(optional)]
    pub confirmed: Option<bool>,
    /// Each prompt's variables set for every row, beneath the row's own, by prompt file (as
    /// Compare's form sends them; values as a run sends them).
    #[serde(default)]
    #[ts(optional, type = "Record<string, Record<string, unknown>>")]
    pub vars: Option<std::collections::HashMap<String, serde_json::Map<String, serde_json::Value>>>,
}

pub use super::view::{
    CellKey, CellView, DatasetPreview, DatasetProblem, GroundPlace, Mark, MarkedRecord, PreviewRow,
};

/// An eval opened from the history: its report, its charts (F1 and recall against the budget,
/// as the HTML report draws them; repeat stability), why pieces were dropped (bars whose
/// categories the matrix filters by) and its rows' ids in the dataset's order.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct EvalShown {
    pub report: Report,
    pub charts: Vec<crate::charts::Chart>,
    pub drop_chart: Option<crate::charts::Chart>,
    pub rows: Vec<String>,
}

/// What an eval would send, before it starts (`kerf eval --dry-run`, the window's
/// [`flow::plan`](super::flow::plan)): the plan's size, the line the CLI announces, and the
/// prompts' warnings.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct EvalPlan {
    pub size: crate::experiments::plan::Size,
    pub line: String,
    pub warnings: Vec<String>,
}
