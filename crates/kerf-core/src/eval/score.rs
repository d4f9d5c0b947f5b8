//! Scoring one document's extracted records against its expected ones: one-to-one matching per
//! record type, then precision, recall and F1 with the null rules below; agreement of the
//! non-identity fields of matched pairs; grounding of extracted records in the input.
//!
//! `tp` = matched pairs; `fp` = extracted − tp; `fn` = expected − tp. Precision is `null` when
//! nothing was extracted, recall when nothing was expected, F1 only when both sets are empty.
//!
//! Matching is an optimal assignment on the pairs whose identity fields all reach the
//! threshold: as many exact pairs as possible (a record extracted exactly as expected is
//! credited to that record, never traded for two near misses), then as many pairs as possible,
//! then the most similar. One extracted record never satisfies two expected ones, so a
//! duplicate extraction is spurious — unless the prompt's `match.repeats` is `once`: then an
//! extracted record with the identity of one before it is left out of the scoring (listed in
//! `repeats`, beside the record it repeats).
//!
//! The cost stays near linear in what the model writes (issue 36, item 9: `eval show`, `report`
//! and `rescore` score again every time), by these means:
//!
//! - **Classes of identical records.** Expected records with the same identity fields and the
//!   same forms (value and aliases), and extracted records with the same identity tuple, have
//!   the same candidates with the same similarities, so each class is one node of the
//!   assignment with its count as capacity: 10,000 repeats of one record on both sides are one
//!   candidate pair, not 10⁸.
//! - **Exact pairs through a hash index** of the classes' tuples.
//! - **Fuzzy candidates by the pigeonhole rule**: a text within `k` edits of another keeps one
//!   of its `k + 1` segments unchanged, so only classes sharing a segment, at a shift of at most
//!   `k`, are compared at all, and then by Myers' bit-parallel distance, stopped as soon as it
//!   must exceed `k` (the most edits the threshold allows at that length).
//! - **Exact pairs first, and only open classes compared fuzzily.** In a large type, the most
//!   exact pairs are found first (a max flow over the classes); a class they fill to its size in
//!   every way of making them can take no fuzzy pair in any optimal assignment, so it is never
//!   compared fuzzily: 2,000 names found exactly on both sides cost no fuzzy comparison at all
//!   (they once cost 4 million, and a flow over them: 368 s at `fuzzy: 0`).
//! - **The assignment per connected group.** A group of one candidate pair needs no solving; a
//!   small group is solved by Kuhn–Munkres (the `pathfinding` crate) over its records exactly
//!   as before; a large one by successive shortest paths over its classes, with the same
//!   integer weights, so the same number of pairs and the same total weight — unless the flow
//!   would take more than `FLOW_WORK`: such a group takes its pairs greedily, most weight first,
//!   then raises them to the most pairs by augmenting paths (the most pairs, exact ones first,
//!   but its total similarity may fall short of the optimum).
//! - **Grounding by one pass over the document** ([`Grounding`]): Myers' bit-parallel search
//!   rules out every run of words at once, and only runs it cannot rule out get a distance.
//!
//! Every figure is the one the record-by-record definitions give (the tests hold the old
//! algorithms as an oracle), with one boundary: when a group larger than `DENSE_CELLS` (4,096
//! record pairs) has several assignments of the same weight, which one it gets may differ
//! from the one Kuhn–Munkres over every record picked before (that was its internal order;
//! the flow deals interchangeable records out in index order). The counts, precision, recall
//! and F1 are the same, and so is the sum of the pairs' weights (similarities to six
//! decimals); which records pair, and so their similarities beyond the sixth decimal and the
//! agreement of their other fields, may not.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::distance::{Myers, levenshtein_within, max_edits, similarity_from};
use super::matching::{ANY_TYPE, Matcher, Repeats};
use super::normalize::{agreement, value_text, value_text_into};

mod assignment;
mod grounding;
mod index;

#[cfg(test)]
pub(super) use assignment::flow;
use assignment::*;
pub use grounding::Grounding;
use index::*;

/// How many fuzzy comparisons of a wanted class with an extracted one scoring made on this
/// thread: counted, not timed, so a test can hold the work to a bound however fast the machine.
pub mod compared {
    use std::cell::Cell;

    thread_local! {
        static COMPARED: Cell<u64> = const { Cell::new(0) };
        static DOCUMENTS: Cell<u64> = const { Cell::new(0) };
    }

    /// Comparisons on this thread since [`reset`].
    pub fn count() -> u64 {
        COMPARED.with(Cell::get)
    }

    /// Documents scored ([`super::score`] calls) on this thread since [`reset`].
    pub fn documents() -> u64 {
        DOCUMENTS.with(Cell::get)
    }

    pub fn reset() {
        COMPARED.with(|c| c.set(0));
        DOCUMENTS.with(|c| c.set(0));
    }

    pub(super) fn one() {
        COMPARED.with(|c| c.set(c.get() + 1));
    }

