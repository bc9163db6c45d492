//! [`Builder`]: accumulates decoded records (streaming), then computes the
//! [`Report`].

use std::collections::{BTreeMap, BTreeSet};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Direction, Outage, Protocol};

use super::events::{self, downsample, Win};
use super::*;
use crate::report::summary::LinkStats;
use crate::store::rollup::Rollup;

/// Points per chart series after downsampling (each bucket keeps its
/// minimum and maximum, so up to twice this many).
pub const CHART_BUCKETS: usize = 360;

#[derive(Debug, Default)]
pub(super) struct LinkAcc {
    pub rest: LinkStats,
    pub load: LinkStats,
    pub windows: Vec<Win>,
}

#[derive(Debug, Clone)]
pub(super) struct Test {
    pub from: String,
    pub to: String,
    pub t: u64,
    pub gbps: Option<f64>,
}

#[derive(Debug, Default)]
pub(super) struct NodeAcc {
    /// (time, hottest sensor, throttled).
    pub readings: Vec<(u64, Option<f64>, bool)>,
    /// sensor -> (readings, sum, max).
    pub sensors: BTreeMap<String, (u64, f64, f64)>,
}

#[derive(Debug, Default)]
struct BootAcc {
    min_seq: u64,
    max_seq: u64,
    count: u64,
    drops: Option<(u64, u64)>,
}

/// Accumulates a soak's records; see the module documentation.
#[derive(Debug)]
pub struct Builder {
    scope: Scope,
    only: BTreeSet<String>,
    links: BTreeMap<(String, String), LinkAcc>,
    tests: Vec<Test>,
    thermal: BTreeMap<String, NodeAcc>,
    services: BTreeMap<(String, String, String), (u64, u64)>,
    outages: Vec<(String, String, Outage)>,
    boots: BTreeMap<(String, String), BootAcc>,
    records: u64,
    seen: BTreeSet<String>,
}

impl Builder {
    /// An empty report over `scope`.
    pub fn new(scope: Scope) -> Builder {
        Builder {
            only: scope.nodes.iter().cloned().collect(),
            scope,
            links: BTreeMap::new(),
            tests: Vec::new(),
            thermal: BTreeMap::new(),
            services: BTreeMap::new(),
            outages: Vec::new(),
            boots: BTreeMap::new(),
            records: 0,
            seen: BTreeSet::new(),
        }
    }

    /// A peer outside the soak's nodes (a soak of a and b ignores a's
    /// probes of c).
    fn foreign(&self, peer: &str) -> bool {
        !self.only.is_empty() && !self.only.contains(peer)
    }

    fn in_range(&self, t: u64) -> bool {
        (self.scope.from_unix_ns..self.scope.to_unix_ns).contains(&t)
    }

