//! RTT of a directed link: its probe windows accumulated (at rest and under
//! load apart, each window kept for coverage and charts) and the report's
//! figures of a merged set.

use boltwatch_proto::v1::RttSummary;
use boltwatch_store::MinuteLink;

use super::{ms, Rtt, Win};
use crate::report::summary::LinkStats;

/// One directed link's RTT windows.
#[derive(Debug, Default)]
pub(super) struct LinkAcc {
    /// Windows no bandwidth test overlapped.
    pub rest: LinkStats,
    /// Windows a bandwidth test overlapped.
    pub load: LinkStats,
    /// Every window (sorted and deduplicated by [`LinkAcc::sort`]).
    pub windows: Vec<Win>,
}

impl LinkAcc {
    /// Window `r`, recorded at `unix_ns`.
    pub fn add(&mut self, r: &RttSummary, unix_ns: u64) {
        if r.under_load {
            self.load.add(r);
        } else {
            self.rest.add(r);
        }
        self.windows.push(Win::of(r, unix_ns));
    }

    /// A rolled-up minute's windows of this link.
    pub fn add_minute(&mut self, l: &MinuteLink<'_>) {
        if let Some((s, windows)) = l.rest() {
            self.rest.add_merged(s, windows);
        }
        if let Some((s, windows)) = l.load() {
            self.load.add_merged(s, windows);
        }
        self.windows.extend(l.windows());
    }

    /// Sorts the windows by start, one per start.
    pub fn sort(&mut self) {
        self.windows.sort_by_key(|w| w.t);
        self.windows.dedup_by_key(|w| w.t);
    }

    /// At rest and under load together.
    pub fn both(&self) -> LinkStats {
        let mut both = self.rest.clone();
        both.merge(&self.load);
        both
    }
}

/// The report's RTT figures of `s`.
pub(super) fn rtt(s: &LinkStats) -> Rtt {
    Rtt {
        windows: s.windows,
        probes: s.merged.sent,
        received: s.merged.received,
        lost: s.merged.lost,
        loss_percent: s.loss_ratio() * 100.0,
        mean_ms: s.mean_ns().map(ms),
        p50_ms: s.quantile_ns(0.5).map(ms),
        p99_ms: s.quantile_ns(0.99).map(ms),
        worst_ms: (s.merged.received > 0).then(|| ms(s.merged.max_ns as f64)),
    }
}
