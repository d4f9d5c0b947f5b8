//! An eval's figures, from what the history keeps: each cell's run (its finish and the objects
//! its reply gave when it ran) scored against its row's expected records. Every figure comes
//! from the stored replies, so `kerf eval show` and `kerf eval rescore` print what `kerf eval`
//! printed, bit for bit.
//!
//! The replies are read from the history one cell at a time ([`Reader`]) and let go once their
//! figures are taken: a report holds the cells' figures and the aggregates, and a few replies
//! at most (a comparison's two, the HTML report's one), whatever the replies weigh.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kerf_core::eval::dataset::Row;
use kerf_core::eval::{Grounding, Matcher, Tally, identity, score};
use kerf_core::{DropCounts, DropKind, ParseReport, Prompt};
use kerf_llm::FinishReason;
use kerf_store::{Status, Store};
use serde::Serialize;
use serde_json::Value;
use ts_rs::TS;

use super::Eval;
use super::analysis::{
    Advice, BudgetPoint, Comparison, Drops, RepeatCell, RowRepeats, Side, advise, compare,
    f1_interval, repeat_stats, row_repeats,
};
pub use super::lines::held;
use super::lines::{CellLine, ProviderLine, SummaryLine, line_cells, quantile, run_times};
pub(crate) use super::replies::{Reader, reread_reply};
use crate::charts::{self, Axis, BudgetCurve, Chart, Scale, Ticks};
use crate::error::Result;

pub(crate) mod documents;
mod kept;

use kept::{CellScore, KEEP_BATCH, score_key};

/// An eval's result: what `kerf eval --json` prints and the history keeps. `experiment`,
/// `summary` and `cells` are an interface; the rest are additions.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[ts(rename = "EvalReport")]
pub struct Report {
    pub experiment: i64,
    pub summary: Vec<SummaryLine>,
    pub cells: Vec<CellLine>,
    pub dataset: String,
    pub rows: usize,
    pub repeat: u32,
    /// The first provider, and its model (every provider is in `providers`).
    pub provider: String,
    pub model: String,
    /// Each provider side by side, in the eval's order: cost, tokens and run times.
    pub providers: Vec<ProviderLine>,
    /// Cells of the matrix without a finished run (`kerf eval resume` runs them).
    pub pending: usize,
    /// Cells measured by a reply an earlier eval bought (`--cache`).
    pub cached: usize,
    /// Per prompt and constraint: the smallest budget whose recall is within a share of the
    /// best budget's.
    pub advice: Vec<Advice>,
    /// Per prompt: why its replies lost pieces, and in which rows.
    pub drops: Vec<Drops>,
    /// Every two prompts at the same provider, budget and constraint, and every provider
    /// against the first at the same prompt, budget and constraint: the paired F1 difference.
    pub comparisons: Vec<Comparison>,
    /// By prompt id, the variables set for every row beneath the row's own (`--var`, the
    /// window's form); absent when none was set.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[ts(optional, type = "Record<string, Record<string, unknown>>")]
    pub vars: BTreeMap<String, serde_json::Map<String, Value>>,
    /// How the documents were cut (absent: sent whole): the advice's chunk size with this
    /// chunker and overlap is what a TrustGraph flow is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub chunking: Option<super::chunked::Chunking>,
    /// Which objects were scored: a comparison or the HTML report reads each cell's records
    /// back the same way.
    #[serde(skip)]
    pub replies: Replies,
}

/// How a report is figured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Budget advice: the smallest budget whose recall is within this share of the best.
    pub advise_within: f64,
    pub replies: Replies,
}

/// Which objects a report scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replies {
    /// The objects each run's parse gave as it ran.
    Stored,
    /// The stored raw replies parsed again (`kerf eval rescore`): the report owes nothing to
    /// what was parsed at the time.
    Reread,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            advise_within: 0.05,
            replies: Replies::Stored,
        }
    }
}

