//! What happened near a changepoint: the events a link's changepoints are
//! set beside (its outages either way, workload marks, throttling of
//! either end, an agent restart or a link event on either end), and the
//! nearest one within [`NEAR_NS`]. Pure.

use serde::Serialize;

use super::changepoint::{detect, relative, Params};

/// How far from a changepoint an event may be and still be named.
pub const NEAR_NS: u64 = 10 * 60 * 1_000_000_000;

/// The RTT level series: per-minute p50, segments of at least 10 minutes
/// (a 30-minute shift is two segment lengths and more), 5 % and more.
pub const RTT: Params = Params {
    min_segment: 10,
    min_relative: 0.05,
};

/// The bandwidth series: one point per test, segments of at least 3 tests.
pub const BANDWIDTH: Params = Params {
    min_segment: 3,
    min_relative: 0.05,
};

/// A changepoint of one link's series, with what happened near it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shift {
    /// Measuring node.
    pub node: String,
    /// Peer.
    pub peer: String,
    /// `rtt_p50` (ms, per minute) or `bandwidth` (Gbps, per test).
    pub series: &'static str,
    /// The first point of the new level, unix ns.
    pub at_unix_ns: u64,
    /// Mean level before.
    pub before: f64,
    /// Mean level after.
    pub after: f64,
    /// Unit of both.
    pub unit: &'static str,
    /// (after - before) / before, percent.
    pub relative_change_percent: f64,
    /// The nearest event within ten minutes.
    pub event: Option<String>,
    /// Its time minus the changepoint's, s.
    pub event_offset_seconds: Option<f64>,
}

/// The changepoints of `node` -> `peer`'s `series` (`points` in time
/// order), each beside the nearest of the link's `events`.
pub fn find(
    (node, peer): (&str, &str),
    (series, unit, params): (&'static str, &'static str, Params),
    points: &[(u64, f64)],
    events: &[Event],
) -> Vec<Shift> {
    let values: Vec<f64> = points.iter().map(|p| p.1).collect();
    detect(&values, params)
        .into_iter()
        .map(|c| {
            let at = points[c.index].0;
            let near = nearest(of_link(events, node, peer), at);
            Shift {
                node: node.to_string(),
                peer: peer.to_string(),
                series,
                at_unix_ns: at,
                before: c.before,
                after: c.after,
                unit,
                relative_change_percent: 100.0 * relative(c.before, c.after),
                event: near.map(|(e, _)| e.what.clone()),
                event_offset_seconds: near.map(|(_, off)| off as f64 / 1e9),
            }
        })
        .collect()
}

/// Per-minute medians of `(t, v)` points in time order, at each minute's
/// start.
pub fn per_minute(points: impl Iterator<Item = (u64, f64)>) -> Vec<(u64, f64)> {
    const MINUTE: u64 = 60_000_000_000;
    let mut out: Vec<(u64, f64)> = Vec::new();
    let mut cur: Option<(u64, Vec<f64>)> = None;
    let close = |m: u64, mut v: Vec<f64>, out: &mut Vec<(u64, f64)>| {
        v.sort_by(f64::total_cmp);
        out.push((m, v[v.len() / 2]));
    };
    for (t, v) in points {
        let m = t - t % MINUTE;
        match &mut cur {
            Some((cm, vals)) if *cm == m => vals.push(v),
            _ => {
                if let Some((cm, vals)) = cur.take() {
                    close(cm, vals, &mut out);
                }
                cur = Some((m, vec![v]));
            }
        }
    }
    if let Some((cm, vals)) = cur {
        close(cm, vals, &mut out);
    }
    out
}

/// One thing that happened, at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// When, unix ns.
    pub t: u64,
    /// Which nodes it concerns (empty: every link, as a workload mark).
    pub nodes: Vec<String>,
    /// What, in words.
    pub what: String,
}

