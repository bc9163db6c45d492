//! Report math over stored records: per-link probe and RTT figures, per
//! sensor temperature figures. Pure: records in, numbers out.
//!
//! Percentiles over long runs come from the merged per-window histograms
//! (schema-3 buckets, 9% wide), interpolated geometrically inside the bucket
//! and clamped to the exact minimum and maximum, so a 72-hour p99 costs a few
//! hundred counters, not millions of samples.

use std::collections::BTreeMap;

use boltwatch_proto::histogram::upper_bound_seconds;
use boltwatch_proto::v1::{HistogramBucket, RttSummary, ThermalReading};

/// Aggregated probing of one direction of one link (node -> peer).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkStats {
    /// The probing node.
    pub node: String,
    /// The probed peer.
    pub peer: String,
    /// Windows merged.
    pub windows: u64,
    /// These windows overlapped a bandwidth test (RTT under load); RTT at
    /// rest and under load are kept in separate rows.
    pub under_load: bool,
    /// The merged figures by the one merge rule
    /// ([`boltwatch_proto::merge::rtt`]): probes sent, answered, lost and
    /// duplicated, the exact minimum, maximum and sum of RTT (ns; the
    /// minimum is 0 when nothing was received), and the merged histogram.
    /// Its percentiles and window fields mean nothing here.
    pub merged: RttSummary,
}

impl LinkStats {
    /// Merges one window summary.
    pub fn add(&mut self, r: &RttSummary) {
        self.add_merged(r, 1);
    }

    /// Merges `r`, which is `windows` window summaries already merged
    /// (a per-minute rollup's).
    pub fn add_merged(&mut self, r: &RttSummary, windows: u64) {
        self.windows += windows;
        boltwatch_proto::merge::rtt(&mut self.merged, r);
    }

    /// Merges another set of windows' statistics (another link's, or the
    /// other side of at rest / under load).
    pub fn merge(&mut self, s: &LinkStats) {
        self.add_merged(&s.merged, s.windows);
    }

    /// Lost over sent, 0..1 (0 when nothing was sent).
    pub fn loss_ratio(&self) -> f64 {
        if self.merged.sent == 0 {
            0.0
        } else {
            self.merged.lost as f64 / self.merged.sent as f64
        }
    }

    /// Mean RTT in ns.
    pub fn mean_ns(&self) -> Option<f64> {
        let m = &self.merged;
        (m.received > 0).then(|| m.sum_ns as f64 / m.received as f64)
    }

    /// The `q` quantile (0..=1) of RTT in ns, nearest rank over the merged
    /// histogram, interpolated geometrically within the bucket.
    pub fn quantile_ns(&self, q: f64) -> Option<f64> {
        let m = &self.merged;
        let total: u64 = m.buckets.iter().map(|b| b.count).sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut below = 0u64;
        for &HistogramBucket { index: idx, count } in &m.buckets {
            if below + count >= rank {
                let lo = upper_bound_seconds(idx - 1) * 1e9;
                let hi = upper_bound_seconds(idx) * 1e9;
                let frac = (rank - below) as f64 / count as f64;
                let v = lo * (hi / lo).powf(frac);
                let (min, max) = (m.min_ns as f64, m.max_ns as f64);
                return Some(if max >= min && max > 0.0 {
                    v.clamp(min, max)
                } else {
                    v
                });
            }
            below += count;
        }
        None
    }
}

/// Groups window summaries by (node, peer, under load).
pub fn link_stats<'a>(
    records: impl IntoIterator<Item = (&'a str, &'a RttSummary)>,
) -> Vec<LinkStats> {
    let mut by: BTreeMap<(String, String, bool), LinkStats> = BTreeMap::new();
    for (node, r) in records {
        let e = by
            .entry((node.to_string(), r.peer.clone(), r.under_load))
            .or_insert_with(|| LinkStats {
                node: node.to_string(),
                peer: r.peer.clone(),
                under_load: r.under_load,
                ..Default::default()
            });
        e.add(r);
    }
    by.into_values().collect()
}

