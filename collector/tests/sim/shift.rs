//! The acceptance truth of the simulator: a level shift at a known time on
//! one link (its RTT up, its bandwidth down), interface counters whose
//! errors, drops and carrier changes grow at known readings (across an
//! agent restart, and through a counter reset), an MTU mismatch on one
//! link in the agents' `Hello`s, and agent CPU and memory. The truth is
//! the generator's own bookkeeping of what it injected.

use std::collections::BTreeMap;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Hello, Interface, InterfaceCounters, Peer};

use super::{Scenario, Truth, S};

/// Interface counters interval: one reading a minute, at its start, so a
/// rolled-up minute (which keeps its newest reading) reads the same.
pub const COUNTERS: u64 = 60 * S;
/// Agent CPU, percent of a core.
pub const CPU_PERCENT: f64 = 2.0;

/// A level shift of one directed link over `[start, end)`.
#[derive(Debug, Clone)]
pub struct Shift {
    pub from: usize,
    pub to: usize,
    pub start: u64,
    pub end: u64,
    /// RTT multiplied by this.
    pub rtt: f64,
    /// Bandwidth multiplied by this.
    pub bandwidth: f64,
}

/// The standard shift of `sc`: link 1 -> 2, from the NFS copy's mark
/// (`at(0.65)`) for 45 minutes, RTT up 30 %, bandwidth down 25 %. Set it
/// to add the acceptance truth to a scenario (counters and Hellos come
/// with it; without it the agents' Hellos are the plain test ones).
pub fn standard(sc: &Scenario) -> Shift {
    let start = (sc.start + sc.duration * 65 / 100) / (60 * S) * (60 * S);
    Shift {
        from: 1,
        to: 2,
        start,
        end: start + 45 * 60 * S,
        rtt: 1.3,
        bandwidth: 0.75,
    }
}

/// What the report's acceptance parts must reproduce.
#[derive(Debug, Default, Clone)]
pub struct Acceptance {
    /// (node, interface) -> growth of [rx errors, tx errors, rx drops,
    /// tx drops, carrier changes].
    pub growth: BTreeMap<(String, String), [u64; 5]>,
    /// The link whose ends' MTUs differ (9000 at the first, 1500 at the
    /// second).
    pub mtu_mismatch: (String, String),
}

/// The interface node `i` reaches node `j` over.
pub fn iface(j: usize) -> String {
    format!("tb{j}")
}

/// The MTU of node `i`'s end towards `j`: 1500 on the last node's end
/// towards the first, 9000 elsewhere.
fn mtu(sc: &Scenario, i: usize, j: usize) -> u32 {
    if i == sc.nodes.len() - 1 && j == 0 {
        1500
    } else {
        9000
    }
}

/// Node `i`'s `Hello` for boot `boot`, its agent started at `started`.
pub fn hello(sc: &Scenario, i: usize, boot: &str, started: u64) -> Hello {
    let mut h = crate::common::hello(&sc.nodes[i], boot);
    if sc.shift.is_none() {
        return h;
    }
    h.started_unix_ns = started;
    h.os = "macOS 15.1 (24B83)".into();
    h.agent_version = "0.9.0".into();
    for j in (0..sc.nodes.len()).filter(|j| *j != i) {
        h.interfaces.push(Interface {
            name: iface(j),
            kind: "thunderbolt".into(),
            speed_bits_per_second: 80_000_000_000,
            generation: "Thunderbolt 5".into(),
            mtu: mtu(sc, i, j),
            ..Default::default()
        });
        h.peers.push(Peer {
            name: sc.nodes[j].clone(),
            address: format!("10.0.{i}.{j}"),
            interface: iface(j),
        });
    }
    h
}

/// `v` (RTT, ns) of `i` -> `j` at `t`, shifted.
pub fn rtt(sc: &Scenario, i: usize, j: usize, t: u64, v: u64) -> u64 {
    match &sc.shift {
        Some(s) if s.from == i && s.to == j && (s.start..s.end).contains(&t) => {
            (v as f64 * s.rtt) as u64
        }
        _ => v,
    }
}

/// `gbps` of `i` -> `j` at `t`, shifted.
pub fn bandwidth(sc: &Scenario, i: usize, j: usize, t: u64, gbps: f64) -> f64 {
    match &sc.shift {
        Some(s) if s.from == i && s.to == j && (s.start..s.end).contains(&t) => gbps * s.bandwidth,
        _ => gbps,
    }
}