/// Score every cell of `eval` from its stored run, each prompt with its own `match` settings.
///
/// The cells and their runs' outcomes are read first (no reply); then each finished cell's
/// reply is read from the history, parsed (or its stored parse taken) and scored, what the
/// figures need of it kept — its counts, the pairs it matched — and the reply let go. A line's
/// cells are read a row at a time, the row's repeats together, so repeat statistics are
/// figured per row as it goes. At most a few replies are held at once, however many cells
/// there are and however large their replies ([`held`] counts them).
pub fn report(store: &Store, eval: &Eval, options: Options) -> Result<Report> {
    let matchers: Vec<Matcher> = eval.subjects.iter().map(|s| s.prompt.matcher()).collect();
    let reader = Reader::new(store, eval, options.replies);
    let repeated = eval.spec.repeat >= 2;
    let mut lines = Vec::new();
    let outcomes = store.eval_outcomes(eval.experiment)?;
    let place = |key: &kerf_store::CellKey| {
        Some((
            reader.subject(&key.prompt)?,
            eval.provider_index(&key.provider)?,
            reader.seq(&key.row)?,
        ))
    };
    // Cells with a finished run (a cut document's line is several).
    let finished = outcomes
        .iter()
        .filter(|o| o.cell.finished() && place(&o.cell.cell).is_some())
        .count();
    if eval.spec.chunking.is_some() {
        // A line per document: its chunk cells, merged once read.
        for (key, cells) in documents::gather(outcomes) {
            if let Some((si, pi, ri)) = place(&key) {
                let requests = eval.document_requests(si, ri, key.chunk_size);
                let line = CellLine::of_document(&key, &cells, requests, eval.experiment);
                lines.push(((si, pi), ri, line));
            }
        }
    } else {
        for stored in outcomes {
            if let Some((si, pi, ri)) = place(&stored.cell.cell) {
                let line = CellLine::unscored(&stored, eval.experiment);
                lines.push(((si, pi), ri, line));
            }
        }
    }
    // Provider by provider, then prompt by prompt.
    lines.sort_by(|((sa, pa), ra, a), ((sb, pb), rb, b)| {
        (
            pa,
            sa,
            a.max_tokens,
            !a.constrained,
            a.chunk_size,
            a.context_chars,
            a.repeat,
            ra,
        )
            .cmp(&(
                pb,
                sb,
                b.max_tokens,
                !b.constrained,
                b.chunk_size,
                b.context_chars,
                b.repeat,
                rb,
            ))
    });
    // Read in line, row, repeat order: a row's repeats of a line come together.
    let mut order: Vec<usize> = (0..lines.len()).collect();
    order.sort_by_key(|&i| {
        let ((si, pi), ri, l) = &lines[i];
        (
            *pi,
            *si,
            l.max_tokens,
            !l.constrained,
            l.chunk_size,
            l.context_chars,
            *ri,
            l.repeat,
        )
    });
    // Each document's expected records' places, for a cut document's figures (by prompt and
    // row: a few numbers each).
    let mut expected_at: HashMap<(usize, usize), Vec<Option<std::ops::Range<usize>>>> =
        HashMap::new();
    let mut repeats = Repeats::default();
    let mut to_keep: Vec<(i64, String, String)> = Vec::new();
    // The row being read (a line's cells of one row come together).
    let mut row: Option<(usize, Row)> = None;
    for i in order {
        let ((si, pi), ri, line) = &mut lines[i];
        let (si, pi, ri) = (*si, *pi, *ri);
        if repeated {
            repeats.at(
                (
                    si,
                    pi,
                    (line.max_tokens, line.chunk_size, line.context_chars),
                    line.constrained,
                    ri,
                ),
                &row,
                eval,
                &matchers,
            );
        }
        if !line.measured() {
            continue;
        }
        if row.as_ref().is_none_or(|(seq, _)| *seq != ri) {
            row = Some((ri, eval.row(store, ri)?));
        }
        let Some((_, r)) = row.as_ref() else { continue };
        let (prompt, m) = (&eval.subjects[si].prompt, &matchers[si]);
        if let Some(size) = line.chunk_size {
            // A cut document: its chunk replies merged, then scored as one reply.
            let expected = r.expected_for(prompt).map(|(e, _)| e);
            let Some(mut doc) = reader.document(line, si, ri, r, expected)? else {
                continue;
            };
            let report = std::mem::take(&mut doc.reply.report);
            // The merge's places first: the records it held as values are let go before
            // scoring reads them back from the reply's compact text, so a book's records are
            // held as values once, never twice.
            line.merged(m, doc);
            let objects = report.objects.to_vec();
            score_objects(line, m, prompt, r, &report, &objects, GroundIn::Chunks);
            if repeated {
                repeats.cells.push(RepeatCell::of(m, &objects, line));
            }
            drop(objects);
            if let (Some(expected), Some(text)) = (expected, r.document(prompt)) {
                let places = expected_at
                    .entry((si, ri))
                    .or_insert_with(|| documents::expected_places(m, text, expected));
                documents::chunk_figures(line, &eval.chunks(si, ri, r, size)?, places);
            }
            continue;
        }
        let Some(run) = line.run else {
            continue;
        };
        let reply = reader.reply(run, si, r)?;
        // A score kept with the run is taken as it is; one made now is kept (best effort: a
        // history opened read-only is scored each time, as before).
        let key = score_key(eval, si, ri, options.replies);
        let kept = store
            .cell_score(run, &key)
            .ok()
            .flatten()
            .and_then(|text| serde_json::from_str::<CellScore>(&text).ok());
        let objects = match kept {
            Some(kept) => {
                kept.apply(line, &reply.report);
                if repeated {
                    reply.report.objects.to_vec()
                } else {
                    Vec::new()
                }
            }
            None => {
                let objects = score_line(line, m, prompt, r, &reply.report, GroundIn::Document);
                if let Ok(text) = serde_json::to_string(&CellScore::of(line)) {
                    to_keep.push((run, key, text));
                }
                if to_keep.len() >= KEEP_BATCH {
                    let _ = store.put_cell_scores(&std::mem::take(&mut to_keep));
                }
                objects
            }
        };
        if repeated {
            repeats.cells.push(RepeatCell::of(m, &objects, line));
        }
    }
    let _ = store.put_cell_scores(&to_keep);
    drop(to_keep);
    repeats.close(&row, eval, &matchers);
    drop(row);
    let mut cells: Vec<CellLine> = lines.into_iter().map(|(_, _, l)| l).collect();
    lost_to_cut(&mut cells);
    let summary = summarise(eval, &cells, &repeats.by_line);
    let lines = &summary;
    // Every provider × prompt, in the report's order.
    let pairs: Vec<(&str, &str)> = eval
        .spec
        .providers
        .iter()
        .flat_map(|p| {
            eval.subjects
                .iter()
                .map(move |s| (s.prompt.id(), p.provider.as_str()))
        })
        .collect();
    let advice = pairs
        .iter()
        .flat_map(|&(id, provider)| {
            [true, false].into_iter().filter_map(move |constrained| {
                let points: Vec<BudgetPoint> = lines
                    .iter()
                    .filter(|l| {
                        l.prompt == id
                            && l.provider == provider
                            && l.constrained == constrained
                            && l.cells > 0
                    })
                    .map(|l| BudgetPoint {
                        max_tokens: l.max_tokens,
                        recall: l.micro.recall,
                        cost_per_document: l.cost_usd.map(|c| c / l.cells as f64),
                        completion_tokens_per_document: Some(
                            l.completion_tokens as f64 / l.cells as f64,
                        ),
                        chunk_size: l.chunk_size,
                        context_chars: l.context_chars,
                        tokens_per_document: l.chunks.as_ref().map(|c| {
                            c.prompt_tokens_per_document + c.completion_tokens_per_document
                        }),
                        requests_per_document: l.chunks.as_ref().map(|c| c.requests_per_document),
                    })
                    .collect();
                advise((id, provider), constrained, &points, options.advise_within)
            })
        })
        .collect();
    let drops = pairs
        .iter()
        .map(|&(id, provider)| {
            let mine: Vec<&CellLine> = cells
                .iter()
                .filter(|c| c.prompt == id && c.provider == provider)
                .collect();
            super::analysis::drops((id, provider), &mine)
        })
        .collect();
    // Line by line, each paired row's first repeat read back from the history, two replies at
    // a time: every two prompts on the same provider at the same budget and constraint; then
    // every other provider against the first on the same prompt.
    let mut comparisons = Vec::new();
    let mut pairs_of_lines = Vec::new();
    for p in &eval.spec.providers {
        for (i, a) in eval.subjects.iter().enumerate() {
            for b in &eval.subjects[i + 1..] {
                for la in summary
                    .iter()
                    .filter(|l| l.prompt == a.prompt.id() && l.provider == p.provider)
                {
                    pairs_of_lines.extend(
                        summary
                            .iter()
                            .find(|l| {
                                l.prompt == b.prompt.id()
                                    && l.provider == p.provider
                                    && l.max_tokens == la.max_tokens
                                    && l.constrained == la.constrained
                                    && l.chunk_size == la.chunk_size
                                    && l.context_chars == la.context_chars
                            })
                            .map(|lb| (la, lb)),
                    );
                }
            }
        }
    }
    if let Some((first, others)) = eval.spec.providers.split_first() {
        for la in summary.iter().filter(|l| l.provider == first.provider) {
            for other in others {
                pairs_of_lines.extend(
                    summary
                        .iter()
                        .find(|l| {
                            l.provider == other.provider
                                && l.prompt == la.prompt
                                && l.max_tokens == la.max_tokens
                                && l.constrained == la.constrained
                                && l.chunk_size == la.chunk_size
                                && l.context_chars == la.context_chars
                        })
                        .map(|lb| (la, lb)),
                );
            }
        }
    }
    for (la, lb) in pairs_of_lines {
        comparisons.push(compare(
            (Side::of(eval.experiment, la), &line_cells(&cells, la)),
            (Side::of(eval.experiment, lb), &line_cells(&cells, lb)),
            &mut |c| reader.objects(c),
            &mut |c| reader.objects(c),
        )?);
    }
    let cached = cells.iter().filter(|c| c.cached && c.measured()).count();
    let providers = provider_lines(eval, &cells);
    Ok(Report {
        experiment: eval.experiment,
        summary,
        cells,
        dataset: eval.spec.dataset.clone(),
        rows: eval.rows.len(),
        repeat: eval.spec.repeat,
        provider: eval
            .spec
            .providers
            .first()
            .map(|p| p.provider.clone())
            .unwrap_or_default(),
        model: eval
            .spec
            .providers
            .first()
            .map(|p| p.model.clone())
            .unwrap_or_default(),
        providers,
        pending: eval.spec.cells.saturating_sub(finished),
        cached,
        advice,
        drops,
        comparisons,
        vars: eval
            .spec
            .prompts
            .iter()
            .filter(|p| !p.vars.is_empty())
            .map(|p| (p.id.clone(), p.vars.clone()))
            .collect(),
        chunking: eval.spec.chunking.clone(),
        replies: options.replies,
    })
}

