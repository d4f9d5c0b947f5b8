//! Evaluations: every prompt × provider × budget × constraint × repeat × dataset row, run as
//! one experiment in the history and scored against the rows' expected records. Several
//! providers run side by side, each in its own lane of the cell runner (its own requests in
//! flight, its own rate limits).
//!
//! - [`begin`] checks the dataset against the prompts (nothing is written if a row is wrong),
//!   starts the experiment and keeps the rows; [`stored`] reads an eval back for `resume` and
//!   `rescore`. The dataset is read a row at a time ([`Rows`]): planning checks and renders
//!   each row and lets it go, beginning reads the rows again into the history, and a cell reads
//!   its row back from the history as it starts, so an eval over a million rows holds their
//!   ids, never their documents.
//! - [`run_cells`] runs the cells that still need a run, many in flight (the provider's rate
//!   limiter paces them; the local engine runs one at a time). Each cell is written with its run
//!   as it begins, so a cell whose run finished — ok or cut by its budget, both measurements — is
//!   never bought again, whether the eval was stopped with Ctrl-C or killed.
//! - [`report`] scores the stored replies ([`Report`] is what `kerf eval --json` prints and
//!   what the history keeps as the experiment's result), reading them from the history one
//!   cell at a time.
//! - [`flow`] — the use cases both front ends call: start (or a dry run), resume, and a pass
//!   that runs what remains and says how the eval stands; [`threshold`] — CI's minimums.

pub mod analysis;
pub mod batched;
pub mod chunked;
pub mod flow;
pub mod html;
#[cfg(test)]
mod large;
pub mod lines;
mod replies;
pub mod report;
mod rows;
pub mod suites;
pub mod threshold;
pub mod view;
pub mod wire;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use kerf_core::Prompt;
use kerf_core::eval::dataset::{self, Dataset, Row};
use kerf_llm::CancelToken;
use kerf_store::{CellKey, Store};
use serde::Serialize;
use serde_json::{Map, Value};
use ts_rs::TS;

use crate::error::{ApiError, Code, Result};
use crate::experiments::cells::{self, Cell, CellEnd, Hooks, Ran};
use crate::experiments::pass;
use crate::experiments::plan::{self, Allowance, Size};
use crate::experiments::spec::SpecSettings;
use crate::experiments::{
    ConstrainMode, ExperimentKind, ExperimentSpec, Subject, lifecycle, variants,
};
use crate::runs::{Chosen, Rendering, RunParams, RunSettings};

pub use flow::{Ending, Finished, StartInput};
pub use lines::{CellLine, SummaryLine};
pub use report::{Options, Replies, Report, compare_reports, report};
pub use threshold::{Metric, Threshold};

pub use crate::experiments::spec::{AUTO_CEILING, DEFAULT_CONCURRENCY, EvalSpec, SpecPrompt};
pub use rows::Rows;
use rows::{Fingerprint, row_json};

/// An eval as it starts or resumes: its prompts, rows and matrix.
pub struct Eval {
    pub experiment: i64,
    pub spec: EvalSpec,
    pub subjects: Vec<Subject>,
    /// The rows' ids, in the dataset's order (a row's index is its place in the history's
    /// `eval_rows`): each row itself is read back from the history when a cell needs it
    /// ([`Eval::row`]).
    pub rows: Vec<String>,
    /// What every cell of each provider runs with, in the spec's order of providers (each cell
    /// sets its budget and constraint).
    pub params: Vec<RunParams>,
    /// How many chunks each document has at each size, for an eval that cuts its documents
    /// (empty otherwise).
    pub cuts: chunked::Cuts,
}

/// The matrix's axes besides prompts and rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan<'a> {
    pub budgets: &'a [u32],
    pub constrain: ConstrainMode,
    /// Runs of each cell (1 or more).
    pub repeat: u32,
    /// Reuse an earlier eval's reply for a cell when it ended on its own and everything that
    /// shaped it (prompt version, input, provider, model, parameters, repeat index) is the same.
    pub cache: bool,
    /// Requests in flight at once (1 or more); with `adaptive`, the most.
    pub concurrency: usize,
    /// Find the number in flight by itself (`--concurrency auto`), up to `concurrency`.
    pub adaptive: bool,
    /// What the person starting it allowed (an eval over 2,000 requests needs it).
    pub allowed: Allowance,
    /// Per prompt, in the prompts' order, the variables set for every row beneath the row's
    /// own (`--var`, the window's form); shorter than the prompts (or empty): none for the
    /// rest.
    pub vars: &'a [Map<String, Value>],
    /// Cut each document into chunks, a request each (`--chunk-size`); checked
    /// ([`chunked::Chunking::checked`]).
    pub chunking: Option<&'a chunked::Chunking>,
}

