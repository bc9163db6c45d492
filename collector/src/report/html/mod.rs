//! The HTML report: one self-contained page (inline CSS and SVG, no script,
//! nothing fetched) a team lead reads. From the top: a paragraph with the
//! verdict and its three biggest reasons, the headline and verdict tables
//! (and a baseline comparison when asked), then per directed link its
//! charts, then every other section of the report as a real table. The
//! tables are [`render::sections`], the same list the text formats draw,
//! so a section added there shows here with no work.
//!
//! Charts are hand-written SVG: `axes` (time ticks on round hours, dates
//! where a day starts, round value ticks, gridlines), `series` (RTT p50
//! and p99 on a log axis, bandwidth and temperature, the SLO lines,
//! outages, throttling and marks as labelled spans), `dist` (heatmap and
//! CDF). A plotting crate was not taken: `plotters`' SVG backend draws
//! text and shapes without classes or tooltips, the page's print and
//! browser checks rely on both, and the charts need few primitives.
//! Series arrive downsampled with min and max kept (the `chart` module of
//! [`super::soak`]), so a 72-hour page stays small and a spike visible.
//!
//! Every chart's `<svg>` carries `data-points` (the points or cells it
//! drew), which the browser test checks against what the DOM holds.
//! Printed, each link starts a page.

mod axes;
mod dist;
mod series;
mod shifts;
mod summary;
mod text;

use std::fmt::Write;

