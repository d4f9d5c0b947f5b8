//! Edit distances that stop early: what fuzzy matching and grounding need without ever
//! computing a full distance they will throw away.
//!
//! Both compare by [`similarity`](super::normalize::similarity), strsim's normalised Levenshtein
//! `1 − d ÷ L` (`d` edits over characters, `L` the longer length in characters), against a
//! threshold. For a given `L` the accepted distances are `0..=max_edits(L, threshold)`, so a
//! pair can be decided by a distance bounded by that number, and everything here gives exactly
//! the figures strsim gives whenever the pair is accepted:
//!
//! - [`max_edits`]: the bound, found by evaluating strsim's own floating-point expression, so
//!   no rounding can make it disagree with `similarity(..) >= threshold`;
//! - [`levenshtein_within`]: Ukkonen's banded Levenshtein, which only fills the diagonals within
//!   the bound and stops as soon as a whole row exceeds it;
//! - [`Myers`]: Myers' bit-parallel edit distance (in Hyyrö's block form, any pattern length),
//!   64 cells per machine word: the distance of a pattern to every prefix of a text, or
//!   (semi-global) to the closest substring ending at every position, in one pass over the
//!   text; [`Myers::within`] stops as soon as the distance must exceed a bound.

use std::collections::HashMap;

/// `1 − d ÷ longer`, exactly as `strsim::normalized_levenshtein` computes it from the distance.
pub fn similarity_from(distance: usize, longer: usize) -> f64 {
    if longer == 0 {
        return 1.0;
    }
    1.0 - distance as f64 / longer as f64
}

/// The most edits two texts whose longer one has `longer` characters may differ by and still
/// reach `threshold` similarity; `None` when not even equal texts reach it (a threshold above 1,
/// or NaN).
///
/// Found by testing strsim's expression itself: `1 − d ÷ L` only falls as `d` grows (IEEE
/// division and subtraction are monotone), so the accepted `d` are exactly `0..=` the result.
pub fn max_edits(longer: usize, threshold: f64) -> Option<usize> {
    let accepts = |d: usize| similarity_from(d, longer) >= threshold;
    if !accepts(0) {
        return None;
    }
    if accepts(longer) {
        return Some(longer);
    }
    // `accepts(lo)` and `!accepts(hi)` throughout: a binary search, never off by a rounding.
    let (mut lo, mut hi) = (0, longer);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if accepts(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// The Levenshtein distance of `a` and `b` (in characters) when it is at most `bound`, else
/// `None`: Ukkonen's band of `2·bound + 1` diagonals, stopped as soon as a whole row of the band
/// exceeds `bound` (the distance along any alignment never decreases, and a cell outside the
/// band is at least its distance from the diagonal). O(`bound` × length) time, O(length) space.
pub fn levenshtein_within(a: &[char], b: &[char], bound: usize) -> Option<usize> {
    // A common prefix and suffix never change the distance (an optimal alignment matches them).
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[prefix..], &b[prefix..]);
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a, b) = (&a[..a.len() - suffix], &b[..b.len() - suffix]);
    // Rows over the shorter text, the row vector over the longer.
    let (a, b) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let (n, m) = (a.len(), b.len());
    if m - n > bound {
        return None;
    }
    if n == 0 {
        return Some(m);
    }
    // Cells are capped at `over`, which stands for "more than the bound" (and for every cell
    // outside the band: row 0 beyond the bound, and the cells no row writes, keep it).
    let over = bound.saturating_add(1);
    let mut row: Vec<usize> = (0..=m).map(|j| j.min(over)).collect();
    for i in 1..=n {
        let lo = i.saturating_sub(bound).max(1);
        let hi = (i + bound).min(m);
        // D[i-1][lo-1], then D[i][lo-1]: the left edge of the band (column 0 is D[i][0] = i).
        let mut diagonal = row[lo - 1];
        let mut left = if lo == 1 { i.min(over) } else { over };
        row[lo - 1] = left;
        let mut lowest = left;
        let x = a[i - 1];
        for j in lo..=hi {
            let up = row[j];
            let cell = if b[j - 1] == x {
                diagonal
                    .min(up.saturating_add(1))
                    .min(left.saturating_add(1))
            } else {
                diagonal.min(up).min(left).saturating_add(1)
            }
            .min(over);
            diagonal = up;
            row[j] = cell;
            left = cell;
            lowest = lowest.min(cell);
        }
        if lowest > bound {
            return None;
        }
    }
    let d = row[m];
    (d <= bound).then_some(d)
}

const WORD: usize = 64;

