//! A soak simulator with a known truth: N nodes in a full mesh over a
//! simulated (time-compressed) range, with RTT distributions, bandwidth
//! tests that dip under thermal throttling, temperature curves, throttle
//! episodes, link and service outages with exact start and end, an agent
//! restart (a gap, then a new boot), a spool drop (sequence holes) and
//! workload marks. Records travel through the collector's real gRPC ingest
//! with real boot ids and sequence numbers; their timestamps are the
//! simulated ones.
//!
//! The truth is kept by the generator's own bookkeeping as it emits each
//! record, never by the report code it checks.
#![allow(dead_code)] // The test and the example use different parts.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use boltwatch_proto::histogram::sparse_buckets;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{
    AgentStats, BandwidthResult, Direction, Outage, OutageCause, Protocol, Record, RttSummary,
    ServiceCheck, TemperatureSensor, ThermalReading, Throttle,
};

pub mod errored;
mod send;
pub mod shift;

pub use send::run;

pub const S: u64 = 1_000_000_000;
/// RTT window.
pub const WINDOW: u64 = S;
/// Probes per window.
pub const PROBES: u64 = 10;
/// Thermal reading interval.
pub const THERMAL: u64 = 5 * S;
/// Service check interval.
pub const SERVICE: u64 = 30 * S;
/// Bandwidth test interval per link, and test length.
pub const BW_EVERY: u64 = 300 * S;
pub const BW_LEN: u64 = 10 * S;
/// Agent stats interval.
pub const STATS: u64 = 60 * S;
/// Sequence numbers the spool "drops" on node 1.
pub const DROPPED: u64 = 5;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub nodes: Vec<String>,
    pub start: u64,
    pub duration: u64,
    /// Link outages by (from index, to index, start, end, carrier?).
    pub outages: Vec<(usize, usize, u64, u64, bool)>,
    /// Throttle episodes by (node index, start, end), on the thermal grid.
    pub throttles: Vec<(usize, u64, u64)>,
    /// The last node's agent is down over [start, end) and restarts with a
    /// new boot.
    pub restart: (u64, u64),
    /// Node 1's spool drops DROPPED records at this time.
    pub drop_at: u64,
    /// ssh on node 1 refuses node 0's checks over [start, end).
    pub service_outage: (u64, u64),
    /// The RTT spike (link 0 -> 1), ns, and when.
    pub spike: (u64, u64),
    /// Marks (at, until, text).
    pub marks: Vec<(u64, Option<u64>, String)>,
    /// Errored windows by (from index, to index, start, probes lost):
    /// [`errored`].
    pub errored: Vec<(usize, usize, u64, u64)>,
    /// Keep every RTT sample for the percentile truth.
    pub keep_samples: bool,
    /// A level shift on one link (and with it interface counters, Hellos
    /// with an MTU mismatch, agent load): [`shift`].
    pub shift: Option<shift::Shift>,
}

fn align(t: u64, grid: u64) -> u64 {
    t / grid * grid
}

impl Scenario {
    /// The standard scenario over `duration` from `start` (aligned to 60 s).
    pub fn standard(nodes: usize, start: u64, duration: u64) -> Scenario {
        assert!(nodes >= 3, "the scenario needs three nodes");
        let at = |f: f64| align(start + (duration as f64 * f) as u64, 60 * S);
        Scenario {
            nodes: (0..nodes)
                .map(|i| format!("mini-{}", (b'a' + i as u8) as char))
                .collect(),
            start,
            duration,
            outages: vec![
                (0, 1, at(0.2) + 7 * S, at(0.2) + 44 * S, false),
                (1, 0, at(0.55), at(0.55) + 3 * S, true),
            ],
            throttles: vec![
                (0, at(0.3), at(0.3) + duration / 12 / THERMAL * THERMAL),
                (1, at(0.7), at(0.7) + 600 * S),
            ],
            restart: (at(0.45), at(0.45) + 120 * S),
            drop_at: at(0.6) + 13 * S,
            service_outage: (at(0.8), at(0.8) + 90 * S),
            spike: (400_000, at(0.5) + 17 * S),
            marks: vec![
                (
                    at(0.1),
                    Some(at(0.1) + 1800 * S),
                    "xcode incremental build".into(),
                ),
                (
                    at(0.3),
                    Some(at(0.4)),
                    "llama.cpp inference, both nodes".into(),
                ),
                (at(0.65), None, "NFS copy 200 GB".into()),
            ],
            errored: errored::standard(at),
            keep_samples: true,
            shift: None,
        }
    }

