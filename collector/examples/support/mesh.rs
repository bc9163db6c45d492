//! The simulated mesh of `bench/store.sh`, shared by `store_load` (sends it
//! to a collector) and `store_split` (times the collector's stages on it):
//! N nodes in a full mesh over H hours, one RTT summary per directed link
//! per second (10 probes), interface counters every second, thermals every
//! 5 s, a bandwidth test per link every 5 minutes, agent stats every
//! minute; encoded as the agent would, one boot per node.

use boltwatch_proto::histogram::sparse_buckets;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{
    agent_message, AgentMessage, AgentStats, BandwidthResult, Direction, Hello, InterfaceCounters,
    Protocol, Record, RecordBatch, RttSummary, TemperatureSensor, ThermalReading, Throttle,
};
use prost::bytes::Bytes;
use prost::Message;

pub const S: u64 = 1_000_000_000;
/// 2026-11-01T00:00:00Z: `bench/store.sh` reports over [START, START + hours).
/// Fixed, so runs are alike, and weeks in the past, so a 72-hour mesh
/// never runs ahead of the collector's clock (`max_clock_skew`).
pub const START: u64 = 1_793_491_200 * S;

/// `mini-a`, `mini-b`, ...
pub fn node_names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("mini-{}", (b'a' + i as u8) as char))
        .collect()
}