    pub(super) fn document() {
        DOCUMENTS.with(|c| c.set(c.get() + 1));
    }
}

/// Matched, spurious and missed records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub tp: u64,
    pub fp: u64,
    #[serde(rename = "fn")]
    pub fn_: u64,
}

impl Counts {
    /// tp / (tp + fp); `None` when nothing was extracted.
    pub fn precision(&self) -> Option<f64> {
        let d = self.tp + self.fp;
        (d > 0).then(|| self.tp as f64 / d as f64)
    }

    /// tp / (tp + fn); `None` when nothing was expected.
    pub fn recall(&self) -> Option<f64> {
        let d = self.tp + self.fn_;
        (d > 0).then(|| self.tp as f64 / d as f64)
    }

    /// 2tp / (2tp + fp + fn); `None` only when both sets are empty.
    pub fn f1(&self) -> Option<f64> {
        let d = 2 * self.tp + self.fp + self.fn_;
        (d > 0).then(|| 2.0 * self.tp as f64 / d as f64)
    }

    pub fn add(&mut self, other: &Counts) {
        self.tp += other.tp;
        self.fp += other.fp;
        self.fn_ += other.fn_;
    }

    pub fn scores(&self) -> Scores {
        Scores {
            tp: self.tp,
            fp: self.fp,
            fn_: self.fn_,
            precision: self.precision(),
            recall: self.recall(),
            f1: self.f1(),
        }
    }
}

/// Counts with their figures, as every `--json` prints them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Scores {
    pub tp: u64,
    pub fp: u64,
    #[serde(rename = "fn")]
    pub fn_: u64,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
}

/// A figure of a scored document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Precision,
    Recall,
    F1,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::Precision => "precision",
            Metric::Recall => "recall",
            Metric::F1 => "f1",
        }
    }

    pub fn of(self, s: &Scores) -> Option<f64> {
        match self {
            Metric::Precision => s.precision,
            Metric::Recall => s.recall,
            Metric::F1 => s.f1,
        }
    }
}

/// One matched pair: indices into the expected and extracted lists.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    pub expected: usize,
    pub actual: usize,
    /// The lowest similarity of the pair's identity fields (1 when all are equal).
    pub similarity: f64,
}

impl Pair {
    /// Matched below exact equality (by `fuzzy`).
    pub fn is_partial(&self) -> bool {
        self.similarity < 1.0
    }
}

/// How far the non-identity fields of matched pairs agree: a sum over pairs, for averaging
/// across documents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    pub pairs: u64,
    pub sum: f64,
}

impl Agreement {
    pub fn mean(&self) -> Option<f64> {
        (self.pairs > 0).then(|| self.sum / self.pairs as f64)
    }

    pub fn add(&mut self, other: &Agreement) {
        self.pairs += other.pairs;
        self.sum += other.sum;
    }
}

/// One document scored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    pub counts: Counts,
    /// Per record type: every type of the prompt, and any other seen.
    pub by_type: BTreeMap<String, Counts>,
    /// In the order of the expected records.
    pub matched: Vec<Pair>,
    /// Expected records left unmatched (indices).
    pub missed: Vec<usize>,
    /// Extracted records left unmatched (indices).
    pub spurious: Vec<usize>,
    /// With `match.repeats: once`, each extracted record not scored as it repeats an earlier
    /// one's identity: (its index, the earlier one's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<(usize, usize)>,
    /// Per non-identity field of the expected records (`type:field`).
    pub agreement: BTreeMap<String, Agreement>,
}

/// The most alias combinations looked up in the index for one expected record; beyond it the
/// record's fields are looked up one by one instead.
const MAX_COMBINATIONS: usize = 64;

/// A missing field compares unequal to every present value.
const MISSING: &str = "\u{0}missing";

/// [`MISSING`] in characters, as fuzzy comparisons hold texts.
const MISSING_CHARS: [char; 8] = ['\u{0}', 'm', 'i', 's', 's', 'i', 'n', 'g'];

fn field_text(m: &Matcher, object: &Value, field: &str) -> String {
    object
        .get(field)
        .map(|v| value_text(v, m.normalize))
        .unwrap_or_else(|| MISSING.to_string())
}

/// A record's identity as matching sees it: its type and its identity fields' compared texts
/// (`definition · stroma`). Two records with the same identity are the same record to an exact
/// matcher; repeats are compared as sets of these.
pub fn identity(m: &Matcher, object: &Value) -> String {
    let t = m.type_of(object);
    let rule = m.rule(t);
    let mut out = t.to_string();
    for k in m.keys_of(rule, object).iter() {
        out.push_str(" · ");
        match object.get(k.as_str()) {
            Some(v) => out.push_str(&value_text(v, m.normalize)),
            None => out.push('∅'),
        }
    }
    out
}

