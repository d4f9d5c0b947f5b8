//! The lines an eval's report is made of — each cell scored, each prompt × budget ×
//! constraint summed, a line's repeat statistics — apart from the code that makes them
//! (`report`) and the code that reads them (`analysis`), so neither imports the other's data.

use std::collections::BTreeMap;

use kerf_core::DropCounts;
use kerf_core::eval::{Scored, Scores, TypeTotals};
use kerf_llm::FinishReason;
use kerf_store::Status;
use serde::Serialize;
use serde_json::Value;
use ts_rs::TS;

/// One cell of the matrix, scored. The first sixteen keys are an interface (`kerf eval --json`);
/// the rest are additions.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct CellLine {
    pub row: String,
    pub prompt: String,
    /// The provider the cell ran on, by the name it was given.
    pub provider: String,
    pub max_tokens: u32,
    pub constrained: bool,
    pub repeat: u32,
    /// The run's id in the history.
    pub run: Option<i64>,
    pub finish_reason: Option<FinishReason>,
    pub objects: usize,
    /// Null when the row has no expected records for this prompt, or the cell has no finished
    /// run.
    pub tp: Option<u64>,
    pub fp: Option<u64>,
    #[serde(rename = "fn")]
    pub fn_: Option<u64>,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
    /// Expected records this prompt matched at a larger budget (same constraint, same repeat)
    /// on a reply that ended on its own, but not here: what the cut cost.
    pub lost_to_cut: Option<u64>,
    pub status: Option<Status>,
    #[ts(as = "std::collections::HashMap<kerf_core::DropKind, usize>")]
    pub dropped: DropCounts,
    /// Extracted records whose identity fields are not found in the document.
    pub ungrounded: Option<usize>,
    pub completion_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    /// Measured by a reply an earlier eval bought (`--cache`): its run is that eval's.
    pub cached: bool,
    /// How long its run took, from its first request to its end (the bought run's, when
    /// cached).
    pub seconds: Option<f64>,
    /// When its run began, in milliseconds since the Unix epoch (for the requests in flight
    /// over time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub started_at: Option<i64>,
    /// The record types the cell's scoring met (expected or extracted), for the window's
    /// filter by type. Absent when it met none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<String>>", optional)]
    pub types: Vec<String>,
    /// For an eval that cuts its documents: the size this document was cut at (the line is
    /// the document's chunks merged), in the chunker's unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub chunk_size: Option<u32>,
    /// The characters of the chunk before each chunk was given as context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub context_chars: Option<u32>,
    /// What the document's chunks did: how many, which were cut by the budget and what was
    /// lost with them, what they cost, how their records merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub chunks: Option<ChunkFigures>,
    /// Where each merged record stands in the whole document, in the order of the merged
    /// records (a cut document's line only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<ObjectSpan>>", optional)]
    pub spans: Vec<ObjectSpan>,
    /// A cut document's cells: `(chunk, pass, run)`, each measured, in pass then chunk order
    /// (the merge reads their replies back in this order).
    #[serde(skip)]
    #[ts(skip)]
    pub chunk_runs: Vec<(u32, u32, i64)>,
    /// A cut document's requests this eval made (none from the cache): `(run, start, end)`,
    /// in milliseconds since the epoch. Its chunks run side by side, so the in-flight chart
    /// counts these, not the document's one span.
    #[serde(skip)]
    #[ts(skip)]
    pub requests: Vec<(i64, i64, i64)>,
    /// With several passes: the document's counts with its first 1, 2, … passes merged.
    #[serde(skip)]
    #[ts(skip)]
    pub by_passes: Vec<kerf_core::eval::Counts>,
    /// The scoring (counts by type, pairs, misses, agreement), for the summaries,
    /// `lost_to_cut`, repeats and the report's side-by-side view — without its list of
    /// spurious records: the report keeps no cell's reply (a cell's records are read back from
    /// the history when a comparison or the HTML report shows them), and the pairs name the
    /// rest.
    #[serde(skip)]
    pub scored: Option<Scored>,
}

/// What a cut document's chunks did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, TS)]
pub struct ChunkFigures {
    /// Chunks the document was cut into.
    pub chunks: u32,
    /// Requests its line sent (chunks × passes), and how many replies were cut by their
    /// budget.
    pub requests: u32,
    pub cut: u32,
    /// The chunks (from 1) with a reply cut by its budget.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<u32>>", optional)]
    pub cut_chunks: Vec<u32>,
    /// Expected records not found that stand in a chunk whose reply was cut: the most the
    /// cut can have cost (some the model would have missed anyway; `lost_to_cut` counts those
    /// a larger budget found). Null: the row has no expected records.
    pub missed_in_cut: Option<u64>,
    /// Expected records that no single chunk holds whole (their fields fall in different
    /// chunks), and how many of them were found (null: none).
    pub at_boundary: u64,
    pub at_boundary_found: u64,
    /// Tokens the requests held (the document's cost in input), as the provider counted them.
    pub prompt_tokens: i64,
    /// Records folded into another: the same record at an overlapping place, from an
    /// overlapping chunk or another pass.
    pub folded: usize,
    /// The merged records by how they were found in their chunk.
    pub spans: kerf_core::eval::mentions::SpanCounts,
}

