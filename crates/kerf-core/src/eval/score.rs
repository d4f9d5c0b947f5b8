//! Scoring one document's extracted records against its expected ones: one-to-one matching per
//! record type, then precision, recall and F1 with the null rules below; agreement of the
//! non-identity fields of matched pairs; grounding of extracted records in the input.
//!
//! `tp` = matched pairs; `fp` = extracted − tp; `fn` = expected − tp. Precision is `null` when
//! nothing was extracted, recall when nothing was expected, F1 only when both sets are empty.
//!
//! Matching is an optimal assignment (Kuhn–Munkres, from the `pathfinding` crate) on the pairs
//! whose identity fields all reach the threshold: as many pairs as possible, then the most
//! similar. One extracted record never satisfies two expected ones, so a duplicate extraction is
//! spurious. Exact pairs are found through a hash index and the assignment runs only on the
//! connected groups of candidates that have a choice in them, so a document of hundreds of
//! records costs about as much as hashing them.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::matching::{ANY_TYPE, Matcher};
use super::normalize::{agreement, may_reach, normalize, similarity, value_text, value_text_into};

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
#[derive(Debug, Clone, Default, PartialEq)]
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
    /// Per non-identity field of the expected records (`type:field`).
    pub agreement: BTreeMap<String, Agreement>,
}

/// The most alias combinations looked up in the index for one expected record; beyond it the
/// record is compared with every extracted one instead.
const MAX_COMBINATIONS: usize = 64;

/// A missing field compares unequal to every present value.
const MISSING: &str = "\u{0}missing";

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

/// An expected record as matching sees it.
struct Wanted<'r> {
    index: usize,
    keys: std::borrow::Cow<'r, [String]>,
    forms: Vec<Vec<String>>,
}

/// Separates the fields of an identity tuple in its index key (a control character no
/// normalised text contains).
const SEP: char = '\u{1f}';

/// The extracted records of one type under one list of identity fields: each record's tuple,
/// and the records by tuple.
type Extracted = (Vec<Vec<String>>, HashMap<String, Vec<usize>>);