/// The forms an expected record's field may take: its value, then its aliases.
fn field_forms(m: &Matcher, object: &Value, field: &str) -> Vec<String> {
    let mut forms = vec![field_text(m, object, field)];
    if let Some(Value::Array(aliases)) = object.get("aliases").and_then(|a| a.get(field)) {
        for a in aliases {
            let t = value_text(a, m.normalize);
            if !forms.contains(&t) {
                forms.push(t);
            }
        }
    }
    forms
}

/// A class of expected records as matching sees them: the same identity fields with the same
/// forms, so the same candidates.
struct Wanted<'r> {
    keys: Cow<'r, [String]>,
    forms: Vec<Vec<String>>,
    /// The first forms as one index key.
    tuple: String,
}

/// FxHash's mixing over 8 bytes at a time (rustc's hash): fast on short texts.
fn fx_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |h: u64, x: u64| (h.rotate_left(5) ^ x).wrapping_mul(K);
    let mut h = mix(0, bytes.len() as u64);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        h = mix(h, u64::from_le_bytes(word));
    }
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    mix(h, u64::from_le_bytes(last))
}

/// The hasher of a map whose keys are already hashes.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys reach it; anything else is still mixed in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Separates the fields of an identity tuple in its index key (a control character that
/// normalisation keeps, so a field holding it makes its record a class of its own: see
/// [`Extracted::new`]).
const SEP: char = '\u{1f}';

/// The record types of a document in order, each with its records (positions in the expected
/// and the extracted lists).
struct Types<'a> {
    names: Vec<&'a str>,
    records: Vec<(Vec<usize>, Vec<usize>)>,
    /// The names' positions, once there are more than comparing finds quickly (a reply that
    /// invents a type per record).
    index: HashMap<&'a str, usize>,
}

impl<'a> Types<'a> {
    /// Up to this many types are found by comparing names.
    const FEW: usize = 8;

    fn new(names: Vec<&'a str>) -> Types<'a> {
        let mut types = Types {
            records: vec![Default::default(); names.len()],
            names,
            index: HashMap::new(),
        };
        if types.names.len() > Self::FEW {
            types.index = types
                .names
                .iter()
                .enumerate()
                .map(|(i, n)| (*n, i))
                .collect();
        }
        types
    }

    /// The position of type `t`, added last if new.
    fn position(&mut self, t: &'a str) -> usize {
        let found = if self.names.len() > Self::FEW {
            self.index.get(t).copied()
        } else {
            self.names.iter().position(|n| *n == t)
        };
        if let Some(i) = found {
            return i;
        }
        let i = self.names.len();
        self.names.push(t);
        self.records.push(Default::default());
        if self.names.len() > Self::FEW {
            if self.index.is_empty() {
                self.index = self
                    .names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (*n, i))
                    .collect();
            } else {
                self.index.insert(t, i);
            }
        }
        i
    }
}

/// Score the extracted records `actual` against `expected` (both in the prompt's record shape;
/// an expected record may carry `aliases`).
pub fn score(m: &Matcher, expected: &[Value], actual: &[Value]) -> Scored {
    compared::document();
    let mut out = Scored::default();
    let types: Vec<&str> = m
        .types
        .keys()
        .map(String::as_str)
        .filter(|t| *t != ANY_TYPE || m.discriminator.is_none())
        .collect();
    // The records of each type in one pass, the types in the order first seen after the
    // prompt's own (that order decides which of two clashing `type:field` agreement names wins).
    let mut types = Types::new(types);
    for (i, o) in expected.iter().enumerate() {
        let t = types.position(m.type_of(o));
        types.records[t].0.push(i);
    }
    let mut first_of: HashMap<String, usize> = HashMap::new();
    for (i, o) in actual.iter().enumerate() {
        if m.repeats == Repeats::Once {
            let earlier = *first_of.entry(identity(m, o)).or_insert(i);
            if earlier != i {
                out.repeats.push((i, earlier));
                continue;
            }
        }
        let t = types.position(m.type_of(o));
        types.records[t].1.push(i);
    }
    for (t, (e, a)) in types.names.into_iter().zip(types.records) {
        let pairs = match_type(m, t, &e, &a, expected, actual);
        let counts = Counts {
            tp: pairs.len() as u64,
            fp: (a.len() - pairs.len()) as u64,
            fn_: (e.len() - pairs.len()) as u64,
        };
        out.counts.add(&counts);
        out.by_type.insert(t.to_string(), counts);
        let rule = m.rule(t);
        let mut agreed: BTreeMap<&str, Agreement> = BTreeMap::new();
        for p in &pairs {
            let (x, y) = (&expected[p.expected], &actual[p.actual]);
            let keys = m.keys_of(rule, x);
            if let Value::Object(fields) = x {
                for (f, v) in fields {
                    if keys.contains(f)
                        || f == "aliases"
                        || Some(f.as_str()) == m.discriminator.as_deref()
                    {
                        continue;
                    }
                    let theirs = y.get(f).map(|w| value_text(w, m.normalize));
                    let a = agreed.entry(f).or_default();
                    a.pairs += 1;
                    a.sum += theirs.map_or(0.0, |w| agreement(&value_text(v, m.normalize), &w));
                }
            }
        }
        for (f, a) in agreed {
            out.agreement.insert(format!("{t}:{f}"), a);
        }
        out.matched.extend(pairs);
    }
    out.matched.sort_by_key(|p| p.expected);
    let mut taken_e = vec![false; expected.len()];
    let mut taken_a = vec![false; actual.len()];
    for &(i, _) in &out.repeats {
        taken_a[i] = true;
    }
    for p in &out.matched {
        taken_e[p.expected] = true;
        taken_a[p.actual] = true;
    }
    out.missed = (0..expected.len()).filter(|&i| !taken_e[i]).collect();
    out.spurious = (0..actual.len()).filter(|&i| !taken_a[i]).collect();
    out
}