impl CellLine {
    /// Cell `cell`, run by `run` and ended `status`, with no figure yet.
    pub(crate) fn of(
        cell: &kerf_store::CellKey,
        run: Option<i64>,
        status: Option<Status>,
    ) -> CellLine {
        CellLine {
            row: cell.row.clone(),
            prompt: cell.prompt.clone(),
            provider: cell.provider.clone(),
            max_tokens: cell.max_tokens,
            constrained: cell.constrained,
            repeat: cell.repeat,
            run,
            finish_reason: None,
            objects: 0,
            tp: None,
            fp: None,
            fn_: None,
            precision: None,
            recall: None,
            f1: None,
            lost_to_cut: None,
            status,
            dropped: DropCounts::default(),
            ungrounded: None,
            completion_tokens: None,
            cost_usd: None,
            cached: false,
            seconds: None,
            started_at: None,
            types: Vec::new(),
            chunk_size: None,
            context_chars: None,
            chunks: None,
            spans: Vec::new(),
            chunk_runs: Vec::new(),
            requests: Vec::new(),
            by_passes: Vec::new(),
            scored: None,
        }
    }

    /// Cell `stored` of eval `experiment` before its reply is scored: its key, its run and how
    /// the run ended.
    pub(crate) fn unscored(stored: &kerf_store::StoredReply, experiment: i64) -> CellLine {
        let c = &stored.cell;
        let mut line = CellLine::of(&c.cell, c.run, c.status);
        line.cached = c.run.is_some() && stored.run_experiment != Some(experiment);
        if c.run.is_some() {
            line.finish_reason = stored.finish_reason;
            line.completion_tokens = stored.completion_tokens;
            line.cost_usd = stored.cost_usd;
            line.seconds = stored.seconds;
            line.started_at = stored.started_at;
        }
        line
    }
}

