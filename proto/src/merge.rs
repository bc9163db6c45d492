//! The one rule for merging RTT window statistics, shared by the store's
//! per-minute rollups and the report's per-link figures: probe counts,
//! the RTT sum and histogram bucket counts add; the exact minimum and
//! maximum combine over sets that received anything (a set without
//! replies has no minimum: its 0 is not one). Percentiles do not merge
//! and are left alone.

use crate::v1::{HistogramBucket, RttSummary};

/// Adds `r`'s mergeable figures to `into` (buckets stay sorted by index).
pub fn rtt(into: &mut RttSummary, r: &RttSummary) {
    if r.received > 0 {
        if into.received == 0 || r.min_ns < into.min_ns {
            into.min_ns = r.min_ns;
        }
        into.max_ns = into.max_ns.max(r.max_ns);
    }
    // Saturating: the figures are an agent's, and a forged window must not
    // wrap a sum (or stop a report) however large it claims to be.
    into.sent = into.sent.saturating_add(r.sent);
    into.received = into.received.saturating_add(r.received);
    into.lost = into.lost.saturating_add(r.lost);
    into.duplicates = into.duplicates.saturating_add(r.duplicates);
    into.discarded = into.discarded.saturating_add(r.discarded);
    into.sum_ns = into.sum_ns.saturating_add(r.sum_ns);
    for b in &r.buckets {
        match into.buckets.binary_search_by_key(&b.index, |x| x.index) {
            Ok(i) => into.buckets[i].count = into.buckets[i].count.saturating_add(b.count),
            Err(i) => into.buckets.insert(
                i,
                HistogramBucket {
                    index: b.index,
                    count: b.count,
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(received: u64, min: u64, max: u64, buckets: &[(i32, u64)]) -> RttSummary {
        RttSummary {
            sent: received + 1,
            received,
            lost: 1,
            min_ns: min,
            max_ns: max,
            sum_ns: received * min,
            buckets: buckets
                .iter()
                .map(|&(index, count)| HistogramBucket { index, count })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn counts_add_extremes_combine_over_sets_with_replies() {
        let mut m = RttSummary::default();
        rtt(&mut m, &window(0, 0, 0, &[]));
        rtt(&mut m, &window(2, 90, 120, &[(-106, 2)]));
        rtt(&mut m, &window(3, 80, 100, &[(-107, 1), (-106, 2)]));
        assert_eq!((m.sent, m.received, m.lost), (8, 5, 3));
        assert_eq!((m.min_ns, m.max_ns, m.sum_ns), (80, 120, 420));
        let b: Vec<_> = m.buckets.iter().map(|b| (b.index, b.count)).collect();
        assert_eq!(b, [(-107, 1), (-106, 4)]);
    }

    #[test]
    fn forged_figures_saturate_instead_of_wrapping() {
        let mut m = window(2, 1, 1, &[(0, u64::MAX)]);
        m.sum_ns = u64::MAX - 1;
        let huge = RttSummary {
            sum_ns: u64::MAX,
            sent: u64::MAX,
            ..window(2, 1, 1, &[(0, u64::MAX)])
        };
        rtt(&mut m, &huge);
        assert_eq!(
            (m.sum_ns, m.sent, m.buckets[0].count),
            (u64::MAX, u64::MAX, u64::MAX)
        );
    }
}
