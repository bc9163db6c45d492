//! A report beside a baseline's (`report --baseline-soak NAME`, or
//! `--baseline-from/--baseline-to`): each headline figure and each SLO
//! line's measured value, the baseline's, and the difference, so "did the
//! new cable or the OS update change anything" has an answer. Pure: two
//! finished reports in, rows out; the renderers draw them.

use serde::Serialize;

use super::soak::{Headline, Report};

/// One figure of both reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delta {
    /// What it is (`RTT mean`, `SLO RTT p99`).
    pub figure: String,
    /// Unit of the three values.
    pub unit: &'static str,
    /// This report's value (None: no data).
    pub current: Option<f64>,
    /// The baseline's.
    pub baseline: Option<f64>,
    /// current - baseline, when both have data.
    pub difference: Option<f64>,
    /// The difference relative to the baseline, percent (None when the
    /// baseline is 0 or missing).
    pub difference_percent: Option<f64>,
    /// For an SLO line: this report's PASS, FAIL or n/a.
    pub current_result: Option<&'static str>,
    /// The baseline's.
    pub baseline_result: Option<&'static str>,
}

/// The comparison with a baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The baseline's name (its soak, or its range).
    pub baseline: String,
    /// Its range start, unix ns.
    pub from_unix_ns: u64,
    /// Its range end, unix ns.
    pub to_unix_ns: u64,
    /// Its verdict, `PASS` or `FAIL`.
    pub verdict: &'static str,
    /// Headline figures, then SLO lines, in the reports' order.
    pub rows: Vec<Delta>,
}

fn delta(figure: String, unit: &'static str, current: Option<f64>, baseline: Option<f64>) -> Delta {
    let difference = current.zip(baseline).map(|(c, b)| c - b);
    Delta {
        figure,
        unit,
        current,
        baseline,
        difference,
        difference_percent: difference
            .zip(baseline)
            .filter(|(_, b)| *b != 0.0)
            .map(|(d, b)| d / b.abs() * 100.0),
        current_result: None,
        baseline_result: None,
    }
}

/// The headline's figures, name and unit, in the seed table's order.
fn headline(h: &Headline) -> Vec<(String, &'static str, Option<f64>)> {
    let service = h.service.to_uppercase();
    vec![
        ("RTT mean".into(), "ms", h.rtt_mean_ms),
        ("RTT worst".into(), "ms", h.rtt_worst_ms),
        ("TCP bandwidth mean".into(), "Gbps", h.bandwidth_mean_gbps),
        ("TCP bandwidth worst".into(), "Gbps", h.bandwidth_worst_gbps),
        (
            "link interruptions".into(),
            "",
            Some(h.interruptions as f64),
        ),
        (
            "link interruptions, worst link".into(),
            "",
            Some(h.interruptions_worst_link as f64),
        ),
        (
            format!("{service} availability mean"),
            "%",
            h.availability_mean_percent,
        ),
        (
            format!("{service} availability worst"),
            "%",
            h.availability_worst_percent,
        ),
        (
            "case temperature mean".into(),
            "C",
            h.temperature_mean_celsius,
        ),
        (
            "case temperature worst".into(),
            "C",
            h.temperature_worst_celsius,
        ),
    ]
}

/// `current` beside `base`: every headline figure, then every SLO line of
/// `current` with the baseline's line of the same key (a line the
/// baseline lacks compares with no data).
pub fn compare(current: &Report, base: &Report) -> Comparison {
    let mut rows: Vec<Delta> = headline(&current.headline)
        .into_iter()
        .zip(headline(&base.headline))
        .map(|((name, unit, c), (_, _, b))| delta(name, unit, c, b))
        .collect();
    for l in &current.verdict.lines {
        let b = base.verdict.lines.iter().find(|b| b.key == l.key);
        let mut d = delta(
            format!("SLO {}", l.name),
            l.unit,
            l.measured,
            b.and_then(|b| b.measured),
        );
        d.current_result = Some(l.word());
        d.baseline_result = Some(b.map_or("n/a", |b| b.word()));
        rows.push(d);
    }
    Comparison {
        baseline: base.soak.clone(),
        from_unix_ns: base.from_unix_ns,
        to_unix_ns: base.to_unix_ns,
        verdict: base.verdict.word(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::soak::{Builder, Scope};

    fn empty(name: &str) -> Report {
        Builder::new(Scope {
            name: name.into(),
            from_unix_ns: 0,
            to_unix_ns: 3_600_000_000_000,
            nodes: vec![],
            slo: Default::default(),
            marks: vec![],
        })
        .finish()
    }

    #[test]
    fn differences_are_current_minus_baseline() {
        let mut now = empty("new-cable");
        let mut base = empty("old-cable");
        now.headline.rtt_mean_ms = Some(0.09);
        base.headline.rtt_mean_ms = Some(0.12);
        now.headline.interruptions = 1;
        base.headline.interruptions = 0;
        now.headline.bandwidth_mean_gbps = Some(70.0);
        let c = compare(&now, &base);
        assert_eq!(c.baseline, "old-cable");
        let row = |f: &str| c.rows.iter().find(|d| d.figure == f).unwrap().clone();
        let rtt = row("RTT mean");
        assert!((rtt.difference.unwrap() + 0.03).abs() < 1e-12, "{rtt:?}");
        assert!((rtt.difference_percent.unwrap() + 25.0).abs() < 1e-9);
        // From 0 there is a difference but no relative change.
        let i = row("link interruptions");
        assert_eq!((i.difference, i.difference_percent), (Some(1.0), None));
        // No data on one side: no difference.
        let bw = row("TCP bandwidth mean");
        assert_eq!((bw.baseline, bw.difference), (None, None));
        // Every SLO line of the report, with both results.
        let slo: Vec<&Delta> = c
            .rows
            .iter()
            .filter(|d| d.current_result.is_some())
            .collect();
        assert_eq!(slo.len(), now.verdict.lines.len());
        assert!(slo.iter().all(|d| d.figure.starts_with("SLO ")));
        assert_eq!(slo[0].baseline_result, Some(base.verdict.lines[0].word()));
    }
}