/// How [`run_cells`] goes about it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// Requests in flight at once (cloud providers; the local engine runs one at a time); with
    /// `adaptive`, the most.
    pub concurrency: usize,
    /// Find the number in flight by itself, per provider (`--concurrency auto`).
    pub adaptive: bool,
    /// Run again the cells whose run failed (otherwise they stay failed).
    pub retry_errors: bool,
    /// Score each cell as it ends and hand it with the progress ([`Progress::cell`]): the
    /// window's matrix fills in live; the CLI's bar needs only the counts.
    pub live: bool,
}

/// Where an eval stands, as it goes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, TS)]
#[ts(rename = "EvalProgress")]
pub struct Progress {
    /// The eval's experiment in the history (what `kerf eval resume` and `show` name).
    pub experiment: i64,
    /// Cells finished in this pass (ok, cut by their budget, or failed).
    pub done: usize,
    /// Cells this pass runs.
    pub total: usize,
    pub failed: usize,
    /// Cells already measured before this pass (a resume's).
    pub skipped: usize,
    /// Cells of this pass measured by an earlier eval's reply (`--cache`), bought for nothing.
    pub cached: usize,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost_usd: f64,
    /// The last notice a run gave (a rate-limit wait, a retry), if any.
    pub notice: Option<String>,
    /// The cell that just ended, scored as the report scores it (with [`Pace::live`]): the
    /// window fills its matrix in from these.
    #[ts(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cell: Option<CellLine>,
}

/// Check the dataset's rows against the prompts (every problem named) and the plan against the
/// limits, rendering every row with every prompt: what the eval will send, before anything is
/// stored or bought. The rows are gone through one at a time.
pub fn plan(
    rows: &Rows,
    subjects: &[Subject],
    plan: &Plan<'_>,
    params: &RunParams,
    providers: &[Chosen],
) -> Result<Size> {
    Ok(planned(rows, subjects, plan, params, providers, false)?.0)
}

/// [`plan`], with the fingerprint of the rows it went through when `fingerprint` (what
/// [`begin`] keeps must be what was checked).
fn planned(
    rows: &Rows,
    subjects: &[Subject],
    plan: &Plan<'_>,
    params: &RunParams,
    providers: &[Chosen],
    fingerprint: bool,
) -> Result<(Size, u64)> {
    let Plan {
        budgets,
        constrain,
        repeat,
        concurrency,
        allowed,
        ..
    } = *plan;
    // The dataset's own problems come before these.
    let first = |e: ApiError| rows.problems_first(e);
    if budgets.is_empty() || budgets.contains(&0) {
        return Err(first(ApiError::new(
            Code::Usage,
            "give one or more token budgets, each above 0",
        )));
    }
    plan::check_repeat(repeat).map_err(first)?;
    plan::check_concurrency(concurrency).map_err(first)?;
    params.check(budgets).map_err(first)?;
    plan::check_providers(providers).map_err(first)?;
    let mut ids = BTreeSet::new();
    for s in subjects {
        if !ids.insert(s.prompt.id()) {
            return Err(first(ApiError::new(
                Code::Usage,
                format!("prompt `{}` is given twice", s.prompt.id()),
            )));
        }
    }
    let prompts: Vec<&Prompt> = subjects.iter().map(|s| &s.prompt).collect();
    let none = Map::new();
    let set_of = |i: usize| plan.vars.get(i).unwrap_or(&none);
    let checker = dataset::Checker::new(&prompts).with_set(
        (0..subjects.len())
            .map(|i| set_of(i).keys().cloned().collect())
            .collect(),
    );
    let budgets = sorted(budgets);
    // The matrix's size grows with the rows read: once it is past the limit, the rest are
    // checked but not rendered (the plan is refused once the rows are found sound).
    // Per prompt, each provider's constraint variants.
    let variants_of: Vec<Vec<u64>> = subjects
        .iter()
        .map(|s| {
            providers
                .iter()
                .map(|p| variants(constrain, &s.prompt, p).len() as u64)
                .collect()
        })
        .collect();
    // Cells per request a row's prompt makes: its constraint variants on every provider, at
    // every budget, repeated.
    let per_request: Vec<u64> = variants_of
        .iter()
        .map(|v| v.iter().sum::<u64>() * budgets.len() as u64 * u64::from(repeat))
        .collect();
    // One pass over the rows: each read (every problem a dataset can have found), held to
    // every prompt, and — while none has a problem — rendered with each (each chunk, for an
    // eval that cuts its documents), what it renders to being the plan's input bound. A row
    // is let go once it is checked and rendered. The matrix's size grows with the rows read:
    // once it is past the limit, the rest are checked but not rendered (the plan is refused
    // once the rows are found sound).
    let mut problems = Vec::new();
    let mut sizes = vec![Size::new(ExperimentKind::Eval); providers.len()];
    // The first row each prompt failed to render: the first prompt's is the error, as when
    // each prompt renders every row in turn.
    let mut unrendered: Vec<Option<ApiError>> = vec![None; subjects.len()];
    // The first document the cut refuses (a chunker's refusal, a blank document with records
    // expected of it): said once every row is read, after the dataset's own problems, which
    // are what a user fixes first.
    let mut refused: Option<ApiError> = None;
    let fingerprinted = fingerprint && rows.reread();
    let mut prints = Fingerprint::default();
    let mut cells: u64 = 0;
    rows.each(&mut |row| {
        if fingerprinted {
            prints.add(&row_json(row)?);
        }
        checker.row(row, &mut problems);
        if !problems.is_empty() || refused.is_some() {
            return Ok(());
        }
        for (i, (s, failed)) in subjects.iter().zip(&mut unrendered).enumerate() {
            if failed.is_some() || plan::check_cells(cells).is_err() {
                // Counted, not rendered (a cut document's chunks count more: the plan is
                // refused either way).
                cells = cells.saturating_add(per_request[i]);
                continue;
            }
            // Each request the row makes of this prompt: how many cells send it, and its
            // rendered text's bytes.
            let requests = match row_requests(&s.prompt, set_of(i), row, plan.chunking) {
                Ok(r) => r,
                Err(e) if e.code == Code::Usage && plan.chunking.is_some() => {
                    refused = Some(e);
                    return Ok(());
                }
                Err(e) => {
                    *failed = Some(ApiError {
                        message: format!(
                            "{}: prompt `{}`: {}",
                            row.place(),
                            s.prompt.id(),
                            e.message
                        ),
                        ..e
                    });
                    cells = cells.saturating_add(per_request[i]);
                    continue;
                }
            };
            let n: u64 = requests.iter().map(|(n, _)| n).sum();
            cells = cells.saturating_add(n.saturating_mul(per_request[i]));
            for (size, &variants) in sizes.iter_mut().zip(&variants_of[i]) {
                for &b in &budgets {
                    for &(n, bytes) in &requests {
                        size.add(n * variants * u64::from(repeat), bytes, b, 0, 0);
                    }
                }
            }
        }
        Ok(())
    })?;
    dataset::problems_in(rows.path(), problems)?;
    if let Some(e) = refused {
        return Err(e);
    }
    plan::check_cells(cells)?;
    if let Some(e) = unrendered.into_iter().flatten().next() {
        return Err(e);
    }
    let size = Size::of_parts(ExperimentKind::Eval, sizes, providers)?;
    plan::check_allowed(&size, allowed)?;
    Ok((size, prints.finish()))
}