/// The one-to-one pairs of records of one type (`e`, `a`: indices of that type's records).
fn match_type(
    m: &Matcher,
    t: &str,
    e: &[usize],
    a: &[usize],
    expected: &[Value],
    actual: &[Value],
) -> Vec<Pair> {
    if e.is_empty() || a.is_empty() {
        return Vec::new();
    }
    let rule = m.rule(t);
    let (wanted, rows) = wanted_classes(m, rule, e, expected);
    // The extracted records in classes, once per distinct list of identity fields (one list
    // unless the type has no schema).
    let mut lists: HashMap<&[String], usize> = HashMap::new();
    let mut sides: Vec<Extracted> = Vec::new();
    let mut side_of: Vec<usize> = Vec::with_capacity(wanted.len());
    for w in &wanted {
        let s = match sides.last() {
            Some(last) if *last.keys == *w.keys => sides.len() - 1,
            None => {
                sides.push(Extracted::new(m, &w.keys, a, actual));
                0
            }
            Some(_) => {
                if lists.is_empty() {
                    lists.insert(sides[0].keys, 0);
                }
                let next = sides.len();
                let s = *lists.entry(&w.keys).or_insert(next);
                if s == next {
                    sides.push(Extracted::new(m, &w.keys, a, actual));
                }
                s
            }
        };
        side_of.push(s);
    }
    // The assignment's column classes: records with the same tuple under every list.
    let (cols, within) = column_classes(&sides, a.len());
    // Candidate pairs of classes: (wanted class, column class, similarity).
    let mut edges: Vec<(usize, usize, f64)> = Vec::new();
    let mut stamps: Vec<Vec<usize>> = sides.iter().map(|s| vec![0; s.classes]).collect();
    let mut found: Vec<usize> = Vec::new();
    // The column classes inside class `c` of list `si`.
    let inside = |si: usize, c: usize| -> Vec<usize> {
        match &within {
            Some(within) => within[si][c].clone(),
            None => vec![c],
        }
    };
    // First the exact candidates of every wanted class: exact pairs come first (see
    // `assign`), and in a large type they decide which classes may take a fuzzy pair at all.
    for (wi, w) in wanted.iter().enumerate() {
        let si = side_of[wi];
        let side = &mut sides[si];
        let stamp = &mut stamps[si];
        // A mark per wanted class: its exact candidates, then its fuzzy ones.
        let exact_mark = 2 * wi + 1;
        found.clear();
        let combinations = w
            .forms
            .iter()
            .map(Vec::len)
            .fold(1usize, usize::saturating_mul);
        if combinations == 1 {
            for &c in side.by_tuple.get(&w.tuple).into_iter().flatten() {
                if stamp[c] != exact_mark {
                    stamp[c] = exact_mark;
                    found.push(c);
                }
            }
        } else if combinations <= MAX_COMBINATIONS {
            for_each_combination(&w.forms, &mut |tuple| {
                for &c in side.by_tuple.get(&joined(tuple)).into_iter().flatten() {
                    if stamp[c] != exact_mark {
                        stamp[c] = exact_mark;
                        found.push(c);
                    }
                }
            });
        } else {
            // Field by field: the classes whose every field is one of the forms.
            let forms = chars_of(&w.forms);
            side.fields(m, a, actual);
            let field = side.least_exact(&forms);
            let mut candidates = Vec::new();
            side.exact_candidates(&forms, field, &mut |list| {
                candidates.extend_from_slice(list)
            });
            for c in candidates {
                if stamp[c] != exact_mark && side.is_exact(&forms, c) {
                    stamp[c] = exact_mark;
                    found.push(c);
                }
            }
        }
        for &c in &found {
            edges.extend(inside(si, c).into_iter().map(|g| (wi, g, 1.0)));
        }
    }
    if m.fuzzy < 1.0 {
        // In a large type, only classes that the exact pairs need not fill whole may take a
        // fuzzy pair: 2,000 names found exactly on both sides are then never compared fuzzily
        // with each other (4 million comparisons, and a flow over them, once).
        let open =
            (e.len().saturating_mul(a.len()) > DENSE_CELLS).then(|| Open::of(&rows, &cols, &edges));
        for (wi, w) in wanted.iter().enumerate() {
            if open.as_ref().is_some_and(|o| !o.rows[wi]) {
                continue;
            }
            let si = side_of[wi];
            let side = &mut sides[si];
            let stamp = &mut stamps[si];
            let exact_mark = 2 * wi + 1;
            let fuzzy_mark = exact_mark + 1;
            let forms = chars_of(&w.forms);
            side.fields(m, a, actual);
            let candidates = side.fuzzy_candidates(&forms, m.fuzzy);
            // Each form ready for Myers' distance, once for all its candidates.
            let patterns: Vec<Vec<Option<Myers>>> = forms
                .iter()
                .map(|f| f.iter().map(|form| Myers::new(form)).collect())
                .collect();
            let mut mine: Vec<(usize, f64)> = Vec::new();
            for c in candidates {
                if stamp[c] == exact_mark || stamp[c] == fuzzy_mark {
                    continue;
                }
                stamp[c] = fuzzy_mark;
                let mut columns = inside(si, c);
                if let Some(o) = &open {
                    columns.retain(|&g| o.cols[g]);
                }
                if columns.is_empty() {
                    continue;
                }
                if let Some(s) = side.fuzzy_similarity(&forms, &patterns, c, m.fuzzy) {
                    mine.extend(columns.into_iter().map(|g| (g, s)));
                }
            }
            // In a large type a wanted class keeps its closest fuzzy candidates only: at a low
            // threshold every pair is one (2,000 × 2,000 distinct names at `fuzzy: 0` once
            // made a flow of 8 million arcs, 751 MB).
            if open.is_some() && mine.len() > FUZZY_PER_CLASS {
                let closer =
                    |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
                mine.select_nth_unstable_by(FUZZY_PER_CLASS - 1, closer);
                mine.truncate(FUZZY_PER_CLASS);
                mine.sort_unstable_by(closer);
            }
            edges.extend(mine.into_iter().map(|(g, s)| (wi, g, s)));
        }
    }
    assign(&rows, &cols, &edges)
        .into_iter()
        .map(|(wi, aj, similarity)| Pair {
            expected: e[wi],
            actual: a[aj],
            similarity,
        })
        .collect()
}

