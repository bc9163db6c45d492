//! Per-window RTT statistics: collect samples, then finish them into exact
//! min/mean/max/p50/p99/sum and a sparse histogram in the shared bucket
//! layout ([`boltwatch_proto::histogram`]).
//!
//! Pure. A window holds at most a few thousand samples (one second of
//! probes), so the samples are kept and sorted: percentiles are exact, not
//! sketched.
//!
//! Percentiles use the nearest-rank definition: the p-th percentile of `n`
//! sorted samples is the sample at 1-based rank `ceil(p/100 * n)` (rank 1
//! for p = 0). It is always one of the samples, never an interpolation, and
//! p100 is the maximum.

use std::collections::BTreeMap;

use boltwatch_proto::histogram::bucket_index;
use boltwatch_proto::v1::{HistogramBucket, RttSummary};

/// Samples of one window, in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accumulator {
    samples: Vec<u64>,
}

/// The statistics of a finished window; all zero when it had no samples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min_ns: u64,
    /// Mean, rounded to the nearest nanosecond.
    pub mean_ns: u64,
    /// Largest sample.
    pub max_ns: u64,
    /// Nearest-rank median.
    pub p50_ns: u64,
    /// Nearest-rank 99th percentile.
    pub p99_ns: u64,
    /// Sum of all samples (saturating).
    pub sum_ns: u64,
    /// Sparse histogram, ascending by index, counts summing to `count`.
    pub buckets: Vec<HistogramBucket>,
}

impl Accumulator {
    /// An empty window.
    pub fn new() -> Accumulator {
        Accumulator::default()
    }

    /// Adds one sample.
    pub fn add(&mut self, ns: u64) {
        self.samples.push(ns);
    }

    /// Number of samples so far.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// True when no sample was added.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The window's statistics.
    pub fn finish(mut self) -> Summary {
        if self.samples.is_empty() {
            return Summary::default();
        }
        self.samples.sort_unstable();
        let s = &self.samples;
        let n = s.len() as u64;
        let sum: u128 = s.iter().map(|&x| x as u128).sum();
        let mut buckets: BTreeMap<i32, u64> = BTreeMap::new();
        for &x in s {
            *buckets.entry(bucket_index(x)).or_default() += 1;
        }
        Summary {
            count: n,
            min_ns: s[0],
            mean_ns: ((sum + n as u128 / 2) / n as u128) as u64,
            max_ns: s[s.len() - 1],
            p50_ns: nearest_rank(s, 50, 100),
            p99_ns: nearest_rank(s, 99, 100),
            sum_ns: sum.min(u64::MAX as u128) as u64,
            buckets: buckets
                .into_iter()
                .map(|(index, count)| HistogramBucket { index, count })
                .collect(),
        }
    }
}

impl Summary {
    /// `window` with these statistics as its figures (min to buckets); the
    /// count is the window's own `received`.
    pub fn into_rtt(self, window: RttSummary) -> RttSummary {
        RttSummary {
            min_ns: self.min_ns,
            mean_ns: self.mean_ns,
            max_ns: self.max_ns,
            p50_ns: self.p50_ns,
            p99_ns: self.p99_ns,
            sum_ns: self.sum_ns,
            buckets: self.buckets,
            ..window
        }
    }
}

/// Nearest-rank percentile `num/den` (e.g. 99/100) of ascending `sorted`:
/// the sample at 1-based rank `ceil(num/den * n)`, at least rank 1.
///
/// # Panics
/// If `sorted` is empty or `den` is zero.
pub fn nearest_rank(sorted: &[u64], num: u64, den: u64) -> u64 {
    let n = sorted.len() as u128;
    let rank = (num as u128 * n).div_ceil(den as u128).clamp(1, n);
    sorted[(rank - 1) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(xs: &[u64]) -> Summary {
        let mut a = Accumulator::new();
        for &x in xs {
            a.add(x);
        }
        a.finish()
    }

    #[test]
    fn empty_is_zero() {
        assert_eq!(Accumulator::new().finish(), Summary::default());
    }

    #[test]
    fn one_sample() {
        let s = summary(&[40_000]);
        assert_eq!(
            (s.count, s.min_ns, s.mean_ns, s.max_ns, s.p50_ns, s.p99_ns, s.sum_ns),
            (1, 40_000, 40_000, 40_000, 40_000, 40_000, 40_000)
        );
        assert_eq!(
            s.buckets,
            vec![HistogramBucket {
                index: bucket_index(40_000),
                count: 1
            }]
        );
    }

    #[test]
    fn nearest_rank_definition() {
        // n = 4: p50 -> rank ceil(2) = 2; p99 -> rank ceil(3.96) = 4.
        let s = [10, 20, 30, 40];
        assert_eq!(nearest_rank(&s, 50, 100), 20);
        assert_eq!(nearest_rank(&s, 99, 100), 40);
        assert_eq!(nearest_rank(&s, 0, 100), 10);
        assert_eq!(nearest_rank(&s, 25, 100), 10);
        assert_eq!(nearest_rank(&s, 26, 100), 20);
        assert_eq!(nearest_rank(&s, 100, 100), 40);
        // n = 5: p50 -> rank ceil(2.5) = 3, the true median.
        assert_eq!(nearest_rank(&[1, 2, 3, 4, 5], 50, 100), 3);
    }

    #[test]
    fn hundred_samples() {
        // 1..=100 us, shuffled: p50 = 50 us, p99 = 99 us.
        let mut xs: Vec<u64> = (1..=100).map(|i| i * 1_000).collect();
        xs.reverse();
        xs.swap(3, 77);
        let s = summary(&xs);
        assert_eq!(s.count, 100);
        assert_eq!(s.min_ns, 1_000);
        assert_eq!(s.max_ns, 100_000);
        assert_eq!(s.p50_ns, 50_000);
        assert_eq!(s.p99_ns, 99_000);
        assert_eq!(s.sum_ns, 5_050_000);
        assert_eq!(s.mean_ns, 50_500);
        assert_eq!(s.buckets.iter().map(|b| b.count).sum::<u64>(), 100);
        assert!(s.buckets.windows(2).all(|w| w[0].index < w[1].index));
        for b in &s.buckets {
            let inside = xs.iter().filter(|&&x| bucket_index(x) == b.index).count();
            assert_eq!(inside as u64, b.count);
        }
    }

    #[test]
    fn mean_rounds_to_nearest() {
        assert_eq!(summary(&[1, 2]).mean_ns, 2); // 1.5 rounds up
        assert_eq!(summary(&[1, 1, 2]).mean_ns, 1); // 1.33
    }

    #[test]
    fn sum_saturates() {
        let s = summary(&[u64::MAX, u64::MAX]);
        assert_eq!(s.sum_ns, u64::MAX);
        assert_eq!(s.mean_ns, u64::MAX);
    }
}