/// The requests one row makes of `prompt`, as `(cells sending it, its rendered bytes)`: the
/// whole document once, or each chunk at each size with each context (`passes` cells each).
fn row_requests(
    prompt: &Prompt,
    set: &Map<String, Value>,
    row: &Row,
    chunking: Option<&chunked::Chunking>,
) -> Result<Vec<(u64, u64)>> {
    let bytes = |vars: &Map<String, Value>| -> Result<u64> {
        let r = prompt.render(&Map::new(), vars)?;
        Ok((r.user.len() + r.system.as_ref().map_or(0, String::len)) as u64)
    };
    let Some(c) = chunking else {
        return Ok(vec![(1, bytes(&row_vars(prompt, set, row))?)]);
    };
    let mut out = Vec::new();
    for &size in &c.sizes {
        let chunks = chunked::cut(prompt, row, c, size)?;
        // A document of only whitespace gives no chunk, so no cell: its expected records
        // would be left out of the scores, not missed. Said before anything is sent.
        if let Some((expected, pointer)) = row.expected_for(prompt).filter(|_| chunks.is_empty())
            && !expected.is_empty()
        {
            return Err(ApiError::new(
                Code::Usage,
                format!(
                    "{}: prompt `{}`: the document has no text to cut (TrustGraph's chunkers give it no chunk), so the {} record(s) at {pointer} could not be scored; give the row its text or take it out",
                    row.place(),
                    prompt.id(),
                    expected.len()
                ),
            ));
        }
        for &context in &c.context_chars {
            for i in 0..chunks.len() {
                let v = chunked::chunk_vars(prompt, set, row, &chunks, i, context);
                out.push((u64::from(c.passes), bytes(&v)?));
            }
        }
    }
    Ok(out)
}

fn sorted(budgets: &[u32]) -> Vec<u32> {
    let mut budgets = budgets.to_vec();
    budgets.sort_unstable();
    budgets.dedup();
    budgets
}

