//! Under each link's charts, its changepoints in words (the full table is
//! in the detail): when the RTT level or the bandwidth moved, by how much,
//! and next to what.

use std::fmt::Write;

use super::text::esc;
use crate::report::soak::Report;
use crate::soak::time;

/// The changepoints of `node` -> `peer` as one note (nothing when none).
pub fn note(o: &mut String, r: &Report, node: &str, peer: &str) {
    let items: Vec<String> = r
        .changepoints
        .iter()
        .filter(|c| c.node == node && c.peer == peer)
        .map(|c| {
            let what = if c.series == "rtt_p50" {
                "RTT p50"
            } else {
                "bandwidth"
            };
            let near = c
                .event
                .as_ref()
                .map_or(String::new(), |e| format!(", next to {e}"));
            format!(
                "{what} {:+.1} % at {}{near}",
                c.relative_change_percent,
                time::format(c.at_unix_ns)
            )
        })
        .collect();
    if !items.is_empty() {
        let _ = write!(
            o,
            "<p class=\"note changepoints\">Changepoints: {}.</p>",
            esc(&items.join("; "))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::soak::shifts::Shift;

    #[test]
    fn a_links_changepoints_in_one_escaped_note() {
        let mut r = Report::default();
        r.changepoints.push(Shift {
            node: "a".into(),
            peer: "b".into(),
            series: "rtt_p50",
            at_unix_ns: 1_795_996_800_000_000_000,
            before: 0.1,
            after: 0.13,
            unit: "ms",
            relative_change_percent: 30.0,
            event: Some("workload mark `<x>` began".into()),
            event_offset_seconds: Some(0.0),
        });
        let mut o = String::new();
        note(&mut o, &r, "b", "a");
        assert_eq!(o, "");
        note(&mut o, &r, "a", "b");
        assert_eq!(
            o,
            "<p class=\"note changepoints\">Changepoints: RTT p50 +30.0 % at 2026-11-30T00:00:00Z, next to workload mark `&lt;x&gt;` began.</p>"
        );
    }
}