/// The events of `node` -> `peer` among `events`: those of either end, and
/// those of no node in particular.
pub fn of_link<'a>(
    events: &'a [Event],
    node: &'a str,
    peer: &'a str,
) -> impl Iterator<Item = &'a Event> + 'a {
    events
        .iter()
        .filter(move |e| e.nodes.is_empty() || e.nodes.iter().any(|n| n == node || n == peer))
}

/// The event nearest to `t` within [`NEAR_NS`], and its offset (event
/// minus `t`, ns); on a tie, one of the link's own nodes (throttling, a
/// restart) before one of every link (a workload mark), then the earlier.
pub fn nearest<'a>(events: impl Iterator<Item = &'a Event>, t: u64) -> Option<(&'a Event, i64)> {
    events
        .filter(|e| e.t.abs_diff(t) <= NEAR_NS)
        .min_by_key(|e| (e.t.abs_diff(t), e.nodes.is_empty(), e.t))
        .map(|e| (e, e.t as i64 - t as i64))
}

/// Events at the start and end of a span: `what` started, `what` ended
/// (an open end at the range's end is no event).
pub fn span(nodes: &[&str], start: u64, end: Option<u64>, what: &str) -> Vec<Event> {
    let nodes: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
    let mut v = vec![Event {
        t: start,
        nodes: nodes.clone(),
        what: format!("{what} began"),
    }];
    if let Some(end) = end {
        v.push(Event {
            t: end,
            nodes,
            what: format!("{what} ended"),
        });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000_000_000;

    #[test]
    fn nearest_event_of_the_link_within_ten_minutes() {
        let mut e = span(&["a", "b"], 100 * MIN, Some(130 * MIN), "outage a -> b");
        e.extend(span(&[], 95 * MIN, None, "mark `build`"));
        e.extend(span(&["c"], 101 * MIN, None, "throttling of c"));
        let near = |t| nearest(of_link(&e, "a", "b"), t).map(|(e, off)| (e.what.clone(), off));
        assert_eq!(
            near(99 * MIN),
            Some(("outage a -> b began".into(), MIN as i64))
        );
        // A tie goes to the link's own event, then to the earlier one.
        assert_eq!(
            near(97 * MIN + MIN / 2),
            Some((
                "outage a -> b began".into(),
                2 * MIN as i64 + MIN as i64 / 2
            ))
        );
        let marks = span(&[], 10 * MIN, Some(12 * MIN), "mark `x`");
        assert_eq!(
            nearest(marks.iter(), 11 * MIN).map(|(e, _)| e.what.as_str()),
            Some("mark `x` began")
        );
        assert_eq!(near(129 * MIN).unwrap().0, "outage a -> b ended");
        // c's throttling is not a -> b's; nothing within ten minutes.
        assert_eq!(near(150 * MIN), None);
        assert_eq!(of_link(&e, "c", "d").count(), 2);
    }

    #[test]
    fn a_level_shift_is_found_beside_its_event() {
        // Two hours of minutes at 1.0 ms, then an hour at 1.3 ms, each
        // minute of 60 windows with a little spread.
        let points = (0..180 * 60u64).map(|s| {
            let level = if s >= 120 * 60 { 1.3 } else { 1.0 };
            (s * 1_000_000_000, level + (s % 7) as f64 * 0.001)
        });
        let minutes = per_minute(points);
        assert_eq!(minutes.len(), 180);
        assert_eq!(minutes[1].0, MIN);
        let e = [Event {
            t: 122 * MIN,
            nodes: vec!["a".into()],
            what: "agent restart on a".into(),
        }];
        let s = find(("a", "b"), ("rtt_p50", "ms", RTT), &minutes, &e);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].at_unix_ns, 120 * MIN);
        assert!((s[0].relative_change_percent - 30.0).abs() < 0.5, "{s:?}");
        assert_eq!(s[0].event.as_deref(), Some("agent restart on a"));
        assert_eq!(s[0].event_offset_seconds, Some(120.0));
    }
}
