//! Text renderings of a soak [`Report`]: an aligned table (the seed's rows
//! first, then the verdict and the detail), the same as Markdown, and JSON.
//! Both text forms come from one list of sections, so they cannot disagree.

use std::fmt::Write;

use super::acceptance;
use super::baseline::Comparison;
use super::soak::rdma::RdmaLink;
use super::soak::{Interruptions, Link, Report, Rtt};
use crate::soak::time;

pub use super::section::Section;

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn pct(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => "100%".into(),
        Some(v) => format!("{v:.3}%"),
        None => "-".into(),
    }
}

fn rtt_row(label: String, r: &Rtt) -> Vec<String> {
    vec![
        label,
        r.probes.to_string(),
        r.lost.to_string(),
        format!("{:.3}", r.loss_percent),
        num(r.mean_ms, 3),
        num(r.p50_ms, 3),
        num(r.p99_ms, 3),
        num(r.worst_ms, 3),
    ]
}

/// One row per outage of `i`, of kind `title`.
fn outage_rows(title: String, i: &Interruptions, rows: &mut Vec<Vec<String>>) {
    for o in &i.outages {
        rows.push(vec![
            title.clone(),
            format!("{} -> {}", o.node, o.peer),
            o.service.clone().unwrap_or(o.cause.clone()),
            time::format(o.start_unix_ns),
            if o.open {
                "(open)".into()
            } else {
                time::format(o.end_unix_ns)
            },
            format!("{:.3}", o.seconds),
        ]);
    }
}

/// The sections of every rendering, in order; those without rows are
/// left out.
pub fn sections(r: &Report) -> Vec<Section> {
    let mut s = vec![
        headline(r),
        verdict(r),
        rtt(r),
        rdma(r),
        bandwidth(r),
        interruptions(r),
        outages(r),
        services(r),
        thermal(r),
        correlation(r),
        completeness(r),
        marks(r),
    ];
    s.splice(2..2, acceptance::leading(r));
    s.extend(acceptance::trailing(r));
    s.extend(
        super::findings::all(r)
            .into_iter()
            .map(|(title, header, rows)| Section {
                title,
                header,
                rows,
            }),
    );
    s.retain(|section| !section.rows.is_empty());
    s
}

/// A link's name in the rows (`overall` for all links together).
fn link_name(l: &Link) -> String {
    if l.node == "*" {
        "overall".to_string()
    } else {
        format!("{} -> {}", l.node, l.peer)
    }
}

/// The seed's rows.
fn headline(r: &Report) -> Section {
    let h = &r.headline;
    Section {
        title: "headline".into(),
        header: vec!["indicator", "mean", "worst"],
        rows: vec![
            vec![
                "RTT (ms)".into(),
                num(h.rtt_mean_ms, 2),
                num(h.rtt_worst_ms, 2),
            ],
            vec![
                "TCP bandwidth (Gbps)".into(),
                num(h.bandwidth_mean_gbps, 1),
                num(h.bandwidth_worst_gbps, 1),
            ],
            vec![
                "link interruptions".into(),
                h.interruptions.to_string(),
                h.interruptions_worst_link.to_string(),
            ],
            vec![
                format!("{} availability", h.service.to_uppercase()),
                pct(h.availability_mean_percent),
                pct(h.availability_worst_percent),
            ],
            vec![
                "case temperature (C)".into(),
                num(h.temperature_mean_celsius, 1),
                num(h.temperature_worst_celsius, 1),
            ],
        ],
    }
}

/// One row per SLO line.
fn verdict(r: &Report) -> Section {
    Section {
        title: format!("verdict: {}", r.verdict.word()),
        header: vec!["SLO", "measured", "threshold", "result"],
        rows: r
            .verdict
            .lines
            .iter()
            .map(|l| {
                let unit = if l.unit.is_empty() {
                    String::new()
                } else {
                    format!(" {}", l.unit)
                };
                vec![
                    l.name.to_string(),
                    l.measured
                        .map_or("no data".into(), |m| format!("{m:.3}{unit}")),
                    l.threshold
                        .map_or("not set".into(), |t| format!("{} {t}{unit}", l.op)),
                    l.word().to_string(),
                ]
            })
            .collect(),
    }
}

/// RTT at rest and under load per link, then overall.
fn rtt(r: &Report) -> Section {
    let mut rows = Vec::new();
    for l in r.links.iter().chain([&r.overall]) {
        let name = link_name(l);
        rows.push(rtt_row(format!("{name} rest"), &l.rtt_rest));
        rows.push(rtt_row(format!("{name} load"), &l.rtt_load));
    }
    Section {
        title: "RTT per directed link (at rest, under load)".into(),
        header: vec![
            "link", "probes", "lost", "loss %", "mean ms", "p50 ms", "p99 ms", "worst ms",
        ],
        rows,
    }
}