/// Check the eval's [`plan`] (nothing written when a row or a limit is wrong), hand its size
/// to `on_plan`, then start the eval: the experiment, its spec and its rows (read again from
/// the dataset and kept in the history as they come; a dataset that changed since it was
/// checked is an error, and none of its rows is kept).
pub fn begin(
    store: &Store,
    rows: impl Into<Rows>,
    subjects: Vec<Subject>,
    plan: &Plan<'_>,
    params: RunParams,
    providers: &[Chosen],
    on_plan: &mut dyn FnMut(&Size),
) -> Result<Eval> {
    let rows = rows.into();
    let (size, fingerprint) = planned(&rows, &subjects, plan, &params, providers, true)?;
    on_plan(&size);
    let Plan {
        budgets,
        constrain,
        repeat,
        cache,
        concurrency,
        adaptive,
        ..
    } = *plan;
    let budgets = sorted(budgets);
    let spec = EvalSpec {
        cells: size.cells as usize,
        dataset: rows.path().display().to_string(),
        prompts: subjects
            .iter()
            .enumerate()
            .map(|(i, s)| {
                Ok(SpecPrompt {
                    vars: plan.vars.get(i).cloned().unwrap_or_default(),
                    ..SpecPrompt::keep(store, s)?
                })
            })
            .collect::<Result<_>>()?,
        max_tokens: budgets,
        constrain,
        repeat,
        providers: providers
            .iter()
            .map(|p| SpecSettings::of(p, &params))
            .collect(),
        cache,
        concurrency,
        adaptive,
        plan: Some(size),
        chunking: plan.chunking.cloned(),
    };
    let running = lifecycle::begin(store, &ExperimentSpec::Eval(spec.clone()))?;
    let experiment = running.id;
    let ids = match keep_rows(store, experiment, &rows, fingerprint) {
        Ok(ids) => ids,
        Err(e) => {
            // The experiment has no rows: it ends failed, naming why (best effort: the
            // error that stopped it is the one to report).
            let _ = running.settle(lifecycle::End::Failed(e.message.clone()));
            return Err(e);
        }
    };
    // Each provider's cells run with the same parameters under its own name (a resume builds
    // each provider again from it).
    let params = match providers {
        [_] => vec![params],
        _ => providers
            .iter()
            .map(|p| RunParams {
                settings: RunSettings {
                    provider: p.name(),
                    ..params.settings.clone()
                },
                ..params.clone()
            })
            .collect(),
    };
    Eval {
        experiment,
        spec,
        subjects,
        rows: ids,
        params,
        cuts: chunked::Cuts::default(),
    }
    .cut(store)
}

/// Keep `rows` as eval `experiment`'s, a row at a time in one transaction: their ids, in order.
fn keep_rows(store: &Store, experiment: i64, rows: &Rows, checked: u64) -> Result<Vec<String>> {
    let mut writer = store.eval_rows_writer(experiment)?;
    let mut ids = Vec::new();
    let mut fingerprint = Fingerprint::default();
    rows.each(&mut |row| {
        let text = row_json(row)?;
        if rows.reread() {
            fingerprint.add(&text);
        }
        writer.put(&row.id, &text)?;
        ids.push(row.id.clone());
        Ok(())
    })?;
    if rows.reread() && fingerprint.finish() != checked {
        return Err(ApiError::new(
            Code::Conflict,
            format!(
                "{}: the dataset changed while the eval was starting (its rows are checked, then read again to be kept); nothing was sent — start the eval again",
                rows.path().display()
            ),
        ));
    }
    writer.commit()?;
    Ok(ids)
}

/// Eval `experiment` as the history keeps it: the prompt versions it ran (compiled), its rows
/// and parameters.
pub fn stored(store: &Store, experiment: i64) -> Result<Eval> {
    let corrupt = |what: &str, err: String| {
        ApiError::new(
            Code::StoreCorrupt,
            format!("eval {experiment}'s {what} is not what Kerf wrote: {err}"),
        )
    };
    let ExperimentSpec::Eval(spec) = lifecycle::spec_of(store, experiment, ExperimentKind::Eval)?
    else {
        return Err(corrupt("spec", "not an eval's".into()));
    };
    let subjects = spec
        .prompts
        .iter()
        .map(|p| p.load(store, &format!("eval {experiment}'s prompt")))
        .collect::<Result<Vec<_>>>()?;
    let rows = store.eval_row_ids(experiment)?;
    let params = spec
        .providers
        .iter()
        .map(SpecSettings::run_params)
        .collect::<Result<Vec<_>>>()?;
    Eval {
        experiment,
        spec,
        subjects,
        rows,
        params,
        cuts: chunked::Cuts::default(),
    }
    .cut(store)
}

/// Give each of `eval`'s prompts the `match` settings its file has now (`kerf eval rescore`):
/// the prompts' ids whose settings differ from those the eval ran with. A prompt whose file
/// is gone, or no longer a valid prompt, is an error naming it.
pub fn rematch(eval: &mut Eval) -> Result<Vec<String>> {
    let mut changed = Vec::new();
    for (s, p) in eval.subjects.iter_mut().zip(&eval.spec.prompts) {
        let Some(path) = &p.path else {
            continue;
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            ApiError::new(
                Code::NotFound,
                format!(
                    "{path}: prompt `{}`'s file cannot be read ({e}); rescore takes its current `match` from it",
                    p.id
                ),
            )
        })?;
        let loaded = kerf_core::PromptFile::from_json_str(&text, path)?;
        let now = Prompt::compile(loaded.file, path)?.file.match_spec;
        if now != s.prompt.file.match_spec {
            changed.push(p.id.clone());
            s.prompt.file.match_spec = now;
        }
    }
    Ok(changed)
}

