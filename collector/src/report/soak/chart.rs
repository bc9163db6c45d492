//! The HTML report's series of a directed link, downsampled with each
//! bucket's minimum and maximum kept so a single spike in 72 hours stays
//! visible.

use super::dist::{cdf, heatmap};
use super::{ms, Chart, OutageItem, Win};
use crate::report::summary::LinkStats;

/// Points per chart series after downsampling (each bucket keeps its
/// minimum and maximum, so up to twice this many).
pub const CHART_BUCKETS: usize = 360;

/// What one link's chart draws, as the report holds it.
pub(super) struct Series<'a> {
    /// The link's RTT windows, sorted.
    pub windows: &'a [Win],
    /// Its successful bandwidth tests, `(start, Gbps)`.
    pub bandwidth: Vec<(u64, f64)>,
    /// The measuring node's hottest sensor, `(t, C)`, sorted.
    pub temperature: Vec<(u64, f64)>,
    /// Throttle episodes of either end, `(start, end)`.
    pub throttled: Vec<(u64, u64)>,
    /// The link's outages.
    pub outages: &'a [OutageItem],
    /// Its probes at rest and under load, merged.
    pub stats: LinkStats,
}

/// The chart of `node` -> `peer` over `[from, to)`.
pub(super) fn chart(node: &str, peer: &str, s: Series<'_>, from: u64, to: u64) -> Chart {
    Chart {
        node: node.to_string(),
        peer: peer.to_string(),
        p50: downsample(&rtt(s.windows, |w| w.p50_ns), from, to, CHART_BUCKETS),
        p99: downsample(&rtt(s.windows, |w| w.p99_ns), from, to, CHART_BUCKETS),
        bandwidth: s.bandwidth,
        temperature: downsample(&s.temperature, from, to, CHART_BUCKETS),
        throttled: s.throttled,
        outages: s
            .outages
            .iter()
            .map(|o| (o.start_unix_ns, o.end_unix_ns))
            .collect(),
        heatmap: heatmap(s.windows, from, to),
        cdf: cdf(&s.stats),
    }
}

/// One RTT figure `f` of each window that received anything, `(t, ms)`.
fn rtt(w: &[Win], f: impl Fn(&Win) -> u64) -> Vec<(u64, f64)> {
    w.iter()
        .filter(|w| w.received > 0)
        .map(|w| (w.t, ms(f(w) as f64)))
        .collect()
}

/// Downsamples `(t, v)` points (time-ordered) to at most two per bucket of
/// `[from, to)`: each bucket keeps its minimum and maximum, in time order,
/// so a single spike in 72 hours survives.
pub fn downsample(p: &[(u64, f64)], from: u64, to: u64, buckets: usize) -> Vec<(u64, f64)> {
    if p.len() <= 2 * buckets || to <= from {
        return p.to_vec();
    }
    let width = ((to - from) / buckets as u64).max(1);
    let mut out = Vec::with_capacity(2 * buckets);
    let mut i = 0;
    while i < p.len() {
        let b = p[i].0.saturating_sub(from) / width;
        let mut j = i;
        let (mut lo, mut hi) = (i, i);
        while j < p.len() && p[j].0.saturating_sub(from) / width == b {
            if p[j].1 < p[lo].1 {
                lo = j;
            }
            if p[j].1 > p[hi].1 {
                hi = j;
            }
            j += 1;
        }
        let (a, z) = (lo.min(hi), lo.max(hi));
        out.push(p[a]);
        if z != a {
            out.push(p[z]);
        }
        i = j;
    }
    out
}
