//! Fuzzy candidates by the pigeonhole rule: the classes of one field indexed by text, length
//! and segments, so a lookup compares only the classes that could be within the threshold.

use super::*;

/// The classes of one field by text, by length, and by the segments of the pigeonhole rule:
/// when a text `v` of `n` characters is cut into `k + 1` segments, a text within `k` edits of it
/// contains one of them unchanged, shifted by at most `k` (each edit touches one segment). For
/// every length `n` and bound `k` a lookup needs, the texts of length `n` are cut once and their
/// segments hashed; a lookup then hashes the substrings of its form at the segments' places.
pub(super) struct FieldIndex {
    pub(super) exact: HashMap<Vec<char>, Vec<usize>>,
    /// Present texts (not missing) by length in characters.
    pub(super) by_len: HashMap<usize, Vec<usize>>,
    /// The lengths in `by_len`, ascending.
    pub(super) lengths: Vec<usize>,
    /// Classes by [`segment_hash`] of (length, bound, segment number, segment).
    pub(super) segments: HashMap<u64, Vec<usize>>,
    /// The (length, bound) pairs cut so far.
    pub(super) cut: HashSet<(usize, usize)>,
}

/// Segment `i` of `k + 1` of a text of `n` characters: (start, length), shorter ones first.
pub(super) fn segment(n: usize, k: usize, i: usize) -> (usize, usize) {
    let parts = k + 1;
    let (base, short) = (n / parts, parts - n % parts);
    if i < short {
        (i * base, base)
    } else {
        (short * base + (i - short) * (base + 1), base + 1)
    }
}

/// A hash of a segment and where it came from (FxHash's mixing step: fast, and a collision only
/// adds a candidate that the distance then rules out).
pub(super) fn segment_hash(n: usize, k: usize, i: usize, text: &[char]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |h: u64, x: u64| (h.rotate_left(5) ^ x).wrapping_mul(K);
    let mut h = mix(mix(mix(0, n as u64), k as u64), i as u64);
    for &c in text {
        h = mix(h, u64::from(c));
    }
    h
}

impl FieldIndex {
    pub(super) fn new(texts: &[Vec<Vec<char>>], field: usize) -> FieldIndex {
        let mut exact: HashMap<Vec<char>, Vec<usize>> = HashMap::new();
        let mut by_len: HashMap<usize, Vec<usize>> = HashMap::new();
        for (c, fields) in texts.iter().enumerate() {
            let Some(text) = fields.get(field) else {
                continue;
            };
            exact.entry(text.clone()).or_default().push(c);
            if *text != MISSING_CHARS {
                by_len.entry(text.len()).or_default().push(c);
            }
        }
        let mut lengths: Vec<usize> = by_len.keys().copied().collect();
        lengths.sort_unstable();
        FieldIndex {
            exact,
            by_len,
            lengths,
            segments: HashMap::new(),
            cut: HashSet::new(),
        }
    }

    /// Visits lists of classes that hold every class whose text in this field may be within
    /// reach of `form` at `threshold` (more may come, some twice).
    pub(super) fn probe(
        &mut self,
        texts: &[Vec<Vec<char>>],
        field: usize,
        form: &[char],
        threshold: f64,
        visit: &mut dyn FnMut(&[usize]),
    ) {
        if *form == MISSING_CHARS {
            // Missing is only ever equal to missing.
            if let Some(list) = self.exact.get(form) {
                visit(list);
            }
            return;
        }
        let m = form.len();
        for at in 0..self.lengths.len() {
            let n = self.lengths[at];
            let longer = m.max(n);
            let Some(k) = max_edits(longer, threshold) else {
                continue;
            };
            if m.abs_diff(n) > k {
                continue;
            }
            if k == 0 {
                if let Some(list) = self.exact.get(form) {
                    visit(list);
                }
                continue;
            }
            let Some(all) = self.by_len.get(&n) else {
                continue;
            };
            // Too short to cut into k + 1 non-empty segments, or more lookups than texts of
            // this length: every one is a candidate.
            let lookups = (k + 1).saturating_mul(2 * k + 1);
            if n <= k || lookups >= all.len() {
                visit(all);
                continue;
            }
            if self.cut.insert((n, k)) {
                for &c in all {
                    let text = &texts[c][field];
                    for i in 0..=k {
                        let (p, len) = segment(n, k, i);
                        self.segments
                            .entry(segment_hash(n, k, i, &text[p..p + len]))
                            .or_default()
                            .push(c);
                    }
                }
            }
            // The shift of an unchanged segment is the insertions less the deletions before
            // it, and the rest of the length difference comes after it: |s| + |Δ − s| ≤ k.
            let (k_, delta) = (k as isize, m as isize - n as isize);
            for i in 0..=k {
                let (p, len) = segment(n, k, i);
                for shift in -k_..=k_ {
                    if shift.abs() + (delta - shift).abs() > k_ {
                        continue;
                    }
                    let start = p as isize + shift;
                    if start < 0 || start as usize + len > m {
                        continue;
                    }
                    let start = start as usize;
                    let h = segment_hash(n, k, i, &form[start..start + len]);
                    if let Some(list) = self.segments.get(&h) {
                        visit(list);
                    }
                }
            }
        }
    }
}
