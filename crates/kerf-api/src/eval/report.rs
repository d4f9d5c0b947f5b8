//! An eval's figures, from what the history keeps: each cell's run (its finish and the objects
//! its reply gave when it ran) scored against its row's expected records. Every figure comes
//! from the stored replies, so `kerf eval show` and `kerf eval rescore` print what `kerf eval`
//! printed, bit for bit.

use std::collections::{BTreeSet, HashMap};

use kerf_core::DropCounts;
use kerf_core::eval::dataset::Row;
use kerf_core::eval::{Grounding, Matcher, Tally, identity, score};
use kerf_core::{ParseReport, Prompt};
use kerf_llm::{FinishReason, RunDetails};
use kerf_store::{Status, Store, StoredReply};
use serde::Serialize;
use ts_rs::TS;

use super::Eval;
use super::analysis::{
    Advice, BudgetPoint, Comparison, Drops, Side, advise, compare, f1_interval, repeat_stats,
};
use super::lines::{CellLine, SummaryLine, line_cells};
use crate::charts::{self, Axis, BudgetCurve, Chart, Scale, Ticks};
use crate::error::Result;

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
    pub provider: String,
    pub model: String,
    /// Cells of the matrix without a finished run (`kerf eval resume` runs them).
    pub pending: usize,
    /// Cells measured by a reply an earlier eval bought (`--cache`).
    pub cached: usize,
    /// Per prompt and constraint: the smallest budget whose recall is within a share of the
    /// best budget's.
    pub advice: Vec<Advice>,
    /// Per prompt: why its replies lost pieces, and in which rows.
    pub drops: Vec<Drops>,
    /// Every two prompts at the same budget and constraint: the paired F1 difference.
    pub comparisons: Vec<Comparison>,
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
pub fn report(store: &Store, eval: &Eval, options: Options) -> Result<Report> {
    let matchers: Vec<Matcher> = eval.subjects.iter().map(|s| s.prompt.matcher()).collect();
    let subject_of: HashMap<&str, usize> = eval
        .subjects
        .iter()
        .enumerate()
        .map(|(i, s)| (s.prompt.id(), i))
        .collect();
    let row_of: HashMap<&str, usize> = eval
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.as_str(), i))
        .collect();
    let mut lines = Vec::new();
    let reread = options.replies == Replies::Reread;
    for stored in store.eval_replies(eval.experiment, reread)? {
        let c = &stored.cell;
        let (Some(&si), Some(&ri)) = (
            subject_of.get(c.cell.prompt.as_str()),
            row_of.get(c.cell.row.as_str()),
        ) else {
            continue;
        };
        let (prompt, row, m) = (&eval.subjects[si].prompt, &eval.rows[ri], &matchers[si]);
        let mut line = CellLine {
            row: c.cell.row.clone(),
            prompt: c.cell.prompt.clone(),
            max_tokens: c.cell.max_tokens,
            constrained: c.cell.constrained,
            repeat: c.cell.repeat,
            run: c.run,
            finish_reason: None,
            objects: 0,
            tp: None,
            fp: None,
            fn_: None,
            precision: None,
            recall: None,
            f1: None,
            lost_to_cut: None,
            status: c.status,
            dropped: DropCounts::default(),
            ungrounded: None,
            completion_tokens: None,
            cost_usd: None,
            cached: c.run.is_some() && stored.run_experiment != Some(eval.experiment),
            scored: None,
            extracted: Vec::new(),
            identities: Vec::new(),
        };
        if c.run.is_some() {
            line.finish_reason = stored.finish_reason;
            line.completion_tokens = stored.completion_tokens;
            line.cost_usd = stored.cost_usd;
            if c.finished() {
                let report = if reread {
                    reread_reply(prompt, row, &stored)
                } else {
                    stored.report.unwrap_or_default()
                };
                line.objects = report.objects.len();
                line.dropped = report.drop_counts();
                let objects = report.objects.to_vec();
                if let Some(doc) = row.document(prompt) {
                    line.ungrounded = Some(Grounding::new(m, doc).ungrounded(m, &objects).len());
                }
                if let Some((expected, _)) = row.expected_for(prompt) {
                    let s = score(m, expected, &objects);
                    let f = s.counts.scores();
                    (line.tp, line.fp, line.fn_) = (Some(f.tp), Some(f.fp), Some(f.fn_));
                    (line.precision, line.recall, line.f1) = (f.precision, f.recall, f.f1);
                    line.scored = Some(s);
                }
                line.identities = super::analysis::identities(m, &objects);
                line.extracted = objects;
            }
        }
        lines.push((si, ri, line));
    }
    lines.sort_by(|(sa, ra, a), (sb, rb, b)| {
        (sa, a.max_tokens, !a.constrained, a.repeat, ra).cmp(&(
            sb,
            b.max_tokens,
            !b.constrained,
            b.repeat,
            rb,
        ))
    });
    let mut cells: Vec<CellLine> = lines.into_iter().map(|(_, _, l)| l).collect();
    lost_to_cut(&mut cells);
    let summary = summarise(eval, &cells);
    let lines = &summary;
    let advice = eval
        .subjects
        .iter()
        .flat_map(|s| {
            let id = s.prompt.id();
            [true, false].into_iter().filter_map(move |constrained| {
                let points: Vec<BudgetPoint> = lines
                    .iter()
                    .filter(|l| l.prompt == id && l.constrained == constrained && l.cells > 0)
                    .map(|l| BudgetPoint {
                        max_tokens: l.max_tokens,
                        recall: l.micro.recall,
                        cost_per_document: l.cost_usd.map(|c| c / l.cells as f64),
                        completion_tokens_per_document: Some(
                            l.completion_tokens as f64 / l.cells as f64,
                        ),
                    })
                    .collect();
                advise(id, constrained, &points, options.advise_within)
            })
        })
        .collect();
    let drops = eval
        .subjects
        .iter()
        .map(|s| {
            let id = s.prompt.id();
            let mine: Vec<&CellLine> = cells.iter().filter(|c| c.prompt == id).collect();
            super::analysis::drops(id, &mine)
        })
        .collect();
    // Every two prompts, line by line: a's lines against b's at the same budget and constraint.
    let mut comparisons = Vec::new();
    for (i, a) in eval.subjects.iter().enumerate() {
        for b in &eval.subjects[i + 1..] {
            for la in summary.iter().filter(|l| l.prompt == a.prompt.id()) {
                let Some(lb) = summary.iter().find(|l| {
                    l.prompt == b.prompt.id()
                        && l.max_tokens == la.max_tokens
                        && l.constrained == la.constrained
                }) else {
                    continue;
                };
                comparisons.push(compare(
                    (Side::of(eval.experiment, la), &line_cells(&cells, la)),
                    (Side::of(eval.experiment, lb), &line_cells(&cells, lb)),
                ));
            }
        }
    }
    let cached = cells.iter().filter(|c| c.cached && c.measured()).count();
    let finished = cells
        .iter()
        .filter(|c| matches!(c.status, Some(Status::Ok | Status::Truncated)))
        .count();
    Ok(Report {
        experiment: eval.experiment,
        summary,
        cells,
        dataset: eval.spec.dataset.clone(),
        rows: eval.rows.len(),
        repeat: eval.spec.repeat,
        provider: eval.spec.settings.provider.clone(),
        model: eval.spec.settings.model.clone(),
        pending: eval.spec.cells.saturating_sub(finished),
        cached,
        advice,
        drops,
        comparisons,
    })
}

