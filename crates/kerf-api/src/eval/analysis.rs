//! What an eval's scored cells say beyond the totals: how stable a line is over repeats, which
//! budget to pick, why records were dropped, and whether one prompt beats another — every
//! figure computed from the cells alone, so it is recomputed the same from the history.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kerf_core::eval::stats::{bootstrap, mean_pairwise_jaccard, mean_sd, micro_f1};
use kerf_core::eval::{Counts, Matcher, identity};
use kerf_core::report::DropKind;
use serde::Serialize;
use serde_json::Value;
use ts_rs::TS;

use super::lines::{CellLine, Records, SummaryLine};
pub use super::lines::{FindRate, RepeatStats};
use crate::error::Result;

/// One measured repeat of a row, as [`row_repeats`] takes it: what repeat statistics need of
/// a cell's reply, kept while the row's repeats are read (never the reply itself).
#[derive(Debug, Clone, PartialEq)]
pub struct RepeatCell {
    /// Its records' identities, each once (as [`identities`] gives them).
    pub identities: Vec<String>,
    /// Its output — the objects as parsed, serialized — hashed: two outputs that are the same
    /// text hash the same (and two that differ, all but surely differently).
    pub output: u64,
    /// The expected records it matched (by index), when it was scored.
    pub matched: Option<BTreeSet<usize>>,
}

impl RepeatCell {
    /// Cell `line`'s repeat figures from the records it was scored on.
    pub fn of(m: &Matcher, objects: &[Value], line: &CellLine) -> RepeatCell {
        RepeatCell {
            identities: identities(m, objects),
            output: output_hash(objects),
            matched: line
                .scored
                .as_ref()
                .map(|s| s.matched.iter().map(|p| p.expected).collect()),
        }
    }
}

/// What one row says about a line's repeats: [`repeat_stats`] sums these over the rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowRepeats {
    /// The mean Jaccard index between the repeats' record sets (`None`: one repeat measured).
    pub jaccard: Option<f64>,
    /// Distinct outputs among the measured repeats.
    pub distinct: usize,
    /// Per expected record of the row, the share of scored repeats that found it.
    pub find_rate: Vec<FindRate>,
}

/// Row `row`'s measured repeats of a line (in repeat order), with the identities of its
/// expected records (`None`: it has none for the line's prompt).
pub fn row_repeats(row: &str, cells: &[RepeatCell], expected: Option<Vec<String>>) -> RowRepeats {
    let sets: Vec<BTreeSet<&str>> = cells
        .iter()
        .map(|c| c.identities.iter().map(String::as_str).collect())
        .collect();
    let outputs: BTreeSet<u64> = cells.iter().map(|c| c.output).collect();
    let with_scores: Vec<&BTreeSet<usize>> =
        cells.iter().filter_map(|c| c.matched.as_ref()).collect();
    let mut find_rate = Vec::new();
    if !with_scores.is_empty()
        && let Some(ids) = expected
    {
        for (i, id) in ids.into_iter().enumerate() {
            let found = with_scores.iter().filter(|m| m.contains(&i)).count() as u32;
            find_rate.push(FindRate {
                row: row.to_string(),
                expected: i,
                identity: id,
                found,
                of: with_scores.len() as u32,
            });
        }
    }
    RowRepeats {
        jaccard: mean_pairwise_jaccard(&sets),
        distinct: outputs.len(),
        find_rate,
    }
}