/// A pattern ready for Myers' bit-parallel edit distance: per block of 64 pattern characters,
/// the bit mask of the positions holding each character.
pub struct Myers {
    /// Pattern length in characters (more than 0).
    len: usize,
    blocks: usize,
    /// `ascii[c * blocks + b]`: block `b`'s mask for ASCII character `c`.
    ascii: Vec<u64>,
    other: HashMap<char, Vec<u64>>,
    /// The mask of a character the pattern lacks.
    none: Vec<u64>,
    /// The bit of the pattern's last character in the last block.
    last: u64,
}

impl Myers {
    /// `None` for an empty pattern (its distance to a text is the text's length).
    pub fn new(pattern: &[char]) -> Option<Myers> {
        if pattern.is_empty() {
            return None;
        }
        let blocks = pattern.len().div_ceil(WORD);
        let mut ascii = vec![0u64; 128 * blocks];
        let mut other: HashMap<char, Vec<u64>> = HashMap::new();
        for (i, &c) in pattern.iter().enumerate() {
            let (b, bit) = (i / WORD, 1u64 << (i % WORD));
            if c.is_ascii() {
                ascii[c as usize * blocks + b] |= bit;
            } else {
                other.entry(c).or_insert_with(|| vec![0; blocks])[b] |= bit;
            }
        }
        Some(Myers {
            len: pattern.len(),
            blocks,
            ascii,
            other,
            none: vec![0; blocks],
            last: 1u64 << ((pattern.len() - 1) % WORD),
        })
    }

    #[inline]
    fn masks(&self, c: char) -> &[u64] {
        if c.is_ascii() {
            let at = c as usize * self.blocks;
            &self.ascii[at..at + self.blocks]
        } else {
            self.other.get(&c).map_or(&self.none[..], |v| &v[..])
        }
    }

    /// Runs over `text`, calling `at(j, score)` after its `j`-th character (from 1), until `at`
    /// returns false. `score` is the edit distance of the whole pattern to `text[..j]` when
    /// `anchored` (global), else to the closest substring of `text` ending at `j` (semi-global,
    /// the start free).
    pub fn scan(&self, text: &[char], anchored: bool, mut at: impl FnMut(usize, usize) -> bool) {
        let mut score = self.len;
        if self.blocks == 1 {
            // One word: the same steps without the vectors (the usual name).
            let (mut pv, mut mv) = (u64::MAX, 0u64);
            let carry = if anchored { 1 } else { 0 };
            for (j, &c) in text.iter().enumerate() {
                score = match block(&mut pv, &mut mv, self.masks(c)[0], carry, self.last) {
                    1 => score + 1,
                    -1 => score.saturating_sub(1),
                    _ => score,
                };
                if !at(j + 1, score) {
                    return;
                }
            }
            return;
        }
        // Vertical deltas down each column: all +1 in column 0 (D[i][0] = i).
        let mut pv = vec![u64::MAX; self.blocks];
        let mut mv = vec![0u64; self.blocks];
        for (j, &c) in text.iter().enumerate() {
            let eqs = self.masks(c);
            // The horizontal delta entering the top of the first block: row 0 is D[0][j] = j
            // when anchored, 0 when any start is free.
            let mut carry: i8 = if anchored { 1 } else { 0 };
            for b in 0..self.blocks {
                let high = if b + 1 == self.blocks {
                    self.last
                } else {
                    1u64 << (WORD - 1)
                };
                carry = block(&mut pv[b], &mut mv[b], eqs[b], carry, high);
            }
            // `carry` is now the delta of the last row: D[m][j+1] − D[m][j].
            score = match carry {
                1 => score + 1,
                -1 => score.saturating_sub(1),
                _ => score,
            };
            if !at(j + 1, score) {
                return;
            }
        }
    }
}

impl Myers {
    /// The edit distance of the pattern to `text` when it is at most `bound`, else `None`:
    /// stopped as soon as the distance to the prefix read, less the characters left (each can
    /// lower it by one at most), exceeds the bound.
    pub fn within(&self, text: &[char], bound: usize) -> Option<usize> {
        let n = text.len();
        if n == 0 {
            return (self.len <= bound).then_some(self.len);
        }
        let mut out = None;
        self.scan(text, true, |j, d| {
            if j == n {
                out = (d <= bound).then_some(d);
                return false;
            }
            d.saturating_sub(n - j) <= bound
        });
        out
    }
}

