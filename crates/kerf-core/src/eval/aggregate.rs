//! Scores over many documents: micro (the sums of tp, fp and fn) and macro (the mean of the
//! documents' F1, nulls skipped), overall and per record type.

use std::collections::BTreeMap;

use rayon::prelude::*;
use serde::Serialize;
use serde_json::Value;

use super::matching::Matcher;
use super::score::{Agreement, Counts, Scored, Scores, score};

/// Figures over documents.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    /// Micro: the sums, with the figures they give.
    #[serde(flatten)]
    pub micro: Scores,
    /// The mean of the documents' F1 (documents whose F1 is null are skipped); null when none
    /// has one.
    pub macro_f1: Option<f64>,
    /// Documents scored.
    pub documents: u64,
    pub by_type: BTreeMap<String, TypeTotals>,
    /// Mean agreement of each non-identity field over every matched pair (`type:field`).
    pub agreement: BTreeMap<String, Option<f64>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TypeTotals {
    #[serde(flatten)]
    pub micro: Scores,
    pub macro_f1: Option<f64>,
}

/// Adds documents' scores up (in any order: the sums and means do not depend on it, and
/// [`Tally::totals`] sums F1 in document order for bit-for-bit repeatable figures).
#[derive(Debug, Clone, Default)]
pub struct Tally {
    counts: Counts,
    f1s: Vec<f64>,
    documents: u64,
    by_type: BTreeMap<String, (Counts, Vec<f64>)>,
    agreement: BTreeMap<String, Agreement>,
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

impl Tally {
    pub fn add(&mut self, s: &Scored) {
        self.documents += 1;
        self.counts.add(&s.counts);
        self.f1s.extend(s.counts.f1());
        for (t, c) in &s.by_type {
            let e = self.by_type.entry(t.clone()).or_default();
            e.0.add(c);
            e.1.extend(c.f1());
        }
        for (f, a) in &s.agreement {
            self.agreement.entry(f.clone()).or_default().add(a);
        }
    }

    pub fn totals(&self) -> Totals {
        Totals {
            micro: self.counts.scores(),
            macro_f1: mean(&self.f1s),
            documents: self.documents,
            by_type: self
                .by_type
                .iter()
                .map(|(t, (c, f1s))| {
                    (
                        t.clone(),
                        TypeTotals {
                            micro: c.scores(),
                            macro_f1: mean(f1s),
                        },
                    )
                })
                .collect(),
            agreement: self
                .agreement
                .iter()
                .map(|(f, a)| (f.clone(), a.mean()))
                .collect(),
        }
    }
}

/// Score many documents (`(expected, extracted)` each) on every core; the results in order.
pub fn score_all(m: &Matcher, documents: &[(&[Value], &[Value])]) -> Vec<Scored> {
    documents.par_iter().map(|(e, a)| score(m, e, a)).collect()
}