/// A merged record's place in the whole document.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct ObjectSpan {
    /// The record as matching compares it (`entity · Ada Lovelace`).
    pub identity: String,
    #[serde(flatten)]
    pub mention: kerf_core::eval::mentions::Mention,
}

/// One prompt × provider × budget × constraint over the dataset. The first twelve keys are an
/// interface.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct SummaryLine {
    pub prompt: String,
    /// The provider the line's cells ran on, by the name it was given.
    pub provider: String,
    pub max_tokens: u32,
    pub constrained: bool,
    /// Cells measured (their run ended on its own or was cut by its budget).
    pub cells: usize,
    #[serde(flatten)]
    pub micro: Scores,
    pub macro_f1: Option<f64>,
    /// Cells whose run failed, or that have not run to the end yet.
    pub failed: usize,
    pub unfinished: usize,
    /// Measured cells cut by their budget.
    pub truncated: usize,
    pub lost_to_cut: u64,
    /// The share of extracted records not found in their document (null: nothing extracted).
    pub ungrounded: Option<f64>,
    pub completion_tokens: i64,
    /// What the line's replies cost when they were bought (cached ones included).
    pub cost_usd: Option<f64>,
    /// Measured cells whose reply came from the cache.
    pub cached: usize,
    /// The median and 95th percentile of the measured cells' run times, in seconds (cached
    /// cells left out: their time was another eval's).
    pub seconds_p50: Option<f64>,
    pub seconds_p95: Option<f64>,
    pub by_type: BTreeMap<String, TypeTotals>,
    pub agreement: BTreeMap<String, Option<f64>>,
    /// A 95% bootstrap interval of `f1` over the rows (each row's repeats pooled).
    pub f1_ci: Option<[f64; 2]>,
    /// With `--repeat` 2 or more: how the line holds up over repeats.
    pub repeats: Option<RepeatStats>,
    /// For an eval that cuts its documents: the size they were cut at, and the context each
    /// chunk was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub chunk_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub context_chars: Option<u32>,
    /// What the documents' chunks did, summed over the measured documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub chunks: Option<ChunkSummary>,
}

/// A line's chunks over its documents: what the cut cost and what it lost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, TS)]
pub struct ChunkSummary {
    /// Measured documents, their chunks, and the requests they took.
    pub documents: usize,
    pub chunks: u64,
    pub requests: u64,
    /// Replies cut by their budget, and the expected records in those chunks not found (the
    /// most the cut can have cost; the line's `lost_to_cut` is what a larger budget found).
    pub cut: u64,
    pub missed_in_cut: u64,
    /// Per document, on average: requests, and input and output tokens.
    pub requests_per_document: f64,
    pub prompt_tokens_per_document: f64,
    pub completion_tokens_per_document: f64,
    /// Expected records no single chunk holds whole, and the share of them found (null: none).
    pub at_boundary: u64,
    pub boundary_recall: Option<f64>,
    /// Records folded into another across overlaps and passes.
    pub folded: usize,
    pub spans: kerf_core::eval::mentions::SpanCounts,
    /// With several passes: the line's figures with its first 1, 2, … passes merged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<PassLine>>", optional)]
    pub by_passes: Vec<PassLine>,
}

/// A line's figures with its first `passes` passes merged.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct PassLine {
    pub passes: u32,
    #[serde(flatten)]
    pub micro: Scores,
    /// Requests per document, for these passes.
    pub requests_per_document: f64,
}

/// How a prompt × budget × constraint line holds up over repeats (`--repeat` 2 or more).
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct RepeatStats {
    /// Micro F1 of each repeat over the dataset, in repeat order (null: nothing to score).
    pub f1_by_repeat: Vec<Option<f64>>,
    pub f1_mean: Option<f64>,
    /// Sample standard deviation of `f1_by_repeat`.
    pub f1_sd: Option<f64>,
    /// Per row, the mean Jaccard index between the repeats' sets of extracted records (by
    /// identity, as matching compares them); then the mean over rows. 1: every repeat
    /// extracted the same records.
    pub jaccard_mean: Option<f64>,
    /// Distinct outputs per row (object lists as parsed): the mean and the most over rows.
    pub distinct_outputs_mean: Option<f64>,
    pub distinct_outputs_max: usize,
    /// Expected records found by every repeat, by some, by none.
    pub found_always: usize,
    pub found_sometimes: usize,
    pub found_never: usize,
    /// Per expected record, the share of repeats that found it (rows with measured repeats).
    pub find_rate: Vec<FindRate>,
}