/// A hash of `objects` serialized (as `Value::Array(objects).to_string()` writes them),
/// written straight into the hasher: no copy of a large reply is made.
pub fn output_hash(objects: &[Value]) -> u64 {
    struct Hashing(std::collections::hash_map::DefaultHasher);
    impl std::io::Write for Hashing {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            std::hash::Hasher::write(&mut self.0, bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(std::collections::hash_map::DefaultHasher::new());
    // Writing to a hasher cannot fail, nor can serializing JSON values.
    let _ = serde_json::to_writer(&mut h, objects);
    std::hash::Hasher::finish(&h.0)
}

/// Repeat statistics for the cells of one line (`None` with one repeat), from its cells'
/// counts and each row's [`RowRepeats`] (by row id).
pub fn repeat_stats(
    cells: &[&CellLine],
    repeats: u32,
    rows: &BTreeMap<String, RowRepeats>,
) -> Option<RepeatStats> {
    if repeats < 2 {
        return None;
    }
    let scored: Vec<&CellLine> = cells.iter().copied().filter(|c| c.measured()).collect();
    let f1_by_repeat: Vec<Option<f64>> = (0..repeats)
        .map(|r| {
            let mut c = Counts::default();
            let mut any = false;
            for cell in scored.iter().filter(|c| c.repeat == r) {
                if let Some(s) = &cell.scored {
                    c.add(&s.counts);
                    any = true;
                }
            }
            any.then(|| c.f1()).flatten()
        })
        .collect();
    let f1s: Vec<f64> = f1_by_repeat.iter().flatten().copied().collect();
    let spread = mean_sd(&f1s);
    let mut jaccards = Vec::new();
    let mut distinct = Vec::new();
    let mut find_rate = Vec::new();
    for r in rows.values() {
        jaccards.extend(r.jaccard);
        distinct.push(r.distinct);
        find_rate.extend(r.find_rate.iter().cloned());
    }
    let mean = |xs: &[f64]| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
    let distinct_f: Vec<f64> = distinct.iter().map(|&d| d as f64).collect();
    Some(RepeatStats {
        f1_mean: spread.map(|s| s.0),
        f1_sd: spread.map(|s| s.1),
        f1_by_repeat,
        jaccard_mean: mean(&jaccards),
        distinct_outputs_mean: mean(&distinct_f),
        distinct_outputs_max: distinct.iter().copied().max().unwrap_or(0),
        found_always: find_rate.iter().filter(|f| f.found == f.of).count(),
        found_sometimes: find_rate
            .iter()
            .filter(|f| f.found > 0 && f.found < f.of)
            .count(),
        found_never: find_rate.iter().filter(|f| f.found == 0).count(),
        find_rate,
    })
}

/// Each row's counts pooled over its measured repeats, by row id.
fn pooled<'a>(cells: impl Iterator<Item = &'a CellLine>) -> BTreeMap<&'a str, Counts> {
    let mut rows: BTreeMap<&str, Counts> = BTreeMap::new();
    for c in cells {
        if let Some(s) = c.scored.as_ref().filter(|_| c.measured()) {
            rows.entry(&c.row).or_default().add(&s.counts);
        }
    }
    rows
}

/// A 95% bootstrap interval of a line's micro F1 over its rows (each row's repeats pooled).
pub fn f1_interval(cells: &[&CellLine]) -> Option<[f64; 2]> {
    let rows: Vec<Counts> = pooled(cells.iter().copied()).into_values().collect();
    bootstrap(rows.len(), |s| micro_f1(&rows, s))
}

/// The budget to pick for one prompt and constraint.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct Advice {
    pub prompt: String,
    /// The provider whose budgets were weighed.
    pub provider: String,
    pub constrained: bool,
    /// The smallest budget whose recall is within `within` (a share) of the best budget's.
    pub max_tokens: u32,
    pub recall: f64,
    pub best_max_tokens: u32,
    pub best_recall: f64,
    pub within: f64,
    /// Mean per document (one cell) at the advised budget; null when no cost is known.
    pub cost_per_document: Option<f64>,
    pub completion_tokens_per_document: Option<f64>,
    /// For an eval that cuts its documents: the advised chunk size and context (the cheapest
    /// cut and budget within `within` of the best recall, by tokens per document), and the
    /// best recall's; the requests each document takes there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub chunk_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub context_chars: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub best_chunk_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub requests_per_document: Option<f64>,
}

/// One budget's figures for [`advise`]: its budget, recall, cost and completion tokens per
/// document; for a cut document's line, its cut and what a document takes in all.
#[derive(Default)]
pub struct BudgetPoint {
    pub max_tokens: u32,
    pub recall: Option<f64>,
    pub cost_per_document: Option<f64>,
    pub completion_tokens_per_document: Option<f64>,
    pub chunk_size: Option<u32>,
    pub context_chars: Option<u32>,
    /// Input and output tokens per document, and requests (a cut document's line).
    pub tokens_per_document: Option<f64>,
    pub requests_per_document: Option<f64>,
}

impl BudgetPoint {
    /// What choosing this point costs, for the choice among those within reach of the best:
    /// a cut document's tokens in all (a smaller chunk sends more requests, each with the
    /// prompt again), else the budget.
    fn price(&self) -> f64 {
        self.tokens_per_document
            .unwrap_or(f64::from(self.max_tokens))
    }
}