impl Eval {
    /// This eval with its documents' chunks counted at every size (an eval that cuts its
    /// documents; the rows are read back from the history, each let go once cut).
    fn cut(mut self, store: &Store) -> Result<Eval> {
        let Some(chunking) = self.spec.chunking.clone() else {
            return Ok(self);
        };
        let mut cuts = chunked::Cuts::default();
        store.each_eval_row(self.experiment, |seq, text| -> Result<()> {
            let row = self.parse_row(seq, &text)?;
            for (si, s) in self.subjects.iter().enumerate() {
                for &size in &chunking.sizes {
                    let n = chunked::cut(&s.prompt, &row, &chunking, size)?.len();
                    cuts.set_count((si, seq, size), n as u32);
                }
            }
            Ok(())
        })?;
        self.cuts = cuts;
        Ok(self)
    }

    /// The variables prompt `si` renders cell `key` of row `row` (its index `seq`) with: the
    /// row's, with the document replaced by the cell's chunk when it reads one.
    pub(crate) fn cell_vars(
        &self,
        si: usize,
        seq: usize,
        row: &Row,
        key: &CellKey,
    ) -> Result<Map<String, Value>> {
        self.chunk_vars(si, seq, row, (key.chunk_size, key.context_chars, key.chunk))
    }

    /// [`Eval::cell_vars`] for the chunk `(size, context, index)` (size 0: the whole document).
    pub(crate) fn chunk_vars(
        &self,
        si: usize,
        seq: usize,
        row: &Row,
        (size, context, chunk): (u32, u32, u32),
    ) -> Result<Map<String, Value>> {
        if self.spec.chunking.is_none() || size == 0 {
            return Ok(self.vars_for(si, row));
        }
        let chunks = self.chunks(si, seq, row, size)?;
        Ok(chunked::chunk_vars(
            &self.subjects[si].prompt,
            self.set(si),
            row,
            &chunks,
            chunk as usize,
            context,
        ))
    }

    /// Row `row`'s document (its index `seq`) as prompt `si` reads it, cut at `size`.
    pub(crate) fn chunks(
        &self,
        si: usize,
        seq: usize,
        row: &Row,
        size: u32,
    ) -> Result<std::sync::Arc<Vec<kerf_core::chunk::Chunk>>> {
        let Some(chunking) = self.spec.chunking.as_ref() else {
            return Ok(std::sync::Arc::new(Vec::new()));
        };
        self.cuts.of((si, seq, size), || {
            chunked::cut(&self.subjects[si].prompt, row, chunking, size)
        })
    }

    /// The variables set for every row of prompt `si` (its [`SpecPrompt::vars`]).
    pub(crate) fn set(&self, si: usize) -> &Map<String, Value> {
        &self.spec.prompts[si].vars
    }

    /// The variables prompt `si` renders `row` with: [`row_vars`].
    pub(crate) fn vars_for(&self, si: usize, row: &Row) -> Map<String, Value> {
        row_vars(&self.subjects[si].prompt, self.set(si), row)
    }

    /// The providers the eval's cells run on, built again from the settings it keeps, in the
    /// spec's order (a resume runs on them).
    pub fn providers(&self, wb: &crate::workbench::Workbench) -> Result<Vec<Chosen>> {
        crate::experiments::spec::providers(wb, &self.spec.providers)
    }

    /// The index of provider `name` among the eval's.
    pub fn provider_index(&self, name: &str) -> Option<usize> {
        self.spec.providers.iter().position(|p| p.provider == name)
    }

    /// Row `seq` (its index in [`Eval::rows`]), read back from the history.
    pub fn row(&self, store: &Store, seq: usize) -> Result<Row> {
        let text = store.eval_row(self.experiment, seq)?;
        self.parse_row(seq, text.as_deref().unwrap_or("null"))
    }

    fn parse_row(&self, seq: usize, text: &str) -> Result<Row> {
        serde_json::from_str::<Row>(text).map_err(|err| {
            ApiError::new(
                Code::StoreCorrupt,
                format!(
                    "eval {}'s row {seq} is not what Kerf wrote: {err}",
                    self.experiment
                ),
            )
        })
    }

    /// The cells measured already (finished; failed ones too unless `retry_errors`).
    fn kept(&self, store: &Store, retry_errors: bool) -> Result<BTreeMap<CellKey, i64>> {
        lifecycle::measured(store, self.experiment, !retry_errors)
    }

    /// What a pass over the cells still to run will send, at most: a resume announces it before
    /// its first request, as a start does. Each row is read back and rendered once per prompt
    /// that has cells of it to run.
    pub fn remaining(
        &self,
        store: &Store,
        providers: &[Chosen],
        retry_errors: bool,
    ) -> Result<Size> {
        let keep = self.kept(store, retry_errors)?;
        let parts = providers
            .iter()
            .map(|p| self.remaining_on(store, p, &keep))
            .collect::<Result<Vec<_>>>()?;
        Ok(Size::merge(ExperimentKind::Eval, parts))
    }