/// One expected record's find rate over repeats.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct FindRate {
    pub row: String,
    /// Its index in the row's expected records.
    pub expected: usize,
    /// Its identity as matching compares it (`definition · stroma`).
    pub identity: String,
    pub found: u32,
    pub of: u32,
}

impl CellLine {
    /// The line as the window gets it: without its spans. Only `--json` outputs read those
    /// (a 5 MB document's lines hold tens of megabytes of them); an opened cell brings its
    /// records' places itself.
    pub fn for_window(mut self) -> CellLine {
        self.spans = Vec::new();
        self
    }

    /// Whether the cell's run finished (ended on its own or was cut by its budget): a
    /// measurement, scored.
    pub fn measured(&self) -> bool {
        matches!(
            self.status,
            Some(kerf_store::Status::Ok | kerf_store::Status::Truncated)
        )
    }
}

/// The cells of a summary line (its prompt, provider, budget and constraint, and its cut).
pub fn line_cells<'r>(cells: &'r [CellLine], line: &SummaryLine) -> Vec<&'r CellLine> {
    cells
        .iter()
        .filter(|c| {
            c.prompt == line.prompt
                && c.provider == line.provider
                && c.max_tokens == line.max_tokens
                && c.constrained == line.constrained
                && c.chunk_size == line.chunk_size
                && c.context_chars == line.context_chars
        })
        .collect()
}

/// A cell's records, read back from the history for as long as they are needed (a comparison's
/// row, a cell of the HTML report), counted while held (see [`held`]).
pub struct Records {
    objects: Vec<Value>,
    _held: Option<held::Held>,
}

impl Records {
    /// `objects`, counted by `held` (the reply they came from).
    pub(crate) fn held(objects: Vec<Value>, held: held::Held) -> Records {
        Records {
            objects,
            _held: Some(held),
        }
    }

    /// No records (a cell without a measured reply): nothing held.
    pub(crate) fn none() -> Records {
        Records {
            objects: Vec::new(),
            _held: None,
        }
    }
}

impl std::ops::Deref for Records {
    type Target = [Value];

    fn deref(&self) -> &[Value] {
        &self.objects
    }
}

/// How many cells' replies the report holds on this thread, now and at most: a report reads
/// them from the history one at a time (two for a comparison), and the tests hold it to that
/// over many replies.
pub mod held {
    use std::cell::Cell;

    thread_local! {
        /// Replies held now, and the most held at once since [`reset`].
        static REPLIES: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    }

    /// Replies held on this thread now.
    pub fn now() -> usize {
        REPLIES.with(|c| c.get().0)
    }

    /// The most replies held at once on this thread since [`reset`].
    pub fn peak() -> usize {
        REPLIES.with(|c| c.get().1)
    }

    /// Start counting the peak again from the replies held now.
    pub fn reset() {
        REPLIES.with(|c| c.set((c.get().0, c.get().0)));
    }

    /// One reply's share of the count.
    pub(crate) struct Held(());

    impl Held {
        pub(crate) fn new() -> Held {
            REPLIES.with(|c| {
                let (now, peak) = c.get();
                c.set((now + 1, peak.max(now + 1)));
            });
            Held(())
        }
    }

    impl Drop for Held {
        fn drop(&mut self) {
            REPLIES.with(|c| {
                let (now, peak) = c.get();
                c.set((now.saturating_sub(1), peak));
            });
        }
    }
}

/// One provider's share of an eval: what its cells cost and how long they took.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct ProviderLine {
    /// The provider by the name it was given, and the model it ran.
    pub provider: String,
    pub model: String,
    /// Cells of its matrix, and how many of them are measured.
    pub cells: usize,
    pub measured: usize,
    pub failed: usize,
    /// Measured cells cut by their budget.
    pub truncated: usize,
    pub completion_tokens: i64,
    /// What its replies cost when they were bought (null: no price known, or the local
    /// engine).
    pub cost_usd: Option<f64>,
    /// The median and 95th percentile of its measured cells' run times, in seconds (cached
    /// cells left out).
    pub seconds_p50: Option<f64>,
    pub seconds_p95: Option<f64>,
}

/// The `q` quantile (0 to 1) of `values`, nearest rank (`None`: no values).
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (q * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// The run times of `cells` that were measured by their own run, for [`quantile`].
pub fn run_times(cells: &[&CellLine]) -> Vec<f64> {
    cells
        .iter()
        .filter(|c| c.measured() && !c.cached)
        .filter_map(|c| c.seconds)
        .collect()
}