    fn end(&self) -> u64 {
        self.start + self.duration
    }

    fn down(&self, node: usize, t: u64) -> bool {
        node == self.nodes.len() - 1 && (self.restart.0..self.restart.1).contains(&t)
    }

    fn throttled(&self, node: usize, t: u64) -> bool {
        self.throttles
            .iter()
            .any(|(n, s, e)| *n == node && (*s..*e).contains(&t))
    }

    fn link_out(&self, a: usize, b: usize, t: u64) -> bool {
        self.outages
            .iter()
            .any(|(x, y, s, e, _)| *x == a && *y == b && (*s..*e).contains(&t))
            || self.down(b, t)
    }

    /// First bandwidth test of link (a, b): staggered so tests never overlap.
    fn bw_offset(&self, a: usize, b: usize) -> u64 {
        150 * S + (a * self.nodes.len() + b) as u64 * 20 * S
    }
}

fn mix(mut x: u64) -> u64 {
    // splitmix64: a fixed, seedless pseudo-random sequence.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Per directed link truth.
#[derive(Debug, Default, Clone)]
pub struct LinkTruth {
    pub windows: u64,
    pub probes: u64,
    pub lost: u64,
    pub sum_ns: u128,
    pub received: u64,
    pub worst_ns: u64,
    pub samples: Vec<u64>,
    pub tests: u64,
    pub failed: u64,
    pub gbps: Vec<f64>,
    /// (start, end) of link outages, exact.
    pub outages: Vec<(u64, u64)>,
    /// Unavailable, errored and severely errored windows (1 s each).
    pub uas: u64,
    pub es: u64,
    pub ses: u64,
    /// Per UTC quarter hour: (UAS, SES, ES, highest window p99 ns).
    pub quarters: BTreeMap<u64, (u64, u64, u64, u64)>,
}

/// Everything the report must reproduce.
#[derive(Debug, Default, Clone)]
pub struct Truth {
    pub links: BTreeMap<(String, String), LinkTruth>,
    pub expected_windows: u64,
    pub stored_windows: u64,
    pub gaps: u64,
    pub records: u64,
    pub sequence_holes: u64,
    pub spool_drops: u64,
    /// (node, episodes, throttled seconds, mean C of "case", worst C).
    pub thermal: BTreeMap<String, (u64, f64, f64, f64)>,
    /// (checker, peer) -> (checks, up).
    pub ssh: BTreeMap<(String, String), (u64, u64)>,
    pub bw_throttled: Vec<f64>,
    pub bw_normal: Vec<f64>,
    /// Counter growth and the MTU mismatch ([`shift`]).
    pub acceptance: shift::Acceptance,
}

/// One node's records, in order, with the truth updated as they are made.
struct NodeGen {
    boot: String,
    seq: u64,
    out: Vec<Record>,
    thermal_sum: f64,
    thermal_n: u64,
    thermal_max: f64,
    dropped: bool,
    /// When this boot's agent started.
    started: u64,
    counters: shift::CounterGen,
}

/// Generates node `i`'s records of one simulated second `t` into `g`.
fn second(sc: &Scenario, i: usize, t: u64, g: &mut NodeGen, truth: &mut Truth) {
    let n = sc.nodes.len();
    let me = sc.nodes[i].clone();
    let push = |g: &mut NodeGen, truth: &mut Truth, p: Payload| {
        if i == 1 && t == sc.drop_at && !g.dropped {
            g.seq += DROPPED; // These records were lost in the spool.
            g.dropped = true;
        }
        g.seq += 1;
        truth.records += 1;
        g.out.push(Record {
            node: me.clone(),
            boot_id: g.boot.clone(),
            seq: g.seq,
            unix_ns: t,
            payload: Some(p),
        });
    };
    for j in (0..n).filter(|j| *j != i) {
        let peer = sc.nodes[j].clone();
        let link = truth.links.entry((me.clone(), peer.clone())).or_default();
        // RTT window.
        let start_bw = sc.start + sc.bw_offset(i, j);
        let in_test = |a: usize, b: usize| {
            let o = sc.start + sc.bw_offset(a, b);
            t >= o && (t - o) % BW_EVERY < BW_LEN
        };
        let load = in_test(i, j) || in_test(j, i);
        let out = sc.link_out(i, j, t);
        let mut rtts: Vec<u64> = Vec::new();
        let drop = errored::lost(sc, i, j, t);
        if !out {
            // The first `drop` probes of an errored window are lost.
            for k in drop..PROBES {
                let h = mix((t / S) << 16 ^ (i * 31 + j) as u64 ^ k << 48);
                let mut v = 70_000 + h % 40_000 + if load { 50_000 } else { 0 };
                if i == 0 && j == 1 && t == sc.spike.1 && k == 3 {
                    v = sc.spike.0;
                }
                v = shift::rtt(sc, i, j, t, v);
                rtts.push(v);
            }
        }
        let mut sorted = rtts.clone();
        sorted.sort_unstable();
        link.windows += 1;
        link.probes += PROBES;
        link.lost += PROBES - rtts.len() as u64;
        link.received += rtts.len() as u64;
        link.sum_ns += rtts.iter().map(|v| *v as u128).sum::<u128>();
        link.worst_ns = link.worst_ns.max(sorted.last().copied().unwrap_or(0));
        if sc.keep_samples {
            link.samples.extend(&rtts);
        }
        let p = |q: f64| {
            sorted
                .get(((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0)
        };
        errored::count(
            link,
            t,
            out,
            PROBES - rtts.len() as u64,
            if rtts.is_empty() { 0 } else { p(0.99) },
        );
        let rtt = Payload::Rtt(RttSummary {
            peer: peer.clone(),
            window_start_unix_ns: t,
            window_ns: WINDOW,
            sent: PROBES,
            received: rtts.len() as u64,
            lost: PROBES - rtts.len() as u64,
            min_ns: sorted.first().copied().unwrap_or(0),
            max_ns: sorted.last().copied().unwrap_or(0),
            mean_ns: if rtts.is_empty() {
                0
            } else {
                rtts.iter().sum::<u64>() / rtts.len() as u64
            },
            sum_ns: rtts.iter().sum(),
            p50_ns: p(0.5),
            p99_ns: p(0.99),
            buckets: sparse_buckets(rtts.iter().copied()),
            under_load: load,
            ..Default::default()
        });
        push(g, truth, rtt);
        let link = truth.links.get_mut(&(me.clone(), peer.clone())).unwrap();
        // Bandwidth test, uploading i -> j.
        if t >= start_bw && (t - start_bw).is_multiple_of(BW_EVERY) {
            let k = (t - start_bw) / BW_EVERY;
            let fail = out || (i == 0 && j == 1 && k == 7);
            let throttled = sc.throttled(i, t) || sc.throttled(j, t);
            let gbps = 70.0 - if throttled { 6.5 } else { 0.0 }
                + (mix(t ^ k) % 1000) as f64 / 1000.0
                - 0.5;
            let gbps = shift::bandwidth(sc, i, j, t, gbps);
            link.tests += 1;
            if fail {
                link.failed += 1;
            } else {
                link.gbps.push(gbps);
                if throttled {
                    truth.bw_throttled.push(gbps);
                } else {
                    truth.bw_normal.push(gbps);
                }
            }
            let bw = Payload::Bandwidth(BandwidthResult {
                peer: peer.clone(),
                direction: Direction::Upload as i32,
                protocol: Protocol::Tcp as i32,
                streams: 4,
                start_unix_ns: t,
                duration_ns: BW_LEN,
                bits_per_second: if fail { 0.0 } else { gbps * 1e9 },
                bytes: if fail {
                    0
                } else {
                    (gbps * 1e9 / 8.0 * 10.0) as u64
                },
                error: if fail {
                    "connection refused".into()
                } else {
                    String::new()
                },
                ..Default::default()
            });
            push(g, truth, bw);
        }
        // Link outages this node records: start and end records.
        let mut outages: Vec<(u64, u64, OutageCause, u64)> = sc
            .outages
            .iter()
            .enumerate()
            .filter(|(_, o)| o.0 == i && o.1 == j)
            .map(|(k, o)| {
                (
                    o.2,
                    o.3,
                    if o.4 {
                        OutageCause::Carrier
                    } else {
                        OutageCause::ProbeLoss
                    },
                    k as u64 + 1,
                )
            })
            .collect();
        if j == n - 1 {
            outages.push((sc.restart.0, sc.restart.1, OutageCause::ProbeLoss, 100));
        }
        for (s, e, cause, id) in outages {
            if t == s || t == e {
                if t == s {
                    truth
                        .links
                        .get_mut(&(me.clone(), peer.clone()))
                        .unwrap()
                        .outages
                        .push((s, e));
                }
                let o = Payload::Outage(Outage {
                    peer: peer.clone(),
                    interface: "bridge0".into(),
                    cause: cause as i32,
                    start_unix_ns: s,
                    end_unix_ns: (t == e).then_some(e),
                    outage_id: id,
                    ..Default::default()
                });
                push(g, truth, o);
            }
        }
        // ssh checks.
        if (t - sc.start).is_multiple_of(SERVICE) {
            let refused =
                (i == 0 && j == 1 && (sc.service_outage.0..sc.service_outage.1).contains(&t))
                    || sc.down(j, t);
            let e = truth.ssh.entry((me.clone(), peer.clone())).or_default();
            e.0 += 1;
            e.1 += u64::from(!refused);
            let c = Payload::Service(ServiceCheck {
                peer: peer.clone(),
                service: "ssh".into(),
                address: format!("10.0.0.{}:22", j + 1),
                up: !refused,
                connect_ns: if refused { 0 } else { 150_000 },
                error: if refused {
                    "connection refused".into()
                } else {
                    String::new()
                },
            });
            push(g, truth, c);
        }
    }
    // Thermals.
    if (t - sc.start).is_multiple_of(THERMAL) {
        let day = ((t - sc.start) % (86_400 * S)) as f64 / (86_400 * S) as f64;
        let throttled = sc.throttled(i, t);
        let case = 36.0
            + i as f64 * 0.5
            + 3.0 * (day * std::f64::consts::TAU).sin().abs()
            + if throttled { 4.0 } else { 0.0 };
        g.thermal_sum += case;
        g.thermal_n += 1;
        g.thermal_max = g.thermal_max.max(case);
        let th = Payload::Thermal(ThermalReading {
            sensors: vec![
                TemperatureSensor {
                    name: "case".into(),
                    celsius: case,
                    source: "sim".into(),
                    critical_celsius: 0.0,
                },
                TemperatureSensor {
                    name: "ssd".into(),
                    celsius: case - 6.0,
                    source: "sim".into(),
                    critical_celsius: 0.0,
                },
            ],
            throttle: Some(Throttle {
                throttled,
                pressure_level: u32::from(throttled),
                cpu_frequency_ratio: Some(if throttled { 0.7 } else { 1.0 }),
                ..Default::default()
            }),
        });
        push(g, truth, th);
    }
    if (t - sc.start) % STATS == STATS - S {
        let dropped = if i == 1 && t > sc.drop_at { DROPPED } else { 0 };
        let (cpu_seconds, resident_bytes) = shift::agent(sc, i, (t - g.started) / S);
        push(
            g,
            truth,
            Payload::AgentStats(AgentStats {
                dropped_records: dropped,
                cpu_seconds,
                resident_bytes,
                ..Default::default()
            }),
        );
    }
    let mut counters = std::mem::take(&mut g.counters);
    for p in shift::extra(sc, i, t, &mut counters, truth) {
        push(g, truth, p);
    }
    g.counters = counters;
}

/// A collector storing in `dir`, its rate limit out of the way, with the
/// standard scenario of `nodes` over `[start, start + duration)` run into
/// it, without per-sample truth (what the long runs of the examples want);
/// the collector, the scenario, the truth and how long the ingest took.
pub async fn fill(
    dir: &Path,
    nodes: usize,
    start: u64,
    duration: u64,
) -> (crate::common::Collector, Scenario, Truth, Duration) {
    // A bulk fill sends hours of records per second of wall time: the
    // per-node rate limits (records and bytes) would refuse it.
    let c = crate::common::Collector::start_with(dir, |cfg| {
        cfg.max_records_per_second = 10_000_000;
        cfg.max_bytes_per_second = 1 << 32;
    })
    .await;
    let mut sc = Scenario::standard(nodes, start, duration);
    sc.keep_samples = false;
    let t = Instant::now();
    let truth = run(&sc, c.grpc, 4000).await;
    let took = t.elapsed();
    (c, sc, truth, took)
}