/// Every run of `lengths` consecutive words of a text within `threshold` similarity of
/// `pattern`: `hit(i, n, d)` for the run of `n` words from word `i`, `d` its edits, by start and
/// then by length, until `hit` returns false. `words` are the words' spans in `joined`, in
/// characters and in order; a run's text is `joined` from its first word's start to its last's
/// end (grounding joins the words as [`compact`](super::normalize::compact) does, so that is
/// the run as similarity reads it). The same runs and the same figures a comparison run by run
/// gives, without a full distance per run:
///
/// 1. A run whose length alone rules it out is skipped (the edits are at least the difference
///    in length).
/// 2. One semi-global pass of Myers' algorithm over the text gives, at every word's end, the
///    distance of the pattern to the closest substring ending there: no run ending there can be
///    closer, so a run whose bound that already exceeds is ruled out. An invented name is ruled
///    out everywhere by this one pass, linear in the text.
/// 3. Each remaining start gets one anchored pass, which gives the exact distance to every run
///    from it at once, stopped once no run from it can come within its bound.
pub fn runs_within(
    joined: &[char],
    words: &[(usize, usize)],
    pattern: &[char],
    lengths: std::ops::RangeInclusive<usize>,
    threshold: f64,
    mut hit: impl FnMut(usize, usize, usize) -> bool,
) {
    let count = words.len();
    let (fewest, most) = (*lengths.start(), (*lengths.end()).min(count));
    let Some(myers) = Myers::new(pattern) else {
        return;
    };
    let m = pattern.len();
    // The most edits a run of each length may have (its longer side at least the pattern's),
    // found once per length: a book has millions of runs and a few hundred lengths.
    let mut most_edits: Vec<Option<usize>> = Vec::new();
    let mut edits_at = |longer: usize| -> Option<usize> {
        let at = longer - m;
        if at >= most_edits.len() {
            most_edits.extend((most_edits.len()..=at).map(|l| max_edits(m + l, threshold)));
        }
        most_edits[at]
    };
    // The most edits run (i, n) may have, when its length leaves it a chance.
    let mut bound = |i: usize, n: usize| -> Option<usize> {
        let len = words[i + n - 1].1 - words[i].0;
        edits_at(len.max(m)).filter(|&k| len.abs_diff(m) <= k)
    };
    // The last word a run its length leaves a chance ends on (looked for from the end: usually
    // the last word).
    let last_end = (0..count).rev().find(|&end| {
        (fewest.max(1)..=most).any(|n| n <= end + 1 && bound(end + 1 - n, n).is_some())
    });
    let Some(last_end) = last_end else {
        return;
    };
    // The closest substring's distance at each word's end, up to the last one needed.
    let mut closest = vec![usize::MAX; last_end + 1];
    let mut next = 0;
    myers.scan(&joined[..words[last_end].1], false, |j, d| {
        while next <= last_end && words[next].1 == j {
            closest[next] = d;
            next += 1;
        }
        next <= last_end
    });
    for i in 0..count {
        // The runs from word i still in reach: (length in characters, bound, words).
        let runs: Vec<(usize, usize, usize)> = (fewest.max(1)..=most)
            .filter(|&n| i + n <= count)
            .filter_map(|n| {
                let end = i + n - 1;
                bound(i, n)
                    .filter(|&k| end <= last_end && closest[end] <= k)
                    .map(|k| (words[end].1 - words[i].0, k, n))
            })
            .collect();
        let Some(&(reach, _, _)) = runs.iter().max_by_key(|r| r.0) else {
            continue;
        };
        let loosest = runs.iter().map(|r| r.1).max().unwrap_or(0);
        let start = words[i].0;
        let mut go_on = true;
        myers.scan(&joined[start..start + reach], true, |j, d| {
            if let Some(&(_, _, n)) = runs.iter().find(|&&(len, k, _)| len == j && d <= k) {
                go_on = hit(i, n, d);
                if !go_on {
                    return false;
                }
            }
            // The distance to a longer prefix falls by at most one per character.
            d.saturating_sub(reach - j) <= loosest
        });
        if !go_on {
            return;
        }
    }
}

