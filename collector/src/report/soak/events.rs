//! The parts of the report built from events and schedules: throttle
//! episodes, outages clipped to the range, RTT-window coverage, services,
//! the headline rows, the correlation sentence and min/max downsampling.

use std::collections::BTreeMap;

use boltwatch_proto::v1::Outage;

use super::build::{interruptions as to_interruptions, mean, NodeAcc};
use super::*;

/// One RTT window as the report keeps it: what a per-minute rollup keeps
/// of each window, too.
pub(super) use crate::store::rollup::Window as Win;

/// The most common value.
pub(super) fn mode(v: impl Iterator<Item = u64>) -> Option<u64> {
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    for x in v.filter(|x| *x > 0) {
        *counts.entry(x).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(x, n)| (*n, *x))
        .map(|(x, _)| x)
}

/// Whether `t` falls in one of the (sorted) episodes.
pub(super) fn inside(e: &[Episode], t: u64) -> bool {
    let i = e.partition_point(|e| e.start_unix_ns <= t);
    i > 0 && t < e[i - 1].end_unix_ns
}

/// The hottest-sensor reading at or before `t` (the first one if none).
pub(super) fn reading_at(r: &[(u64, Option<f64>, bool)], t: u64) -> Option<f64> {
    let i = r.partition_point(|x| x.0 <= t);
    r.get(i.saturating_sub(1)).and_then(|x| x.1)
}

/// Temperatures and throttle episodes per node; sorts the readings.
pub(super) fn thermal(nodes: &mut BTreeMap<String, NodeAcc>, to: u64) -> Vec<Thermal> {
    let mut out = Vec::new();
    for (node, acc) in nodes.iter_mut() {
        acc.readings.sort_by_key(|r| r.0);
        let mut episodes: Vec<Episode> = Vec::new();
        let mut open: Option<u64> = None;
        for &(t, _, th) in &acc.readings {
            match (open, th) {
                (None, true) => open = Some(t),
                (Some(s), false) => {
                    episodes.push(Episode {
                        start_unix_ns: s,
                        end_unix_ns: t,
                    });
                    open = None;
                }
                _ => {}
            }
        }
        if let Some(s) = open {
            episodes.push(Episode {
                start_unix_ns: s,
                end_unix_ns: to,
            });
        }
        let sensors: Vec<Sensor> = acc
            .sensors
            .iter()
            .map(|(name, (n, sum, max))| Sensor {
                sensor: name.clone(),
                readings: *n,
                mean_celsius: sum / *n as f64,
                worst_celsius: *max,
            })
            .collect();
        let hottest = sensors
            .iter()
            .max_by(|a, b| a.worst_celsius.total_cmp(&b.worst_celsius));
        out.push(Thermal {
            node: node.clone(),
            sensor: hottest.map(|s| s.sensor.clone()),
            mean_celsius: hottest.map(|s| s.mean_celsius),
            worst_celsius: hottest.map(|s| s.worst_celsius),
            throttle_episodes: episodes.len() as u64,
            throttled_seconds: episodes
                .iter()
                .map(|e| secs(e.end_unix_ns - e.start_unix_ns))
                .fold(0.0, |a, b| a + b),
            episodes,
            sensors,
        });
    }
    out
}

/// Joins outage start and end records and clips them to `[from, to)`.
pub(super) fn clip_outages(
    records: Vec<(String, String, Outage)>,
    from: u64,
    to: u64,
) -> Vec<OutageItem> {
    crate::dto::join_outages(records, 0)
        .into_iter()
        .filter(|o| o.start_unix_ns < to && o.end_unix_ns.is_none_or(|e| e > from))
        .map(|o| {
            let start = o.start_unix_ns.max(from);
            let end = o.end_unix_ns.unwrap_or(to).min(to);
            OutageItem {
                node: o.node,
                peer: o.peer,
                cause: o.cause.to_string(),
                service: o.service,
                start_unix_ns: start,
                end_unix_ns: end,
                open: o.end_unix_ns.is_none_or(|e| e > to),
                seconds: secs(end.saturating_sub(start)),
            }
        })
        .collect()
}