/// Records in classes: class `c`'s members are `members[start[c]..start[c + 1]]`, ascending.
pub(super) struct Classes {
    members: Vec<usize>,
    start: Vec<usize>,
}

impl Classes {
    /// The classes of `labels` (record `i` is in class `labels[i]`, of `count`).
    pub(super) fn new(labels: &[usize], count: usize) -> Classes {
        let mut start = vec![0usize; count + 1];
        for &l in labels {
            start[l + 1] += 1;
        }
        for c in 0..count {
            start[c + 1] += start[c];
        }
        let mut members = vec![0usize; labels.len()];
        if count == labels.len() {
            // Every class has one record: the classes are the records' order of first sight.
            for (i, &l) in labels.iter().enumerate() {
                members[l] = i;
            }
            return Classes { members, start };
        }
        let mut next = start.clone();
        for (i, &l) in labels.iter().enumerate() {
            members[next[l]] = i;
            next[l] += 1;
        }
        Classes { members, start }
    }

    fn of(&self, c: usize) -> &[usize] {
        &self.members[self.start[c]..self.start[c + 1]]
    }

    fn len(&self) -> usize {
        self.start.len() - 1
    }
}

/// The expected records of one type in classes of the same identity fields and forms, in the
/// order of their first records: one [`Wanted`] per class, and the classes' members (positions
/// in `e`).
fn wanted_classes<'r>(
    m: &Matcher,
    rule: &'r super::matching::TypeRule,
    e: &[usize],
    expected: &[Value],
) -> (Vec<Wanted<'r>>, Classes) {
    let mut wanted: Vec<Wanted<'r>> = Vec::new();
    // Classes by a hash of the tuple of their first forms (the first class with that hash, the
    // others chained through `same_hash`), then compared in full (aliases included). The gold
    // records are the user's, so a fast hash is enough: a collision only costs a comparison.
    let mut by_hash: HashMap<u64, usize, BuildHasherDefault<Prehashed>> =
        HashMap::with_capacity_and_hasher(e.len(), Default::default());
    let mut same_hash: Vec<Option<usize>> = Vec::new();
    let mut labels = Vec::with_capacity(e.len());
    for &i in e {
        let keys = m.keys_of(rule, &expected[i]);
        let forms: Vec<Vec<String>> = keys
            .iter()
            .map(|k| field_forms(m, &expected[i], k))
            .collect();
        let tuple = joined(forms.iter().map(|f| &f[0]));
        let hash = fx_hash(tuple.as_bytes());
        let mut at = by_hash.get(&hash).copied();
        while let Some(c) = at {
            if *wanted[c].keys == *keys && wanted[c].forms == forms {
                break;
            }
            at = same_hash[c];
        }
        let class = match at {
            Some(c) => c,
            None => {
                let c = wanted.len();
                same_hash.push(by_hash.insert(hash, c));
                wanted.push(Wanted { keys, forms, tuple });
                c
            }
        };
        labels.push(class);
    }
    let rows = Classes::new(&labels, wanted.len());
    (wanted, rows)
}