/// RDMA probing per link: its own transport, not in the RTT rows above
/// nor in the verdict.
fn rdma(r: &Report) -> Section {
    let us = |v: f64| format!("{v:.1}");
    let rows = r
        .rdma
        .iter()
        .map(|l| {
            let errors: Vec<String> = l.errors.iter().map(|(c, n)| format!("{c} {n}")).collect();
            vec![
                format!("{} -> {}", l.node, l.peer),
                l.device.clone(),
                l.sent.to_string(),
                l.lost.to_string(),
                us(l.min_us),
                us(l.mean_us),
                us(l.max_us),
                l.bursts.to_string(),
                burst(l),
                errors.join(", "),
            ]
        })
        .collect();
    Section {
        title: "RDMA per directed link (own transport, not in the verdict)".into(),
        header: vec![
            "link",
            "device",
            "pings",
            "lost",
            "min us",
            "mean us",
            "max us",
            "bursts",
            "burst Gbps mean / worst",
            "errors",
        ],
        rows,
    }
}

/// An RDMA link's bursts: confirmed Gbit/s mean / worst, and what the peer
/// never confirmed; "-" without a burst.
fn burst(l: &RdmaLink) -> String {
    match (l.burst_mean_gbps, l.burst_worst_gbps) {
        (Some(mean), Some(worst)) if l.burst_unconfirmed_bytes > 0 => format!(
            "{mean:.1} / {worst:.1} ({} B unconfirmed)",
            l.burst_unconfirmed_bytes
        ),
        (Some(mean), Some(worst)) => format!("{mean:.1} / {worst:.1}"),
        _ => "-".into(),
    }
}

/// TCP bandwidth per link, then overall.
fn bandwidth(r: &Report) -> Section {
    Section {
        title: "TCP bandwidth per direction".into(),
        header: vec![
            "link",
            "tests",
            "failed",
            "mean Gbps",
            "worst Gbps",
            "best Gbps",
        ],
        rows: r
            .links
            .iter()
            .chain([&r.overall])
            .map(|l| {
                let b = &l.bandwidth;
                vec![
                    link_name(l),
                    b.tests.to_string(),
                    b.failed.to_string(),
                    num(b.mean_gbps, 2),
                    num(b.worst_gbps, 2),
                    num(b.best_gbps, 2),
                ]
            })
            .collect(),
    }
}

/// Interruptions and window coverage per link.
fn interruptions(r: &Report) -> Section {
    Section {
        title: "link interruptions".into(),
        header: vec![
            "link",
            "count",
            "total down s",
            "longest s",
            "windows expected",
            "stored",
            "gaps",
        ],
        rows: r
            .links
            .iter()
            .map(|l| {
                let i = &l.interruptions;
                vec![
                    format!("{} -> {}", l.node, l.peer),
                    i.count.to_string(),
                    format!("{:.3}", i.total_down_seconds),
                    format!("{:.3}", i.longest_seconds),
                    l.coverage.expected.to_string(),
                    l.coverage.stored.to_string(),
                    l.coverage.gaps.len().to_string(),
                ]
            })
            .collect(),
    }
}

/// Every outage: the links', then each service's.
fn outages(r: &Report) -> Section {
    let mut rows = Vec::new();
    outage_rows("link".into(), &r.overall.interruptions, &mut rows);
    for sv in &r.services {
        outage_rows("service".into(), &sv.outages, &mut rows);
    }
    Section {
        title: "outages".into(),
        header: vec!["kind", "link", "cause", "start", "end", "seconds"],
        rows,
    }
}

/// Availability per checked service.
fn services(r: &Report) -> Section {
    Section {
        title: "service availability".into(),
        header: vec![
            "node -> peer",
            "service",
            "checks",
            "up",
            "availability",
            "outages",
            "down s",
        ],
        rows: r
            .services
            .iter()
            .map(|sv| {
                vec![
                    format!("{} -> {}", sv.node, sv.peer),
                    sv.service.clone(),
                    sv.checks.to_string(),
                    sv.up.to_string(),
                    pct(sv.availability_percent),
                    sv.outages.count.to_string(),
                    format!("{:.3}", sv.outages.total_down_seconds),
                ]
            })
            .collect(),
    }
}

