//! The history's bookkeeping as both front ends do it: which runs a filter names, tags, notes,
//! the experiment list, and the export — one rule each, so `kerf history` and the History
//! screen cannot disagree (a note of spaces cleared in one and kept in the other, before).

use kerf_store::{Experiment, ExperimentSummary, Filter, RunRecord, RunSummary, Status, Store};

use crate::error::{ApiError, Code, Result};

/// Which runs, as a person asks: every field optional, dates and ages as typed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    /// A prompt's id, or the start of a prompt version (6+ hex digits).
    pub prompt: Option<String>,
    pub status: Option<Status>,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// YYYY-MM-DD, RFC 3339, or an age such as `7d`.
    pub since: Option<String>,
    pub until: Option<String>,
    pub tag: Option<String>,
    pub experiment: Option<i64>,
    /// At most this many, newest first (`None`: all).
    pub limit: Option<usize>,
}

impl Query {
    /// The store's filter: blank fields are unset, ages and dates read against now. `flag`
    /// names a field in an error the way the asker wrote it (`--since` in the CLI).
    pub fn filter(&self, flag: &dyn Fn(&str) -> String) -> Result<Filter> {
        let now = kerf_core::time::now_ms();
        let given = |s: &Option<String>| {
            s.as_deref()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(String::from)
        };
        let moment = |s: &Option<String>, field: &str| -> Result<Option<i64>> {
            given(s)
                .map(|t| {
                    kerf_core::time::parse_moment(&t, now)
                        .map_err(|e| ApiError::new(Code::Usage, format!("{}: {e}", flag(field))))
                })
                .transpose()
        };
        Ok(Filter {
            prompt: given(&self.prompt),
            status: self.status,
            provider: given(&self.provider),
            model: given(&self.model),
            since: moment(&self.since, "since")?,
            until: moment(&self.until, "until")?,
            tag: given(&self.tag),
            experiment: self.experiment,
            limit: self.limit,
        })
    }
}

/// Set run `id`'s note: text that is empty or only blanks clears it.
pub fn note(store: &Store, id: i64, text: Option<&str>) -> Result<()> {
    let text = text.filter(|t| !t.trim().is_empty());
    Ok(store.note(id, text)?)
}

/// Add `tags` to run `id` (or, with `remove`, take them off); its tags afterwards.
pub fn tag(store: &Store, id: i64, tags: &[String], remove: bool) -> Result<Vec<String>> {
    for t in tags {
        if t.trim().is_empty() {
            return Err(ApiError::new(Code::Usage, "a tag cannot be blank"));
        }
        if remove {
            store.untag(id, t)?;
        } else {
            store.tag(id, t)?;
        }
    }
    Ok(store.run(id)?.summary.tags)
}

/// The runs `filter` names, newest first (`kerf history list`).
pub fn list(store: &Store, filter: &Filter) -> Result<Vec<RunSummary>> {
    Ok(store.list(filter)?)
}

/// The newest run (`kerf history show last`).
pub fn last(store: &Store) -> Result<i64> {
    Ok(store.last_run()?)
}

/// Experiment `id` in full: its spec, result and runs (`kerf history show eN`).
pub fn experiment(store: &Store, id: i64) -> Result<Experiment> {
    Ok(store.experiment(id)?)
}

/// Runs `ids` as the history keeps them, each checked to be there before anything is deleted
/// (what `kerf history delete` shows before it asks).
pub fn runs(store: &Store, ids: &[i64]) -> Result<Vec<RunRecord>> {
    ids.iter().map(|&id| Ok(store.run(id)?)).collect()
}

/// Delete runs `ids` (their cells keep their place in an experiment, without a run).
pub fn delete(store: &Store, ids: &[i64]) -> Result<()> {
    for &id in ids {
        store.delete(id)?;
    }
    Ok(())
}

/// Experiments of every kind, newest first (at most `limit`).
pub fn experiments(store: &Store, limit: Option<usize>) -> Result<Vec<ExperimentSummary>> {
    Ok(store.experiments(limit)?)
}

