//! The HTML report: one self-contained page (inline CSS and SVG, no script,
//! nothing fetched), the verdict first, then per directed link an RTT chart
//! (p50 and p99 over time, outages as red bands, workload marks as dashed
//! lines) and a bandwidth chart (tests over time, the sending node's
//! temperature on a second axis, throttling shaded). Series arrive
//! downsampled with min and max kept ([`super::soak`]'s `chart` module), so a page
//! of a 72-hour soak stays small and a single spike stays visible.
//!
//! Every chart's `<svg>` carries `data-points` (the points it drew), which
//! the browser test checks against what the DOM holds.

use std::fmt::Write;

use super::render;
use super::soak::{Chart, Report};
use crate::soak::time;

const W: f64 = 960.0;
const H: f64 = 200.0;
const PAD_L: f64 = 80.0;
const PAD_R: f64 = 56.0;
const PAD_T: f64 = 12.0;
const PAD_B: f64 = 24.0;

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

struct Axes {
    from: u64,
    to: u64,
}

impl Axes {
    fn x(&self, t: u64) -> f64 {
        let span = (self.to - self.from).max(1) as f64;
        PAD_L + (t.clamp(self.from, self.to) - self.from) as f64 / span * (W - PAD_L - PAD_R)
    }
}

fn scale(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let lo = lo.min(0.0);
    if hi <= lo {
        hi = lo + 1.0;
    }
    (lo, hi * 1.05)
}

fn y(v: f64, (lo, hi): (f64, f64)) -> f64 {
    PAD_T + (1.0 - (v - lo) / (hi - lo)) * (H - PAD_T - PAD_B)
}