fn mix(mut x: u64) -> u64 {
    // splitmix64: fixed, seedless pseudo-random values.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// One node's payloads of simulated second `s`, with their timestamps:
/// per peer an RTT summary and (every 300 s, staggered) a bandwidth test,
/// then the counters, a thermal reading every 5 s and the agent's stats
/// every minute.
fn second(i: usize, nodes: &[String], s: u64, rx_bytes: &mut u64, out: &mut Vec<(u64, Payload)>) {
    let t = START + s * S;
    for (j, peer) in nodes.iter().enumerate().filter(|(j, _)| *j != i) {
        out.push((t + j as u64 * 1_000_000, rtt(i, j, peer, s)));
        let offset = 150 + (i * nodes.len() + j) as u64 * 20;
        if s >= offset && (s - offset).is_multiple_of(300) {
            out.push((t + 500_000_000, bandwidth(i, j, peer, s)));
        }
    }
    *rx_bytes += 1_000_000 + mix(s) % 100_000;
    out.push((t + 900_000_000, counters(*rx_bytes)));
    if s.is_multiple_of(5) {
        out.push((t + 950_000_000, thermal(i, s)));
    }
    if s % 60 == 59 {
        out.push((
            t + 990_000_000,
            Payload::AgentStats(AgentStats {
                resident_bytes: 20 << 20,
                cpu_seconds: s as f64 / 1000.0,
                ..Default::default()
            }),
        ));
    }
}

/// Node `i`'s second `s` of 10 probes to node `j`, 70-110 us each.
fn rtt(i: usize, j: usize, peer: &str, s: u64) -> Payload {
    let t = START + s * S;
    let rtts: Vec<u64> = (0..10u64)
        .map(|k| 70_000 + mix(s << 16 ^ (i * 31 + j) as u64 ^ k << 48) % 40_000)
        .collect();
    let mut sorted = rtts.clone();
    sorted.sort_unstable();
    let sum: u64 = rtts.iter().sum();
    Payload::Rtt(RttSummary {
        peer: peer.to_string(),
        peer_address: format!("169.254.{i}.{j}:862"),
        interface: format!("bridge{j}"),
        window_start_unix_ns: t,
        window_ns: S,
        sent: 10,
        received: 10,
        min_ns: sorted[0],
        mean_ns: sum / 10,
        max_ns: sorted[9],
        p50_ns: sorted[5],
        p99_ns: sorted[9],
        sum_ns: sum,
        buckets: sparse_buckets(rtts.iter().copied()),
        ..Default::default()
    })
}

/// Node `i`'s 10 s upload test to node `j` from second `s`, about 70 Gbit/s.
fn bandwidth(i: usize, j: usize, peer: &str, s: u64) -> Payload {
    let gbps = 69.5 + (mix(s ^ j as u64) % 1000) as f64 / 1000.0;
    Payload::Bandwidth(BandwidthResult {
        peer: peer.to_string(),
        peer_address: format!("169.254.{i}.{j}:5201"),
        interface: format!("bridge{j}"),
        direction: Direction::Upload as i32,
        protocol: Protocol::Tcp as i32,
        streams: 4,
        start_unix_ns: START + s * S,
        duration_ns: 10 * S,
        bytes: (gbps * 1e9 / 8.0 * 10.0) as u64,
        bits_per_second: gbps * 1e9,
        ..Default::default()
    })
}

/// The bridge's counters with `rx_bytes` received so far.
fn counters(rx_bytes: u64) -> Payload {
    Payload::Counters(InterfaceCounters {
        interface: "bridge0".into(),
        receive_bytes: rx_bytes,
        transmit_bytes: rx_bytes / 2,
        receive_packets: rx_bytes / 1500,
        transmit_packets: rx_bytes / 3000,
        carrier: true,
        carrier_known: true,
        carrier_up_count: 1,
        speed_bits_per_second: 80_000_000_000,
        mtu: 9000,
        ..Default::default()
    })
}

/// Node `i`'s case and SSD temperatures at second `s`, not throttled.
fn thermal(i: usize, s: u64) -> Payload {
    let case = 36.0 + i as f64 * 0.5 + (mix(s) % 300) as f64 / 100.0;
    let sensor = |name: &str, celsius| TemperatureSensor {
        name: name.into(),
        celsius,
        source: "smc".into(),
        critical_celsius: 0.0,
    };
    Payload::Thermal(ThermalReading {
        sensors: vec![sensor("case", case), sensor("ssd", case - 6.0)],
        throttle: Some(Throttle {
            cpu_frequency_ratio: Some(1.0),
            source: "pmset".into(),
            ..Default::default()
        }),
    })
}

/// Node `i`'s run as encoded `AgentMessage`s: the Hello, then the batches.
pub fn encode_node(i: usize, nodes: &[String], hours: u64, batch: usize) -> (Vec<Bytes>, u64, u64) {
    let node = &nodes[i];
    let boot = format!(
        "{:032x}",
        mix(i as u64 + 1) as u128 * mix(i as u64 + 7) as u128
    );
    let hello = AgentMessage {
        msg: Some(agent_message::Msg::Hello(Hello {
            node: node.clone(),
            boot_id: boot.clone(),
            agent_version: "store-load".into(),
            ..Default::default()
        })),
    };
    let mut msgs = vec![Bytes::from(hello.encode_to_vec())];
    let (mut seq, mut rx_bytes) = (0u64, 0u64);
    let mut payloads = Vec::new();
    let mut records = Vec::with_capacity(batch);
    let flush = |records: &mut Vec<Record>, msgs: &mut Vec<Bytes>| {
        let m = AgentMessage {
            msg: Some(agent_message::Msg::Batch(RecordBatch {
                records: std::mem::take(records),
            })),
        };
        msgs.push(Bytes::from(m.encode_to_vec()));
    };
    for s in 0..hours * 3600 {
        payloads.clear();
        second(i, nodes, s, &mut rx_bytes, &mut payloads);
        for (t, p) in payloads.drain(..) {
            seq += 1;
            records.push(Record {
                node: node.clone(),
                boot_id: boot.clone(),
                seq,
                unix_ns: t,
                payload: Some(p),
            });
            if records.len() == batch {
                flush(&mut records, &mut msgs);
            }
        }
    }
    if !records.is_empty() {
        flush(&mut records, &mut msgs);
    }
    let bytes = msgs.iter().map(|m| m.len() as u64).sum();
    (msgs, seq, bytes)
}