/// Where a cell's records are grounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroundIn {
    /// The row's document, sent whole.
    Document,
    /// Each record's own chunk (or its context): the merge decides, and
    /// [`CellLine::merged`] gives the count (kept when it has been given). Grounding the merged
    /// records in the whole document as well was thrown away, at a pass over a book per record.
    Chunks,
}

/// Score `line` from its reply's parse (`report`) against `row`'s expected records for `prompt`
/// (`m`: its matcher): its counts, drops, ungrounded records (`ground`: where) and pairs — the
/// one scoring of a cell, for the report and for a cell the window opens. Returns the records,
/// as values.
pub(crate) fn score_line(
    line: &mut CellLine,
    m: &Matcher,
    prompt: &Prompt,
    row: &Row,
    report: &ParseReport,
    ground: GroundIn,
) -> Vec<Value> {
    // The report holds its objects as text; scoring reads them as values.
    let objects = report.objects.to_vec();
    score_objects(line, m, prompt, row, report, &objects, ground);
    objects
}

/// [`score_line`] with `report`'s records already read as values (`objects`).
pub(crate) fn score_objects(
    line: &mut CellLine,
    m: &Matcher,
    prompt: &Prompt,
    row: &Row,
    report: &ParseReport,
    objects: &[Value],
    ground: GroundIn,
) {
    let ungrounded = match ground {
        GroundIn::Document => row
            .document(prompt)
            .map(|doc| Grounding::new(m, doc).ungrounded(m, objects).len()),
        GroundIn::Chunks => line.ungrounded,
    };
    let scored = row.expected_for(prompt).map(|(expected, _)| {
        let mut s = score(m, expected, objects);
        // Indices into the reply, which is not kept.
        s.spurious = Vec::new();
        s
    });
    CellScore { ungrounded, scored }.apply(line, report);
}

/// A line's budget and cut: its `max_tokens`, and a cut document's chunk size and context.
type Cut = (u32, Option<u32>, Option<u32>);

/// A line: its prompt's index, its provider's, budget and cut, and constraint.
type LineKey = (usize, usize, Cut, bool);

/// Repeat statistics as the report reads the cells: the measured repeats of the row being read
/// (for one line), closed into that row's [`RowRepeats`] when the next row or line begins.
#[derive(Default)]
struct Repeats {
    /// The line and row being read.
    at: Option<(LineKey, usize)>,
    /// Its measured repeats so far.
    cells: Vec<RepeatCell>,
    /// Per line, each row's repeat figures, by row id.
    by_line: HashMap<LineKey, BTreeMap<String, RowRepeats>>,
}

impl Repeats {
    /// The report reads a cell of line `key.0..3`, row `key.3`: a new row or line closes the
    /// one before.
    fn at(
        &mut self,
        (si, pi, budget, constrained, ri): (usize, usize, Cut, bool, usize),
        row: &Option<(usize, Row)>,
        eval: &Eval,
        matchers: &[Matcher],
    ) {
        let here = ((si, pi, budget, constrained), ri);
        if self.at != Some(here) {
            self.close(row, eval, matchers);
            self.at = Some(here);
        }
    }

    /// Close the row being read (`row`, which the report read for its measured cells).
    fn close(&mut self, row: &Option<(usize, Row)>, eval: &Eval, matchers: &[Matcher]) {
        let cells = std::mem::take(&mut self.cells);
        let Some((line, ri)) = self.at.take() else {
            return;
        };
        let Some((_, row)) = row.as_ref().filter(|(seq, _)| *seq == ri) else {
            return;
        };
        if cells.is_empty() {
            return;
        }
        let prompt = &eval.subjects[line.0].prompt;
        let expected = row
            .expected_for(prompt)
            .map(|(e, _)| e.iter().map(|o| identity(&matchers[line.0], o)).collect());
        self.by_line
            .entry(line)
            .or_default()
            .insert(row.id.clone(), row_repeats(&row.id, &cells, expected));
    }
}

/// Fill in each scored cell's `lost_to_cut` from its siblings at larger budgets.
fn lost_to_cut(cells: &mut [CellLine]) {
    type Key<'a> = (
        &'a str,
        &'a str,
        bool,
        u32,
        &'a str,
        Option<u32>,
        Option<u32>,
    );
    // Per prompt, provider, constraint, repeat and row: each budget's matched records, where
    // the reply ended on its own.
    let mut complete: HashMap<Key<'_>, Vec<(u32, BTreeSet<usize>)>> = HashMap::new();
    for c in cells.iter() {
        if c.tp.is_some() && c.finish_reason == Some(FinishReason::Stop) {
            complete
                .entry((
                    &c.prompt,
                    &c.provider,
                    c.constrained,
                    c.repeat,
                    &c.row,
                    c.chunk_size,
                    c.context_chars,
                ))
                .or_default()
                .push((c.max_tokens, matched(c)));
        }
    }
    let lost: Vec<Option<u64>> = cells
        .iter()
        .map(|c| {
            c.tp?;
            let mine = matched(c);
            let larger: BTreeSet<usize> = complete
                .get(&(
                    c.prompt.as_str(),
                    c.provider.as_str(),
                    c.constrained,
                    c.repeat,
                    c.row.as_str(),
                    c.chunk_size,
                    c.context_chars,
                ))
                .into_iter()
                .flatten()
                .filter(|(b, _)| *b > c.max_tokens)
                .flat_map(|(_, s)| s.iter().copied())
                .collect();
            Some(larger.difference(&mine).count() as u64)
        })
        .collect();
    for (c, l) in cells.iter_mut().zip(lost) {
        c.lost_to_cut = l;
    }
}