/// The classes of the assignment's columns: extracted records with the same tuple under every
/// list of identity fields in use, in the order of their first records. With one list they are
/// that list's classes (`None`); with more, per list and class of that list, the column
/// classes it is made of.
fn column_classes(sides: &[Extracted], records: usize) -> (Classes, Option<Vec<Vec<Vec<usize>>>>) {
    if let [side] = sides {
        return (Classes::new(&side.class_of, side.classes), None);
    }
    let mut by_classes: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut labels = Vec::with_capacity(records);
    for aj in 0..records {
        let key: Vec<usize> = sides.iter().map(|s| s.class_of[aj]).collect();
        let next = by_classes.len();
        labels.push(*by_classes.entry(key).or_insert(next));
    }
    let cols = Classes::new(&labels, by_classes.len());
    let within = sides
        .iter()
        .map(|side| {
            let mut within: Vec<Vec<usize>> = vec![Vec::new(); side.classes];
            for c in 0..cols.len() {
                // Every member of a column class is in the same class of every list.
                if let Some(&first) = cols.of(c).first() {
                    within[side.class_of[first]].push(c);
                }
            }
            within
        })
        .collect();
    (cols, Some(within))
}

fn chars_of(forms: &[Vec<String>]) -> Vec<Vec<Vec<char>>> {
    forms
        .iter()
        .map(|f| f.iter().map(|s| s.chars().collect()).collect())
        .collect()
}

/// The extracted records of one type under one list of identity fields, in classes of equal
/// tuples (positions in the type's extracted records).
struct Extracted<'k> {
    classes: usize,
    class_of: Vec<usize>,
    /// The first record of each class, which speaks for it.
    first: Vec<usize>,
    /// The classes by their tuple as one index key. A key is one class, except that records
    /// with [`SEP`] inside a field are classes of their own whose keys may coincide (and then
    /// match each other's lookups, as the one index of records did before).
    by_tuple: HashMap<String, Vec<usize>>,
    keys: &'k [String],
    /// Field by field, built when a lookup needs fields (aliases beyond the combinations, or
    /// fuzzy matching).
    fields: Option<Fields>,
}

/// The classes' texts field by field, and an index per field.
struct Fields {
    /// `texts[class][field]`.
    texts: Vec<Vec<Vec<char>>>,
    index: Vec<FieldIndex>,
}

