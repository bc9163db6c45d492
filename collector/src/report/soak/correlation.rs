//! The thermal correlation: bandwidth tests and RTT windows during
//! throttling (of either end of their link, at their start) against those
//! outside it, and the sentence that sums it up.

use std::collections::BTreeMap;

use super::bandwidth::Test;
use super::thermal::{NodeAcc, Throttling};
use super::{mean, ms, Correlation, Side, TestPoint, Win};

/// RTT windows of one side: sum of RTTs, replies, windows.
#[derive(Default)]
struct RttSum {
    sum_ns: u128,
    received: u64,
    windows: u64,
}

/// The correlation of `links` (node, peer, its sorted windows) and `tests`;
/// `thermal` gives each sender's temperature.
pub(super) fn correlation<'a>(
    links: impl Iterator<Item = (&'a str, &'a str, &'a [Win])>,
    tests: &[Test],
    thermal: &BTreeMap<String, NodeAcc>,
    throttling: &Throttling<'_>,
) -> Correlation {
    let [thr_rtt, norm_rtt] = rtt_sums(links, throttling);
    let mut c = Correlation {
        tests: points(tests, thermal, throttling),
        ..Default::default()
    };
    for (side, on, rtt) in [
        (&mut c.throttled, true, thr_rtt),
        (&mut c.normal, false, norm_rtt),
    ] {
        let g: Vec<f64> = c
            .tests
            .iter()
            .filter(|t| t.throttled == on)
            .filter_map(|t| t.gbps)
            .collect();
        *side = Side {
            tests: g.len() as u64,
            mean_gbps: mean(&g),
            rtt_windows: rtt.windows,
            rtt_mean_ms: (rtt.received > 0).then(|| ms(rtt.sum_ns as f64 / rtt.received as f64)),
        };
    }
    describe(&mut c);
    c
}

/// The windows during throttling and outside it.
fn rtt_sums<'a>(
    links: impl Iterator<Item = (&'a str, &'a str, &'a [Win])>,
    throttling: &Throttling<'_>,
) -> [RttSum; 2] {
    let (mut thr, mut norm) = (RttSum::default(), RttSum::default());
    for (node, peer, windows) in links {
        for w in windows {
            let side = if throttling.either(node, peer, w.t) {
                &mut thr
            } else {
                &mut norm
            };
            side.sum_ns += u128::from(w.sum_ns);
            side.received += w.received;
            side.windows += 1;
        }
    }
    [thr, norm]
}

/// Every test with its sender's temperature and whether it ran throttled,
/// by start (then sender).
fn points(
    tests: &[Test],
    thermal: &BTreeMap<String, NodeAcc>,
    throttling: &Throttling<'_>,
) -> Vec<TestPoint> {
    let mut points: Vec<TestPoint> = tests
        .iter()
        .map(|t| TestPoint {
            from: t.from.clone(),
            to: t.to.clone(),
            start_unix_ns: t.t,
            gbps: t.gbps,
            celsius: thermal.get(t.from.as_str()).and_then(|n| n.reading_at(t.t)),
            throttled: throttling.either(&t.from, &t.to, t.t),
        })
        .collect();
    points.sort_by(|a, b| (a.start_unix_ns, &a.from).cmp(&(b.start_unix_ns, &b.from)));
    points
}

/// The differences, and the sentence the seed wrote by hand, with numbers.
fn describe(c: &mut Correlation) {
    c.bandwidth_difference_gbps = match (c.throttled.mean_gbps, c.normal.mean_gbps) {
        (Some(t), Some(n)) => Some(t - n),
        _ => None,
    };
    c.bandwidth_difference_percent = match (c.bandwidth_difference_gbps, c.normal.mean_gbps) {
        (Some(d), Some(n)) if n > 0.0 => Some(100.0 * d / n),
        _ => None,
    };
    c.rtt_difference_ms = match (c.throttled.rtt_mean_ms, c.normal.rtt_mean_ms) {
        (Some(t), Some(n)) => Some(t - n),
        _ => None,
    };
    c.sentence = match (c.throttled.mean_gbps, c.normal.mean_gbps, c.bandwidth_difference_percent) {
        (Some(t), Some(n), Some(p)) => format!(
            "bandwidth under thermal throttling: {t:.1} Gbps over {} tests vs {n:.1} Gbps over {} tests outside it ({p:+.1} %)",
            c.throttled.tests, c.normal.tests
        ),
        (None, Some(n), _) => format!(
            "no bandwidth test ran during thermal throttling; {n:.1} Gbps over {} tests",
            c.normal.tests
        ),
        _ => "no successful bandwidth tests".into(),
    };
}