/// Every sensor of every node, with the node's throttling.
fn thermal(r: &Report) -> Section {
    Section {
        title: "temperature and throttling".into(),
        header: vec![
            "node",
            "sensor",
            "readings",
            "mean C",
            "worst C",
            "throttle episodes",
            "throttled s",
        ],
        rows: r
            .thermal
            .iter()
            .flat_map(|t| {
                t.sensors.iter().map(move |x| {
                    vec![
                        t.node.clone(),
                        x.sensor.clone(),
                        x.readings.to_string(),
                        format!("{:.1}", x.mean_celsius),
                        format!("{:.1}", x.worst_celsius),
                        t.throttle_episodes.to_string(),
                        format!("{:.0}", t.throttled_seconds),
                    ]
                })
            })
            .collect(),
    }
}

/// During throttling against outside it.
fn correlation(r: &Report) -> Section {
    let c = &r.correlation;
    Section {
        title: format!("thermal correlation: {}", c.sentence),
        header: vec![
            "",
            "bandwidth tests",
            "mean Gbps",
            "RTT windows",
            "RTT mean ms",
        ],
        rows: [("during throttling", &c.throttled), ("outside", &c.normal)]
            .iter()
            .map(|(n, side)| {
                vec![
                    n.to_string(),
                    side.tests.to_string(),
                    num(side.mean_gbps, 2),
                    side.rtt_windows.to_string(),
                    num(side.rtt_mean_ms, 4),
                ]
            })
            .collect(),
    }
}

/// The report's own coverage, one row.
fn completeness(r: &Report) -> Section {
    let k = &r.completeness;
    Section {
        title: "data completeness".into(),
        header: vec![
            "RTT windows expected",
            "stored",
            "complete",
            "gaps",
            "records",
            "sequence holes",
            "spool drops",
        ],
        rows: vec![vec![
            k.expected_windows.to_string(),
            k.stored_windows.to_string(),
            pct(k.percent),
            k.gaps.to_string(),
            k.records.to_string(),
            k.sequence_holes.to_string(),
            k.spool_drops.to_string(),
        ]],
    }
}

/// The workload marks.
fn marks(r: &Report) -> Section {
    Section {
        title: "workload marks".into(),
        header: vec!["from", "until", "what"],
        rows: r
            .marks
            .iter()
            .map(|m| {
                vec![
                    time::format(m.at_unix_ns),
                    m.until_unix_ns.map_or("-".into(), time::format),
                    m.text.clone(),
                ]
            })
            .collect(),
    }
}

/// The report's one-line title: soak, range, length, nodes.
pub fn title(r: &Report) -> String {
    format!(
        "soak {}: {} .. {} ({}), nodes {}",
        r.soak,
        time::format(r.from_unix_ns),
        time::format(r.to_unix_ns),
        time::format_duration(r.to_unix_ns - r.from_unix_ns),
        if r.nodes.is_empty() {
            "-".into()
        } else {
            r.nodes.join(", ")
        }
    )
}

/// A cell as a terminal shows it: control characters (a mark stored by an
/// older build, say) written as escapes, never sent raw.
fn shown(c: &str) -> String {
    if !c.chars().any(char::is_control) {
        return c.to_string();
    }
    c.chars()
        .map(|ch| match ch.is_control() {
            true => ch.escape_default().to_string(),
            false => ch.to_string(),
        })
        .collect()
}

/// A cell as Markdown renders it as text: [`shown`], and no HTML (`<`,
/// `&`) or column break (`|`) of its own.
fn md_cell(c: &str) -> String {
    shown(c)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('|', "\\|")
}

/// The aligned-text table.
pub fn table(r: &Report) -> String {
    table_with(r, Vec::new())
}

