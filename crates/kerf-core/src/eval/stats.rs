//! How much to trust an eval's figures: spread over repeats, bootstrap intervals over rows
//! (the rows are the sample; a different corpus of the same kind would give other figures),
//! and how alike repeated outputs are.
//!
//! The bootstrap draws from a fixed seed with ChaCha8 (its stream is specified, unlike
//! `StdRng`'s), so a report is the same every time it is computed from the same stored replies
//! — `kerf eval show` and `rescore` reproduce `kerf eval` bit for bit.

use std::collections::BTreeSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::score::Counts;

/// Resamples per interval: enough for a steady 95% interval's ends at two decimals.
pub const RESAMPLES: usize = 2000;

/// The bootstrap's seed ("kerf").
const SEED: u64 = 0x6b65_7266;

/// Mean and sample standard deviation (`n − 1`; 0 for one value). `None` for no values.
pub fn mean_sd(xs: &[f64]) -> Option<(f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() == 1 {
        return Some((mean, 0.0));
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, var.sqrt()))
}

/// A 95% percentile bootstrap interval of `stat` over `n` rows: `stat` gets the row indices of
/// one resample (drawn with replacement) and may decline one (`None`: nothing to measure in
/// it). `None` with fewer than two rows, or when most resamples were declined.
pub fn bootstrap(n: usize, stat: impl Fn(&[usize]) -> Option<f64>) -> Option<[f64; 2]> {
    if n < 2 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut sample = vec![0; n];
    let mut values = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        for s in &mut sample {
            *s = rng.random_range(0..n);
        }
        if let Some(v) = stat(&sample) {
            values.push(v);
        }
    }
    if values.len() * 2 < RESAMPLES {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some([quantile(&values, 0.025), quantile(&values, 0.975)])
}

/// The `q` quantile of sorted `values`, interpolating between neighbours (R's type 7).
fn quantile(values: &[f64], q: f64) -> f64 {
    let at = q * (values.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    values[lo] + (values[hi] - values[lo]) * (at - lo as f64)
}

/// Micro F1 over the rows `sample` picks from `rows`.
pub fn micro_f1(rows: &[Counts], sample: &[usize]) -> Option<f64> {
    let mut c = Counts::default();
    for &i in sample {
        c.add(&rows[i]);
    }
    c.f1()
}

/// |a ∩ b| / |a ∪ b|; two empty sets are the same set (1).
pub fn jaccard<T: Ord>(a: &BTreeSet<T>, b: &BTreeSet<T>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

/// The mean Jaccard index over every pair of `sets` (`None` with fewer than two).
pub fn mean_pairwise_jaccard<T: Ord>(sets: &[BTreeSet<T>]) -> Option<f64> {
    let mut sum = 0.0;
    let mut pairs = 0usize;
    for (i, a) in sets.iter().enumerate() {
        for b in &sets[i + 1..] {
            sum += jaccard(a, b);
            pairs += 1;
        }
    }
    (pairs > 0).then(|| sum / pairs as f64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn counts(tp: u64, fp: u64, fn_: u64) -> Counts {
        Counts { tp, fp, fn_ }
    }

    #[test]
    fn mean_and_sample_sd() {
        assert_eq!(mean_sd(&[]), None);
        assert_eq!(mean_sd(&[0.5]), Some((0.5, 0.0)));
        let (m, sd) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(m, 5.0);
        // Sum of squares 32 over n − 1 = 7.
        assert!((sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn jaccard_of_sets() {
        let a: BTreeSet<_> = [1, 2, 3].into();
        let b: BTreeSet<_> = [2, 3, 4].into();
        assert_eq!(jaccard(&a, &b), 0.5);
        assert_eq!(jaccard::<i32>(&BTreeSet::new(), &BTreeSet::new()), 1.0);
        assert_eq!(mean_pairwise_jaccard(std::slice::from_ref(&a)), None);
        // (0.5 + 1/3 + 0.5) / 3 with c = {3, 4}.
        let c: BTreeSet<_> = [3, 4].into();
        let m = mean_pairwise_jaccard(&[a, b, c]).unwrap();
        assert!((m - (0.5 + 0.25 + 2.0 / 3.0) / 3.0).abs() < 1e-12, "{m}");
    }

    #[test]
    fn the_interval_holds_the_figure_is_reproducible_and_narrows_with_agreement() {
        // Rows that all score the same: no spread, whatever is drawn.
        let same = vec![counts(3, 1, 1); 10];
        let ci = bootstrap(same.len(), |s| micro_f1(&same, s)).unwrap();
        assert_eq!(ci, [0.75, 0.75]);
        // Mixed rows: the interval holds the full-sample figure, and the same seed draws it
        // again bit for bit.
        let mixed: Vec<Counts> = (0..20)
            .map(|i| {
                if i % 3 == 0 {
                    counts(0, 2, 4)
                } else {
                    counts(5, 0, 1)
                }
            })
            .collect();
        let all: Vec<usize> = (0..mixed.len()).collect();
        let f1 = micro_f1(&mixed, &all).unwrap();
        let [lo, hi] = bootstrap(mixed.len(), |s| micro_f1(&mixed, s)).unwrap();
        assert!(lo < f1 && f1 < hi, "{lo} < {f1} < {hi}");
        assert_eq!(
            bootstrap(mixed.len(), |s| micro_f1(&mixed, s)),
            Some([lo, hi])
        );
        assert_eq!(bootstrap(1, |s| micro_f1(&mixed, s)), None);
        // Nothing to measure in any resample.
        assert_eq!(bootstrap(5, |_| None), None);
    }
}