    /// [`Eval::remaining`] on one provider, `keep` being the cells measured already.
    fn remaining_on(
        &self,
        store: &Store,
        provider: &Chosen,
        keep: &BTreeMap<CellKey, i64>,
    ) -> Result<Size> {
        let mut size = Size::new(ExperimentKind::Eval);
        for (si, s) in self.subjects.iter().enumerate() {
            let variants = variants(self.spec.constrain, &s.prompt, provider);
            store.each_eval_row(self.experiment, |seq, text| -> Result<()> {
                let Some(id) = self.rows.get(seq) else {
                    return Ok(());
                };
                // This row's cells still to run, by budget and request (a cut document's
                // chunk, with its context).
                let mut todo: BTreeMap<(u32, u32, u32, u32), u64> = BTreeMap::new();
                for &max_tokens in &self.spec.max_tokens {
                    for &constrained in &variants {
                        for repeat in 0..self.spec.repeat {
                            let key = cells::key(
                                provider,
                                s.prompt.id(),
                                max_tokens,
                                constrained,
                                repeat,
                                id,
                            );
                            for cell in self.document_cells(si, seq, key) {
                                if !keep.contains_key(&cell) {
                                    let request = (
                                        max_tokens,
                                        cell.chunk_size,
                                        cell.context_chars,
                                        cell.chunk,
                                    );
                                    *todo.entry(request).or_default() += 1;
                                }
                            }
                        }
                    }
                }
                if todo.is_empty() {
                    return Ok(());
                }
                let row = self.parse_row(seq, &text)?;
                for ((max_tokens, chunk_size, context_chars, chunk), n) in todo {
                    let key = CellKey {
                        chunk_size,
                        context_chars,
                        chunk,
                        ..cells::key(provider, s.prompt.id(), max_tokens, false, 0, id)
                    };
                    let vars = self.cell_vars(si, seq, &row, &key)?;
                    let r = s.prompt.render(&Map::new(), &vars)?;
                    let bytes = r.user.len() + r.system.as_ref().map_or(0, String::len);
                    size.add(n, bytes as u64, max_tokens, 0, 0);
                }
                Ok(())
            })?;
        }
        size.priced(provider)
    }

    /// The requests document `seq` makes of prompt `si` cut at `size`, at one budget, context
    /// and repeat: a chunk's each pass.
    pub(crate) fn document_requests(&self, si: usize, seq: usize, size: u32) -> usize {
        let passes = self.spec.chunking.as_ref().map_or(1, |c| c.passes);
        self.cuts.count((si, seq, size)) as usize * passes as usize
    }

    /// The cells one document (row `seq`) makes of prompt `si` at `base`'s budget, constraint
    /// and repeat: `base` itself, the whole document; or, cut, a key for each chunk at each size
    /// with each context, each pass.
    fn document_cells(
        &self,
        si: usize,
        seq: usize,
        base: CellKey,
    ) -> impl Iterator<Item = CellKey> + '_ {
        let (sizes, contexts, passes): (&[u32], &[u32], u32) = match &self.spec.chunking {
            Some(c) => (&c.sizes, &c.context_chars, c.passes),
            None => (&[0], &[0], 1),
        };
        sizes.iter().flat_map(move |&size| {
            let base = base.clone();
            let chunks = if size == 0 {
                1
            } else {
                self.cuts.count((si, seq, size))
            };
            contexts.iter().flat_map(move |&context| {
                let base = base.clone();
                (0..chunks).flat_map(move |chunk| {
                    let base = base.clone();
                    (0..passes).map(move |pass| CellKey {
                        chunk_size: size,
                        context_chars: context,
                        chunk,
                        pass,
                        ..base.clone()
                    })
                })
            })
        })
    }

    /// Every cell of the matrix, with its prompt's index and its row's index, made as they are
    /// taken: prompt × budget × constraint variant (as `provider` allows) × repeat × row (×
    /// chunk size × context × chunk × pass, for an eval that cuts its documents).
    pub fn matrix<'a>(
        &'a self,
        provider: &'a Chosen,
    ) -> impl Iterator<Item = (usize, usize, CellKey)> + 'a {
        self.subjects.iter().enumerate().flat_map(move |(i, s)| {
            let variants = variants(self.spec.constrain, &s.prompt, provider);
            self.spec.max_tokens.iter().flat_map(move |&max_tokens| {
                variants.clone().into_iter().flat_map(move |constrained| {
                    (0..self.spec.repeat).flat_map(move |repeat| {
                        self.rows.iter().enumerate().flat_map(move |(seq, row)| {
                            let key = cells::key(
                                provider,
                                s.prompt.id(),
                                max_tokens,
                                constrained,
                                repeat,
                                row,
                            );
                            self.document_cells(i, seq, key)
                                .map(move |key| (i, seq, key))
                        })
                    })
                })
            })
        })
    }
}

/// The variables a prompt renders one row with: those `set` for every row, then the row's own
/// over them (the document under the input variable).
pub(crate) fn row_vars(prompt: &Prompt, set: &Map<String, Value>, row: &Row) -> Map<String, Value> {
    let mut vars = set.clone();
    vars.extend(row.vars_for(prompt));
    vars
}

