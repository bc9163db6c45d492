//! The acceptance sections of every rendering (table, Markdown, the HTML
//! page's tables): availability and error budget per link, the fleet
//! ranking, the worst quarter hours, time above the thresholds and the
//! RTT distribution right after the verdict; the per-hour table and the
//! definitions at the end.

use super::section::Section;
use super::soak::{Hour, Link, Quarter, Report, Rtt};
use crate::soak::time;

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// A percentage that shows how far from 100 it is (99.9990 is not 100).
fn pct(v: Option<f64>) -> String {
    match v {
        Some(100.0) => "100%".into(),
        Some(v) => format!("{v:.4}%"),
        None => "-".into(),
    }
}

/// Whole seconds, as they mostly are, else to the millisecond.
fn sec(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn name(l: &Link) -> String {
    if l.node == "*" {
        "overall".to_string()
    } else {
        format!("{} -> {}", l.node, l.peer)
    }
}

/// The links, then all of them.
fn all(r: &Report) -> impl Iterator<Item = &Link> {
    r.links.iter().chain([&r.overall])
}

/// The sections placed after the verdict.
pub fn leading(r: &Report) -> Vec<Section> {
    vec![
        availability(r),
        fleet(r),
        worst_quarter(r),
        what_happened(r),
        above(r),
        distribution(r),
    ]
}

/// The sections placed at the end.
pub fn trailing(r: &Report) -> Vec<Section> {
    vec![hourly(r), definitions(r)]
}

fn availability(r: &Report) -> Section {
    Section {
        title: "availability per directed link (RTT-window seconds)".into(),
        header: vec![
            "link",
            "UAS s",
            "ES s",
            "SES s",
            "availability",
            "budget used",
            "outages",
            "longest s",
            "MTBF s",
            "MTTR s",
        ],
        rows: all(r)
            .map(|l| {
                let a = &l.availability;
                vec![
                    name(l),
                    sec(a.uas_seconds),
                    sec(a.es_seconds),
                    sec(a.ses_seconds),
                    pct(a.availability_percent),
                    a.budget_consumed_percent
                        .map_or("blown".into(), |b| format!("{b:.1}%")),
                    a.outages.to_string(),
                    sec(a.longest_outage_seconds),
                    num(a.mtbf_seconds, 0),
                    num(a.mttr_seconds, 1),
                ]
            })
            .collect(),
    }
}

fn fleet(r: &Report) -> Section {
    let f = &r.fleet;
    let mut rows: Vec<Vec<String>> = [("link", &f.links), ("node", &f.nodes)]
        .into_iter()
        .flat_map(|(kind, ranks)| {
            ranks.iter().enumerate().map(move |(i, k)| {
                vec![
                    format!("{kind} {}", i + 1),
                    k.name.clone(),
                    sec(k.uas_seconds),
                    sec(k.ses_seconds),
                    num(k.p99_ms, 3),
                ]
            })
        })
        .collect();
    if !rows.is_empty() {
        rows.push(vec![
            "all links good".into(),
            format!("{} s", sec(f.all_good_seconds)),
            pct(f.all_good_percent),
            "of the range".into(),
            String::new(),
        ]);
    }
    Section {
        title: "fleet, worst first (UAS, then SES, then p99)".into(),
        header: vec!["rank", "link or node", "UAS s", "SES s", "p99 ms"],
        rows,
    }
}

/// The links' worst quarter hours, all links' first.
fn quarters(r: &Report) -> impl Iterator<Item = (&Link, &Quarter)> {
    [&r.overall]
        .into_iter()
        .chain(&r.links)
        .filter_map(|l| Some((l, l.worst_quarter.as_ref()?)))
}

fn worst_quarter(r: &Report) -> Section {
    Section {
        title: "worst quarter hour (UTC :00/:15/:30/:45)".into(),
        header: vec!["link", "start", "UAS s", "SES s", "ES s", "p99 ms"],
        rows: quarters(r)
            .map(|(l, q)| {
                vec![
                    name(l),
                    time::format(q.start_unix_ns),
                    sec(q.uas_seconds),
                    sec(q.ses_seconds),
                    sec(q.es_seconds),
                    num(q.p99_ms, 3),
                ]
            })
            .collect(),
    }
}

/// One cell a row (a first column reads left-aligned in the table).
fn what_happened(r: &Report) -> Section {
    Section {
        title: "what happened in each worst quarter hour".into(),
        header: vec!["link: event"],
        rows: quarters(r)
            .flat_map(|(l, q)| {
                let events = if q.events.is_empty() {
                    vec!["nothing recorded".to_string()]
                } else {
                    q.events.clone()
                };
                events
                    .into_iter()
                    .map(move |e| vec![format!("{}: {e}", name(l))])
            })
            .collect(),
    }
}

fn above(r: &Report) -> Section {
    Section {
        title: "time above threshold".into(),
        header: vec![
            "link",
            "RTT p99 over SLO s",
            "share",
            "tests under bandwidth SLO",
            "s",
            "share",
        ],
        rows: all(r)
            .map(|l| {
                let a = &l.above_threshold;
                vec![
                    name(l),
                    sec(a.rtt_p99_seconds),
                    pct(a.rtt_p99_percent),
                    a.bandwidth_tests
                        .map_or("not set".into(), |n| n.to_string()),
                    a.bandwidth_seconds.map_or("-".into(), sec),
                    pct(a.bandwidth_percent),
                ]
            })
            .collect(),
    }
}

fn dist_row(label: String, r: &Rtt) -> Vec<String> {
    vec![
        label,
        num(r.p50_ms, 3),
        num(r.p90_ms, 3),
        num(r.p99_ms, 3),
        num(r.p999_ms, 3),
        num(r.worst_ms, 3),
    ]
}

fn distribution(r: &Report) -> Section {
    let mut rows = Vec::new();
    for l in all(r) {
        rows.push(dist_row(format!("{} rest", name(l)), &l.rtt_rest));
        rows.push(dist_row(format!("{} load", name(l)), &l.rtt_load));
    }
    Section {
        title: "RTT distribution (ms)".into(),
        header: vec!["link", "p50", "p90", "p99", "p99.9", "worst"],
        rows,
    }
}

fn hourly(r: &Report) -> Section {
    hours("per hour, all links".into(), &r.overall.hourly)
}

/// One link's per-hour table (the HTML page shows it under the link's
/// charts; the text formats keep to all links together).
pub fn link_hourly(l: &Link) -> Section {
    hours(format!("per hour, {}", name(l)), &l.hourly)
}

fn hours(title: String, hours: &[Hour]) -> Section {
    Section {
        title,
        header: vec![
            "hour", "probes", "loss %", "p50 ms", "p99 ms", "worst ms", "ES s", "UAS s",
        ],
        rows: hours
            .iter()
            .map(|h| {
                vec![
                    time::format(h.start_unix_ns),
                    h.probes.to_string(),
                    format!("{:.3}", h.loss_percent),
                    num(h.p50_ms, 3),
                    num(h.p99_ms, 3),
                    num(h.worst_ms, 3),
                    sec(h.es_seconds),
                    sec(h.uas_seconds),
                ]
            })
            .collect(),
    }
}

/// The terms above, as the report uses them (only with the figures).
fn definitions(r: &Report) -> Section {
    let rows = [
        ("UAS", "unavailable second: an RTT window overlapping an outage of its directed link (carrier or probe loss), counted in window seconds"),
        ("ES", "errored second: a window outside outages that lost at least one probe"),
        ("SES", "severely errored second (a subset of ES): a window that lost at least 30 % of the probes it sent"),
        ("availability", "1 - UAS / range, per directed link"),
        ("budget used", "UAS / ((1 - link_availability_min_percent / 100) x range); over 100 % the budget is blown (FAIL)"),
        ("MTBF, MTTR", "up time and down time over the range, each divided by the link's outages (overlapping ones merged)"),
        ("worst quarter hour", "UTC-aligned 15-minute bin with the most UAS, then SES, then ES, then the highest window p99"),
        ("time above threshold", "seconds of windows whose p99 exceeds rtt_p99_ms; bandwidth tests below bandwidth_mean_min_gbps when set"),
        ("all links good", "share of the range in which every link had a window, available, answered and with p99 within rtt_p99_ms"),
    ];
    Section {
        title: "definitions".into(),
        header: vec!["term: meaning"],
        rows: rows
            .iter()
            .filter(|_| !r.links.is_empty())
            .map(|(a, b)| vec![format!("{a}: {b}")])
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::soak::{Availability, Fleet, Rank};

    fn report() -> Report {
        let link = Link {
            node: "a".into(),
            peer: "b".into(),
            availability: Availability {
                uas_seconds: 37.0,
                es_seconds: 2.5,
                availability_percent: Some(99.9),
                budget_consumed_percent: None,
                ..Default::default()
            },
            worst_quarter: Some(Quarter {
                start_unix_ns: 900_000_000_000,
                uas_seconds: 37.0,
                events: vec!["mark \"x\"".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        Report {
            links: vec![link],
            overall: Link {
                node: "*".into(),
                peer: "*".into(),
                ..Default::default()
            },
            fleet: Fleet {
                links: vec![Rank {
                    name: "a -> b".into(),
                    uas_seconds: 37.0,
                    ..Default::default()
                }],
                all_good_seconds: 10.0,
                all_good_percent: Some(100.0),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn sections_carry_the_figures() {
        let r = report();
        let s = leading(&r);
        let a = &s[0].rows[0];
        assert_eq!(a[..5], ["a -> b", "37", "2.500", "0", "99.9000%"]);
        assert_eq!(a[5], "blown", "a zero budget spent has no figure");
        assert_eq!(s[1].rows[0][..3], ["link 1", "a -> b", "37"]);
        assert_eq!(s[1].rows[1][..3], ["all links good", "10 s", "100%"]);
        assert_eq!(s[2].rows.len(), 1, "the overall has no quarter: one row");
        assert_eq!(s[2].rows[0][1], "1970-01-01T00:15:00Z");
        assert_eq!(s[3].rows, [["a -> b: mark \"x\""]]);
        let t = trailing(&r);
        assert_eq!(t[0].rows.len(), 0, "no hours without a range");
        assert!(t[1].rows[0][0].starts_with("UAS: unavailable second"));
        assert!(trailing(&Report::default())[1].rows.is_empty());
    }
}
