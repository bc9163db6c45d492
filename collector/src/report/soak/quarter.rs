//! The worst quarter hour: windows tallied in bins aligned to UTC :00,
//! :15, :30 and :45 (the 96 bins a day of telecom performance monitoring),
//! the worst bin picked (most UAS, then SES, then ES, then the highest
//! window p99; the earliest of equals), and what happened in it: outages,
//! workload marks, throttling and bandwidth tests.

use std::collections::BTreeMap;

use super::availability::Tally;
use super::bandwidth::Test;
use super::{ms, secs, OutageItem, Quarter};
use crate::soak::{time, Mark};

/// A quarter hour, ns.
pub(super) const QUARTER_NS: u64 = 900_000_000_000;

/// What may have happened in a quarter hour (of a link, or of all).
pub(super) struct Context<'a> {
    /// Link outages.
    pub outages: &'a [OutageItem],
    /// Workload marks.
    pub marks: &'a [Mark],
    /// Throttle episodes, `(node, start, end)`.
    pub throttles: Vec<(String, u64, u64)>,
    /// Bandwidth tests.
    pub tests: Vec<&'a Test>,
}

/// The worst bin of `bins` (keyed by start), with its start.
pub(super) fn worst(bins: &BTreeMap<u64, Tally>) -> Option<(u64, Tally)> {
    let mut best: Option<(u64, Tally)> = None;
    for (start, t) in bins {
        if best.is_none_or(|(_, b)| t.severity() > b.severity()) {
            best = Some((*start, *t));
        }
    }
    best
}

/// The quarter hour from `start` with tally `t`, its events from `cx`.
pub(super) fn quarter(start: u64, t: &Tally, cx: &Context<'_>) -> Quarter {
    Quarter {
        start_unix_ns: start,
        uas_seconds: secs(t.uas_ns),
        ses_seconds: secs(t.ses_ns),
        es_seconds: secs(t.es_ns),
        p99_ms: (t.p99_max_ns > 0).then(|| ms(t.p99_max_ns as f64)),
        events: events(start, start + QUARTER_NS, cx),
    }
}

/// Whether `[s, e)` meets `[from, to)` (an instant, `s == e`, inside it).
fn meets(s: u64, e: u64, from: u64, to: u64) -> bool {
    s < to && (e > from || (s == e && s >= from))
}

/// What happened in `[from, to)`, one sentence each.
fn events(from: u64, to: u64, cx: &Context<'_>) -> Vec<String> {
    let mut v = Vec::new();
    for o in cx
        .outages
        .iter()
        .filter(|o| meets(o.start_unix_ns, o.end_unix_ns, from, to))
    {
        v.push(format!(
            "outage {} -> {} ({}) {} .. {}, {:.0} s",
            o.node,
            o.peer,
            o.cause,
            time::format(o.start_unix_ns),
            time::format(o.end_unix_ns),
            o.seconds
        ));
    }
    for m in cx.marks.iter().filter(|m| {
        meets(
            m.at_unix_ns,
            m.until_unix_ns.unwrap_or(m.at_unix_ns),
            from,
            to,
        )
    }) {
        v.push(format!("mark \"{}\"", m.text));
    }
    for (node, s, e) in cx
        .throttles
        .iter()
        .filter(|(_, s, e)| meets(*s, *e, from, to))
    {
        v.push(format!(
            "{node} throttled {} .. {}",
            time::format(*s),
            time::format(*e)
        ));
    }
    let tests: Vec<&&Test> = cx
        .tests
        .iter()
        .filter(|t| (from..to).contains(&t.t))
        .collect();
    if !tests.is_empty() {
        let failed = tests.iter().filter(|t| t.gbps.is_none()).count();
        let lowest = tests.iter().filter_map(|t| t.gbps).reduce(f64::min);
        v.push(format!(
            "{} bandwidth test(s), {failed} failed{}",
            tests.len(),
            lowest.map_or(String::new(), |g| format!(", lowest {g:.1} Gbps"))
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn tally(uas: u64, ses: u64, es: u64, p99: u64) -> Tally {
        Tally {
            uas_ns: uas * S,
            ses_ns: ses * S,
            es_ns: es * S,
            p99_max_ns: p99,
        }
    }

    #[test]
    fn worst_is_most_uas_then_ses_then_es_then_p99() {
        let q = |i: u64| i * QUARTER_NS;
        let mut b = BTreeMap::new();
        b.insert(q(0), tally(0, 5, 9, 900));
        b.insert(q(1), tally(0, 6, 6, 100));
        b.insert(q(2), tally(0, 6, 6, 100));
        assert_eq!(
            worst(&b).unwrap().0,
            q(1),
            "SES first, the earliest of equals"
        );
        b.insert(q(3), tally(0, 6, 7, 1));
        assert_eq!(worst(&b).unwrap().0, q(3), "then ES");
        b.insert(q(4), tally(0, 6, 7, 2));
        assert_eq!(worst(&b).unwrap().0, q(4), "then p99");
        b.insert(q(5), tally(1, 0, 0, 0));
        assert_eq!(worst(&b).unwrap().0, q(5), "UAS above all");
        assert_eq!(worst(&BTreeMap::new()), None);
    }

    #[test]
    fn names_what_happened_in_it() {
        let o = OutageItem {
            node: "a".into(),
            peer: "b".into(),
            cause: "carrier".into(),
            service: None,
            start_unix_ns: QUARTER_NS - 2 * S,
            end_unix_ns: QUARTER_NS + S,
            open: false,
            seconds: 3.0,
        };
        let marks = [
            Mark {
                text: "build".into(),
                at_unix_ns: QUARTER_NS + 60 * S,
                until_unix_ns: None,
            },
            Mark {
                text: "later".into(),
                at_unix_ns: 2 * QUARTER_NS,
                until_unix_ns: None,
            },
        ];
        let tests = [
            Test {
                from: "a".into(),
                to: "b".into(),
                t: QUARTER_NS + 10 * S,
                gbps: Some(63.31),
                ns: 10 * S,
            },
            Test {
                from: "b".into(),
                to: "a".into(),
                t: QUARTER_NS + 20 * S,
                gbps: None,
                ns: 10 * S,
            },
        ];
        let cx = Context {
            outages: std::slice::from_ref(&o),
            marks: &marks,
            throttles: vec![("a".into(), 0, QUARTER_NS)],
            tests: tests.iter().collect(),
        };
        let q = quarter(QUARTER_NS, &tally(1, 0, 0, 250_000), &cx);
        assert_eq!(q.p99_ms, Some(0.25));
        assert_eq!(q.events.len(), 3, "{:?}", q.events);
        assert!(
            q.events[0].starts_with("outage a -> b (carrier) "),
            "{:?}",
            q.events
        );
        assert!(q.events[0].ends_with(", 3 s"), "{:?}", q.events);
        assert_eq!(q.events[1], "mark \"build\"");
        assert_eq!(
            q.events[2],
            "2 bandwidth test(s), 1 failed, lowest 63.3 Gbps"
        );
    }
}