/// Score the extracted records `actual` against `expected` (both in the prompt's record shape;
/// an expected record may carry `aliases`).
pub fn score(m: &Matcher, expected: &[Value], actual: &[Value]) -> Scored {
    let mut out = Scored::default();
    let mut types: Vec<&str> = m
        .types
        .keys()
        .map(String::as_str)
        .filter(|t| *t != ANY_TYPE || m.discriminator.is_none())
        .collect();
    for o in expected.iter().chain(actual) {
        let t = m.type_of(o);
        if !types.contains(&t) {
            types.push(t);
        }
    }
    for t in types {
        let e: Vec<usize> = (0..expected.len())
            .filter(|&i| m.type_of(&expected[i]) == t)
            .collect();
        let a: Vec<usize> = (0..actual.len())
            .filter(|&i| m.type_of(&actual[i]) == t)
            .collect();
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
    let wanted: Vec<Wanted> = e
        .iter()
        .map(|&i| {
            let keys = m.keys_of(rule, &expected[i]);
            let forms = keys
                .iter()
                .map(|k| field_forms(m, &expected[i], k))
                .collect();
            Wanted {
                index: i,
                keys,
                forms,
            }
        })
        .collect();
    // The extracted records' identity tuples, per distinct list of identity fields (one list
    // unless the type has no schema), each indexed by its tuple.
    let mut tuples: HashMap<&[String], Extracted> = HashMap::new();
    // Candidate pairs: (position in `e`, position in `a`, similarity).
    let mut edges: Vec<(usize, usize, f64)> = Vec::new();
    for (wi, w) in wanted.iter().enumerate() {
        let (vals, index) = tuples.entry(&w.keys).or_insert_with(|| {
            let mut index: HashMap<String, Vec<usize>> = HashMap::with_capacity(a.len());
            for (aj, &j) in a.iter().enumerate() {
                index
                    .entry(tuple_key(m, &actual[j], &w.keys))
                    .or_default()
                    .push(aj);
            }
            (Vec::new(), index)
        });
        let combinations: usize = w.forms.iter().map(Vec::len).product();
        // Field by field, for the comparisons the index cannot answer.
        if vals.is_empty() && (combinations > MAX_COMBINATIONS || m.fuzzy < 1.0) {
            *vals = a
                .iter()
                .map(|&j| {
                    w.keys
                        .iter()
                        .map(|k| field_text(m, &actual[j], k))
                        .collect()
                })
                .collect();
        }
        let first = edges.len();
        if combinations == 1 {
            let key = joined(w.forms.iter().map(|f| &f[0]));
            for &aj in index.get(&key).into_iter().flatten() {
                edges.push((wi, aj, 1.0));
            }
        } else if combinations <= MAX_COMBINATIONS {
            for_each_combination(&w.forms, &mut |tuple| {
                for &aj in index.get(&joined(tuple)).into_iter().flatten() {
                    if !edges[first..].iter().any(|&(_, x, _)| x == aj) {
                        edges.push((wi, aj, 1.0));
                    }
                }
            });
        } else {
            for (aj, v) in vals.iter().enumerate() {
                if v.iter().zip(&w.forms).all(|(x, forms)| forms.contains(x)) {
                    edges.push((wi, aj, 1.0));
                }
            }
        }
        if m.fuzzy < 1.0 {
            for (aj, v) in vals.iter().enumerate() {
                if edges[first..].iter().any(|&(_, x, _)| x == aj) {
                    continue;
                }
                if let Some(s) = fuzzy_similarity(&w.forms, v, m.fuzzy) {
                    edges.push((wi, aj, s));
                }
            }
        }
    }
    assign(wanted.len(), a.len(), &edges)
        .into_iter()
        .map(|(wi, aj, similarity)| Pair {
            expected: wanted[wi].index,
            actual: a[aj],
            similarity,
        })
        .collect()
}

/// The similarity of a pair when every field reaches `threshold` (a field's best form counts),
/// else `None`.
fn fuzzy_similarity(forms: &[Vec<String>], values: &[String], threshold: f64) -> Option<f64> {
    let mut lowest = 1.0f64;
    for (forms, v) in forms.iter().zip(values) {
        // Equal forms (a field missing on both sides included) are exact, as in the index.
        let best = forms
            .iter()
            .filter(|f| {
                *f == v || f.as_str() != MISSING && v != MISSING && may_reach(f, v, threshold)
            })
            .map(|f| similarity(f, v))
            .fold(None, |acc: Option<f64>, s| {
                Some(acc.map_or(s, |a| a.max(s)))
            })?;
        if best < threshold {
            return None;
        }
        lowest = lowest.min(best);
    }
    Some(lowest)
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

/// The optimal one-to-one choice among candidate `edges` between `n` expected and `k` extracted
/// records: the most pairs, then the highest total similarity. Each connected group of
/// candidates is solved on its own; a group of one candidate needs no solving.
fn assign(n: usize, k: usize, edges: &[(usize, usize, f64)]) -> Vec<(usize, usize, f64)> {
    // Union-find over expected 0..n and extracted n..n+k.
    let mut parent: Vec<usize> = (0..n + k).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for &(i, j, _) in edges {
        let (ri, rj) = (find(&mut parent, i), find(&mut parent, n + j));
        if ri != rj {
            parent[ri] = rj;
        }
    }
    let mut groups: BTreeMap<usize, Vec<(usize, usize, f64)>> = BTreeMap::new();
    for &edge in edges {
        let root = find(&mut parent, edge.0);
        groups.entry(root).or_default().push(edge);
    }
    let mut out = Vec::new();
    for group in groups.into_values() {
        if group.len() == 1 {
            out.push(group[0]);
            continue;
        }
        let mut rows: Vec<usize> = group.iter().map(|e| e.0).collect();
        let mut cols: Vec<usize> = group.iter().map(|e| e.1).collect();
        rows.sort_unstable();
        rows.dedup();
        cols.sort_unstable();
        cols.dedup();
        // Kuhn–Munkres needs no more rows than columns: solve the transposed problem if not.
        let transposed = rows.len() > cols.len();
        let (r, c) = if transposed {
            (&cols, &rows)
        } else {
            (&rows, &cols)
        };
        // A pair is worth far more than any similarity: the most pairs first, then the closest.
        const PAIR: i64 = 1_000_000_000;
        let mut weights = vec![0i64; r.len() * c.len()];
        let mut sims = vec![0f64; r.len() * c.len()];
        for &(i, j, s) in &group {
            let (x, y) = if transposed { (j, i) } else { (i, j) };
            let (ri, ci) = (
                r.binary_search(&x).unwrap_or_default(),
                c.binary_search(&y).unwrap_or_default(),
            );
            weights[ri * c.len() + ci] = PAIR + (s * 1_000_000.0).round() as i64;
            sims[ri * c.len() + ci] = s;
        }
        let Ok(matrix) = pathfinding::matrix::Matrix::from_vec(r.len(), c.len(), weights.clone())
        else {
            continue;
        };
        let (_, chosen) = pathfinding::kuhn_munkres::kuhn_munkres(&matrix);
        for (ri, ci) in chosen.into_iter().enumerate() {
            if weights[ri * c.len() + ci] == 0 {
                continue;
            }
            let s = sims[ri * c.len() + ci];
            out.push(if transposed {
                (c[ci], r[ri], s)
            } else {
                (r[ri], c[ci], s)
            });
        }
    }
    out
}

/// An input document, ready for grounding lookups.
pub struct Grounding {
    /// The normalised text with a space at each end, so a lookup can ask for whole words.
    text: String,
    words: Vec<String>,
    normalize: bool,
    fuzzy: f64,
}

impl Grounding {
    pub fn new(m: &Matcher, input: &str) -> Grounding {
        let norm = if m.normalize {
            normalize(input)
        } else {
            input.to_string()
        };
        Grounding {
            words: norm.split_whitespace().map(str::to_string).collect(),
            text: format!(" {norm} "),
            normalize: m.normalize,
            fuzzy: m.ground_fuzzy,
        }
    }

    /// Whether `value` appears in the input: as whole words after normalisation, else as a run of
    /// words (one more or one fewer than its own) reaching the grounding similarity.
    pub fn contains(&self, value: &str) -> bool {
        let v = if self.normalize {
            normalize(value)
        } else {
            value.to_string()
        };
        if v.is_empty() || self.text.contains(&format!(" {v} ")) {
            return true;
        }
        let k = v.split_whitespace().count();
        (k.saturating_sub(1).max(1)..=k + 1).any(|n| {
            self.words.windows(n).any(|w| {
                let window = w.join(" ");
                may_reach(&window, &v, self.fuzzy) && similarity(&window, &v) >= self.fuzzy
            })
        })
    }

    /// The extracted records (indices) with a grounding field whose text is not in the input.
    pub fn ungrounded(&self, m: &Matcher, actual: &[Value]) -> Vec<usize> {
        (0..actual.len())
            .filter(|&i| {
                let o = &actual[i];
                let rule = m.rule(m.type_of(o));
                m.ground_of(rule, o)
                    .iter()
                    .filter_map(|f| o.get(f).and_then(Value::as_str))
                    .any(|s| !self.contains(s))
            })
            .collect()
    }
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