/// The cheapest budget (and cut) within `within` of the best recall (`None` with fewer than two
/// points that have a recall: nothing to choose between).
pub fn advise(
    (prompt, provider): (&str, &str),
    constrained: bool,
    points: &[BudgetPoint],
    within: f64,
) -> Option<Advice> {
    if points.iter().filter(|p| p.recall.is_some()).count() < 2 {
        return None;
    }
    let best = points
        .iter()
        .filter_map(|p| p.recall.map(|r| (p, r)))
        // The best recall; on a tie, the smaller budget.
        .max_by(|(a, ra), (b, rb)| ra.total_cmp(rb).then(b.max_tokens.cmp(&a.max_tokens)))?;
    let (pick, recall) = points
        .iter()
        .filter_map(|p| p.recall.map(|r| (p, r)))
        .filter(|(_, r)| *r >= best.1 * (1.0 - within) - 1e-12)
        .min_by(|(a, _), (b, _)| {
            a.price()
                .total_cmp(&b.price())
                .then(a.max_tokens.cmp(&b.max_tokens))
        })?;
    Some(Advice {
        prompt: prompt.to_string(),
        provider: provider.to_string(),
        constrained,
        max_tokens: pick.max_tokens,
        recall,
        best_max_tokens: best.0.max_tokens,
        best_recall: best.1,
        within,
        cost_per_document: pick.cost_per_document,
        completion_tokens_per_document: pick.completion_tokens_per_document,
        chunk_size: pick.chunk_size,
        context_chars: pick.context_chars,
        best_chunk_size: best.0.chunk_size,
        requests_per_document: pick.requests_per_document,
    })
}

/// One bar of a prompt's drop histogram: a reason, how many pieces it dropped, in how many
/// cells, and the rows they came from.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct DropBar {
    pub kind: DropKind,
    pub objects: usize,
    pub cells: usize,
    pub rows: Vec<String>,
}

/// Why one prompt's replies lost pieces, over the whole dataset (every budget, constraint and
/// repeat).
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct Drops {
    pub prompt: String,
    /// The provider whose replies they were.
    pub provider: String,
    pub bars: Vec<DropBar>,
}

/// The drop histogram of `prompt`'s measured cells, largest bar first.
pub fn drops((prompt, provider): (&str, &str), cells: &[&CellLine]) -> Drops {
    let mut bars: Vec<DropBar> = Vec::new();
    for c in cells.iter().filter(|c| c.measured()) {
        for (kind, n) in &c.dropped.0 {
            let bar = match bars.iter_mut().position(|b| b.kind == *kind) {
                Some(i) => &mut bars[i],
                None => {
                    bars.push(DropBar {
                        kind: *kind,
                        objects: 0,
                        cells: 0,
                        rows: Vec::new(),
                    });
                    bars.last_mut().expect("just pushed")
                }
            };
            bar.objects += n;
            bar.cells += 1;
            if !bar.rows.contains(&c.row) {
                bar.rows.push(c.row.clone());
            }
        }
    }
    bars.sort_by_key(|b| std::cmp::Reverse(b.objects));
    Drops {
        prompt: prompt.to_string(),
        provider: provider.to_string(),
        bars,
    }
}

/// One side of a comparison: an eval's prompt at a budget and constraint.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[ts(rename = "EvalSide")]
pub struct Side {
    pub experiment: i64,
    pub prompt: String,
    pub provider: String,
    pub max_tokens: u32,
    pub constrained: bool,
    /// The chunk size a cut eval's line cut its documents at, and the context each chunk had.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub chunk_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub context_chars: Option<u32>,
    /// Micro F1 over the rows both sides measured.
    pub f1: Option<f64>,
}

impl Side {
    /// A summary line of eval `experiment` as a side (its F1 is figured on the paired rows).
    pub fn of(experiment: i64, line: &SummaryLine) -> Side {
        Side {
            experiment,
            prompt: line.prompt.clone(),
            provider: line.provider.clone(),
            max_tokens: line.max_tokens,
            constrained: line.constrained,
            chunk_size: line.chunk_size,
            context_chars: line.context_chars,
            f1: None,
        }
    }
}

/// One row of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct RowDiff {
    pub row: String,
    pub f1_a: Option<f64>,
    pub f1_b: Option<f64>,
    /// `f1_b − f1_a`, null when either is.
    pub diff: Option<f64>,
    /// The first repeat's records only `b` extracted, only `a` did, and those both extracted
    /// with some fields different (the history's object diff).
    #[ts(type = "unknown[]")]
    pub gained: Vec<Value>,
    #[ts(type = "unknown[]")]
    pub lost: Vec<Value>,
    pub changed: usize,
}

/// Two prompts (or two evals) on the same rows: the paired difference of their F1.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[ts(rename = "EvalComparison")]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    /// Rows both sides measured (the pairing).
    pub rows: usize,
    /// `b`'s micro F1 minus `a`'s over those rows.
    pub f1_diff: Option<f64>,
    /// A 95% paired bootstrap interval of `f1_diff` (the same resampled rows for both sides).
    /// When it excludes 0, the difference is unlikely to be the rows' luck.
    pub f1_diff_ci: Option<[f64; 2]>,
    /// Rows where `b`'s F1 is higher, lower, the same.
    pub better: usize,
    pub worse: usize,
    pub same: usize,
    pub per_row: Vec<RowDiff>,
}

