//! The acceptance sections of a soak report as titled rows (changepoints,
//! counter growth, inventory, probe overhead), which
//! [`super::render::sections`] draws in every format beside the others.
//! Plain tuples, so this file needs nothing of the renderer.

use super::soak::inventory::Interface;
use super::soak::Report;
use crate::soak::time;

/// (title, column names, rows).
pub type Rows = (String, Vec<&'static str>, Vec<Vec<String>>);

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// Every acceptance section, in order.
pub fn all(r: &Report) -> Vec<Rows> {
    vec![
        changepoints(r),
        counters(r),
        nodes(r),
        link_ends(r),
        findings(r),
        agents(r),
        traffic(r),
    ]
}

/// Each changepoint with the event beside it.
fn changepoints(r: &Report) -> Rows {
    let rows = r
        .changepoints
        .iter()
        .map(|c| {
            let digits = if c.unit == "ms" { 4 } else { 2 };
            vec![
                format!("{} -> {}", c.node, c.peer),
                if c.series == "rtt_p50" {
                    "RTT p50 per minute".into()
                } else {
                    "bandwidth per test".into()
                },
                time::format(c.at_unix_ns),
                format!("{:.digits$} {}", c.before, c.unit),
                format!("{:.digits$} {}", c.after, c.unit),
                format!("{:+.1}%", c.relative_change_percent),
                match (&c.event, c.event_offset_seconds) {
                    (Some(e), Some(off)) => format!("{e} ({off:+.0} s)"),
                    _ => "none within 10 min".into(),
                },
            ]
        })
        .collect();
    (
        "changepoints (RTT level and bandwidth)".into(),
        vec![
            "link",
            "series",
            "at",
            "before",
            "after",
            "change",
            "nearest event",
        ],
        rows,
    )
}

/// Counter growth per node and interface.
fn counters(r: &Report) -> Rows {
    let rows = r
        .counter_growth
        .iter()
        .map(|g| {
            let c = &g.growth;
            vec![
                g.node.clone(),
                g.interface.clone(),
                c.receive_errors.to_string(),
                c.transmit_errors.to_string(),
                c.receive_drops.to_string(),
                c.transmit_drops.to_string(),
                c.carrier_changes.to_string(),
                g.resets.to_string(),
            ]
        })
        .collect();
    (
        "counter growth over the range".into(),
        vec![
            "node",
            "interface",
            "rx errors",
            "tx errors",
            "rx drops",
            "tx drops",
            "carrier changes",
            "resets",
        ],
        rows,
    )
}

fn speed(i: &Interface) -> String {
    opt(i.speed_gbps, 0)
}

fn mtu(i: &Interface) -> String {
    i.mtu.map_or("-".into(), |m| m.to_string())
}

/// Per node its software and each interface.
fn nodes(r: &Report) -> Rows {
    let mut rows = Vec::new();
    for n in &r.inventory.nodes {
        let head = |i: Option<&Interface>| {
            let dash = || "-".to_string();
            vec![
                n.node.clone(),
                if n.os.is_empty() {
                    dash()
                } else {
                    n.os.clone()
                },
                if n.agent_version.is_empty() {
                    dash()
                } else {
                    n.agent_version.clone()
                },
                i.map_or_else(dash, |i| i.name.clone()),
                i.map_or_else(dash, |i| i.kind.clone()),
                i.map_or_else(dash, speed),
                i.map_or_else(dash, |i| i.generation.clone()),
                i.map_or_else(dash, mtu),
                i.map_or_else(dash, |i| i.members.join(" ")),
            ]
        };
        if n.interfaces.is_empty() {
            rows.push(head(None));
        }
        rows.extend(n.interfaces.iter().map(|i| head(Some(i))));
    }
    (
        "inventory: nodes and interfaces".into(),
        vec![
            "node",
            "OS",
            "agent",
            "interface",
            "kind",
            "Gbps",
            "generation",
            "MTU",
            "members",
        ],
        rows,
    )
}

fn end(i: &Option<Interface>) -> [String; 4] {
    match i {
        Some(i) => [i.name.clone(), mtu(i), speed(i), i.generation.clone()],
        None => ["-".into(), "-".into(), "-".into(), "-".into()],
    }
}

/// Per link both ends side by side.
fn link_ends(r: &Report) -> Rows {
    let rows = r
        .inventory
        .links
        .iter()
        .map(|l| {
            let [a_if, a_mtu, a_speed, a_gen] = end(&l.node_end);
            let [b_if, b_mtu, b_speed, b_gen] = end(&l.peer_end);
            vec![
                format!("{} -- {}", l.node, l.peer),
                a_if,
                b_if,
                format!("{a_mtu} / {b_mtu}"),
                format!("{a_speed} / {b_speed}"),
                format!("{a_gen} / {b_gen}"),
                if l.mismatches.is_empty() {
                    "ok".into()
                } else {
                    format!("MISMATCH: {}", l.mismatches.join(", "))
                },
            ]
        })
        .collect();
    (
        "inventory: link ends side by side".into(),
        vec![
            "link",
            "interface",
            "peer interface",
            "MTU",
            "Gbps",
            "generation",
            "ends",
        ],
        rows,
    )
}

/// The inventory's findings in words: per link, then the cabling's.
fn findings(r: &Report) -> Rows {
    let links = r.inventory.links.iter().flat_map(|l| {
        l.findings
            .iter()
            .map(move |f| vec![format!("{} -- {}", l.node, l.peer), f.clone()])
    });
    let cabling = r
        .inventory
        .cabling_findings
        .iter()
        .map(|f| vec!["cabling".to_string(), f.clone()]);
    let rows = links.chain(cabling).collect();
    ("inventory findings".into(), vec!["link", "finding"], rows)
}

/// Each agent's CPU and memory.
fn agents(r: &Report) -> Rows {
    let mib = |b: f64| format!("{:.1}", b / (1u64 << 20) as f64);
    let rows = r
        .overhead
        .agents
        .iter()
        .map(|a| {
            vec![
                a.node.clone(),
                a.readings.to_string(),
                opt(a.cpu_percent, 2),
                a.rss_mean_bytes.map_or("-".into(), mib),
                a.rss_max_bytes.map_or("-".into(), |b| mib(b as f64)),
            ]
        })
        .collect();
    (
        format!("probe overhead: agents. {}", r.overhead.sentence),
        vec![
            "node",
            "readings",
            "CPU % of a core",
            "RSS mean MiB",
            "RSS max MiB",
        ],
        rows,
    )
}

/// Each link's soak traffic.
fn traffic(r: &Report) -> Rows {
    let rows = r
        .overhead
        .links
        .iter()
        .map(|l| {
            vec![
                format!("{} -> {}", l.node, l.peer),
                opt(l.speed_gbps, 0),
                l.probes.to_string(),
                l.probe_bytes.to_string(),
                opt(l.probe_share_percent, 5),
                l.tests.to_string(),
                format!("{:.0}", l.test_seconds),
                l.test_bytes.to_string(),
                opt(l.test_share_percent, 3),
            ]
        })
        .collect();
    (
        "probe overhead: soak traffic per link".into(),
        vec![
            "link",
            "Gbps",
            "probes",
            "probe bytes",
            "probe % of link",
            "tests",
            "test s",
            "test bytes",
            "test % of link",
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::soak::shifts::Shift;

    #[test]
    fn changepoint_rows_name_the_event_or_say_none() {
        let mut r = Report::default();
        let shift = |event: Option<&str>| Shift {
            node: "a".into(),
            peer: "b".into(),
            series: "rtt_p50",
            at_unix_ns: 1_795_996_800_000_000_000,
            before: 0.09,
            after: 0.117,
            unit: "ms",
            relative_change_percent: 30.0,
            event: event.map(Into::into),
            event_offset_seconds: event.map(|_| -60.0),
        };
        r.changepoints = vec![shift(Some("workload mark `nfs` began")), shift(None)];
        let (title, header, rows) = changepoints(&r);
        assert!(title.starts_with("changepoints"));
        assert_eq!(header.len(), rows[0].len());
        assert_eq!(
            rows[0],
            [
                "a -> b",
                "RTT p50 per minute",
                "2026-11-30T00:00:00Z",
                "0.0900 ms",
                "0.1170 ms",
                "+30.0%",
                "workload mark `nfs` began (-60 s)"
            ]
        );
        assert_eq!(rows[1][6], "none within 10 min");
        // Every section has as many cells a row as columns.
        for (t, h, rows) in all(&r) {
            assert!(rows.iter().all(|row| row.len() == h.len()), "{t}");
        }
    }
}
