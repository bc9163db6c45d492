//! The histograms the collector exports: the agents' RTT windows, which
//! arrive pre-bucketed in the schema-3 layout of [`boltwatch_proto::histogram`]
//! with an exact sum, and the collector's own commit timings.
//!
//! An agent bucket is added to the first classic bound at or above its
//! upper bound; the classic bounds are the schema-3 bounds themselves over
//! [`RTT_RANGE_SECONDS`], so no re-bucketing error is added inside that
//! range.

use std::sync::OnceLock;

use boltwatch_proto::histogram::{indexes_spanning, upper_bound_seconds};
use boltwatch_proto::v1::HistogramBucket;

use super::family::Buckets;

/// The RTT histogram's classic bucket range, seconds: from a loopback
/// probe to past the agent's default probe timeout (1 s), so a link
/// queueing tens or hundreds of milliseconds under load has its quantiles
/// inside the buckets rather than capped at the last bound (with 5 ms as
/// the top, every quantile above it read 5.07 ms). 153 bounds.
pub const RTT_RANGE_SECONDS: (f64, f64) = (10e-6, 5.0);

/// Upper bounds of the commit-time histogram, seconds.
pub const COMMIT_BOUNDS_SECONDS: [f64; 13] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

fn rtt_indexes() -> std::ops::RangeInclusive<i32> {
    // Computed once: it takes two logarithms, and every bucket of every
    // RTT window asks for it.
    static INDEXES: OnceLock<std::ops::RangeInclusive<i32>> = OnceLock::new();
    INDEXES
        .get_or_init(|| indexes_spanning(RTT_RANGE_SECONDS.0, RTT_RANGE_SECONDS.1))
        .clone()
}

/// The classic `le` bounds of the RTT histograms: the schema-3 bucket
/// bounds spanning [`RTT_RANGE_SECONDS`].
pub fn rtt_bounds() -> &'static [f64] {
    static BOUNDS: OnceLock<Vec<f64>> = OnceLock::new();
    BOUNDS.get_or_init(|| rtt_indexes().map(upper_bound_seconds).collect())
}

/// Position in the classic buckets of agent bucket `index`: the first bound
/// at or above the agent bucket's bound, or `len` (only `+Inf`) when it is
/// above them all.
pub fn classic_slot(index: i32) -> usize {
    let r = rtt_indexes();
    if index <= *r.start() {
        0
    } else if index > *r.end() {
        (r.end() - r.start() + 1) as usize
    } else {
        (index - r.start()) as usize
    }
}

/// Accumulated RTT windows of one link.
#[derive(Debug, Clone, PartialEq)]
pub struct RttHistogram {
    /// Per classic bound (non-cumulative) plus one overflow slot.
    counts: Vec<u64>,
    /// Exact sum, nanoseconds.
    sum_ns: u128,
    count: u64,
}

impl Default for RttHistogram {
    fn default() -> Self {
        RttHistogram {
            counts: vec![0; rtt_bounds().len() + 1],
            sum_ns: 0,
            count: 0,
        }
    }
}

impl RttHistogram {
    /// Adds a window: its sparse agent buckets, its exact sum and the
    /// number of observations it stands for.
    pub fn add(&mut self, buckets: &[HistogramBucket], sum_ns: u64, count: u64) {
        for b in buckets {
            self.counts[classic_slot(b.index)] += b.count;
        }
        self.sum_ns += u128::from(sum_ns);
        self.count += count;
    }

    /// The series as exported, in seconds.
    pub fn buckets(&self) -> Buckets<'_> {
        Buckets {
            bounds: rtt_bounds(),
            counts: &self.counts,
            sum: self.sum_ns as f64 / 1e9,
            count: self.count,
        }
    }
}

/// A fixed-bucket histogram of the collector's own timings, seconds.
#[derive(Debug, Clone, Default)]
pub struct CommitHistogram {
    counts: [u64; COMMIT_BOUNDS_SECONDS.len()],
    sum: f64,
    count: u64,
}

impl CommitHistogram {
    /// One observation.
    pub fn observe(&mut self, seconds: f64) {
        if let Some(i) = COMMIT_BOUNDS_SECONDS.iter().position(|b| seconds <= *b) {
            self.counts[i] += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }

    /// The series as exported.
    pub fn buckets(&self) -> Buckets<'_> {
        Buckets {
            bounds: &COMMIT_BOUNDS_SECONDS,
            counts: &self.counts,
            sum: self.sum,
            count: self.count,
        }
    }
}