    /// One stored record. Records outside the range are ignored except
    /// outages (which may have started before it).
    pub fn add(&mut self, node: &str, boot: &str, seq: u64, unix_ns: u64, p: Option<&Payload>) {
        if !self.only.is_empty() && !self.only.contains(node) {
            return;
        }
        if let Some(Payload::Outage(o)) = p {
            self.outages.push((node.into(), boot.into(), o.clone()));
        }
        if !self.in_range(unix_ns) {
            return;
        }
        self.records += 1;
        self.seen.insert(node.to_string());
        let b = self.boots.entry((node.into(), boot.into())).or_default();
        if b.count == 0 || seq < b.min_seq {
            b.min_seq = seq;
        }
        b.max_seq = b.max_seq.max(seq);
        b.count += 1;
        match p {
            Some(Payload::Rtt(r)) if self.foreign(&r.peer) => {}
            Some(Payload::Bandwidth(bw)) if self.foreign(&bw.peer) => {}
            Some(Payload::Service(c)) if self.foreign(&c.peer) => {}
            Some(Payload::Rtt(r)) => {
                let acc = self.links.entry((node.into(), r.peer.clone())).or_default();
                if r.under_load {
                    acc.load.add(r);
                } else {
                    acc.rest.add(r);
                }
                acc.windows.push(Win::of(r, unix_ns));
            }
            Some(Payload::Bandwidth(bw)) => {
                if bw.protocol == Protocol::Udp as i32 {
                    return;
                }
                let (from, to) = if bw.direction == Direction::Download as i32 {
                    (bw.peer.clone(), node.to_string())
                } else {
                    (node.to_string(), bw.peer.clone())
                };
                let ok = bw.error.is_empty() && bw.bits_per_second > 0.0;
                self.tests.push(Test {
                    from,
                    to,
                    t: if bw.start_unix_ns > 0 {
                        bw.start_unix_ns
                    } else {
                        unix_ns
                    },
                    gbps: ok.then_some(bw.bits_per_second / 1e9),
                });
            }
            Some(Payload::Thermal(th)) => {
                let acc = self.thermal.entry(node.into()).or_default();
                let mut hottest: Option<f64> = None;
                for s in &th.sensors {
                    let e =
                        acc.sensors
                            .entry(s.name.clone())
                            .or_insert((0, 0.0, f64::NEG_INFINITY));
                    e.0 += 1;
                    e.1 += s.celsius;
                    e.2 = e.2.max(s.celsius);
                    hottest = Some(hottest.map_or(s.celsius, |h: f64| h.max(s.celsius)));
                }
                let throttled = th.throttle.as_ref().is_some_and(|t| t.throttled);
                acc.readings.push((unix_ns, hottest, throttled));
            }
            Some(Payload::Service(c)) => {
                let e = self
                    .services
                    .entry((node.into(), c.peer.clone(), c.service.clone()))
                    .or_default();
                e.0 += 1;
                e.1 += u64::from(c.up);
            }
            Some(Payload::AgentStats(s)) => {
                let key = (node.to_string(), boot.to_string());
                let b = self.boots.get_mut(&key).expect("counted above");
                let v = s.dropped_records;
                b.drops = Some(b.drops.map_or((v, v), |(f, l)| (f.min(v), l.max(v))));
            }
            _ => {}
        }
    }

    /// One stored rollup (raw RTT summaries or counters of one boot's
    /// minute, replaced under raw retention): counted and read as the
    /// records it replaced. A rollup belongs to the range when its minute
    /// starts in it, so a range that does not start and end on a minute
    /// reads its first and last minutes whole.
    pub fn add_rollup(&mut self, node: &str, boot: &str, minute: u64, r: &Rollup) {
        if (!self.only.is_empty() && !self.only.contains(node)) || !self.in_range(minute) {
            return;
        }
        let Some((min_seq, max_seq)) = r.seq_bounds() else {
            return;
        };
        self.records += r.records;
        self.seen.insert(node.to_string());
        let b = self.boots.entry((node.into(), boot.into())).or_default();
        if b.count == 0 || min_seq < b.min_seq {
            b.min_seq = min_seq;
        }
        b.max_seq = b.max_seq.max(max_seq);
        b.count += r.records;
        for m in &r.rtt {
            if self.foreign(&m.peer) {
                continue;
            }
            let acc = self.links.entry((node.into(), m.peer.clone())).or_default();
            if let Some(s) = &m.rest {
                acc.rest.add_merged(s, m.rest_windows);
            }
            if let Some(s) = &m.load {
                acc.load.add_merged(s, m.load_windows);
            }
            acc.windows.extend(m.windows(minute));
        }
    }

