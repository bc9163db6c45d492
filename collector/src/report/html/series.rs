//! The time charts of a directed link: RTT p50 and p99 on a log axis (so
//! the median stays readable under a tail two decades higher) with the
//! SLO's p99 line, and bandwidth tests with the SLO's minimum and the
//! sending node's temperature on a right axis. Outages, throttling and
//! workload marks are labelled spans across the plot.

use std::fmt::Write;

use super::axes::{frame, Scale, Time, H, PAD_B, PAD_L, PAD_T, W};
use super::text::esc;
use crate::report::soak::Chart;
use crate::soak::time;

/// A workload mark as the charts draw it.
pub struct Mark {
    pub at: u64,
    pub until: Option<u64>,
    pub text: String,
}

/// SLO thresholds the charts draw, when set.
#[derive(Default, Clone, Copy)]
pub struct Limits {
    pub rtt_p99_ms: Option<f64>,
    pub bandwidth_min_gbps: Option<f64>,
}

fn polyline(o: &mut String, t: &Time, pts: &[(u64, f64)], sc: &Scale, class: &str) -> usize {
    if pts.is_empty() {
        return 0;
    }
    let _ = write!(o, r#"<polyline class="{class}" points=""#);
    for (at, v) in pts {
        let _ = write!(o, "{:.1},{:.1} ", t.x(*at), sc.y(*v));
    }
    o.push_str("\"/>");
    pts.len()
}

/// Spans `(start, end)` of `class`, each labelled `label` at the top when
/// wide enough to read, with its times as a tooltip.
fn spans(o: &mut String, t: &Time, spans: &[(u64, u64)], class: &str, label: &str) {
    for (s, e) in spans {
        let (x0, x1) = (t.x(*s), t.x(*e));
        let _ = write!(
            o,
            r#"<rect class="{class}" x="{x0:.1}" y="{PAD_T}" width="{:.1}" height="{:.1}"><title>{label} {} .. {}</title></rect>"#,
            (x1 - x0).max(1.5),
            H - PAD_T - PAD_B,
            time::format(*s),
            time::format(*e)
        );
        if x1 - x0 >= 6.0 * label.len() as f64 {
            let _ = write!(
                o,
                r#"<text class="span-label {class}-label" x="{:.1}" y="{:.1}">{label}</text>"#,
                x0 + 2.0,
                PAD_T + 11.0
            );
        }
    }
}

/// The marks as spans (a mark without an end as a thin one), each named
/// at its start, staggered so neighbours do not overprint.
fn marks(o: &mut String, t: &Time, marks: &[Mark]) {
    for (i, m) in marks.iter().enumerate() {
        let x0 = t.x(m.at);
        let x1 = m.until.map_or(x0 + 2.0, |u| t.x(u).max(x0 + 2.0));
        let until = m.until.map_or("(no end)".into(), time::format);
        let _ = write!(
            o,
            r#"<rect class="mark" x="{x0:.1}" y="{PAD_T}" width="{:.1}" height="{:.1}"><title>{} {} .. {until}</title></rect><text class="span-label mark-label" x="{:.1}" y="{:.1}">{}</text>"#,
            x1 - x0,
            H - PAD_T - PAD_B,
            esc(&m.text),
            time::format(m.at),
            x0 + 2.0,
            H - PAD_B - 4.0 - 12.0 * (i % 3) as f64,
            esc(&m.text)
        );
    }
}

/// A horizontal SLO line at `v`, labelled.
fn threshold(o: &mut String, sc: &Scale, v: f64, label: &str) {
    let y = sc.y(v);
    let _ = write!(
        o,
        r#"<line class="slo" x1="{PAD_L}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text class="slo-label" x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"#,
        W - super::axes::PAD_R,
        W - super::axes::PAD_R - 4.0,
        y - 3.0
    );
}

fn svg(o: &mut String, class: &str, n: usize, label: &str, body: &str) {
    let _ = write!(
        o,
        r#"<svg class="chart {class}" data-points="{n}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">{body}</svg>"#,
        esc(label)
    );
}

/// The RTT chart, or a sentence when the link answered no probe.
pub fn rtt(o: &mut String, t: &Time, c: &Chart, m: &[Mark], lim: Limits) {
    if c.p50.is_empty() && c.p99.is_empty() {
        o.push_str("<p class=\"empty\">No probe was answered on this link in the range: no RTT to draw.</p>");
        return;
    }
    let sc = Scale::log(c.p50.iter().chain(&c.p99).map(|p| p.1), lim.rtt_p99_ms);
    let mut body = String::new();
    frame(&mut body, t, &sc, "RTT ms (log)", None);
    spans(&mut body, t, &c.outages, "outage", "outage");
    marks(&mut body, t, m);
    let n = polyline(&mut body, t, &c.p99, &sc, "p99") + polyline(&mut body, t, &c.p50, &sc, "p50");
    if let Some(v) = lim.rtt_p99_ms {
        threshold(&mut body, &sc, v, &format!("SLO p99 {v} ms"));
    }
    svg(
        o,
        "rtt",
        n,
        &format!("RTT p50 and p99 of {} to {}", c.node, c.peer),
        &body,
    );
}

/// The bandwidth chart (with the temperature when a sensor reported), or
/// a sentence for what is missing.
pub fn bandwidth(o: &mut String, t: &Time, c: &Chart, m: &[Mark], lim: Limits) {
    if c.bandwidth.is_empty() && c.temperature.is_empty() {
        o.push_str("<p class=\"empty\">No bandwidth test succeeded in this direction and no temperature was reported: no bandwidth chart.</p>");
        return;
    }
    let sc = Scale::linear(c.bandwidth.iter().map(|p| p.1), lim.bandwidth_min_gbps);
    let temp =
        (!c.temperature.is_empty()).then(|| Scale::linear(c.temperature.iter().map(|p| p.1), None));
    let mut body = String::new();
    frame(&mut body, t, &sc, "Gbps", temp.as_ref().map(|s| (s, "C")));
    spans(&mut body, t, &c.throttled, "throttle", "throttled");
    marks(&mut body, t, m);
    let mut n = temp.map_or(0, |ts| polyline(&mut body, t, &c.temperature, &ts, "temp"));
    n += polyline(&mut body, t, &c.bandwidth, &sc, "bw");
    for (at, v) in &c.bandwidth {
        let _ = write!(
            body,
            r#"<circle class="bw" cx="{:.1}" cy="{:.1}" r="2.5"><title>{} {v:.2} Gbps</title></circle>"#,
            t.x(*at),
            sc.y(*v),
            time::format(*at)
        );
    }
    if let Some(v) = lim.bandwidth_min_gbps {
        threshold(&mut body, &sc, v, &format!("SLO mean >= {v} Gbps"));
    }
    svg(
        o,
        "bandwidth",
        n,
        &format!("bandwidth of {} to {}", c.node, c.peer),
        &body,
    );
    if c.bandwidth.is_empty() {
        o.push_str("<p class=\"empty\">No bandwidth test succeeded in this direction.</p>");
    }
    if c.temperature.is_empty() {
        let _ = write!(
            o,
            "<p class=\"empty\">No temperature was reported by {}.</p>",
            esc(&c.node)
        );
    }
}