/// The aligned-text table, `extra` sections (a baseline comparison) after
/// the headline and verdict.
pub fn table_with(r: &Report, extra: Vec<Section>) -> String {
    let mut o = format!("{}\n", title(r));
    for s in with_extra(sections(r), extra) {
        let _ = writeln!(o, "\n{}", s.title);
        let cols = s.header.len();
        let mut w: Vec<usize> = s.header.iter().map(|h| h.len()).collect();
        let rows: Vec<Vec<String>> = s
            .rows
            .iter()
            .map(|row| row.iter().map(|c| shown(c)).collect())
            .collect();
        for row in &rows {
            for (i, c) in row.iter().enumerate().take(cols) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |cells: Vec<&str>| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate() {
                let pad = w[i] - c.chars().count();
                if i == 0 {
                    l.push_str(c);
                    l.push_str(&" ".repeat(pad));
                } else {
                    l.push_str("  ");
                    l.push_str(&" ".repeat(pad));
                    l.push_str(c);
                }
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(o, "{}", line(s.header.clone()));
        for row in &rows {
            let _ = writeln!(o, "{}", line(row.iter().map(String::as_str).collect()));
        }
    }
    o
}

/// Markdown: a heading, then one table per section.
pub fn markdown(r: &Report) -> String {
    markdown_with(r, Vec::new())
}

/// Markdown with `extra` sections, placed as in [`table_with`].
pub fn markdown_with(r: &Report, extra: Vec<Section>) -> String {
    let mut o = format!("# {}\n", title(r));
    for s in with_extra(sections(r), extra) {
        let _ = writeln!(o, "\n## {}\n", s.title);
        let _ = writeln!(o, "| {} |", s.header.join(" | "));
        let _ = writeln!(o, "|{}", "---|".repeat(s.header.len()));
        for row in &s.rows {
            let cells: Vec<String> = row.iter().map(|c| md_cell(c)).collect();
            let _ = writeln!(o, "| {} |", cells.join(" | "));
        }
    }
    o
}

/// `extra` inserted after the headline and verdict (the first two
/// sections), where a reader compares the figures they repeat.
pub fn with_extra(mut s: Vec<Section>, extra: Vec<Section>) -> Vec<Section> {
    let at = s.len().min(2);
    s.splice(at..at, extra.into_iter().filter(|x| !x.rows.is_empty()));
    s
}

/// Pretty JSON.
pub fn json(r: &Report) -> String {
    json_with(r, None)
}

/// Pretty JSON, with the baseline comparison under `baseline` when given.
pub fn json_with(r: &Report, baseline: Option<&Comparison>) -> String {
    let mut v = serde_json::to_value(r).expect("the report serializes");
    if let (Some(c), Some(o)) = (baseline, v.as_object_mut()) {
        o.insert(
            "baseline".into(),
            serde_json::to_value(c).expect("the comparison serializes"),
        );
    }
    serde_json::to_string_pretty(&v).expect("a JSON value serializes") + "\n"
}

/// The baseline comparison as a section: each figure, the baseline's, the
/// difference.
pub fn comparison(c: &Comparison) -> Section {
    Section {
        title: format!(
            "compared with baseline {} ({}): {}",
            c.baseline,
            time::format_duration(c.to_unix_ns.saturating_sub(c.from_unix_ns)),
            c.verdict
        ),
        header: vec!["figure", "this", "baseline", "difference", "change %"],
        rows: c
            .rows
            .iter()
            .map(|d| {
                let unit = |v: Option<f64>| {
                    v.map_or("-".into(), |v| {
                        format!(
                            "{v:.3}{}{}",
                            if d.unit.is_empty() { "" } else { " " },
                            d.unit
                        )
                    })
                };
                let word =
                    |w: &Option<&'static str>| w.map(|w| format!(" {w}")).unwrap_or_default();
                vec![
                    d.figure.clone(),
                    unit(d.current) + &word(&d.current_result),
                    unit(d.baseline) + &word(&d.baseline_result),
                    d.difference.map_or("-".into(), |v| format!("{v:+.3}")),
                    d.difference_percent
                        .map_or("-".into(), |v| format!("{v:+.1}%")),
                ]
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::soak::{Builder, Scope};

    #[test]
    fn cells_carry_no_control_characters_or_html() {
        assert_eq!(shown("xcode build"), "xcode build");
        assert_eq!(shown("\u{1b}[2Jx\n"), "\\u{1b}[2Jx\\n");
        assert_eq!(
            md_cell("<img src=x onerror=alert(1)> a|b & c -> d"),
            "&lt;img src=x onerror=alert(1)> a\\|b &amp; c -> d"
        );
    }

    #[test]
    fn table_starts_with_the_seed_rows_and_md_matches() {
        let r = Builder::new(Scope {
            name: "empty".into(),
            from_unix_ns: 0,
            to_unix_ns: 3_600_000_000_000,
            nodes: vec![],
            slo: Default::default(),
            marks: vec![],
        })
        .finish();
        let t = table(&r);
        let rows: Vec<&str> = t
            .lines()
            .skip(4)
            .take(5)
            .map(|l| l.split("  ").next().unwrap())
            .collect();
        assert_eq!(
            rows,
            [
                "RTT (ms)",
                "TCP bandwidth (Gbps)",
                "link interruptions",
                "SSH availability",
                "case temperature (C)"
            ],
            "{t}"
        );
        assert!(t.contains("verdict: FAIL"), "{t}");
        assert!(t.contains("no data"), "{t}");
        let md = markdown(&r);
        assert!(md.contains("| RTT (ms) | - | - |"), "{md}");
    }
}
