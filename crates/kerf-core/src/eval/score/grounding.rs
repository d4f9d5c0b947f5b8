//! Grounding: whether an extracted record's text is found in the input document, by one pass
//! of Myers' bit-parallel search over the document's words.

use super::*;
use crate::eval::distance::runs_within;

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
        let (joined, words) = crate::eval::normalize::compact_spans(norm.split_whitespace());
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

    /// Whether a run of `fewest..=most` words is within the grounding similarity of `pattern`
    /// ([`runs_within`], stopped at the first).
    pub(super) fn near(&self, pattern: &[char], fewest: usize, most: usize) -> bool {
        let mut found = false;
        runs_within(
            &self.joined,
            &self.words,
            pattern,
            fewest..=most,
            self.fuzzy,
            |_, _, _| {
                found = true;
                false
            },
        );
        found
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
