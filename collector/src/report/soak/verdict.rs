//! The SLO verdict: one line per threshold, PASS or FAIL with the measured
//! value beside it. A line without data fails when the SLO `require`s it (a
//! report must not pass on holes) and otherwise says "no data" and does not
//! decide (no sshd, no sensors); a line without a threshold (bandwidth and
//! temperature have no default) is shown and does not decide.

use super::counters::Growth;
use super::{Completeness, Headline, Line, Link, Verdict};
use crate::soak::Slo;

fn line(
    key: &'static str,
    name: &'static str,
    unit: &'static str,
    op: &'static str,
    measured: Option<f64>,
    threshold: Option<f64>,
) -> Line {
    let pass = threshold.map(|t| match (measured, op) {
        (None, _) => false,
        (Some(m), "<=") => m <= t,
        (Some(m), _) => m >= t,
    });
    Line {
        key,
        name,
        unit,
        op,
        measured,
        threshold,
        pass,
    }
}

/// `l` undecided when it has no data and `slo` does not require it.
fn excused(slo: &Slo, mut l: Line) -> Line {
    if l.measured.is_none() && !slo.requires(l.key) {
        l.pass = None;
    }
    l
}

/// Judges the report's figures against `slo`.
pub fn judge(slo: &Slo, overall: &Link, h: &Headline, c: &Completeness) -> Verdict {
    let lines: Vec<Line> = vec![
        line(
            "rtt_worst",
            "RTT worst",
            "ms",
            "<=",
            overall.rtt.worst_ms,
            Some(slo.rtt_worst_ms),
        ),
        line(
            "rtt_p99",
            "RTT p99",
            "ms",
            "<=",
            overall.rtt.p99_ms,
            Some(slo.rtt_p99_ms),
        ),
        line(
            "interruptions",
            "link interruptions",
            "",
            "<=",
            Some(h.interruptions as f64),
            Some(slo.interruptions_max as f64),
        ),
        line(
            "availability",
            "service availability (worst)",
            "%",
            ">=",
            h.availability_worst_percent,
            Some(slo.availability_min_percent),
        ),
        line(
            "bandwidth_mean",
            "TCP bandwidth mean",
            "Gbps",
            ">=",
            h.bandwidth_mean_gbps,
            slo.bandwidth_mean_min_gbps,
        ),
        line(
            "temperature_worst",
            "temperature worst",
            "C",
            "<=",
            h.temperature_worst_celsius,
            slo.temperature_worst_max_celsius,
        ),
        line(
            "completeness",
            "data completeness",
            "%",
            ">=",
            c.percent,
            Some(slo.completeness_min_percent),
        ),
    ];
    let lines: Vec<Line> = lines.into_iter().map(|l| excused(slo, l)).collect();
    Verdict {
        pass: lines.iter().all(|l| l.pass != Some(false)),
        lines,
    }
}

/// `v` with the error-budget line: the most any link consumed of its
/// budget (`link_availability_min_percent`), FAIL over 100 %. A link whose
/// budget is zero and spent has no figure and fails all the same; no links
/// at all is "no data".
pub fn with_budget(slo: &Slo, v: Verdict, links: &[Link]) -> Verdict {
    let consumed = || links.iter().map(|l| l.availability.budget_consumed_percent);
    let blown = consumed().any(|c| c.is_none());
    let worst = consumed().flatten().reduce(f64::max);
    let l = line(
        "error_budget",
        "error budget consumed (worst link)",
        "%",
        "<=",
        worst.filter(|_| !blown),
        Some(100.0),
    );
    // A zero budget that was spent has no figure, and is blown all the same.
    let l = match blown {
        true => Line {
            pass: Some(false),
            ..l
        },
        false => excused(slo, l),
    };
    with_line(v, l)
}

/// The interface-errors line: receive and transmit errors grown over the
/// range on every interface of the soak's nodes (no readings: no data).
pub fn interface_errors(slo: &Slo, growth: &[Growth]) -> Line {
    let measured =
        (!growth.is_empty()).then(|| growth.iter().map(|g| g.growth.errors()).sum::<u64>() as f64);
    let l = line(
        "interface_errors",
        "interface errors grown",
        "",
        "<=",
        measured,
        Some(slo.interface_errors_max as f64),
    );
    excused(slo, l)
}

/// `v` with `l` added, its overall result judged again.
pub fn with_line(mut v: Verdict, l: Line) -> Verdict {
    v.pass = v.pass && l.pass != Some(false);
    v.lines.push(l);
    v
}
