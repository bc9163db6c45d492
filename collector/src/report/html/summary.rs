//! The page's opening paragraph, pure: the verdict and its three biggest
//! reasons in words. Failed lines come first, the furthest past their
//! threshold (relative to it) first, a line without data before all;
//! then, to make three, the lines closest to their threshold.

use crate::report::soak::{Line, Report};

/// How far `l` is past its threshold, relative to it (negative: inside
/// it); None for a line without a threshold (it does not decide).
fn miss(l: &Line) -> Option<f64> {
    let t = l.threshold?;
    let Some(m) = l.measured else {
        return Some(f64::INFINITY);
    };
    let over = if l.op == "<=" { m - t } else { t - m };
    Some(over / t.abs().max(1e-9))
}

fn value(v: f64, unit: &str) -> String {
    let v = format!("{v:.3}");
    let v = v.trim_end_matches('0').trim_end_matches('.');
    match unit {
        "" => v.to_string(),
        "%" => format!("{v}%"),
        u => format!("{v} {u}"),
    }
}

/// One line in words.
fn reason(l: &Line) -> String {
    let (Some(m), Some(t)) = (l.measured, l.threshold) else {
        return format!("{} had no data", l.name);
    };
    let (m, t) = (value(m, l.unit), value(t, l.unit));
    let (limit, past, within) = match l.op {
        "<=" => ("the limit", "above", "within"),
        _ => ("the minimum", "below", "meeting"),
    };
    match l.pass {
        Some(false) => format!("{} was {m}, {past} {limit} of {t}", l.name),
        _ => format!("{} was {m}, {within} {limit} of {t}", l.name),
    }
}

/// The paragraph, as plain text (the caller escapes it).
pub fn paragraph(r: &Report) -> String {
    let mut judged: Vec<(&Line, f64)> = r
        .verdict
        .lines
        .iter()
        .filter_map(|l| Some((l, miss(l)?)))
        .collect();
    // Failed ones by how far they missed, then passed ones by how close
    // they came (the largest `miss` first in both cases).
    judged.sort_by(|a, b| {
        let failed = |l: &Line| l.pass == Some(false);
        failed(b.0).cmp(&failed(a.0)).then(b.1.total_cmp(&a.1))
    });
    let reasons: Vec<String> = judged.iter().take(3).map(|(l, _)| reason(l)).collect();
    let failed = judged.iter().filter(|(l, _)| l.pass == Some(false)).count();
    let lead = match (r.verdict.pass, failed) {
        (true, _) => "PASS: every SLO line held. Closest to their limits".to_string(),
        (false, 1) => "FAIL: 1 SLO line failed. The biggest reasons".to_string(),
        (false, n) => format!("FAIL: {n} SLO lines failed. The biggest reasons"),
    };
    let links = r.links.len();
    format!(
        "{lead}: {}. Over {} on {links} directed link{}, {} link interruption{}.",
        reasons.join("; "),
        crate::soak::time::format_duration(r.to_unix_ns.saturating_sub(r.from_unix_ns)),
        if links == 1 { "" } else { "s" },
        r.headline.interruptions,
        if r.headline.interruptions == 1 {
            ""
        } else {
            "s"
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::soak::{Builder, Scope};

    #[test]
    fn failed_lines_lead_furthest_first_then_the_closest() {
        let mut r = Builder::new(Scope {
            name: "x".into(),
            from_unix_ns: 0,
            to_unix_ns: 3_600_000_000_000,
            nodes: vec![],
            slo: Default::default(),
            marks: vec![],
        })
        .finish();
        for l in &mut r.verdict.lines {
            l.measured = l.threshold.map(|t| if l.op == "<=" { t * 0.5 } else { t });
            l.pass = l.threshold.map(|_| true);
        }
        let p99 = r
            .verdict
            .lines
            .iter_mut()
            .find(|l| l.key == "rtt_p99")
            .unwrap();
        p99.measured = Some(p99.threshold.unwrap() * 1.2);
        p99.pass = Some(false);
        let worst = r
            .verdict
            .lines
            .iter_mut()
            .find(|l| l.key == "rtt_worst")
            .unwrap();
        worst.measured = Some(worst.threshold.unwrap() * 3.0);
        worst.pass = Some(false);
        r.verdict.pass = false;
        let p = paragraph(&r);
        assert!(
            p.starts_with("FAIL: 2 SLO lines failed. The biggest reasons: RTT worst was"),
            "{p}"
        );
        let (worst_at, p99_at) = (p.find("RTT worst").unwrap(), p.find("RTT p99").unwrap());
        assert!(worst_at < p99_at, "{p}");
        assert!(p.contains("above the limit of"), "{p}");
        // A third reason: one of the lines at their threshold exactly.
        assert_eq!(p.matches("; ").count(), 2, "{p}");
        assert!(
            p.contains("within the limit of") || p.contains("meeting the minimum of"),
            "{p}"
        );
        assert!(
            p.contains("on 0 directed links, 0 link interruptions."),
            "{p}"
        );
    }

    #[test]
    fn an_empty_report_fails_for_want_of_data() {
        let r = Builder::new(Scope {
            name: "x".into(),
            from_unix_ns: 0,
            to_unix_ns: 1,
            nodes: vec![],
            slo: Default::default(),
            marks: vec![],
        })
        .finish();
        let p = paragraph(&r);
        assert!(p.starts_with("FAIL:") && p.contains("had no data"), "{p}");
    }
}