    /// Computes the report.
    pub fn finish(mut self) -> Report {
        let (from, to) = (self.scope.from_unix_ns, self.scope.to_unix_ns);
        let mut nodes: BTreeSet<String> = self.only.clone();
        if nodes.is_empty() {
            nodes = self.seen.clone();
        }
        // Every pair of the soak's nodes is a link the schedule expects.
        for a in &self.only {
            for b in &self.only {
                if a != b {
                    self.links.entry((a.clone(), b.clone())).or_default();
                }
            }
        }
        let thermal = events::thermal(&mut self.thermal, to);
        let episodes: BTreeMap<&str, &[Episode]> = thermal
            .iter()
            .map(|t| (t.node.as_str(), t.episodes.as_slice()))
            .collect();
        let throttled = |a: &str, b: &str, t: u64| {
            [a, b]
                .iter()
                .any(|n| episodes.get(n).is_some_and(|e| events::inside(e, t)))
        };
        let outages = events::clip_outages(std::mem::take(&mut self.outages), from, to);
        let default_window = events::mode(
            self.links
                .values()
                .flat_map(|l| l.windows.iter().map(|w| w.window_ns)),
        );

        let mut links = Vec::new();
        let mut charts = Vec::new();
        let (mut all_rest, mut all_load) = (LinkStats::default(), LinkStats::default());
        let mut corr = Correlation::default();
        let (mut thr_rtt, mut norm_rtt) = ((0u128, 0u64), (0u128, 0u64));
        for ((node, peer), acc) in &mut self.links {
            acc.windows.sort_by_key(|w| w.t);
            acc.windows.dedup_by_key(|w| w.t);
            all_rest.merge(&acc.rest);
            all_load.merge(&acc.load);
            let mut both = acc.rest.clone();
            both.merge(&acc.load);
            let tests: Vec<&Test> = self
                .tests
                .iter()
                .filter(|t| &t.from == node && &t.to == peer)
                .collect();
            let link_outages: Vec<OutageItem> = outages
                .iter()
                .filter(|o| &o.node == node && &o.peer == peer && o.service.is_none())
                .cloned()
                .collect();
            let window = events::mode(acc.windows.iter().map(|w| w.window_ns)).or(default_window);
            for w in &acc.windows {
                let side = if throttled(node, peer, w.t) {
                    &mut thr_rtt
                } else {
                    &mut norm_rtt
                };
                side.0 += u128::from(w.sum_ns);
                side.1 += w.received;
                let s = if throttled(node, peer, w.t) {
                    &mut corr.throttled
                } else {
                    &mut corr.normal
                };
                s.rtt_windows += 1;
            }
            let temps = self.thermal.get(node.as_str());
            charts.push(Chart {
                node: node.clone(),
                peer: peer.clone(),
                p50: downsample(&series(&acc.windows, |w| w.p50_ns), from, to, CHART_BUCKETS),
                p99: downsample(&series(&acc.windows, |w| w.p99_ns), from, to, CHART_BUCKETS),
                bandwidth: tests.iter().filter_map(|t| Some((t.t, t.gbps?))).collect(),
                temperature: downsample(
                    &temps
                        .map(|n| {
                            n.readings
                                .iter()
                                .filter_map(|r| Some((r.0, r.1?)))
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default(),
                    from,
                    to,
                    CHART_BUCKETS,
                ),
                throttled: [node, peer]
                    .iter()
                    .flat_map(|n| episodes.get(n.as_str()).copied().unwrap_or_default())
                    .map(|e| (e.start_unix_ns, e.end_unix_ns))
                    .collect(),
                outages: link_outages
                    .iter()
                    .map(|o| (o.start_unix_ns, o.end_unix_ns))
                    .collect(),
            });
            links.push(Link {
                node: node.clone(),
                peer: peer.clone(),
                rtt_rest: rtt(&acc.rest),
                rtt_load: rtt(&acc.load),
                rtt: rtt(&both),
                bandwidth: bandwidth(tests.iter().copied()),
                interruptions: interruptions(link_outages),
                coverage: events::coverage(&acc.windows, window, from, to),
            });
        }
        let mut all = all_rest.clone();
        all.merge(&all_load);
        let overall = Link {
            node: "*".into(),
            peer: "*".into(),
            rtt_rest: rtt(&all_rest),
            rtt_load: rtt(&all_load),
            rtt: rtt(&all),
            bandwidth: bandwidth(self.tests.iter()),
            interruptions: interruptions(
                outages
                    .iter()
                    .filter(|o| o.service.is_none())
                    .cloned()
                    .collect(),
            ),
            coverage: Coverage {
                window_ns: default_window.unwrap_or(0),
                expected: links.iter().map(|l| l.coverage.expected).sum(),
                stored: links.iter().map(|l| l.coverage.stored).sum(),
                gaps: Vec::new(),
            },
        };

        // Thermal-bandwidth correlation.
        for t in &self.tests {
            let th = throttled(&t.from, &t.to, t.t);
            let celsius = self
                .thermal
                .get(t.from.as_str())
                .and_then(|n| events::reading_at(&n.readings, t.t));
            corr.tests.push(TestPoint {
                from: t.from.clone(),
                to: t.to.clone(),
                start_unix_ns: t.t,
                gbps: t.gbps,
                celsius,
                throttled: th,
            });
        }
        corr.tests
            .sort_by(|a, b| (a.start_unix_ns, &a.from).cmp(&(b.start_unix_ns, &b.from)));
        for (side, on) in [(&mut corr.throttled, true), (&mut corr.normal, false)] {
            let g: Vec<f64> = corr
                .tests
                .iter()
                .filter(|t| t.throttled == on)
                .filter_map(|t| t.gbps)
                .collect();
            side.tests = g.len() as u64;
            side.mean_gbps = mean(&g);
            let (sum, n) = if on { thr_rtt } else { norm_rtt };
            side.rtt_mean_ms = (n > 0).then(|| ms(sum as f64 / n as f64));
        }
        events::describe(&mut corr);

        let services = events::services(&self.services, &outages);
        let mut completeness = Completeness {
            expected_windows: overall.coverage.expected,
            stored_windows: overall.coverage.stored,
            percent: (overall.coverage.expected > 0).then(|| {
                100.0 * overall.coverage.stored.min(overall.coverage.expected) as f64
                    / overall.coverage.expected as f64
            }),
            gaps: links.iter().map(|l| l.coverage.gaps.len() as u64).sum(),
            records: self.records,
            ..Default::default()
        };
        for b in self.boots.values() {
            completeness.sequence_holes += (b.max_seq - b.min_seq + 1).saturating_sub(b.count);
            if let Some((first, last)) = b.drops {
                // A boot that began inside the range dropped its first
                // figure inside it too.
                completeness.spool_drops += if b.min_seq == 1 { last } else { last - first };
            }
        }
        let headline = events::headline(&overall, &services, &thermal);
        let verdict = verdict::judge(&self.scope.slo, &overall, &headline, &completeness);
        Report {
            soak: self.scope.name.clone(),
            from_unix_ns: from,
            to_unix_ns: to,
            duration_seconds: secs(to.saturating_sub(from)),
            nodes: nodes.into_iter().collect(),
            headline,
            overall,
            links,
            services,
            thermal,
            correlation: corr,
            completeness,
            marks: self.scope.marks.clone(),
            verdict,
            charts,
        }
    }
}

fn series(w: &[Win], f: impl Fn(&Win) -> u64) -> Vec<(u64, f64)> {
    w.iter()
        .filter(|w| w.received > 0)
        .map(|w| (w.t, ms(f(w) as f64)))
        .collect()
}

/// Adds `s` into `into` (histograms, counts, extremes).
fn rtt(s: &LinkStats) -> Rtt {
    Rtt {
        windows: s.windows,
        probes: s.sent,
        received: s.received,
        lost: s.lost,
        loss_percent: s.loss_ratio() * 100.0,
        mean_ms: s.mean_ns().map(ms),
        p50_ms: s.quantile_ns(0.5).map(ms),
        p99_ms: s.quantile_ns(0.99).map(ms),
        worst_ms: (s.received > 0).then(|| ms(s.max_ns as f64)),
    }
}

pub(super) fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn bandwidth<'a>(tests: impl Iterator<Item = &'a Test>) -> Bandwidth {
    let mut b = Bandwidth::default();
    let mut ok = Vec::new();
    for t in tests {
        b.tests += 1;
        match t.gbps {
            Some(g) => ok.push(g),
            None => b.failed += 1,
        }
    }
    b.mean_gbps = mean(&ok);
    b.worst_gbps = ok.iter().copied().reduce(f64::min);
    b.best_gbps = ok.iter().copied().reduce(f64::max);
    b
}

pub(super) fn interruptions(outages: Vec<OutageItem>) -> Interruptions {
    Interruptions {
        count: outages.len() as u64,
        // A fold from +0: an empty f64 sum is -0.0, which prints as "-0".
        total_down_seconds: outages.iter().map(|o| o.seconds).fold(0.0, |a, b| a + b),
        longest_seconds: outages.iter().map(|o| o.seconds).fold(0.0, f64::max),
        outages,
    }
}