/// Temperature figures of one sensor of one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SensorStats {
    /// Node.
    pub node: String,
    /// Sensor name.
    pub sensor: String,
    /// Readings.
    pub readings: u64,
    /// Mean, celsius.
    pub mean: f64,
    /// Minimum, celsius.
    pub min: f64,
    /// Maximum, celsius.
    pub max: f64,
}

/// Per-sensor statistics over thermal readings.
pub fn sensor_stats<'a>(
    records: impl IntoIterator<Item = (&'a str, &'a ThermalReading)>,
) -> Vec<SensorStats> {
    let mut by: BTreeMap<(String, String), (u64, f64, f64, f64)> = BTreeMap::new();
    for (node, t) in records {
        for s in &t.sensors {
            let e = by.entry((node.to_string(), s.name.clone())).or_insert((
                0,
                0.0,
                f64::INFINITY,
                f64::NEG_INFINITY,
            ));
            e.0 += 1;
            e.1 += s.celsius;
            e.2 = e.2.min(s.celsius);
            e.3 = e.3.max(s.celsius);
        }
    }
    by.into_iter()
        .map(|((node, sensor), (n, sum, min, max))| SensorStats {
            node,
            sensor,
            readings: n,
            mean: sum / n as f64,
            min,
            max,
        })
        .collect()
}

fn ms(ns: Option<f64>) -> String {
    match ns {
        Some(v) => format!("{:.3}", v / 1e6),
        None => "-".into(),
    }
}