/// When node 1's interface towards the last node is re-created (its
/// counters start again from zero).
pub fn reset_at(sc: &Scenario) -> u64 {
    (sc.start + sc.duration * 3 / 4) / COUNTERS * COUNTERS
}

/// Counter events of node `i`'s interface towards `j` in `(a, b]`, per
/// counter: the last node's errors towards the first (one every 20 min),
/// the first node's transmit drops towards node 1 (two an hour), node 1's
/// carrier changes towards the first (its carrier outage's edges), node
/// 1's receive drops towards the last node (one every 10 min).
fn events(sc: &Scenario, i: usize, j: usize, a: u64, b: u64) -> [u64; 5] {
    let n = sc.nodes.len();
    let every = |p: u64| (b - sc.start) / p - (a - sc.start) / p;
    let mut e = [0; 5];
    if i == n - 1 && j == 0 {
        e[0] = every(1200 * S);
    }
    if i == 0 && j == 1 {
        e[3] = 2 * every(3600 * S);
    }
    if i == 1 && j == 0 {
        for (x, y, s, end, carrier) in &sc.outages {
            if *x == 1 && *y == 0 && *carrier {
                e[4] += u64::from(a < *s && *s <= b) + u64::from(a < *end && *end <= b);
            }
        }
    }
    if i == 1 && j == n - 1 {
        e[2] = every(600 * S);
    }
    e
}

/// One interface's counter state: (base, since the last reset, the last
/// reading's time).
type Counter = ([u64; 5], [u64; 5], Option<u64>);

/// Each of a node's interfaces' counter state, by peer.
#[derive(Debug, Default)]
pub struct CounterGen {
    state: BTreeMap<usize, Counter>,
}

/// The records node `i` adds at `t`: its counters every [`COUNTERS`].
pub fn extra(
    sc: &Scenario,
    i: usize,
    t: u64,
    gen: &mut CounterGen,
    truth: &mut Truth,
) -> Vec<Payload> {
    if sc.shift.is_none() || !(t - sc.start).is_multiple_of(COUNTERS) {
        return Vec::new();
    }
    let n = sc.nodes.len();
    let mut out = Vec::new();
    for j in (0..n).filter(|j| *j != i) {
        let key = (sc.nodes[i].clone(), iface(j));
        let (base, since, last) =
            gen.state
                .entry(j)
                .or_insert(([1000 * (i as u64 + 1) + j as u64; 5], [0; 5], None));
        if i == 1 && j == n - 1 && t == reset_at(sc) {
            // The interface was re-created: its counters start from zero.
            (*base, *since) = ([0; 5], [0; 5]);
        }
        if let Some(prev) = *last {
            let e = events(sc, i, j, prev, t);
            let g = truth.acceptance.growth.entry(key.clone()).or_default();
            for k in 0..5 {
                since[k] += e[k];
                g[k] += e[k];
            }
        } else {
            truth.acceptance.growth.entry(key.clone()).or_default();
        }
        *last = Some(t);
        let v: Vec<u64> = (0..5).map(|k| base[k] + since[k]).collect();
        out.push(Payload::Counters(InterfaceCounters {
            interface: iface(j),
            receive_errors: v[0],
            transmit_errors: v[1],
            receive_drops: v[2],
            transmit_drops: v[3],
            // The carrier changes split: up and down counts.
            carrier_up_count: v[4] / 2,
            carrier_down_count: v[4] - v[4] / 2,
            carrier: true,
            carrier_known: true,
            speed_bits_per_second: 80_000_000_000,
            mtu: mtu(sc, i, j),
            ..Default::default()
        }));
    }
    truth.acceptance.mtu_mismatch = (sc.nodes[0].clone(), sc.nodes[n - 1].clone());
    out
}

/// Agent CPU seconds `secs_up` seconds after its start, and its memory
/// (none reported without a shift).
pub fn agent(sc: &Scenario, i: usize, secs_up: u64) -> (f64, u64) {
    if sc.shift.is_none() {
        return (0.0, 0);
    }
    (secs_up as f64 * CPU_PERCENT / 100.0, (30 + i as u64) << 20)
}
