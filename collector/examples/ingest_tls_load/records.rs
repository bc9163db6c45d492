//! One simulated agent's records, second by second.

use std::time::{SystemTime, UNIX_EPOCH};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{
    HistogramBucket, InterfaceCounters, Record, RttSummary, TemperatureSensor, ThermalReading,
};

/// Agent `i`'s seconds of records, one after the other, numbered on from
/// the last.
pub struct Seconds<'a> {
    node: &'a str,
    i: u32,
    peers: &'a [String],
    interfaces: u32,
    /// The next second.
    n: u64,
    /// The last record's sequence number.
    seq: u64,
}

impl<'a> Seconds<'a> {
    /// From second 0 and sequence number 1.
    pub fn new(node: &'a str, i: u32, peers: &'a [String], interfaces: u32) -> Self {
        Seconds {
            node,
            i,
            peers,
            interfaces,
            n: 0,
            seq: 0,
        }
    }

    /// The next second's records.
    pub fn next_second(&mut self) -> Vec<Record> {
        let records = second_of_records(
            self.node,
            self.i,
            self.n,
            self.peers,
            self.interfaces,
            &mut self.seq,
        );
        self.n += 1;
        records
    }
}

/// Second `n` of agent `i`: an RTT summary per peer, counters per
/// interface, and every 5th second a thermal reading.
fn second_of_records(
    node: &str,
    i: u32,
    n: u64,
    peers: &[String],
    interfaces: u32,
    seq: &mut u64,
) -> Vec<Record> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut out = Vec::new();
    let mut push = |payload| {
        *seq += 1;
        out.push(Record {
            node: node.to_string(),
            boot_id: format!("boot-{i}"),
            seq: *seq,
            unix_ns: now,
            payload: Some(payload),
        });
    };
    for peer in peers {
        push(rtt(peer, now));
    }
    for k in 0..interfaces {
        push(counters(k, n));
    }
    if n.is_multiple_of(5) {
        push(thermal(i));
    }
    out
}

/// The second to `now` of 10 probes to `peer` around 80 us: buckets
/// 2^(k/8) s, k = -109..-108.
fn rtt(peer: &str, now: u64) -> Payload {
    Payload::Rtt(RttSummary {
        peer: peer.to_string(),
        interface: "bridge0".into(),
        window_start_unix_ns: now.saturating_sub(1_000_000_000),
        window_ns: 1_000_000_000,
        sent: 10,
        received: 10,
        min_ns: 70_000,
        mean_ns: 80_000,
        max_ns: 95_000,
        p50_ns: 80_000,
        p99_ns: 95_000,
        sum_ns: 800_000,
        buckets: vec![
            HistogramBucket {
                index: -109,
                count: 7,
            },
            HistogramBucket {
                index: -108,
                count: 3,
            },
        ],
        ..Default::default()
    })
}

/// Interface `k`'s counters after `n` seconds at 10 Gbit/s.
fn counters(k: u32, n: u64) -> Payload {
    let bytes = n * 1_250_000_000;
    Payload::Counters(InterfaceCounters {
        interface: format!("en{}", k + 5),
        receive_bytes: bytes,
        transmit_bytes: bytes,
        receive_packets: n * 100_000,
        transmit_packets: n * 100_000,
        carrier: true,
        carrier_known: true,
        speed_bits_per_second: 40_000_000_000,
        mtu: 9000,
        ..Default::default()
    })
}

/// Agent `i`'s four sensors, 55-64 degrees.
fn thermal(i: u32) -> Payload {
    Payload::Thermal(ThermalReading {
        sensors: ["cpu", "gpu", "soc", "ssd"]
            .iter()
            .map(|s| TemperatureSensor {
                name: (*s).into(),
                celsius: 55.0 + f64::from(i % 10),
                source: "bench".into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    })
}