/// The expected records a cell matched, by index into its row's list.
fn matched(c: &CellLine) -> BTreeSet<usize> {
    c.scored
        .iter()
        .flat_map(|s| s.matched.iter().map(|p| p.expected))
        .collect()
}

/// Each provider's share of `cells`, in the eval's order.
fn provider_lines(eval: &Eval, cells: &[CellLine]) -> Vec<ProviderLine> {
    eval.spec
        .providers
        .iter()
        .map(|p| {
            let mine: Vec<&CellLine> = cells.iter().filter(|c| c.provider == p.provider).collect();
            let measured: Vec<&CellLine> = mine.iter().copied().filter(|c| c.measured()).collect();
            // A cut document's line is its chunks' cells.
            let weight = |c: &&CellLine| c.chunks.as_ref().map_or(1, |f| f.requests as usize);
            let replies_cut = |c: &&CellLine| match &c.chunks {
                Some(f) => f.cut as usize,
                None => usize::from(c.status == Some(Status::Truncated)),
            };
            let costs: Vec<f64> = measured.iter().filter_map(|c| c.cost_usd).collect();
            let times = run_times(&mine);
            // Every cell of its matrix, whether it has a run yet or not, as the plan counted
            // them (an eval of one provider: all of them).
            let planned = match &eval.spec.plan {
                Some(plan) if !plan.providers.is_empty() => plan
                    .providers
                    .iter()
                    .find(|part| part.provider.as_deref() == Some(p.provider.as_str()))
                    .map_or(0, |part| part.cells as usize),
                _ => eval.spec.cells,
            };
            ProviderLine {
                provider: p.provider.clone(),
                model: p.model.clone(),
                cells: planned.max(mine.iter().map(weight).sum()),
                measured: measured.iter().map(weight).sum(),
                failed: mine
                    .iter()
                    .filter(|c| c.status == Some(Status::Error))
                    .count(),
                truncated: measured.iter().map(replies_cut).sum(),
                completion_tokens: measured.iter().filter_map(|c| c.completion_tokens).sum(),
                cost_usd: (!costs.is_empty()).then(|| costs.iter().sum()),
                seconds_p50: quantile(&times, 0.5),
                seconds_p95: quantile(&times, 0.95),
            }
        })
        .collect()
}

/// One line per provider × prompt × budget × constraint, in the spec's order; `repeats` holds
/// each line's rows' repeat figures.
fn summarise(
    eval: &Eval,
    cells: &[CellLine],
    repeats: &HashMap<LineKey, BTreeMap<String, RowRepeats>>,
) -> Vec<SummaryLine> {
    let none = BTreeMap::new();
    let mut out = Vec::new();
    for (pi, p) in eval.spec.providers.iter().enumerate() {
        for (si, s) in eval.subjects.iter().enumerate() {
            summarise_one(
                eval,
                cells,
                repeats,
                (si, s),
                (pi, &p.provider),
                &none,
                &mut out,
            );
        }
    }
    out
}

/// [`summarise`]'s lines of one prompt on one provider.
fn summarise_one(
    eval: &Eval,
    cells: &[CellLine],
    repeats: &HashMap<LineKey, BTreeMap<String, RowRepeats>>,
    (si, s): (usize, &super::Subject),
    (pi, provider): (usize, &str),
    none: &BTreeMap<String, RowRepeats>,
    out: &mut Vec<SummaryLine>,
) {
    {
        let id = s.prompt.id();
        let mine: Vec<&CellLine> = cells
            .iter()
            .filter(|c| c.prompt == id && c.provider == provider)
            .collect();
        let variants: BTreeSet<(u32, bool, Option<u32>, Option<u32>)> = mine
            .iter()
            .map(|c| (c.max_tokens, !c.constrained, c.chunk_size, c.context_chars))
            .collect();
        for (budget, unconstrained, chunk_size, context_chars) in variants {
            let group: Vec<&&CellLine> = mine
                .iter()
                .filter(|c| {
                    c.max_tokens == budget
                        && c.constrained != unconstrained
                        && c.chunk_size == chunk_size
                        && c.context_chars == context_chars
                })
                .collect();
            let measured: Vec<&CellLine> =
                group.iter().map(|c| **c).filter(|c| c.measured()).collect();
            let mut tally = Tally::default();
            for scored in measured.iter().filter_map(|c| c.scored.as_ref()) {
                tally.add(scored);
            }
            let t = tally.totals();
            let objects: usize = measured.iter().map(|c| c.objects).sum();
            let ungrounded: Option<usize> = measured.iter().map(|c| c.ungrounded).sum();
            let costs: Vec<f64> = measured.iter().filter_map(|c| c.cost_usd).collect();
            let times = run_times(&measured);
            out.push(SummaryLine {
                prompt: id.to_string(),
                provider: provider.to_string(),
                max_tokens: budget,
                constrained: !unconstrained,
                cells: measured.len(),
                micro: t.micro,
                macro_f1: t.macro_f1,
                failed: group
                    .iter()
                    .filter(|c| c.status == Some(Status::Error))
                    .count(),
                unfinished: group.len() - measured.len(),
                truncated: measured
                    .iter()
                    .filter(|c| c.status == Some(Status::Truncated))
                    .count(),
                lost_to_cut: measured.iter().filter_map(|c| c.lost_to_cut).sum(),
                ungrounded: ungrounded
                    .filter(|_| objects > 0)
                    .map(|u| u as f64 / objects as f64),
                completion_tokens: measured.iter().filter_map(|c| c.completion_tokens).sum(),
                cached: measured.iter().filter(|c| c.cached).count(),
                seconds_p50: quantile(&times, 0.5),
                seconds_p95: quantile(&times, 0.95),
                cost_usd: (!costs.is_empty()).then(|| costs.iter().sum()),
                by_type: t.by_type,
                agreement: t.agreement,
                f1_ci: f1_interval(&measured),
                repeats: repeat_stats(
                    &measured,
                    eval.spec.repeat,
                    repeats
                        .get(&(si, pi, (budget, chunk_size, context_chars), !unconstrained))
                        .unwrap_or(none),
                ),
                chunk_size,
                context_chars,
                chunks: documents::summary(
                    &measured,
                    eval.spec.chunking.as_ref().map_or(1, |c| c.passes),
                ),
            });
        }
    }
}