impl<'k> Extracted<'k> {
    fn new(m: &Matcher, keys: &'k [String], a: &[usize], actual: &[Value]) -> Extracted<'k> {
        let mut by_tuple: HashMap<String, Vec<usize>> = HashMap::with_capacity(a.len());
        let mut class_of = Vec::with_capacity(a.len());
        let mut first = Vec::new();
        let separators = keys.len().saturating_sub(1);
        for (aj, &j) in a.iter().enumerate() {
            let key = tuple_key(m, &actual[j], keys);
            // More separators than fields: a field holds one, and the key alone no longer
            // says which fields the record has.
            let own = key.bytes().filter(|&b| b == SEP as u8).count() > separators;
            let class = match by_tuple.entry(key) {
                Entry::Occupied(list) if !own => list.get()[0],
                Entry::Occupied(mut list) => {
                    list.get_mut().push(first.len());
                    first.push(aj);
                    first.len() - 1
                }
                Entry::Vacant(place) => {
                    place.insert(vec![first.len()]);
                    first.push(aj);
                    first.len() - 1
                }
            };
            class_of.push(class);
        }
        Extracted {
            classes: first.len(),
            class_of,
            first,
            by_tuple,
            keys,
            fields: None,
        }
    }

    /// Builds the classes' field texts, once.
    fn fields(&mut self, m: &Matcher, a: &[usize], actual: &[Value]) {
        if self.fields.is_some() {
            return;
        }
        let texts: Vec<Vec<Vec<char>>> = self
            .first
            .iter()
            .map(|&aj| {
                self.keys
                    .iter()
                    .map(|k| field_text(m, &actual[a[aj]], k).chars().collect())
                    .collect()
            })
            .collect();
        let index = (0..self.keys.len())
            .map(|f| FieldIndex::new(&texts, f))
            .collect();
        self.fields = Some(Fields { texts, index });
    }

    fn texts(&self, class: usize) -> &[Vec<char>] {
        self.fields
            .as_ref()
            .and_then(|f| f.texts.get(class))
            .map_or(&[][..], Vec::as_slice)
    }

    /// The field whose exact lookups of `forms` find the fewest classes.
    fn least_exact(&self, forms: &[Vec<Vec<char>>]) -> Option<usize> {
        let index = &self.fields.as_ref()?.index;
        (0..forms.len()).min_by_key(|&f| {
            forms[f]
                .iter()
                .map(|form| index[f].exact.get(form.as_slice()).map_or(0, Vec::len))
                .sum::<usize>()
        })
    }

    /// Visits the classes whose field `field` is one of its forms (every class when there is
    /// no field to look up).
    fn exact_candidates(
        &self,
        forms: &[Vec<Vec<char>>],
        field: Option<usize>,
        visit: &mut dyn FnMut(&[usize]),
    ) {
        let Some(fields) = &self.fields else {
            return;
        };
        match field {
            Some(f) => {
                for form in &forms[f] {
                    if let Some(list) = fields.index[f].exact.get(form.as_slice()) {
                        visit(list);
                    }
                }
            }
            None => visit(&(0..self.classes).collect::<Vec<_>>()),
        }
    }

    /// Whether every field of class `c` is one of its forms.
    fn is_exact(&self, forms: &[Vec<Vec<char>>], c: usize) -> bool {
        self.texts(c)
            .iter()
            .zip(forms)
            .all(|(v, forms)| forms.contains(v))
    }

    /// The classes that may reach `threshold` on every field: those the index of the most
    /// selective field finds for one of its forms (every class when there is no field). A
    /// superset: each is checked by [`Extracted::fuzzy_similarity`].
    fn fuzzy_candidates(&mut self, forms: &[Vec<Vec<char>>], threshold: f64) -> Vec<usize> {
        let Some(fields) = &mut self.fields else {
            return Vec::new();
        };
        if forms.is_empty() {
            return (0..self.classes).collect();
        }
        // One field needs no choosing.
        let mut best: Option<(usize, usize)> = (forms.len() == 1).then_some((0, 0));
        for (f, field_forms) in forms.iter().enumerate().filter(|_| forms.len() > 1) {
            let mut found = 0usize;
            for form in field_forms {
                fields.index[f].probe(&fields.texts, f, form, threshold, &mut |list| {
                    found = found.saturating_add(list.len())
                });
            }
            if best.is_none_or(|(_, least)| found < least) {
                best = Some((f, found));
            }
        }
        let mut out = Vec::new();
        if let Some((f, _)) = best {
            for form in &forms[f] {
                fields.index[f].probe(&fields.texts, f, form, threshold, &mut |list| {
                    out.extend_from_slice(list)
                });
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The similarity of class `c` to `forms` when every field reaches `threshold` (a field's
    /// best form counts), else `None`: the figures of `similarity` (strsim's normalised
    /// Levenshtein), from a distance that stops at the most edits the threshold allows
    /// (`patterns`: the forms ready for Myers' algorithm, `None` for an empty one).
    fn fuzzy_similarity(
        &self,
        forms: &[Vec<Vec<char>>],
        patterns: &[Vec<Option<Myers>>],
        c: usize,
        threshold: f64,
    ) -> Option<f64> {
        compared::one();
        let mut lowest = 1.0f64;
        for ((forms, patterns), v) in forms.iter().zip(patterns).zip(self.texts(c)) {
            let mut best: Option<f64> = None;
            for (f, pattern) in forms.iter().zip(patterns) {
                // Equal forms (a field missing on both sides included) are exact, as in the
                // index; a missing field is like no present value.
                let s = if f == v {
                    Some(1.0)
                } else if *f == MISSING_CHARS || *v == MISSING_CHARS {
                    None
                } else {
                    let longer = f.len().max(v.len());
                    max_edits(longer, threshold)
                        .filter(|&k| f.len().abs_diff(v.len()) <= k)
                        .and_then(|k| match pattern {
                            Some(p) => p.within(v, k),
                            None => levenshtein_within(f, v, k),
                        })
                        .map(|d| similarity_from(d, longer))
                };
                if let Some(s) = s {
                    best = Some(best.map_or(s, |b: f64| b.max(s)));
                }
            }
            let best = best?;
            if best < threshold {
                return None;
            }
            lowest = lowest.min(best);
        }
        Some(lowest)
    }
}

/// The identity tuple of `object` under `keys`, as one index key, built in one string.
fn tuple_key(m: &Matcher, object: &Value, keys: &[String]) -> String {
    let mut out = String::new();
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push(SEP);
        }
        match object.get(k) {
            Some(v) => value_text_into(v, m.normalize, &mut out),
            None => out.push_str(MISSING),
        }
    }
    out
}

/// An identity tuple as one index key.
fn joined<'s>(fields: impl IntoIterator<Item = &'s String>) -> String {
    let mut out = String::new();
    for (i, f) in fields.into_iter().enumerate() {
        if i > 0 {
            out.push(SEP);
        }
        out.push_str(f);
    }
    out
}

fn for_each_combination(forms: &[Vec<String>], f: &mut dyn FnMut(&Vec<String>)) {
    fn walk(
        forms: &[Vec<String>],
        at: usize,
        cur: &mut Vec<String>,
        f: &mut dyn FnMut(&Vec<String>),
    ) {
        if at == forms.len() {
            f(cur);
            return;
        }
        for form in &forms[at] {
            cur.push(form.clone());
            walk(forms, at + 1, cur, f);
            cur.pop();
        }
    }
    walk(forms, 0, &mut Vec::with_capacity(forms.len()), f);
}

/// `kerf score --json`: one document's scores with the records themselves. Keep these names.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreReport {
    #[serde(flatten)]
    pub scores: Scores,
    pub by_type: BTreeMap<String, Scores>,
    pub matched: Vec<MatchedPair>,
    /// The matched pairs below exact equality (also in `matched`).
    pub partial: Vec<MatchedPair>,
    pub missed: Vec<Value>,
    pub spurious: Vec<Value>,
    /// With `match.repeats: once`: the extracted records not scored again, each repeating an
    /// earlier one's identity (absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<Value>,
    /// With an input: the extracted records not found in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ungrounded: Option<Vec<Value>>,
    /// Mean agreement of each non-identity field over the matched pairs (`type:field`).
    pub agreement: BTreeMap<String, Option<f64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatchedPair {
    pub expected: Value,
    pub actual: Value,
    pub similarity: f64,
}

impl ScoreReport {
    pub fn new(
        scored: &Scored,
        expected: &[Value],
        actual: &[Value],
        ungrounded: Option<&[usize]>,
    ) -> ScoreReport {
        let pair = |p: &Pair| MatchedPair {
            expected: expected[p.expected].clone(),
            actual: actual[p.actual].clone(),
            similarity: p.similarity,
        };
        ScoreReport {
            scores: scored.counts.scores(),
            by_type: scored
                .by_type
                .iter()
                .map(|(t, c)| (t.clone(), c.scores()))
                .collect(),
            matched: scored.matched.iter().map(pair).collect(),
            partial: scored
                .matched
                .iter()
                .filter(|p| p.is_partial())
                .map(pair)
                .collect(),
            missed: scored.missed.iter().map(|&i| expected[i].clone()).collect(),
            spurious: scored.spurious.iter().map(|&i| actual[i].clone()).collect(),
            repeats: scored
                .repeats
                .iter()
                .map(|&(i, _)| actual[i].clone())
                .collect(),
            ungrounded: ungrounded.map(|u| u.iter().map(|&i| actual[i].clone()).collect()),
            agreement: scored
                .agreement
                .iter()
                .map(|(f, a)| (f.clone(), a.mean()))
                .collect(),
        }
    }
}

/// An expected record without its `aliases`: the record in the prompt's own shape, as its schema
/// checks it.
pub fn without_aliases(object: &Value) -> Value {
    match object {
        Value::Object(m) if m.contains_key("aliases") => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "aliases")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    #[test]
    fn the_missing_marker_in_characters_is_the_marker() {
        assert_eq!(MISSING.chars().collect::<Vec<_>>(), MISSING_CHARS);
    }

    #[test]
    fn segments_cut_a_text_into_consecutive_non_empty_pieces() {
        for n in 1..40 {
            for k in 0..n {
                let mut at = 0;
                for i in 0..=k {
                    let (start, len) = segment(n, k, i);
                    assert_eq!(start, at, "n {n} k {k} i {i}");
                    assert!(len > 0);
                    at += len;
                }
                assert_eq!(at, n);
            }
        }
    }

    /// The pigeonhole filter never loses a pair that reaches the threshold (seeded from the
    /// test's own constant: the generator runs the same every time).
    #[test]
    fn fuzzy_candidates_hold_every_text_within_reach() {
        let mut draws = super::super::reference::Seeded::fixed(0x0dd5_eed5);
        let mut below = |n: usize| draws.below(n);
        for round in 0..300 {
            let threshold = [0.0, 0.4, 0.6, 0.75, 0.8, 0.85, 0.9, 0.95][below(8)];
            let classes: Vec<Vec<Vec<char>>> = (0..60)
                .map(|_| {
                    let len = 1 + below(24);
                    vec![(0..len).map(|_| ['a', 'b', 'c', 'd'][below(4)]).collect()]
                })
                .collect();
            let mut index = FieldIndex::new(&classes, 0);
            for _ in 0..20 {
                let form = {
                    let len = 1 + below(24);
                    (0..len)
                        .map(|_| ['a', 'b', 'c', 'd'][below(4)])
                        .collect::<Vec<_>>()
                };
                let mut found = Vec::new();
                index.probe(&classes, 0, &form, threshold, &mut |l| {
                    found.extend_from_slice(l)
                });
                for (c, fields) in classes.iter().enumerate() {
                    let v = &fields[0];
                    let s = super::super::normalize::similarity(
                        &form.iter().collect::<String>(),
                        &v.iter().collect::<String>(),
                    );
                    if s >= threshold {
                        assert!(
                            found.contains(&c),
                            "round {round}: {form:?} ~ {v:?} ({s} ≥ {threshold}) not a candidate"
                        );
                    }
                }
            }
        }
    }
}
