//! Grounding: whether an extracted record's text is found in the input document, by one pass
//! of Myers' bit-parallel search over the document's words.

use super::*;

/// An input document, ready for grounding lookups.
pub struct Grounding {
    /// The normalised text with a space at each end, so a lookup can ask for whole words.
    pub(super) text: String,
    /// The text's words joined by single spaces, but for characters that stand alone side by
    /// side (`normalize::compact`): the runs of words a fuzzy lookup compares are its
    /// substrings. In characters.
    pub(super) joined: Vec<char>,
    /// Each word's span in `joined`, in characters.
    pub(super) words: Vec<(usize, usize)>,
    pub(super) normalize: bool,
    pub(super) fuzzy: f64,
}

impl Grounding {
    pub fn new(m: &Matcher, input: &str) -> Grounding {
        let norm = crate::eval::normalize::as_grounded(input, m.normalize);
        // The words joined as similarity reads them (`compact`): the runs a fuzzy lookup
        // compares are substrings of this.
        let mut joined = Vec::with_capacity(norm.len());
        let mut words = Vec::new();
        let mut before: Option<&str> = None;
        for w in norm.split_whitespace() {
            if before.is_some_and(|b| crate::eval::normalize::apart(b, w)) {
                joined.push(' ');
            }
            before = Some(w);
            let start = joined.len();
            joined.extend(w.chars());
            words.push((start, joined.len()));
        }
        Grounding {
            text: format!(" {norm} "),
            joined,
            words,
            normalize: m.normalize,
            fuzzy: m.ground_fuzzy,
        }
    }

    /// Whether `value` appears in the input: as whole words after normalisation, else as a run of
    /// words (one more or one fewer than its own) reaching the grounding similarity.
    pub fn contains(&self, value: &str) -> bool {
        let v = crate::eval::normalize::as_grounded(value, self.normalize);
        // A value with no word in it has nothing to look for.
        if v.split_whitespace().next().is_none()
            || memchr::memmem::find(self.text.as_bytes(), format!(" {v} ").as_bytes()).is_some()
        {
            return true;
        }
        let k = v.split_whitespace().count();
        let pattern: Vec<char> = crate::eval::normalize::compact(v.split_whitespace())
            .chars()
            .collect();
        self.near(&pattern, k.saturating_sub(1).max(1), k + 1)
    }

    /// Whether a run of `fewest..=most` words is within the grounding similarity of `pattern`:
    /// the same runs, and the same similarity, the lookup compared one by one before, decided
    /// without a full distance per run.
    ///
    /// 1. A run whose length alone rules it out is skipped (the edits are at least the
    ///    difference in length).
    /// 2. One semi-global pass of Myers' algorithm over the text gives, at every word's end,
    ///    the distance of the pattern to the closest substring ending there: no run ending there
    ///    can be closer, so a run whose bound that already exceeds is ruled out. An invented
    ///    name is ruled out everywhere by this one pass, linear in the text.
    /// 3. Each remaining start gets one anchored pass, which gives the exact distance to every
    ///    run from it at once, stopped once no run from it can come within its bound.
    pub(super) fn near(&self, pattern: &[char], fewest: usize, most: usize) -> bool {
        let words = self.words.len();
        let most = most.min(words);
        let Some(myers) = Myers::new(pattern) else {
            return false;
        };
        let m = pattern.len();
        // The most edits run (i, n) may have, when its length leaves it a chance.
        let bound = |i: usize, n: usize| -> Option<usize> {
            let len = self.words[i + n - 1].1 - self.words[i].0;
            max_edits(len.max(m), self.fuzzy).filter(|&k| len.abs_diff(m) <= k)
        };
        let mut last_end: Option<usize> = None;
        for n in fewest..=most {
            for i in 0..=words - n {
                if bound(i, n).is_some() {
                    last_end = Some(last_end.map_or(i + n - 1, |e: usize| e.max(i + n - 1)));
                }
            }
        }
        let Some(last_end) = last_end else {
            return false;
        };
        // The closest substring's distance at each word's end, up to the last one needed.
        let mut closest = vec![usize::MAX; last_end + 1];
        let mut next = 0;
        myers.scan(&self.joined[..self.words[last_end].1], false, |j, d| {
            while next <= last_end && self.words[next].1 == j {
                closest[next] = d;
                next += 1;
            }
            next <= last_end
        });
        for i in 0..words {
            // The runs from word i still in reach: (length from its start, bound).
            let runs: Vec<(usize, usize)> = (fewest..=most)
                .filter(|&n| i + n <= words)
                .filter_map(|n| {
                    let end = i + n - 1;
                    bound(i, n)
                        .filter(|&k| closest[end.min(last_end)] <= k && end <= last_end)
                        .map(|k| (self.words[end].1 - self.words[i].0, k))
                })
                .collect();
            let Some(&(reach, _)) = runs.iter().max_by_key(|r| r.0) else {
                continue;
            };
            let loosest = runs.iter().map(|r| r.1).max().unwrap_or(0);
            let start = self.words[i].0;
            let mut found = false;
            myers.scan(&self.joined[start..start + reach], true, |j, d| {
                if runs.iter().any(|&(len, k)| len == j && d <= k) {
                    found = true;
                    return false;
                }
                // The distance to a longer prefix falls by at most one per character.
                d.saturating_sub(reach - j) <= loosest
            });
            if found {
                return true;
            }
        }
        false
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