/// A stored reply read again from its raw text, the way its run read it: unwrapped from the
/// key its run wrapped it in, enum case folded if its run folded any, parsed with the row's
/// variables.
fn reread_reply(prompt: &Prompt, row: &Row, stored: &StoredReply) -> ParseReport {
    let details: Option<RunDetails> = stored
        .details
        .clone()
        .and_then(|d| serde_json::from_value(d).ok());
    let folded = matches!(&details, Some(RunDetails::Cloud(c)) if !c.case_folded.is_empty());
    let (report, _) = crate::runs::read_reply(
        prompt,
        stored.raw.as_deref().unwrap_or_default(),
        details.as_ref().and_then(RunDetails::wrapped_in),
        folded,
        &row.vars_for(prompt),
    );
    report
}

/// Fill in each scored cell's `lost_to_cut` from its siblings at larger budgets.
fn lost_to_cut(cells: &mut [CellLine]) {
    type Key<'a> = (&'a str, bool, u32, &'a str);
    // Per prompt, constraint, repeat and row: each budget's matched records, where the reply
    // ended on its own.
    let mut complete: HashMap<Key<'_>, Vec<(u32, BTreeSet<usize>)>> = HashMap::new();
    for c in cells.iter() {
        if c.tp.is_some() && c.finish_reason == Some(FinishReason::Stop) {
            complete
                .entry((&c.prompt, c.constrained, c.repeat, &c.row))
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
                .get(&(c.prompt.as_str(), c.constrained, c.repeat, c.row.as_str()))
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

/// One line per prompt × budget × constraint, in the spec's order.
fn summarise(eval: &Eval, cells: &[CellLine]) -> Vec<SummaryLine> {
    let mut out = Vec::new();
    for s in &eval.subjects {
        let id = s.prompt.id();
        let matcher = s.prompt.matcher();
        let mine: Vec<&CellLine> = cells.iter().filter(|c| c.prompt == id).collect();
        let variants: BTreeSet<(u32, bool)> = mine
            .iter()
            .map(|c| (c.max_tokens, !c.constrained))
            .collect();
        for (budget, unconstrained) in variants {
            let group: Vec<&&CellLine> = mine
                .iter()
                .filter(|c| c.max_tokens == budget && c.constrained != unconstrained)
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
            out.push(SummaryLine {
                prompt: id.to_string(),
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
                cost_usd: (!costs.is_empty()).then(|| costs.iter().sum()),
                by_type: t.by_type,
                agreement: t.agreement,
                f1_ci: f1_interval(&measured),
                repeats: repeat_stats(&measured, eval.spec.repeat, &|row| {
                    let r = eval.rows.iter().find(|r| r.id == row)?;
                    let (expected, _) = r.expected_for(&s.prompt)?;
                    Some(expected.iter().map(|o| identity(&matcher, o)).collect())
                }),
            });
        }
    }
    out
}

/// Two evals compared line by line: each prompt × budget × constraint of `a` with the same
/// line of `b`, rows paired by id. Evals of one prompt each (two versions of a prompt under
/// different ids, or two prompts) pair by budget and constraint alone.
pub fn compare_reports(a: &Report, b: &Report) -> Vec<Comparison> {
    let prompts =
        |r: &Report| -> BTreeSet<String> { r.summary.iter().map(|l| l.prompt.clone()).collect() };
    let (pa, pb) = (prompts(a), prompts(b));
    let by_budget_only = pa.is_disjoint(&pb) && pa.len() == 1 && pb.len() == 1;
    let mut out = Vec::new();
    for la in &a.summary {
        let Some(lb) = b.summary.iter().find(|lb| {
            (by_budget_only || lb.prompt == la.prompt)
                && lb.max_tokens == la.max_tokens
                && lb.constrained == la.constrained
        }) else {
            continue;
        };
        let (ca, cb) = (line_cells(&a.cells, la), line_cells(&b.cells, lb));
        out.push(compare(
            (Side::of(a.experiment, la), &ca),
            (Side::of(b.experiment, lb), &cb),
        ));
    }
    out
}

impl Report {
    /// F1 and recall against the budget, a line per prompt and constraint pass: F1 with its
    /// band (the spread over repeats, else its bootstrap interval). What the HTML report draws
    /// and the window will.
    pub fn budget_charts(&self) -> Vec<Chart> {
        let mut charts = Vec::new();
        for (metric, title) in [
            ("F1", "F1 against the budget"),
            ("recall", "Recall against the budget"),
        ] {
            let mut curves = Vec::new();
            for l in self.summary.iter().filter(|l| l.cells > 0) {
                let name = format!(
                    "{}{}",
                    l.prompt,
                    if l.constrained { " (constrained)" } else { "" }
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
}