fn polyline(o: &mut String, a: &Axes, pts: &[(u64, f64)], sc: (f64, f64), class: &str) -> usize {
    if pts.is_empty() {
        return 0;
    }
    let _ = write!(o, r#"<polyline class="{class}" points=""#);
    for (t, v) in pts {
        let _ = write!(o, "{:.1},{:.1} ", a.x(*t), y(*v, sc));
    }
    o.push_str("\"/>");
    pts.len()
}

fn bands(o: &mut String, a: &Axes, spans: &[(u64, u64)], class: &str, what: &str) {
    for (s, e) in spans {
        let (x0, x1) = (a.x(*s), a.x(*e));
        let _ = write!(
            o,
            r#"<rect class="{class}" x="{x0:.1}" y="{PAD_T}" width="{:.1}" height="{:.1}"><title>{what} {} .. {}</title></rect>"#,
            (x1 - x0).max(1.5),
            H - PAD_T - PAD_B,
            time::format(*s),
            time::format(*e)
        );
    }
}

fn frame(
    o: &mut String,
    a: &Axes,
    left: (f64, f64),
    left_unit: &str,
    right: Option<((f64, f64), &str)>,
) {
    let _ = write!(
        o,
        r#"<rect class="frame" x="{PAD_L}" y="{PAD_T}" width="{:.1}" height="{:.1}"/>"#,
        W - PAD_L - PAD_R,
        H - PAD_T - PAD_B
    );
    for (v, anchor, x) in [(left.1, "end", PAD_L - 4.0), (left.0, "end", PAD_L - 4.0)] {
        let _ = write!(
            o,
            r#"<text x="{x}" y="{:.1}" text-anchor="{anchor}">{v:.digits$} {left_unit}</text>"#,
            y(v, left) + 4.0,
            digits = if left_unit == "ms" { 3 } else { 1 }
        );
    }
    if let Some((sc, unit)) = right {
        for v in [sc.0, sc.1] {
            let _ = write!(
                o,
                r#"<text class="temp-label" x="{:.1}" y="{:.1}">{v:.1} {unit}</text>"#,
                W - PAD_R + 4.0,
                y(v, sc) + 4.0
            );
        }
    }
    for (t, anchor) in [(a.from, "start"), (a.to, "end")] {
        let _ = write!(
            o,
            r#"<text x="{:.1}" y="{}" text-anchor="{anchor}">{}</text>"#,
            a.x(t),
            H - 6.0,
            time::format(t)
        );
    }
}

fn rtt_chart(o: &mut String, a: &Axes, c: &Chart, marks: &[(u64, String)]) {
    let sc = scale(c.p50.iter().chain(&c.p99).map(|p| p.1));
    let mut body = String::new();
    frame(&mut body, a, sc, "ms", None);
    bands(&mut body, a, &c.outages, "outage", "outage");
    let n = polyline(&mut body, a, &c.p99, sc, "p99") + polyline(&mut body, a, &c.p50, sc, "p50");
    for (t, text) in marks {
        let x = a.x(*t);
        let _ = write!(
            body,
            r#"<line class="mark" x1="{x:.1}" x2="{x:.1}" y1="{PAD_T}" y2="{:.1}"><title>{}</title></line>"#,
            H - PAD_B,
            esc(text)
        );
    }
    let _ = write!(
        o,
        r#"<svg class="chart rtt" data-points="{n}" viewBox="0 0 {W} {H}" width="{W}" height="{H}">{body}</svg>"#
    );
}

fn bandwidth_chart(o: &mut String, a: &Axes, c: &Chart) {
    let sc = scale(c.bandwidth.iter().map(|p| p.1));
    let tsc = scale(c.temperature.iter().map(|p| p.1));
    let mut body = String::new();
    frame(&mut body, a, sc, "Gbps", Some((tsc, "C")));
    bands(&mut body, a, &c.throttled, "throttle", "throttled");
    let mut n = polyline(&mut body, a, &c.temperature, tsc, "temp");
    n += polyline(&mut body, a, &c.bandwidth, sc, "bw");
    for (t, v) in &c.bandwidth {
        let _ = write!(
            body,
            r#"<circle class="bw" cx="{:.1}" cy="{:.1}" r="2.5"><title>{} {v:.2} Gbps</title></circle>"#,
            a.x(*t),
            y(*v, sc),
            time::format(*t)
        );
    }
    let _ = write!(
        o,
        r#"<svg class="chart bandwidth" data-points="{n}" viewBox="0 0 {W} {H}" width="{W}" height="{H}">{body}</svg>"#
    );
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:24px;color:#222;background:#fff}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}.PASS{background:#d8f5d8}.FAIL{background:#f8d0d0}
svg{display:block;margin:4px 0 12px;background:#fafafa}svg text{font-size:11px;fill:#555}
.frame{fill:none;stroke:#bbb}.p50{fill:none;stroke:#1f77b4;stroke-width:1.2}.p99{fill:none;stroke:#ff7f0e;stroke-width:1.2}
.bw{fill:#2ca02c;stroke:#2ca02c;stroke-width:1.2}polyline.bw{fill:none}.temp{fill:none;stroke:#d62728;stroke-width:1}
.throttle{fill:#d62728;opacity:.15}.outage{fill:#d00;opacity:.35}.mark{stroke:#9467bd;stroke-dasharray:4 3}
.legend span{margin-right:14px}";

/// The whole page.
pub fn page(r: &Report) -> String {
    let mut o = String::from("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(
        o,
        "<title>soak {} report</title><style>{STYLE}</style></head><body>",
        esc(&r.soak)
    );
    let _ = write!(
        o,
        "<h1>soak {}: {}</h1><p>{} .. {} ({}), nodes {}</p>",
        esc(&r.soak),
        r.verdict.word(),
        time::format(r.from_unix_ns),
        time::format(r.to_unix_ns),
        time::format_duration(r.to_unix_ns - r.from_unix_ns),
        esc(&r.nodes.join(", "))
    );
    o.push_str("<table id=\"verdict\"><tr><th>SLO</th><th>measured</th><th>threshold</th><th>result</th></tr>");
    for l in &r.verdict.lines {
        let _ = write!(
            o,
            "<tr class=\"{w}\"><td>{}</td><td>{}</td><td>{}</td><td>{w}</td></tr>",
            esc(l.name),
            l.measured
                .map_or("no data".into(), |m| format!("{m:.3} {}", l.unit)),
            l.threshold.map_or("not set".into(), |t| format!(
                "{} {t} {}",
                esc(l.op),
                l.unit
            )),
            w = l.word()
        );
    }
    o.push_str("</table>");
    let _ = write!(o, "<p>{}</p>", esc(&r.correlation.sentence));
    // The text table's sections, for the detail below the charts.
    let detail = render::markdown(r);
    let marks: Vec<(u64, String)> = r
        .marks
        .iter()
        .map(|m| (m.at_unix_ns, m.text.clone()))
        .collect();
    let a = Axes {
        from: r.from_unix_ns,
        to: r.to_unix_ns.max(r.from_unix_ns + 1),
    };
    o.push_str("<p class=\"legend\"><span style=\"color:#1f77b4\">RTT p50</span><span style=\"color:#ff7f0e\">RTT p99</span><span style=\"color:#2ca02c\">bandwidth</span><span style=\"color:#d62728\">temperature / throttled</span><span style=\"color:#d00\">outage</span><span style=\"color:#9467bd\">workload mark</span></p>");
    for c in &r.charts {
        let _ = write!(o, "<h2>{} &rarr; {}</h2>", esc(&c.node), esc(&c.peer));
        rtt_chart(&mut o, &a, c, &marks);
        bandwidth_chart(&mut o, &a, c);
    }
    let _ = writeln!(
        o,
        "<h2>detail</h2><pre>{}</pre></body></html>",
        esc(&detail)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::soak::{Builder, Scope};

    #[test]
    fn page_is_self_contained_and_escapes() {
        let mut r = Builder::new(Scope {
            name: "x".into(),
            from_unix_ns: 0,
            to_unix_ns: 100,
            nodes: vec![],
            slo: Default::default(),
            marks: vec![],
        })
        .finish();
        r.charts.push(Chart {
            node: "<a>".into(),
            peer: "b".into(),
            p50: vec![(10, 0.08), (20, 0.09)],
            p99: vec![(10, 0.1), (20, 0.2)],
            bandwidth: vec![(50, 70.0)],
            temperature: vec![(0, 40.0), (90, 42.0)],
            throttled: vec![(60, 80)],
            outages: vec![(30, 35)],
        });
        let p = page(&r);
        assert!(p.contains("&lt;a&gt;") && !p.contains("<a>"));
        assert!(!p.contains("http://") && !p.contains("https://") && !p.contains("<script"));
        assert!(p.contains(r#"class="chart rtt" data-points="4""#), "{p}");
        assert!(p.contains(r#"class="chart bandwidth" data-points="3""#));
        assert!(p.find("id=\"verdict\"").unwrap() < p.find("<svg").unwrap());
    }
}
