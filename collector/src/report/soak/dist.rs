//! The HTML report's distribution series of a directed link: a heatmap of
//! its RTT windows (time bin x RTT bucket, counting windows by their p99)
//! and the CDF of every probe's RTT (from the merged histogram, exact to
//! one bucket). Pure.

use super::{ms, Heatmap, Win};
use crate::report::summary::LinkStats;

/// Bin lengths tried in turn, the first giving at most [`MAX_BINS`] bins:
/// a quarter hour (the bins of the worst quarter hour, 288 at 72 h), an
/// hour, six hours, a day.
const BIN_NS: [u64; 4] = [900 * SEC, 3600 * SEC, 6 * 3600 * SEC, 86_400 * SEC];
const SEC: u64 = 1_000_000_000;
/// At most this many time bins (a page's columns stay wider than a pixel).
pub const MAX_BINS: u64 = 400;
/// RTT buckets per decade (edges 1, 1.78, 3.16, 5.62 x 10^k ms).
const PER_DECADE: f64 = 4.0;

/// The quantiles the CDF is drawn at: every percent, then the tail.
fn cdf_quantiles() -> impl Iterator<Item = f64> {
    [0.001, 0.005]
        .into_iter()
        .chain((1..100).map(|p| p as f64 / 100.0))
        .chain([0.995, 0.999, 0.9999, 1.0])
}

/// `(ms, share of probes at or below)` of the link's merged RTT
/// histogram; empty when nothing was answered.
pub(super) fn cdf(s: &LinkStats) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for q in cdf_quantiles() {
        let Some(v) = s.quantile_ns(q) else {
            return Vec::new();
        };
        let v = ms(v);
        // Quantiles inside one bucket repeat: keep the highest share.
        match out.last_mut() {
            Some(last) if last.0 == v => last.1 = q,
            _ => out.push((v, q)),
        }
    }
    out
}

/// The heatmap of `windows` (sorted) over `[from, to)`: bins aligned to
/// UTC (a quarter hour starts at :00, :15, :30, :45), log-spaced RTT
/// buckets spanning the windows' p99s. Windows without replies are left
/// out (they are outages or losses, drawn elsewhere).
pub(super) fn heatmap(windows: &[Win], from: u64, to: u64) -> Heatmap {
    let span = to.saturating_sub(from).max(1);
    let bin_ns = BIN_NS
        .into_iter()
        .find(|b| span.div_ceil(*b) <= MAX_BINS)
        .unwrap_or(span.div_ceil(MAX_BINS));
    let first = from - from % bin_ns;
    let bins = (to.max(first + 1) - first).div_ceil(bin_ns) as usize;
    // A nudge so an edge (0.1 ms) lands in its own bucket despite rounding.
    let level =
        |w: &Win| (ms(w.p99_ns as f64).max(1e-6).log10() * PER_DECADE + 1e-9).floor() as i32;
    let answered = || windows.iter().filter(|w| w.received > 0 && w.p99_ns > 0);
    let (Some(lo), Some(hi)) = (answered().map(level).min(), answered().map(level).max()) else {
        return Heatmap {
            first_unix_ns: first,
            bin_ns,
            ..Heatmap::default()
        };
    };
    let rows = (hi - lo + 1) as usize;
    let mut counts = vec![vec![0u32; rows]; bins];
    for w in answered().filter(|w| w.t >= first && w.t < to) {
        let b = ((w.t - first) / bin_ns) as usize;
        counts[b.min(bins - 1)][(level(w) - lo) as usize] += 1;
    }
    Heatmap {
        first_unix_ns: first,
        bin_ns,
        edges_ms: (lo..=hi + 1)
            .map(|k| 10f64.powf(k as f64 / PER_DECADE))
            .collect(),
        counts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn win(t: u64, p99_ms: f64) -> Win {
        Win {
            t,
            window_ns: S,
            sum_ns: 0,
            received: 10,
            p50_ns: 1,
            p99_ns: (p99_ms * 1e6) as u64,
            sent: 10,
            lost: 0,
        }
    }

    #[test]
    fn heatmap_bins_quarter_hours_and_log_buckets() {
        // 72 h from 00:05: quarter hours aligned to :00, 289 of them.
        let from = 300 * S;
        let to = from + 72 * 3600 * S;
        let w = vec![
            win(from, 0.1),
            win(from + S, 0.1),
            win(from + 900 * S, 1.0),
            win(to - S, 10.0),
        ];
        let h = heatmap(&w, from, to);
        assert_eq!((h.first_unix_ns, h.bin_ns), (0, 900 * S));
        assert_eq!(h.counts.len(), 289);
        // 0.1 ms is level -4, 10 ms level 4: nine rows, ten edges.
        assert_eq!(h.counts[0].len(), 9);
        assert_eq!(h.edges_ms.len(), 10);
        assert!((h.edges_ms[0] - 0.1).abs() < 1e-12);
        assert_eq!(h.counts[0][0], 2);
        assert_eq!(h.counts[1][4], 1);
        assert_eq!(h.counts[288][8], 1);
        let total: u32 = h.counts.iter().flatten().sum();
        assert_eq!(total, 4);
    }

    #[test]
    fn long_ranges_use_longer_bins_and_empty_links_have_none() {
        let h = heatmap(&[], 0, 30 * 86_400 * S);
        assert_eq!(h.bin_ns, 6 * 3600 * S);
        assert!(h.counts.is_empty() && h.edges_ms.is_empty());
    }
}