/// Two evals compared line by line: each prompt × provider × budget × constraint (× chunk size
/// and context) of `a` with the same line of `b`, rows paired by id; whole documents against
/// each chunk size of a cut eval. Evals of one prompt each (two versions of a prompt
/// under different ids, or two prompts) pair by budget and constraint alone; evals of one
/// provider each (the same prompts on two models) pair whatever their providers. Each eval is given with
/// its report; the records of each paired row are read back from `store`, two replies at a
/// time, as each report read them.
pub fn compare_reports(
    store: &Store,
    (ea, a): (&Eval, &Report),
    (eb, b): (&Eval, &Report),
) -> Result<Vec<Comparison>> {
    let (ra, rb) = (
        Reader::new(store, ea, a.replies),
        Reader::new(store, eb, b.replies),
    );
    let prompts =
        |r: &Report| -> BTreeSet<String> { r.summary.iter().map(|l| l.prompt.clone()).collect() };
    let (pa, pb) = (prompts(a), prompts(b));
    let by_budget_only = pa.is_disjoint(&pb) && pa.len() == 1 && pb.len() == 1;
    let any_provider = a.providers.len() <= 1 && b.providers.len() <= 1;
    // Two cut evals pair a chunk size (and context) with the same; whole documents pair with
    // every chunk size of a cut eval (what cutting them cost).
    let cut_alike = |la: &SummaryLine, lb: &SummaryLine| match (la.chunk_size, lb.chunk_size) {
        (Some(x), Some(y)) => x == y && la.context_chars == lb.context_chars,
        _ => true,
    };
    let mut out = Vec::new();
    for la in &a.summary {
        for lb in b.summary.iter().filter(|lb| {
            (by_budget_only || lb.prompt == la.prompt)
                && (any_provider || lb.provider == la.provider)
                && lb.max_tokens == la.max_tokens
                && lb.constrained == la.constrained
                && cut_alike(la, lb)
        }) {
            let (ca, cb) = (line_cells(&a.cells, la), line_cells(&b.cells, lb));
            out.push(compare(
                (Side::of(a.experiment, la), &ca),
                (Side::of(b.experiment, lb), &cb),
                &mut |c| ra.objects(c),
                &mut |c| rb.objects(c),
            )?);
        }
    }
    Ok(out)
}

impl Report {
    /// The report as the window gets it: its lines [without their spans](CellLine::for_window).
    pub fn for_window(mut self) -> Report {
        self.cells = self.cells.into_iter().map(CellLine::for_window).collect();
        self
    }

    /// A line's prompt as a chart names it: with its provider when the eval has several.
    fn named(&self, prompt: &str, provider: &str) -> String {
        if self.providers.len() > 1 {
            format!("{prompt} on {provider}")
        } else {
            prompt.to_string()
        }
    }

    /// F1 and recall against the budget, a line per prompt and constraint pass: F1 with its
    /// band (the spread over repeats, else its bootstrap interval). What the HTML report draws
    /// and the window will.
    /// With repeats: each line's F1 in each repeat, a curve per prompt × budget × constraint —
    /// how stable the figures are (`None` with one repeat).
    pub fn repeat_chart(&self) -> Option<Chart> {
        let lines: Vec<&SummaryLine> = self
            .summary
            .iter()
            .filter(|l| l.repeats.is_some())
            .collect();
        if lines.is_empty() || self.repeat < 2 {
            return None;
        }
        let series = lines
            .iter()
            .enumerate()
            .map(|(i, l)| charts::Series {
                name: format!(
                    "{} @ {}{}",
                    self.named(&l.prompt, &l.provider),
                    l.max_tokens,
                    if l.constrained { " (constrained)" } else { "" }
                ),
                color: charts::color(i),
                ys: l
                    .repeats
                    .as_ref()
                    .map(|r| r.f1_by_repeat.clone())
                    .unwrap_or_default(),
                band: None,
                marks: true,
            })
            .collect();
        Some(Chart {
            title: "F1 in each repeat".into(),
            x: Axis::new("repeat", Scale::Linear, Ticks::Count),
            y: Axis::new("F1", Scale::Linear, Ticks::Decimal).range(0.0, 1.02),
            xs: (1..=self.repeat).map(f64::from).collect(),
            series,
            stepped: false,
            categories: None,
        })
    }