/// Each row's measured first repeat, by row id.
fn first_repeats<'c>(cells: &[&'c CellLine]) -> HashMap<&'c str, &'c CellLine> {
    cells
        .iter()
        .filter(|c| c.repeat == 0 && c.measured())
        .map(|c| (c.row.as_str(), *c))
        .collect()
}

/// The records of a cell's reply, read back when a comparison needs them.
pub type Objects<'f> = &'f mut dyn FnMut(&CellLine) -> Result<Records>;

/// Compare the cells of side `a` with those of side `b`, row by row. The first repeat's records
/// of each paired row are read with `objects_a` and `objects_b`, a row at a time.
pub fn compare(
    a: (Side, &[&CellLine]),
    b: (Side, &[&CellLine]),
    objects_a: Objects<'_>,
    objects_b: Objects<'_>,
) -> Result<Comparison> {
    let (mut side_a, cells_a) = a;
    let (mut side_b, cells_b) = b;
    let rows_a = pooled(cells_a.iter().copied());
    let rows_b = pooled(cells_b.iter().copied());
    let (first_a, first_b) = (first_repeats(cells_a), first_repeats(cells_b));
    let paired: Vec<(&str, Counts, Counts)> = rows_a
        .iter()
        .filter_map(|(row, ca)| rows_b.get(row).map(|cb| (*row, *ca, *cb)))
        .collect();
    let (left, right): (Vec<Counts>, Vec<Counts>) = paired.iter().map(|(_, a, b)| (*a, *b)).unzip();
    let all: Vec<usize> = (0..paired.len()).collect();
    side_a.f1 = micro_f1(&left, &all);
    side_b.f1 = micro_f1(&right, &all);
    let diff_of = |s: &[usize]| Some(micro_f1(&right, s)? - micro_f1(&left, s)?);
    let mut out = Comparison {
        f1_diff: diff_of(&all),
        f1_diff_ci: bootstrap(paired.len(), diff_of),
        rows: paired.len(),
        better: 0,
        worse: 0,
        same: 0,
        per_row: Vec::new(),
        a: side_a,
        b: side_b,
    };
    for (row, ca, cb) in &paired {
        let (fa, fb) = (ca.f1(), cb.f1());
        let diff = fa.zip(fb).map(|(x, y)| y - x);
        match diff {
            Some(d) if d > 1e-12 => out.better += 1,
            Some(d) if d < -1e-12 => out.worse += 1,
            _ => out.same += 1,
        }
        let xa = first_a.get(*row).map(|c| objects_a(c)).transpose()?;
        let xb = first_b.get(*row).map(|c| objects_b(c)).transpose()?;
        let objects = kerf_core::diff::objects(
            xa.as_deref().unwrap_or_default(),
            xb.as_deref().unwrap_or_default(),
        );
        drop((xa, xb));
        out.per_row.push(RowDiff {
            row: row.to_string(),
            f1_a: fa,
            f1_b: fb,
            diff,
            gained: objects.added,
            lost: objects.removed,
            changed: objects.changed.len(),
        });
    }
    Ok(out)
}

/// The identities of `objects` as `m` compares them (a cell's record set, for Jaccard).
pub fn identities(m: &Matcher, objects: &[Value]) -> Vec<String> {
    let set: BTreeSet<String> = objects.iter().map(|o| identity(m, o)).collect();
    set.into_iter().collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn point(max_tokens: u32, recall: Option<f64>) -> BudgetPoint {
        BudgetPoint {
            max_tokens,
            recall,
            cost_per_document: Some(f64::from(max_tokens) / 1e6),
            ..BudgetPoint::default()
        }
    }

    #[test]
    fn advice_is_the_smallest_budget_near_the_best_recall() {
        let points = [
            point(256, Some(0.80)),
            point(512, Some(0.95)),
            point(1024, Some(0.97)),
            point(2048, Some(0.97)),
        ];
        let a = advise(("p", "local"), false, &points, 0.05).unwrap();
        // 0.95 ≥ 0.97 × 0.95; 0.80 is not. The best is the smaller of the two at 0.97.
        assert_eq!((a.max_tokens, a.best_max_tokens), (512, 1024));
        assert_eq!(a.cost_per_document, Some(512.0 / 1e6));
        assert_eq!(
            advise(("p", "local"), false, &points, 0.0)
                .unwrap()
                .max_tokens,
            1024,
            "within 0%: the best itself"
        );
        assert_eq!(
            advise(("p", "local"), false, &points, 0.2)
                .unwrap()
                .max_tokens,
            256
        );
        // One budget measured, or none: nothing to advise.
        assert_eq!(
            advise(
                ("p", "local"),
                false,
                &[point(256, Some(0.8)), point(512, None)],
                0.05
            ),
            None
        );
    }
}