/// The lab's end-of-run table: one row per link direction, then sensors.
pub fn render_table(links: &[LinkStats], sensors: &[SensorStats]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<24} {:>8} {:>7} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
        "link (node -> peer)",
        "probes",
        "lost",
        "loss %",
        "min ms",
        "p50 ms",
        "p99 ms",
        "max ms",
        "mean ms"
    ));
    for l in links {
        let has = l.merged.received > 0;
        out.push_str(&format!(
            "{:<24} {:>8} {:>7} {:>8.3} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            format!(
                "{} -> {}{}",
                l.node,
                l.peer,
                if l.under_load { " [load]" } else { "" }
            ),
            l.merged.sent,
            l.merged.lost,
            l.loss_ratio() * 100.0,
            ms(has.then_some(l.merged.min_ns as f64)),
            ms(l.quantile_ns(0.5)),
            ms(l.quantile_ns(0.99)),
            ms(has.then_some(l.merged.max_ns as f64)),
            ms(l.mean_ns()),
        ));
    }
    if links.is_empty() {
        out.push_str("(no RTT records)\n");
    }
    if sensors.is_empty() {
        out.push_str("temperatures: no sensors reported\n");
    } else {
        out.push_str(&format!(
            "\n{:<32} {:>8} {:>8} {:>8} {:>8}\n",
            "sensor (node/sensor)", "n", "mean C", "min C", "max C"
        ));
        for s in sensors {
            out.push_str(&format!(
                "{:<32} {:>8} {:>8.1} {:>8.1} {:>8.1}\n",
                format!("{}/{}", s.node, s.sensor),
                s.readings,
                s.mean,
                s.min,
                s.max
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::histogram::sparse_buckets;
    use boltwatch_proto::v1::TemperatureSensor;

    fn window(peer: &str, rtts: &[u64], lost: u64) -> RttSummary {
        RttSummary {
            peer: peer.into(),
            sent: rtts.len() as u64 + lost,
            received: rtts.len() as u64,
            lost,
            min_ns: rtts.iter().copied().min().unwrap_or(0),
            max_ns: rtts.iter().copied().max().unwrap_or(0),
            sum_ns: rtts.iter().sum(),
            buckets: sparse_buckets(rtts.iter().copied()),
            ..Default::default()
        }
    }

    #[test]
    fn merges_windows_and_counts_loss() {
        let a = window("b", &[80_000, 90_000], 1);
        let b = window("b", &[70_000], 0);
        let stats = link_stats([("a", &a), ("a", &b)]);
        assert_eq!(stats.len(), 1);
        let s = &stats[0];
        assert_eq!((s.merged.sent, s.merged.received, s.merged.lost), (4, 3, 1));
        assert_eq!((s.merged.min_ns, s.merged.max_ns), (70_000, 90_000));
        assert!((s.loss_ratio() - 0.25).abs() < 1e-12);
        assert_eq!(s.mean_ns(), Some(80_000.0));
    }

    #[test]
    fn merging_sets_is_adding_their_windows() {
        let (a, b) = (window("b", &[80_000, 90_000], 1), window("b", &[70_000], 2));
        let none = window("b", &[], 3);
        let mut one = LinkStats::default();
        for w in [&a, &none, &b] {
            one.add(w);
        }
        let mut x = LinkStats::default();
        x.add(&a);
        let mut y = LinkStats::default();
        y.add(&none);
        let mut z = LinkStats::default();
        z.add_merged(&b, 1);
        let mut merged = LinkStats::default();
        for s in [&y, &x, &z] {
            merged.merge(s);
        }
        assert_eq!(merged, one);
        // A set without replies has no minimum: its 0 is not taken.
        assert_eq!(
            (one.merged.min_ns, one.merged.max_ns, one.windows),
            (70_000, 90_000, 3)
        );
        assert_eq!(
            (one.merged.sent, one.merged.received, one.merged.lost),
            (9, 3, 6)
        );
    }

    #[test]
    fn quantiles_stay_within_a_bucket_of_truth() {
        // 1000 samples from 50 us to 149.9 us.
        let rtts: Vec<u64> = (0..1000).map(|i| 50_000 + i * 100).collect();
        let s = link_stats([("a", &window("b", &rtts, 0))]).remove(0);
        for (q, truth) in [(0.5, 99_900.0), (0.99, 148_900.0)] {
            let got = s.quantile_ns(q).unwrap();
            assert!((got / truth - 1.0).abs() < 0.0905, "q{q}: {got} vs {truth}");
        }
        assert_eq!(s.quantile_ns(0.0).unwrap(), 50_000.0);
        assert_eq!(s.quantile_ns(1.0).unwrap(), 149_900.0);
    }

    #[test]
    fn directions_are_separate_rows() {
        let ab = window("b", &[1_000], 0);
        let ba = window("a", &[2_000], 0);
        let stats = link_stats([("a", &ab), ("b", &ba)]);
        assert_eq!(stats.len(), 2);
        let table = render_table(&stats, &[]);
        assert!(
            table.contains("a -> b") && table.contains("b -> a"),
            "{table}"
        );
        assert!(table.contains("no sensors"));
    }

    #[test]
    fn rtt_under_load_is_a_separate_row() {
        let rest = window("b", &[10_000], 0);
        let mut busy = window("b", &[90_000], 0);
        busy.under_load = true;
        let stats = link_stats([("a", &rest), ("a", &busy)]);
        assert_eq!(stats.len(), 2);
        assert_eq!(
            (stats[0].under_load, stats[0].merged.max_ns),
            (false, 10_000)
        );
        assert_eq!(
            (stats[1].under_load, stats[1].merged.max_ns),
            (true, 90_000)
        );
        let table = render_table(&stats, &[]);
        assert!(table.contains("a -> b [load]"), "{table}");
    }

    #[test]
    fn nothing_received_prints_dashes() {
        let w = window("b", &[], 5);
        let table = render_table(&link_stats([("a", &w)]), &[]);
        assert!(table.contains("100.000"), "{table}");
        assert!(table.contains(" -"), "{table}");
    }

    #[test]
    fn sensor_stats_mean_min_max() {
        let t = |c: f64| ThermalReading {
            sensors: vec![TemperatureSensor {
                name: "cpu".into(),
                celsius: c,
                ..Default::default()
            }],
            throttle: None,
        };
        let (x, y) = (t(40.0), t(42.0));
        let s = sensor_stats([("a", &x), ("a", &y)]);
        assert_eq!(s[0].readings, 2);
        assert_eq!((s[0].mean, s[0].min, s[0].max), (41.0, 40.0, 42.0));
    }
}