    /// Why pieces were dropped, as bars: a group per reason (the most pieces first), a bar per
    /// prompt. Each category is the reason's wire name (`truncated`, `schema`, …), the value
    /// the window's matrix filters by when a bar is clicked. `None` when nothing was dropped.
    pub fn drop_chart(&self) -> Option<Chart> {
        let shown: Vec<&Drops> = self.drops.iter().filter(|d| !d.bars.is_empty()).collect();
        let mut kinds: Vec<(DropKind, usize)> = Vec::new();
        for b in shown.iter().flat_map(|d| &d.bars) {
            match kinds.iter_mut().find(|(k, _)| *k == b.kind) {
                Some((_, n)) => *n += b.objects,
                None => kinds.push((b.kind, b.objects)),
            }
        }
        if kinds.is_empty() {
            return None;
        }
        // Stable: reasons with as many pieces keep the order they were first met in.
        kinds.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
        let series = shown
            .iter()
            .map(|d| {
                let bar =
                    |k: DropKind| d.bars.iter().find(|b| b.kind == k).map_or(0, |b| b.objects);
                (
                    self.named(&d.prompt, &d.provider),
                    kinds.iter().map(|&(k, _)| bar(k) as f64).collect(),
                )
            })
            .collect();
        Some(Chart::bars(
            "Why pieces were dropped",
            "reason",
            Axis::new("pieces dropped", Scale::Linear, Ticks::Count),
            kinds.iter().map(|(k, _)| k.as_str().to_string()).collect(),
            series,
        ))
    }

    /// Requests in flight over the eval's time, a stepped line per provider: how many of its
    /// runs had begun and not ended, at most, in each of up to 240 slices of the time from the
    /// first run's start to the last one's end. The runs this eval bought (not cached, ended):
    /// a batch's runs count from their submission to their fold. `None` with no such run.
    pub fn flight_chart(&self) -> Option<Chart> {
        const SLICES: usize = 240;
        // (provider, run, start, end) in ms; a run that took under a millisecond starts and ends
        // at the same moment.
        // A cut document's line spans its first request to its last: its requests are
        // counted instead, each chunk's each pass.
        let runs: Vec<(&str, i64, i64, i64)> = self
            .cells
            .iter()
            .flat_map(|c| {
                let p = c.provider.as_str();
                let whole = (c.chunk_size.is_none() && !c.cached)
                    .then(|| {
                        let start = c.started_at?;
                        let ms = (c.seconds? * 1000.0).round() as i64;
                        Some((p, c.run.unwrap_or(0), start, start + ms.max(0)))
                    })
                    .flatten();
                let cut = c
                    .requests
                    .iter()
                    .map(move |&(run, start, end)| (p, run, start, end));
                whole.into_iter().chain(cut)
            })
            .collect();
        let t0 = runs.iter().map(|r| r.2).min()?;
        let t1 = runs.iter().map(|r| r.3).max()?;
        let span = (t1 - t0).max(1) as f64;
        let slices = SLICES.min(runs.len() * 2).max(2);
        let slice_of = |t: i64| (((t - t0) as f64 / span) * slices as f64) as usize;
        let mut series = Vec::new();
        for (i, p) in self.providers.iter().enumerate() {
            // +1 at each start, −1 at each end. At one millisecond: first the ends of runs that
            // began earlier, then the runs that began in it, each its start then its end, in
            // the order they were recorded (one request after another within a millisecond is
            // one in flight, not two).
            let mut events: Vec<((i64, bool, i64, bool), i32)> = runs
                .iter()
                .filter(|r| r.0 == p.provider)
                .flat_map(|&(_, id, start, end)| {
                    [
                        ((start, true, id, false), 1),
                        ((end, end == start, id, true), -1),
                    ]
                })
                .collect();
            if events.is_empty() {
                continue;
            }
            events.sort_unstable();
            let mut most = vec![0f64; slices];
            let mut now = 0i32;
            let mut at = 0usize;
            for ((t, ..), d) in events {
                let s = slice_of(t).min(slices - 1);
                // The count held through the slices passed since the last event.
                for m in most.iter_mut().take(s).skip(at) {
                    *m = m.max(f64::from(now));
                }
                at = at.max(s);
                now += d;
                most[s] = most[s].max(f64::from(now));
            }
            series.push(charts::Series {
                name: p.provider.clone(),
                color: charts::color(i),
                ys: most.into_iter().map(Some).collect(),
                band: None,
                marks: false,
            });
        }
        Some(Chart {
            title: "Requests in flight".into(),
            x: Axis::new(
                "seconds since the first request",
                Scale::Linear,
                Ticks::Count,
            ),
            y: Axis::new("in flight", Scale::Linear, Ticks::Count),
            xs: (0..slices)
                .map(|i| i as f64 * span / slices as f64 / 1000.0)
                .collect(),
            series,
            stepped: true,
            categories: None,
        })
    }