/// One column step of one block (Myers 1999, in Hyyrö's and edlib's block formulation): `pv`
/// and `mv` hold the block's positive and negative vertical deltas, `eq` the rows whose pattern
/// character is the text's, `carry` the horizontal delta entering from the row above. Returns
/// the horizontal delta leaving at the row `high`.
fn block(pv: &mut u64, mv: &mut u64, eq: u64, carry: i8, high: u64) -> i8 {
    let (p, m) = (*pv, *mv);
    let negative = u64::from(carry < 0);
    let xv = eq | m;
    let eq = eq | negative;
    let xh = ((eq & p).wrapping_add(p) ^ p) | eq;
    let mut ph = m | !(xh | p);
    let mut mh = p & xh;
    let out = if ph & high != 0 {
        1
    } else if mh & high != 0 {
        -1
    } else {
        0
    };
    ph = (ph << 1) | u64::from(carry > 0);
    mh = (mh << 1) | negative;
    *pv = mh | !(xv | ph);
    *mv = ph & xv;
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    /// The textbook full table, the reference for everything above.
    fn levenshtein(a: &[char], b: &[char]) -> usize {
        let mut prev: Vec<usize> = (0..=b.len()).collect();
        for (i, x) in a.iter().enumerate() {
            let mut cur = vec![i + 1; b.len() + 1];
            for (j, y) in b.iter().enumerate() {
                cur[j + 1] = (prev[j] + usize::from(x != y))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1);
            }
            prev = cur;
        }
        prev[b.len()]
    }

    /// Seeded text over a small alphabet (so near matches are common), with a non-ASCII letter.
    struct Texts(u64);

    impl Texts {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        fn text(&mut self, max: usize) -> Vec<char> {
            let n = self.below(max + 1);
            (0..n)
                .map(|_| ['a', 'b', 'c', ' ', 'é'][self.below(5)])
                .collect()
        }
    }

    #[test]
    fn max_edits_agrees_with_strsims_expression_at_every_length() {
        for threshold in [
            0.0,
            0.1,
            0.5,
            0.8,
            0.85,
            0.9,
            11.0 / 12.0,
            0.99,
            1.0,
            1.5,
            -0.5,
        ] {
            for longer in 0..300 {
                let k = max_edits(longer, threshold);
                for d in 0..=longer {
                    let s = if longer == 0 {
                        1.0
                    } else {
                        1.0 - d as f64 / longer as f64
                    };
                    assert_eq!(
                        k.is_some_and(|k| d <= k),
                        s >= threshold,
                        "L {longer}, d {d}, threshold {threshold}"
                    );
                }
            }
        }
        assert_eq!(max_edits(10, f64::NAN), None);
    }

    #[test]
    fn banded_levenshtein_is_exact_within_the_bound_and_none_beyond() {
        let mut g = Texts(0x1e5e);
        for _ in 0..4000 {
            let (a, b) = (g.text(12), g.text(12));
            let d = levenshtein(&a, &b);
            for bound in 0..14 {
                let got = levenshtein_within(&a, &b, bound);
                assert_eq!(got, (d <= bound).then_some(d), "{a:?} {b:?} bound {bound}");
            }
        }
        assert_eq!(
            levenshtein_within(&chars("kitten"), &chars("sitting"), 3),
            Some(3)
        );
        assert_eq!(
            levenshtein_within(&chars("kitten"), &chars("sitting"), 2),
            None
        );
    }

    #[test]
    fn myers_gives_every_prefix_distance_and_every_best_substring() {
        let mut g = Texts(0xb17);
        for round in 0..600 {
            // Patterns across block edges: up to 150 characters is three blocks.
            let pattern = if round % 3 == 0 {
                g.text(150)
            } else {
                g.text(20)
            };
            let text = g.text(60);
            let Some(myers) = Myers::new(&pattern) else {
                continue;
            };
            let mut anchored = vec![];
            myers.scan(&text, true, |j, s| {
                anchored.push((j, s));
                true
            });
            let mut free = vec![];
            myers.scan(&text, false, |j, s| {
                free.push((j, s));
                true
            });
            for j in 1..=text.len() {
                assert_eq!(anchored[j - 1], (j, levenshtein(&pattern, &text[..j])));
                let best = (0..=j)
                    .map(|s| levenshtein(&pattern, &text[s..j]))
                    .min()
                    .unwrap();
                assert_eq!(free[j - 1], (j, best), "{pattern:?} in {text:?} at {j}");
            }
        }
    }

    #[test]
    fn myers_within_a_bound_is_the_banded_distance() {
        let mut g = Texts(0x3e3e);
        for _ in 0..3000 {
            let (a, b) = (g.text(80), g.text(80));
            let Some(myers) = Myers::new(&a) else {
                continue;
            };
            for bound in [0, 1, 2, 5, 10, 40, 90] {
                assert_eq!(
                    myers.within(&b, bound),
                    levenshtein_within(&a, &b, bound),
                    "{a:?} {b:?} {bound}"
                );
            }
        }
    }

    #[test]
    fn a_scan_stops_when_told() {
        let myers = Myers::new(&chars("abc")).unwrap();
        let mut seen = 0;
        myers.scan(&chars("xxxxxxxx"), false, |j, _| {
            seen = j;
            j < 3
        });
        assert_eq!(seen, 3);
    }
}