/// The newest experiments as History lists them, each with its batches summed.
pub fn experiment_rows(
    store: &Store,
    limit: Option<usize>,
) -> Result<Vec<super::wire::ExperimentRow>> {
    experiments(store, limit)?
        .into_iter()
        .map(|e| {
            let id = e.id;
            let mut row = super::wire::ExperimentRow::from(e);
            row.batches = super::wire::BatchTally::of(&store.batches(id)?);
            Ok(row)
        })
        .collect()
}

/// How runs are exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// One full record per line.
    Jsonl,
    /// One summary row per run, with a header.
    Csv,
}

/// The CSV export's columns, in order.
pub const CSV_COLUMNS: [&str; 18] = [
    "id",
    "created_at",
    "status",
    "prompt",
    "prompt_version",
    "provider",
    "model",
    "finish_reason",
    "objects",
    "dropped",
    "truncated",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "attempts",
    "experiment",
    "tags",
    "note",
];

/// The runs `filter` names, as JSON lines (full records) or CSV (one row per run), handed to
/// `put` one at a time: the memory an export takes does not grow with the history. The number
/// of runs written.
pub fn export(
    store: &Store,
    filter: &Filter,
    format: ExportFormat,
    put: &mut dyn FnMut(&str) -> Result<()>,
) -> Result<usize> {
    let runs = store.list(filter)?;
    match format {
        ExportFormat::Jsonl => {
            for r in &runs {
                let mut line = serde_json::to_string(&store.run(r.id)?)
                    .map_err(|e| ApiError::new(Code::Internal, e.to_string()))?;
                line.push('\n');
                put(&line)?;
            }
        }
        ExportFormat::Csv => {
            put(&csv_line(CSV_COLUMNS)?)?;
            for r in &runs {
                let o = |v: Option<i64>| v.map(|n| n.to_string()).unwrap_or_default();
                let row = [
                    r.id.to_string(),
                    r.created_at.clone(),
                    r.status.to_string(),
                    r.prompt.clone(),
                    r.prompt_version.clone(),
                    r.provider.clone(),
                    r.model.clone(),
                    r.finish_reason.map(|f| f.to_string()).unwrap_or_default(),
                    o(r.objects),
                    o(r.dropped),
                    r.truncated.map(|t| t.to_string()).unwrap_or_default(),
                    o(r.prompt_tokens),
                    o(r.completion_tokens),
                    r.cost_usd.map(|c| c.to_string()).unwrap_or_default(),
                    r.attempts.to_string(),
                    o(r.experiment),
                    r.tags.join(" "),
                    r.note.clone().unwrap_or_default(),
                ];
                put(&csv_line(row.iter().map(|c| spreadsheet_safe(c)))?)?;
            }
        }
    }
    Ok(runs.len())
}

/// One CSV record (quoted by the `csv` crate where a cell needs it), newline-terminated.
fn csv_line<I, C>(cells: I) -> Result<String>
where
    I: IntoIterator<Item = C>,
    C: AsRef<str>,
{
    let internal = |e: String| ApiError::new(Code::Internal, e);
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record(cells.into_iter().map(|c| c.as_ref().to_owned()))
        .map_err(|e| internal(e.to_string()))?;
    let bytes = w.into_inner().map_err(|e| internal(e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| internal(e.to_string()))
}

/// A cell a spreadsheet will not run: text starting with `=`, `+`, `-`, `@`, a tab or a carriage
/// return is a formula to Excel, LibreOffice and Sheets (a note or tag someone wrote, a prompt
/// id from an imported bundle), so it gets a leading `'`, which they show as text. Kerf's own
/// numbers never start with one of those.
fn spreadsheet_safe(cell: &str) -> std::borrow::Cow<'_, str> {
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        std::borrow::Cow::Owned(format!("'{cell}"))
    } else {
        std::borrow::Cow::Borrowed(cell)
    }
}