/// A prompt rendered for one row: [`row_vars`].
pub(crate) fn rendering(prompt: &Prompt, set: &Map<String, Value>, row: &Row) -> Result<Rendering> {
    let vars = row_vars(prompt, set, row);
    Ok(Rendering {
        rendered: prompt.render(&Map::new(), &vars)?,
        vars,
        terms: Map::new(),
    })
}

/// An eval's cells on its providers, as a pass runs them: prompt × budget × constraint × repeat
/// × row on each, each row read back and rendered as its cell starts. A cell's end is handed
/// over as it came; the report reads the history.
pub(crate) struct EvalPlan<'a> {
    store: &'a Store,
    eval: &'a Eval,
    providers: &'a [Chosen],
    concurrency: usize,
    adaptive: bool,
    /// The providers whose cells this pass takes (`None`: all).
    lanes: Option<Vec<bool>>,
    /// The row the last cell read: a cut document's thousands of cells read it once.
    row: chunked::Last<usize, Row>,
}

/// `eval`'s cells on `providers` as a plan (`lanes`: only those providers' cells), for a pass
/// or for the batch driver.
pub(crate) fn cell_plan<'a>(
    store: &'a Store,
    eval: &'a Eval,
    providers: &'a [Chosen],
    concurrency: usize,
    lanes: Option<Vec<bool>>,
) -> EvalPlan<'a> {
    EvalPlan {
        store,
        eval,
        providers,
        concurrency,
        adaptive: false,
        lanes,
        row: chunked::Last::default(),
    }
}

impl EvalPlan<'_> {
    /// Row `seq`, read back once for the cells that come after one another on it.
    fn row(&self, seq: usize) -> Result<std::sync::Arc<Row>> {
        self.row.of(seq, || self.eval.row(self.store, seq))
    }
}

/// Where an eval's cell sits: its provider, its prompt, its row (indexes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EvalAt {
    provider: usize,
    subject: usize,
    seq: usize,
}

impl pass::Plan for EvalPlan<'_> {
    type At = EvalAt;
    type Out = (CellKey, CellEnd);

    fn providers(&self) -> &[Chosen] {
        self.providers
    }

    fn concurrency(&self) -> usize {
        self.concurrency
    }

    fn adaptive(&self) -> bool {
        self.adaptive
    }

    fn cells(&self, provider: usize) -> Box<dyn Iterator<Item = (EvalAt, CellKey)> + '_> {
        if self
            .lanes
            .as_ref()
            .is_some_and(|l| !l.get(provider).copied().unwrap_or(false))
        {
            return Box::new(std::iter::empty());
        }
        Box::new(
            self.eval
                .matrix(&self.providers[provider])
                .map(move |(subject, seq, key)| {
                    let at = EvalAt {
                        provider,
                        subject,
                        seq,
                    };
                    (at, key)
                }),
        )
    }

    fn cell(&self, at: EvalAt, key: CellKey) -> Result<Cell<'_>> {
        let s = &self.eval.subjects[at.subject];
        let row = self.row(at.seq)?;
        let vars = self.eval.cell_vars(at.subject, at.seq, &row, &key)?;
        Ok(Cell {
            subject: s,
            rendering: Rendering {
                rendered: s.prompt.render(&Map::new(), &vars)?,
                vars,
                terms: Map::new(),
            },
            params: RunParams {
                max_tokens: key.max_tokens,
                constrain: key.constrained,
                ..self.eval.params[at.provider].clone()
            },
            key: Some(key),
        })
    }

    /// The row's variables, with no render (the template is not needed to read a reply).
    fn reading(&self, at: EvalAt, key: CellKey) -> Result<(&Subject, Map<String, Value>)> {
        let s = &self.eval.subjects[at.subject];
        let row = self.row(at.seq)?;
        Ok((s, self.eval.cell_vars(at.subject, at.seq, &row, &key)?))
    }

    /// Per cell, rendering its row (an eval sizes a resume row by row instead, rendering each
    /// row once per prompt: [`Eval::remaining`]).
    fn cost(&self, at: EvalAt, key: &CellKey) -> Result<pass::Cost> {
        let s = &self.eval.subjects[at.subject];
        let row = self.row(at.seq)?;
        let vars = self.eval.cell_vars(at.subject, at.seq, &row, key)?;
        let r = s.prompt.render(&Map::new(), &vars)?;
        Ok(pass::Cost {
            input_bytes: (r.user.len() + r.system.as_ref().map_or(0, String::len)) as u64,
            max_tokens: key.max_tokens,
            ..pass::Cost::default()
        })
    }

    fn ended(&self, _: EvalAt, key: CellKey, end: CellEnd) -> Result<(CellKey, CellEnd)> {
        Ok((key, end))
    }

    fn served_model(&self) -> bool {
        true
    }

    fn resend_broken(&self) -> bool {
        true
    }

    fn layer(&self) -> Option<&dyn cells::Layer> {
        self.eval
            .spec
            .cache
            .then_some(&crate::experiments::cache::ReplyCache as &dyn cells::Layer)
    }
}

