//! The distribution charts of a directed link: the heatmap (time bin x
//! RTT bucket, windows counted by their p99, shaded by count) and the CDF
//! of every probe's RTT on a log axis, with the SLO's p99 line.

use std::fmt::Write;

use super::axes::{frame, short, Scale, Time, H, PAD_B, PAD_L, PAD_R, PAD_T, W};
use super::text::esc;
use crate::report::soak::Chart;
use crate::soak::time;

/// Shades of the heatmap, by count relative to the busiest cell.
const SHADES: usize = 5;

fn shade(count: u32, max: u32) -> usize {
    // Log of the count: one window in a bin stays visible beside 900.
    let f = (count as f64).ln_1p() / (max as f64).ln_1p();
    ((f * SHADES as f64).ceil() as usize).clamp(1, SHADES)
}

/// The heatmap; nothing when the link has no answered window (the RTT
/// chart's sentence says so).
pub fn heatmap(o: &mut String, t: &Time, c: &Chart) {
    let h = &c.heatmap;
    let (Some(&lo), Some(&hi)) = (h.edges_ms.first(), h.edges_ms.last()) else {
        return;
    };
    let sc = Scale::log([lo, hi].into_iter(), None);
    let mut body = String::new();
    frame(&mut body, t, &sc, "p99 ms (log)", None);
    let max = h.counts.iter().flatten().copied().max().unwrap_or(1).max(1);
    let mut n = 0;
    for (b, row) in h.counts.iter().enumerate() {
        let start = h.first_unix_ns + b as u64 * h.bin_ns;
        let (x0, x1) = (t.x(start), t.x(start + h.bin_ns));
        for (k, &count) in row.iter().enumerate().filter(|(_, c)| **c > 0) {
            let (y0, y1) = (sc.y(h.edges_ms[k + 1]), sc.y(h.edges_ms[k]));
            let _ = write!(
                body,
                r#"<rect class="cell s{}" x="{x0:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}"><title>{} {count} windows p99 {}-{} ms</title></rect>"#,
                shade(count, max),
                (x1 - x0).max(0.8),
                (y1 - y0).max(0.8),
                time::format(start),
                short(h.edges_ms[k]),
                short(h.edges_ms[k + 1])
            );
            n += 1;
        }
    }
    let _ = write!(
        o,
        r#"<svg class="chart heatmap" data-points="{n}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">{body}</svg>"#,
        esc(&format!("RTT window heatmap of {} to {}", c.node, c.peer))
    );
    let _ = write!(
        o,
        "<p class=\"note\">Each column is {} of RTT windows, each cell the windows whose p99 fell in that band; darker is more (log shading, busiest cell {max}).</p>",
        time::format_duration(h.bin_ns)
    );
}

/// The CDF of every probe's RTT; nothing without one.
pub fn cdf(o: &mut String, c: &Chart, slo_p99_ms: Option<f64>) {
    if c.cdf.is_empty() {
        return;
    }
    let xs = Scale::log(c.cdf.iter().map(|p| p.0), slo_p99_ms);
    let ys = Scale {
        lo: 0.0,
        hi: 1.0,
        log: false,
    };
    let (y0, y1) = (PAD_T, H - PAD_B);
    let mut body = String::new();
    for v in xs.ticks() {
        let x = xs.x(v);
        let _ = write!(
            body,
            r#"<line class="grid" x1="{x:.1}" x2="{x:.1}" y1="{y0}" y2="{y1}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            y1 + 14.0,
            short(v)
        );
    }
    for q in [0.0, 0.25, 0.5, 0.75, 0.9, 1.0] {
        let y = ys.y(q);
        let _ = write!(
            body,
            r#"<line class="grid" x1="{PAD_L}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}%</text>"#,
            W - PAD_R,
            PAD_L - 4.0,
            y + 4.0,
            q * 100.0
        );
    }
    let _ = write!(
        body,
        r#"<text x="4" y="{:.1}" class="unit">share of probes</text><text x="{:.1}" y="{:.1}" class="unit" text-anchor="end">RTT ms (log) &rarr;</text><rect class="frame" x="{PAD_L}" y="{y0}" width="{:.1}" height="{:.1}"/>"#,
        y0 - 6.0,
        W - PAD_R,
        y0 - 6.0,
        W - PAD_L - PAD_R,
        y1 - y0
    );
    if let Some(v) = slo_p99_ms {
        let x = xs.x(v);
        let _ = write!(
            body,
            r#"<line class="slo" x1="{x:.1}" x2="{x:.1}" y1="{y0}" y2="{y1}"/><text class="slo-label" x="{:.1}" y="{:.1}" text-anchor="end">SLO p99 {v} ms</text>"#,
            x - 3.0,
            y1 - 6.0
        );
    }
    body.push_str(r#"<polyline class="cdf" points=""#);
    for (v, q) in &c.cdf {
        let _ = write!(body, "{:.1},{:.1} ", xs.x(*v), ys.y(*q));
    }
    body.push_str("\"/>");
    let _ = write!(
        o,
        r#"<svg class="chart cdf" data-points="{}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">{body}</svg>"#,
        c.cdf.len(),
        esc(&format!("RTT CDF of {} to {}", c.node, c.peer))
    );
}
