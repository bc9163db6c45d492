//! The per-hour table of a link (or all links): per UTC hour of the range,
//! the probes and losses and the RTT p50, p99 and worst of the windows
//! that started in it (from the merged histograms, as the whole range's),
//! and its errored and unavailable seconds.

use std::collections::BTreeMap;

use super::availability::Tally;
use super::bins::{hour_of, HOUR_NS};
use super::rtt::rtt;
use super::{secs, Hour};
use crate::report::summary::LinkStats;

/// One row per UTC hour overlapping `[from, to)`: `stats` the windows
/// merged per hour, `tally` their classes per hour (both keyed by the
/// hour's start).
pub(super) fn hourly(
    stats: &BTreeMap<u64, LinkStats>,
    tally: &BTreeMap<u64, Tally>,
    from: u64,
    to: u64,
) -> Vec<Hour> {
    let empty = LinkStats::default();
    let mut rows = Vec::new();
    let mut h = hour_of(from);
    while h < to {
        let r = rtt(stats.get(&h).unwrap_or(&empty));
        let t = tally.get(&h).copied().unwrap_or_default();
        rows.push(Hour {
            start_unix_ns: h.max(from),
            probes: r.probes,
            lost: r.lost,
            loss_percent: r.loss_percent,
            p50_ms: r.p50_ms,
            p99_ms: r.p99_ms,
            worst_ms: r.worst_ms,
            es_seconds: secs(t.es_ns),
            uas_seconds: secs(t.uas_ns),
        });
        h += HOUR_NS;
    }
    rows
}

/// Per-hour maps of several links merged into one.
pub(super) fn merge<'a, V: Clone + 'a>(
    maps: impl Iterator<Item = &'a BTreeMap<u64, V>>,
    add: impl Fn(&mut V, &V),
) -> BTreeMap<u64, V> {
    let mut out: BTreeMap<u64, V> = BTreeMap::new();
    for m in maps {
        for (k, v) in m {
            match out.get_mut(k) {
                Some(o) => add(o, v),
                None => {
                    out.insert(*k, v.clone());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use boltwatch_proto::histogram::sparse_buckets;
    use boltwatch_proto::v1::RttSummary;

    use super::*;

    #[test]
    fn one_row_per_hour_clipped_to_the_range() {
        let from = 10 * HOUR_NS + HOUR_NS / 2;
        let to = 12 * HOUR_NS + 1;
        let mut stats = BTreeMap::new();
        let mut s = LinkStats::default();
        s.add(&RttSummary {
            sent: 4,
            received: 3,
            lost: 1,
            max_ns: 300_000,
            sum_ns: 500_000,
            buckets: sparse_buckets([100_000, 100_000, 300_000]),
            ..Default::default()
        });
        stats.insert(11 * HOUR_NS, s.clone());
        let mut tally = BTreeMap::new();
        tally.insert(
            11 * HOUR_NS,
            Tally {
                uas_ns: 2_000_000_000,
                es_ns: 1_000_000_000,
                ..Default::default()
            },
        );
        let rows = hourly(&stats, &tally, from, to);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].start_unix_ns, from);
        assert_eq!((rows[0].probes, rows[0].p50_ms), (0, None));
        let r = &rows[1];
        assert_eq!((r.probes, r.lost, r.loss_percent), (4, 1, 25.0));
        assert_eq!(r.worst_ms, Some(0.3));
        assert_eq!((r.es_seconds, r.uas_seconds), (1.0, 2.0));
        assert_eq!(rows[2].start_unix_ns, 12 * HOUR_NS);
        let both = merge([&stats, &stats].into_iter(), |a, b| a.merge(b));
        assert_eq!(both[&(11 * HOUR_NS)].merged.sent, 8);
    }
}