    /// How long runs took, as bars: a group per band of seconds, a bar per provider (cached
    /// cells left out). `None` with no timed run.
    pub fn latency_chart(&self) -> Option<Chart> {
        const EDGES: [f64; 7] = [0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0];
        let band = |s: f64| EDGES.iter().position(|e| s < *e).unwrap_or(EDGES.len());
        let timed: Vec<(&str, f64)> = self
            .cells
            .iter()
            .filter(|c| !c.cached)
            .filter_map(|c| Some((c.provider.as_str(), c.seconds?)))
            .collect();
        if timed.is_empty() {
            return None;
        }
        let mut categories = vec![format!("< {} s", EDGES[0])];
        categories.extend(EDGES.windows(2).map(|w| format!("{}–{} s", w[0], w[1])));
        categories.push(format!("≥ {} s", EDGES[EDGES.len() - 1]));
        let series = self
            .providers
            .iter()
            .map(|p| {
                let mut counts = vec![0f64; categories.len()];
                for (_, s) in timed.iter().filter(|t| t.0 == p.provider) {
                    counts[band(*s)] += 1.0;
                }
                (p.provider.clone(), counts)
            })
            .collect();
        Some(Chart::bars(
            "How long runs took",
            "seconds",
            Axis::new("runs", Scale::Linear, Ticks::Count),
            categories,
            series,
        ))
    }

    pub fn budget_charts(&self) -> Vec<Chart> {
        let mut charts = Vec::new();
        for (metric, title) in [
            ("F1", "F1 against the budget"),
            ("recall", "Recall against the budget"),
        ] {
            let mut curves = Vec::new();
            for l in self.summary.iter().filter(|l| l.cells > 0) {
                // A cut eval's line per chunk size is a curve of its own.
                let name = format!(
                    "{}{}{}",
                    self.named(&l.prompt, &l.provider),
                    if l.constrained { " (constrained)" } else { "" },
                    cut_of(l.chunk_size, l.context_chars)
                );
                let (value, band) = if metric == "F1" {
                    let band = match &l.repeats {
                        Some(r) => {
                            let f: Vec<f64> = r.f1_by_repeat.iter().flatten().copied().collect();
                            let lo = f.iter().copied().fold(f64::INFINITY, f64::min);
                            let hi = f.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                            (!f.is_empty()).then_some([lo, hi])
                        }
                        None => l.f1_ci,
                    };
                    (l.micro.f1, band)
                } else {
                    (l.micro.recall, None)
                };
                let Some(value) = value else { continue };
                BudgetCurve::add(
                    &mut curves,
                    name,
                    charts::BudgetPoint {
                        budget: l.max_tokens,
                        value,
                        band,
                    },
                );
            }
            if !curves.is_empty() {
                charts.push(Chart::budgets(
                    title,
                    Axis::new(metric, Scale::Linear, Ticks::Decimal).range(0.0, 1.02),
                    &curves,
                ));
            }
        }
        charts
    }

    /// A cut eval's chunk-size study, answered: recall, and input and output tokens per
    /// document, against the chunk size, a curve per prompt, budget and context (so a JSON
    /// array's and a JSONL prompt's curves side by side). `[]` with fewer than two sizes.
    pub fn chunk_size_charts(&self) -> Vec<Chart> {
        let Some(chunking) = &self.chunking else {
            return Vec::new();
        };
        if chunking.sizes.len() < 2 {
            return Vec::new();
        }
        let x = format!("chunk size, {} (log scale)", chunking.chunker.unit());
        let curves = |value: &dyn Fn(&SummaryLine) -> Option<f64>| {
            let mut curves = Vec::new();
            for l in self.summary.iter().filter(|l| l.cells > 0) {
                let (Some(size), Some(v)) = (l.chunk_size, value(l)) else {
                    continue;
                };
                let name = format!(
                    "{}{} @ {}{}",
                    self.named(&l.prompt, &l.provider),
                    if l.constrained { " (constrained)" } else { "" },
                    l.max_tokens,
                    match l.context_chars {
                        Some(c) if c > 0 => format!(", {c} context"),
                        _ => String::new(),
                    }
                );
                BudgetCurve::add(
                    &mut curves,
                    name,
                    charts::BudgetPoint {
                        budget: size,
                        value: v,
                        band: None,
                    },
                );
            }
            curves
        };
        let recall = curves(&|l| l.micro.recall);
        let tokens = curves(&|l| {
            l.chunks
                .as_ref()
                .map(|c| c.prompt_tokens_per_document + c.completion_tokens_per_document)
        });
        let mut charts = Vec::new();
        if !recall.is_empty() {
            charts.push(Chart::against(
                "Recall against the chunk size",
                &x,
                Axis::new("recall", Scale::Linear, Ticks::Decimal).range(0.0, 1.02),
                &recall,
            ));
        }
        if !tokens.is_empty() {
            charts.push(Chart::against(
                "Tokens per document against the chunk size",
                &x,
                Axis::new("input + output tokens", Scale::Linear, Ticks::Count),
                &tokens,
            ));
        }
        charts
    }
}

/// How a line's documents were cut, for a curve's name (` ✂2000`, ` ✂2000 +200`: with context).
fn cut_of(size: Option<u32>, context: Option<u32>) -> String {
    match (size, context) {
        (Some(s), Some(c)) if c > 0 => format!(" ✂{s} +{c}"),
        (Some(s), _) => format!(" ✂{s}"),
        _ => String::new(),
    }
}

impl crate::experiments::lifecycle::Reported for Report {
    /// The cells not run yet, and each summary line's F1.
    fn figures(&self) -> kerf_store::Figures {
        kerf_store::Figures {
            pending: Some(self.pending as u64),
            lines: self
                .summary
                .iter()
                .map(|l| kerf_store::FigureLine {
                    prompt: l.prompt.clone(),
                    provider: Some(l.provider.clone()),
                    max_tokens: l.max_tokens,
                    constrained: l.constrained,
                    f1: l.micro.f1,
                })
                .collect(),
            ..kerf_store::Figures::default()
        }
    }
}
