//! Errored and severely errored windows at known seconds: probes a link
//! loses outside any outage, and the truth of the report's availability
//! figures kept as each window is made (UAS, ES, SES per link and per
//! UTC quarter hour).

use std::collections::BTreeMap;

use super::{LinkTruth, Scenario, PROBES, S};

/// A UTC quarter hour.
pub const QUARTER: u64 = 900 * S;

/// The standard scenario's errored windows, `(from, to, second, probes
/// lost)`, at `at(f)` (a share of the range, aligned to a minute) plus
/// seconds: single ES, single SES (30 % and 100 % lost), and a burst of
/// 20 SES on link 2 -> 1 late in the run. None falls in an outage or
/// the restart.
pub fn standard(at: impl Fn(f64) -> u64) -> Vec<(usize, usize, u64, u64)> {
    let mut v = vec![
        (0, 2, at(0.15) + 5 * S, 1),
        (0, 2, at(0.15) + 6 * S, 2),
        (2, 0, at(0.35) + 30 * S, 3),
        (1, 2, at(0.62) + 11 * S, PROBES),
        (2, 1, at(0.25) + 3 * S, 1),
        (1, 0, at(0.75) + 40 * S, 2),
    ];
    v.extend((0..20).map(|k| (2, 1, at(0.9) + k * S, 4)));
    v
}

/// Probes link `a -> b` loses in the window starting at `t`.
pub fn lost(sc: &Scenario, a: usize, b: usize, t: u64) -> u64 {
    sc.errored
        .iter()
        .filter(|(x, y, s, _)| *x == a && *y == b && *s == t)
        .map(|e| e.3)
        .sum::<u64>()
        .min(PROBES)
}

/// Counts the window starting at `t` of a link: `out` it fell in an
/// outage, `lost` of [`PROBES`] lost, `p99` its p99 (ns; 0 without
/// replies).
pub fn count(link: &mut LinkTruth, t: u64, out: bool, lost: u64, p99: u64) {
    let (uas, es, ses) = if out {
        (1, 0, 0)
    } else {
        (0, u64::from(lost > 0), u64::from(lost * 10 >= PROBES * 3))
    };
    link.uas += uas;
    link.es += es;
    link.ses += ses;
    let q = link.quarters.entry(t - t % QUARTER).or_default();
    q.0 += uas;
    q.1 += ses;
    q.2 += es;
    q.3 = q.3.max(p99);
}

/// The worst quarter hour of `bins` (most UAS, then SES, then ES, then
/// the highest p99; the earliest of equals): its start and figures.
pub fn worst(bins: &BTreeMap<u64, (u64, u64, u64, u64)>) -> Option<(u64, (u64, u64, u64, u64))> {
    let mut best: Option<(u64, (u64, u64, u64, u64))> = None;
    for (s, b) in bins {
        if best.is_none_or(|(_, w)| *b > w) {
            best = Some((*s, *b));
        }
    }
    best
}

/// All links' quarter hours added up (p99: the highest).
pub fn overall<'a>(
    links: impl Iterator<Item = &'a LinkTruth>,
) -> BTreeMap<u64, (u64, u64, u64, u64)> {
    let mut all: BTreeMap<u64, (u64, u64, u64, u64)> = BTreeMap::new();
    for l in links {
        for (s, q) in &l.quarters {
            let a = all.entry(*s).or_default();
            a.0 += q.0;
            a.1 += q.1;
            a.2 += q.2;
            a.3 = a.3.max(q.3);
        }
    }
    all
}
