//! RTT of a directed link: its probe windows accumulated (at rest and under
//! load apart, each window kept for coverage and charts) and the report's
//! figures of a merged set.

use std::collections::BTreeMap;
use std::ops::Range;

use boltwatch_proto::v1::RttSummary;
use boltwatch_store::MinuteLink;

use super::bins::hour_of;
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
    /// The windows merged per UTC hour of their start (a rolled-up
    /// minute's, of the minute), for the per-hour table.
    pub hours: BTreeMap<u64, LinkStats>,
    /// Windows with distinct starts reached the range's cap: no more
    /// are kept.
    full: bool,
}

impl LinkAcc {
    /// Window `r`, recorded at `unix_ns`; at most `cap` windows are kept
    /// (see [`LinkAcc::keep`]).
    pub fn add(&mut self, r: &RttSummary, unix_ns: u64, cap: usize) {
        if r.under_load {
            self.load.add(r);
        } else {
            self.rest.add(r);
        }
        let w = Win::of(r, unix_ns);
        self.hours.entry(hour_of(w.t)).or_default().add(r);
        self.keep(w, cap);
    }

    /// A rolled-up minute's windows of this link, the minute starting at
    /// `minute`: its merged figures when `whole` (the minute is the
    /// range's), and the windows that start in `range`.
    pub fn add_minute(
        &mut self,
        l: &MinuteLink<'_>,
        minute: u64,
        whole: bool,
        range: Range<u64>,
        cap: usize,
    ) {
        if whole {
            let hour = self.hours.entry(hour_of(minute)).or_default();
            for (s, windows) in [l.rest(), l.load()].into_iter().flatten() {
                hour.add_merged(s, windows);
            }
            if let Some((s, windows)) = l.rest() {
                self.rest.add_merged(s, windows);
            }
            if let Some((s, windows)) = l.load() {
                self.load.add_merged(s, windows);
            }
        }
        for w in l.windows().filter(|w| range.contains(&w.t)) {
            self.keep(w, cap);
        }
    }

    /// Keeps window `w` for coverage and charts until the link holds
    /// `cap` windows with distinct starts: a report's memory then follows
    /// its links and the range's one-second slots (at most twice `cap`
    /// windows a link), not how many records an agent sent (repeats of a
    /// window, or windows shorter than the agent's second). Repeats are
    /// dropped each time the windows double, so the cost stays
    /// O(log cap) a window. Its probes still count in full.
    fn keep(&mut self, w: Win, cap: usize) {
        if self.full {
            return;
        }
        self.windows.push(w);
        if self.windows.len() >= cap.saturating_mul(2) {
            self.sort();
            self.full = self.windows.len() >= cap;
        }
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
        p90_ms: s.quantile_ns(0.9).map(ms),
        p999_ms: s.quantile_ns(0.999).map(ms),
    }
}