/// Expected, stored and missing RTT windows of a link (windows sorted).
pub(super) fn coverage(w: &[Win], window: Option<u64>, from: u64, to: u64) -> Coverage {
    let Some(win) = window else {
        return Coverage::default();
    };
    let mut c = Coverage {
        window_ns: win,
        expected: (to - from) / win,
        stored: w.len() as u64,
        gaps: Vec::new(),
    };
    let mut gap = |start: u64, end: u64| {
        // Rounded: real windows drift around the grid by scheduling jitter.
        let missing = (end.saturating_sub(start) + win / 2) / win;
        if missing > 0 {
            c.gaps.push(Gap {
                start_unix_ns: start,
                end_unix_ns: end,
                missing,
            });
        }
    };
    let mut next = from;
    for x in w {
        gap(next, x.t);
        next = x.t + win;
    }
    if to > next && (to - next) >= win {
        gap(next, next + (to - next) / win * win);
    }
    c
}

/// Per service: checks, availability and its outages.
pub(super) fn services(
    checks: &BTreeMap<(String, String, String), (u64, u64)>,
    outages: &[OutageItem],
) -> Vec<Service> {
    checks
        .iter()
        .map(|((node, peer, service), (n, up))| Service {
            node: node.clone(),
            peer: peer.clone(),
            service: service.clone(),
            checks: *n,
            up: *up,
            availability_percent: (*n > 0).then(|| 100.0 * *up as f64 / *n as f64),
            outages: to_interruptions(
                outages
                    .iter()
                    .filter(|o| {
                        &o.node == node && &o.peer == peer && o.service.as_ref() == Some(service)
                    })
                    .cloned()
                    .collect(),
            ),
        })
        .collect()
}

/// The seed's rows.
pub(super) fn headline(overall: &Link, services: &[Service], thermal: &[Thermal]) -> Headline {
    let ssh = services.iter().any(|s| s.service == "ssh");
    let avail: Vec<f64> = services
        .iter()
        .filter(|s| !ssh || s.service == "ssh")
        .filter_map(|s| s.availability_percent)
        .collect();
    let mut per_link: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for o in &overall.interruptions.outages {
        *per_link.entry((&o.node, &o.peer)).or_default() += 1;
    }
    // The mean temperature weighs every reading of each node's hottest
    // sensor alike.
    let (mut n, mut sum) = (0u64, 0.0);
    for t in thermal {
        if let Some(s) = t
            .sensors
            .iter()
            .find(|s| Some(&s.sensor) == t.sensor.as_ref())
        {
            n += s.readings;
            sum += s.mean_celsius * s.readings as f64;
        }
    }
    Headline {
        rtt_mean_ms: overall.rtt.mean_ms,
        rtt_worst_ms: overall.rtt.worst_ms,
        bandwidth_mean_gbps: overall.bandwidth.mean_gbps,
        bandwidth_worst_gbps: overall.bandwidth.worst_gbps,
        interruptions: overall.interruptions.count,
        interruptions_worst_link: per_link.values().copied().max().unwrap_or(0),
        service: if ssh || services.is_empty() {
            "ssh".into()
        } else {
            "service".into()
        },
        availability_mean_percent: mean(&avail),
        availability_worst_percent: avail.iter().copied().reduce(f64::min),
        temperature_mean_celsius: (n > 0).then(|| sum / n as f64),
        temperature_worst_celsius: thermal
            .iter()
            .filter_map(|t| t.worst_celsius)
            .reduce(f64::max),
    }
}

/// The sentence the seed wrote by hand, with numbers.
pub(super) fn describe(c: &mut Correlation) {
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

/// Downsamples `(t, v)` points (time-ordered) to at most two per bucket of
/// `[from, to)`: each bucket keeps its minimum and maximum, in time order,
/// so a single spike in 72 hours survives.
pub fn downsample(p: &[(u64, f64)], from: u64, to: u64, buckets: usize) -> Vec<(u64, f64)> {
    if p.len() <= 2 * buckets || to <= from {
        return p.to_vec();
    }
    let width = ((to - from) / buckets as u64).max(1);
    let mut out = Vec::with_capacity(2 * buckets);
    let mut i = 0;
    while i < p.len() {
        let b = p[i].0.saturating_sub(from) / width;
        let mut j = i;
        let (mut lo, mut hi) = (i, i);
        while j < p.len() && p[j].0.saturating_sub(from) / width == b {
            if p[j].1 < p[lo].1 {
                lo = j;
            }
            if p[j].1 > p[hi].1 {
                hi = j;
            }
            j += 1;
        }
        let (a, z) = (lo.min(hi), lo.max(hi));
        out.push(p[a]);
        if z != a {
            out.push(p[z]);
        }
        i = j;
    }
    out
}
