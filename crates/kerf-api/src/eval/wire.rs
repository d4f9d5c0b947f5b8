//! What a front end sends to start an eval ([`EvalInput`]) and receives: its progress as it
//! goes, and its report — the very types `kerf eval --json` prints (snake_case: the CLI's
//! `--json` is an interface kept exactly, so the window reads the same names). All exported to
//! TypeScript.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

pub use super::batched::FailedCell;
use crate::experiments::ConstrainMode;
pub use crate::experiments::batch::Delivery;
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
    /// How each provider's cells go, by provider name (one not named: online). A batch way
    /// makes the eval a submitted one ([`batched::submit`](super::batched::submit)).
    #[serde(default)]
    #[ts(optional)]
    pub ways: Option<std::collections::HashMap<String, Delivery>>,
    /// Where a batch file is written (a provider going by [`Delivery::BatchFile`]).
    #[serde(default)]
    #[ts(optional)]
    pub batch_file: Option<String>,
    /// Cut each document into chunks, a request each (absent: whole documents).
    #[serde(default)]
    #[ts(optional)]
    pub chunking: Option<super::chunked::Chunking>,
}

pub use super::view::{
    CellKey, CellView, ChunkPlace, DatasetPreview, DatasetProblem, GroundPlace, Mark, MarkedRecord,
    MentionPlace, PreviewRow,
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
    /// The batches its requests went to, as last heard (none: it ran online).
    pub batches: Vec<kerf_store::Batch>,
}

/// What an eval would send, before it starts (`kerf eval --dry-run`, the window's
/// [`flow::plan`](super::flow::plan)): the plan's size, the line the CLI announces, and the
/// prompts' warnings.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct EvalPlan {
    pub size: crate::experiments::plan::Size,
    pub line: String,
    pub warnings: Vec<String>,
    /// Each provider's part and the ways it can go, with its cost bound online and by batch,
    /// in the plan's order: what the window offers before anything is sent.
    pub offers: Vec<Offer>,
}

/// One provider's part of a plan and how it can be measured.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct Offer {
    pub provider: String,
    /// Online always; `batch` where the provider has a batch API; `batch_file` for an
    /// OpenAI-compatible server without one.
    pub ways: Vec<Delivery>,
    pub requests: u64,
    /// Dollars its requests may cost at most, online and by batch (half); `None`: no price is
    /// known, or the local engine.
    pub online_usd: Option<f64>,
    pub batch_usd: Option<f64>,
}

/// An eval handed to batches from the window: its experiment, the batches sent (or written),
/// and the online providers' report when some ran now.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct EvalSubmitted {
    pub experiment: i64,
    pub batches: Vec<kerf_store::Batch>,
    pub report: Option<Report>,
}

/// Where a collect left an eval: its report (partial while requests are with a provider),
/// its batches, and the cells a batch gave no reply for.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct EvalCollected {
    pub report: Report,
    pub batches: Vec<kerf_store::Batch>,
    /// Requests folded by this collect.
    pub folded: usize,
    /// Requests still with a provider.
    pub awaiting: usize,
    pub failed: Vec<FailedCell>,
    /// Why the eval is not whole yet, and what finishes it (`None`: whole).
    pub not_whole: Option<String>,
}