use super::acceptance;
use super::render::{self, Section};
use super::soak::Report;
use crate::soak::time;
use series::{Limits, Mark};
pub use text::esc;

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:24px;color:#222;background:#fff;max-width:1000px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:22px 0 6px}h3{font-size:14px;margin:14px 0 2px}
p.summary{font-size:15px;line-height:1.45;padding:8px 12px;border-left:5px solid #888;background:#f6f6f6}
p.summary.PASS{border-color:#2a2}p.summary.FAIL{border-color:#c22}
table{border-collapse:collapse;margin:6px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}td.PASS{background:#d8f5d8}td.FAIL{background:#f8d0d0}
svg{display:block;margin:2px 0 4px;background:#fcfcfc}svg text{font-size:11px;fill:#444}svg text.unit{font-weight:600}
.frame{fill:none;stroke:#999}.grid{stroke:#e4e4e4;stroke-width:1}
.p50{fill:none;stroke:#1f77b4;stroke-width:1.4}.p99{fill:none;stroke:#ff7f0e;stroke-width:1.2}
.bw{fill:#2ca02c;stroke:#2ca02c;stroke-width:1.2}polyline.bw{fill:none}.temp{fill:none;stroke:#d62728;stroke-width:1}
polyline.cdf{fill:none;stroke:#1f77b4;stroke-width:1.6}
.slo{stroke:#c00;stroke-width:1.2;stroke-dasharray:6 3}svg text.slo-label{fill:#c00;font-weight:600}
.throttle{fill:#d62728;opacity:.13}.outage{fill:#d00;opacity:.3}.mark{fill:#9467bd;opacity:.16;stroke:#9467bd;stroke-opacity:.9}
svg text.span-label{font-size:10px}svg text.outage-label{fill:#a00}svg text.throttle-label{fill:#a33}svg text.mark-label{fill:#6a3d9a}
svg text.right{fill:#d62728}.cell{stroke:none}.s1{fill:#dbe9f6}.s2{fill:#9ecae1}.s3{fill:#4292c6}.s4{fill:#2171b5}.s5{fill:#08306b}
p.empty{color:#a60;font-style:italic}p.note{color:#666;font-size:12px;margin:0 0 8px}
.legend span{margin-right:14px}
@media print{body{margin:0;max-width:none}section.link{break-before:page}svg{max-width:100%;height:auto}
table,svg{break-inside:avoid}p.summary{background:none}}";

const LEGEND: &str = "<p class=\"legend\"><span style=\"color:#1f77b4\">&#9644; RTT p50</span><span style=\"color:#ff7f0e\">&#9644; RTT p99</span><span style=\"color:#c00\">- - SLO threshold</span><span style=\"color:#2ca02c\">&#9679; bandwidth test</span><span style=\"color:#d62728\">&#9644; temperature (right axis) / throttled span</span><span style=\"color:#d00\">&#9632; outage</span><span style=\"color:#9467bd\">&#9632; workload mark</span></p>";

/// `s` as an HTML table; a cell reading PASS or FAIL is coloured.
fn table(o: &mut String, s: &Section, id: Option<&str>) {
    let _ = write!(o, "<h2>{}</h2><table", esc(&s.title));
    if let Some(id) = id {
        let _ = write!(o, " id=\"{id}\"");
    }
    o.push_str("><thead><tr>");
    for h in &s.header {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr></thead><tbody>");
    for row in &s.rows {
        o.push_str("<tr>");
        for c in row {
            match c.as_str() {
                w @ ("PASS" | "FAIL") => {
                    let _ = write!(o, "<td class=\"{w}\">{w}</td>");
                }
                c => {
                    let _ = write!(o, "<td>{}</td>", esc(c));
                }
            }
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table>");
}

/// The SLO thresholds the charts draw, from the verdict's lines.
fn limits(r: &Report) -> Limits {
    let of = |key: &str| {
        r.verdict
            .lines
            .iter()
            .find(|l| l.key == key)
            .and_then(|l| l.threshold)
    };
    Limits {
        rtt_p99_ms: of("rtt_p99"),
        bandwidth_min_gbps: of("bandwidth_mean"),
    }
}

/// Per directed link: its time charts, heatmap and CDF.
fn links(o: &mut String, r: &Report) {
    let marks: Vec<Mark> = r
        .marks
        .iter()
        .map(|m| Mark {
            at: m.at_unix_ns,
            until: m.until_unix_ns,
            text: m.text.clone(),
        })
        .collect();
    let t = axes::Time {
        from: r.from_unix_ns,
        to: r.to_unix_ns.max(r.from_unix_ns + 1),
    };
    let lim = limits(r);
    if r.charts.is_empty() {
        o.push_str("<p class=\"empty\">No directed link reported in the range: no charts.</p>");
        return;
    }
    o.push_str(LEGEND);
    for c in &r.charts {
        let _ = write!(
            o,
            "<section class=\"link\"><h2>{} &rarr; {}</h2><h3>RTT p50 and p99 per window</h3>",
            esc(&c.node),
            esc(&c.peer)
        );
        series::rtt(o, &t, c, &marks, lim);
        o.push_str("<h3>TCP bandwidth and temperature</h3>");
        series::bandwidth(o, &t, c, &marks, lim);
        shifts::note(o, r, &c.node, &c.peer);
        if !c.heatmap.counts.is_empty() {
            o.push_str("<h3>RTT windows over time (heatmap)</h3>");
            dist::heatmap(o, &t, c);
        }
        if !c.cdf.is_empty() {
            o.push_str("<h3>RTT distribution of every probe (CDF)</h3>");
            dist::cdf(o, c, lim.rtt_p99_ms);
        }
        let link = r
            .links
            .iter()
            .find(|l| l.node == c.node && l.peer == c.peer);
        if let Some(l) = link.filter(|l| !l.hourly.is_empty()) {
            table(o, &acceptance::link_hourly(l), None);
        }
        o.push_str("</section>");
    }
}

/// The whole page.
pub fn page(r: &Report) -> String {
    page_with(r, Vec::new())
}

/// The whole page, `extra` sections (a baseline comparison) after the
/// headline and verdict.
pub fn page_with(r: &Report, extra: Vec<Section>) -> String {
    let mut o = String::from("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    let word = r.verdict.word();
    let _ = write!(
        o,
        "<title>soak {} report: {word}</title><style>{STYLE}</style></head><body>",
        esc(&r.soak)
    );
    let _ = write!(
        o,
        "<h1>soak {}: {word}</h1><p>{} .. {} ({}), nodes {}</p><p class=\"summary {word}\">{}</p>",
        esc(&r.soak),
        time::format(r.from_unix_ns),
        time::format(r.to_unix_ns),
        time::format_duration(r.to_unix_ns.saturating_sub(r.from_unix_ns)),
        esc(&r.nodes.join(", ")),
        esc(&summary::paragraph(r))
    );
    // The first two sections are always the headline and the verdict
    // (neither is ever empty); the extras follow them.
    let extras = extra.iter().filter(|x| !x.rows.is_empty()).count();
    let all = render::with_extra(render::sections(r), extra);
    let top = (2 + extras).min(all.len());
    for (i, s) in all[..top].iter().enumerate() {
        table(&mut o, s, (i == 1).then_some("verdict"));
    }
    if !r.correlation.sentence.is_empty() {
        let _ = write!(o, "<p>{}</p>", esc(&r.correlation.sentence));
    }
    links(&mut o, r);
    o.push_str("<section class=\"detail\"><h2 style=\"font-size:20px\">detail</h2>");
    for s in &all[top..] {
        table(&mut o, s, None);
    }
    o.push_str("</section></body></html>\n");
    o
}

#[cfg(test)]
mod tests;