/// Run every cell of `eval` that still needs a run: all of them at first; on a resume, those
/// never started or cut off (and, with `retry_errors`, those that failed). Each provider's
/// cells go in a lane of their own, `pace.concurrency` at a time, all providers at once. Stops
/// starting cells when `cancel` fires; the runs in flight end as cancelled and stay to be run
/// again.
pub fn run_cells(
    store: &Store,
    eval: &Eval,
    providers: &[Chosen],
    pace: Pace,
    cancel: &CancelToken,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<()> {
    run_cells_on(store, eval, providers, None, pace, cancel, on_progress)
}

/// [`run_cells`] over the providers `lanes` marks (`None`: all): the others' cells are left as
/// they are (an eval's batch providers, awaited from their batches).
pub(crate) fn run_cells_on(
    store: &Store,
    eval: &Eval,
    providers: &[Chosen],
    lanes: Option<Vec<bool>>,
    pace: Pace,
    cancel: &CancelToken,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<()> {
    if providers.len() != eval.params.len() {
        return Err(ApiError::new(
            Code::Internal,
            format!(
                "eval {} has {} provider(s), {} given",
                eval.experiment,
                eval.params.len(),
                providers.len()
            ),
        ));
    }
    let measured = eval.kept(store, pace.retry_errors)?;
    let plan = EvalPlan {
        adaptive: pace.adaptive,
        ..cell_plan(store, eval, providers, pace.concurrency, lanes)
    };
    let running = lifecycle::Running {
        store,
        id: eval.experiment,
        kind: ExperimentKind::Eval,
    };
    let progress = RefCell::new(Progress {
        experiment: eval.experiment,
        ..Progress::default()
    });
    // Told once the plan is counted, then as each cell ends.
    let on_progress = RefCell::new(on_progress);
    let tell = || (on_progress.borrow_mut())(&progress.borrow());
    pass::run(
        &plan,
        Some(&running),
        &measured,
        cancel,
        Hooks {
            on_warning: &|_, w| progress.borrow_mut().notice = Some(w.to_string()),
            ..Hooks::default()
        },
        &mut |counted| {
            {
                let mut p = progress.borrow_mut();
                p.total = counted.cells - counted.before;
                p.skipped = counted.before;
            }
            tell();
        },
        &mut |at, _, (cell, end)| {
            // A chunk's cell is not a line of the matrix: its document is, merged, once its
            // last chunk has ended.
            let live = match (&end.ran, pace.live) {
                (Ok(_), true) if cell.chunk_size > 0 => {
                    view::live_document(store, eval, at.subject, at.seq, &cell)?
                }
                (Ok(ran), true) => Some(view::live(store, eval, at.subject, at.seq, cell, ran)?),
                _ => None,
            };
            {
                let mut p = progress.borrow_mut();
                p.done += 1;
                p.cell = live;
                match &end.ran {
                    Ok(Ran::Cached(_)) => p.cached += 1,
                    Ok(Ran::Run(r)) => {
                        let u = &r.out.finish.usage;
                        p.prompt_tokens += u64::from(u.prompt_tokens);
                        p.completion_tokens += u64::from(u.completion_tokens);
                        p.cost_usd += r.cost.as_ref().map_or(0.0, |c| c.usd);
                        if r.out.finish.reason == kerf_llm::FinishReason::Error {
                            p.failed += 1;
                        }
                    }
                    Err(e)
                        if matches!(
                            e.code,
                            Code::StoreFull | Code::StoreCorrupt | Code::StoreIo | Code::Store
                        ) =>
                    {
                        // The history cannot keep what is bought: stop buying.
                        cancel.cancel();
                        return Err(e.clone());
                    }
                    Err(e) if e.code == Code::Refused => {
                        // The provider refuses everything: stop rather than retry for hours.
                        cancel.cancel();
                        let id = eval.experiment;
                        return Err(ApiError::new(
                            Code::Refused,
                            format!(
                                "eval {id} stopped: {}; what finished is kept: `kerf eval resume {id}` runs the rest",
                                e.message
                            ),
                        ));
                    }
                    Err(_) => p.failed += 1,
                }
            }
            tell();
            Ok(())
        },
    )?;
    Ok(())
}

/// Score what `eval` has and end its experiment with that report: `ok`, or `interrupted` when
/// it was `stopped` before every cell ran (`kerf eval resume` finishes it).
pub fn finish(store: &Store, eval: &Eval, stopped: bool, options: Options) -> Result<Report> {
    let report = report(store, eval, options)?;
    let outcome = lifecycle::Outcome::of(&report)?;
    let running = lifecycle::Running {
        store,
        id: eval.experiment,
        kind: ExperimentKind::Eval,
    };
    running.settle(if stopped {
        lifecycle::End::Stopped(outcome)
    } else {
        lifecycle::End::Done(outcome)
    })?;
    Ok(report)
}
