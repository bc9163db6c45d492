//! An independent load client for `bench/store.sh`: simulates an N-node
//! full mesh over `--hours` (one RTT summary per directed link per second
//! from 10 Hz probing, interface counters every second, thermals every 5 s,
//! a bandwidth test per link every 5 minutes, agent stats every minute),
//! encodes every batch up front, then streams them to a running collector's
//! gRPC ingest, one stream per node (as the agents do), `--window` batches
//! in flight per stream. Only the sending is timed.
//!
//! Prints one `key=value` line: records, seconds, records/s and, with
//! `--pid`, the collector's CPU seconds over the send (from /proc), so
//! records per CPU-second is per core whatever the scheduler did.
//!
//! ```sh
//! cargo run --release -p boltwatch-collector --example store_load -- \
//!     --grpc 127.0.0.1:50051 --hours 72 --nodes 4 --pid $COLLECTOR_PID
//! ```

use std::collections::VecDeque;
use std::time::Instant;

use anyhow::{bail, ensure, Context};
use boltwatch_proto::histogram::sparse_buckets;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{
    agent_message, collector_message, AgentMessage, AgentStats, BandwidthResult,
    CollectorMessage, Direction, Hello, InterfaceCounters, Protocol, Record, RecordBatch,
    RttSummary, TemperatureSensor, ThermalReading, Throttle,
};
use prost::bytes::{BufMut, Bytes};
use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

const S: u64 = 1_000_000_000;
/// 2026-11-30T00:00:00Z: `bench/store.sh` reports over [START, START + hours).
const START: u64 = 1_795_996_800 * S;

/// An `AgentMessage` already encoded: written to the wire as is.
#[derive(Debug, Clone, Default)]
struct PreEncoded(Bytes);

impl Message for PreEncoded {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.0);
    }
    fn merge_field(
        &mut self,
        _tag: u32,
        _wire_type: prost::encoding::WireType,
        _buf: &mut impl prost::bytes::Buf,
        _ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        Err(prost::DecodeError::new("send only"))
    }
    fn encoded_len(&self) -> usize {
        self.0.len()
    }
    fn clear(&mut self) {
        self.0 = Bytes::new();
    }
}

struct Args {
    grpc: String,
    hours: u64,
    nodes: usize,
    batch: usize,
    window: usize,
    pid: Option<u32>,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        grpc: String::new(),
        hours: 72,
        nodes: 4,
        batch: 4096,
        window: 2,
        pid: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().with_context(|| format!("{k} needs a value"));
        match k.as_str() {
            "--grpc" => a.grpc = v()?,
            "--hours" => a.hours = v()?.parse()?,
            "--nodes" => a.nodes = v()?.parse()?,
            "--batch" => a.batch = v()?.parse()?,
            "--window" => a.window = v()?.parse()?,
            "--pid" => a.pid = Some(v()?.parse()?),
            _ => bail!("usage: store_load --grpc ADDR [--hours H] [--nodes N] [--batch RECORDS] [--window BATCHES] [--pid COLLECTOR_PID]"),
        }
    }
    ensure!(!a.grpc.is_empty(), "--grpc ADDR");
    ensure!((2..=26).contains(&a.nodes), "--nodes 2..=26");
    ensure!(a.batch > 0 && a.window > 0, "--batch and --window > 0");
    Ok(a)
}

fn mix(mut x: u64) -> u64 {
    // splitmix64: fixed, seedless pseudo-random values.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// One node's payloads of simulated second `s`, with their timestamps.
fn second(i: usize, nodes: &[String], s: u64, rx_bytes: &mut u64, out: &mut Vec<(u64, Payload)>) {
    let t = START + s * S;
    for (j, peer) in nodes.iter().enumerate().filter(|(j, _)| *j != i) {
        let rtts: Vec<u64> = (0..10u64)
            .map(|k| 70_000 + mix(s << 16 ^ (i * 31 + j) as u64 ^ k << 48) % 40_000)
            .collect();
        let mut sorted = rtts.clone();
        sorted.sort_unstable();
        let sum: u64 = rtts.iter().sum();
        out.push((
            t + j as u64 * 1_000_000,
            Payload::Rtt(RttSummary {
                peer: peer.clone(),
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
            }),
        ));
        let offset = 150 + (i * nodes.len() + j) as u64 * 20;
        if s >= offset && (s - offset).is_multiple_of(300) {
            let gbps = 69.5 + (mix(s ^ j as u64) % 1000) as f64 / 1000.0;
            out.push((
                t + 500_000_000,
                Payload::Bandwidth(BandwidthResult {
                    peer: peer.clone(),
                    peer_address: format!("169.254.{i}.{j}:5201"),
                    interface: format!("bridge{j}"),
                    direction: Direction::Upload as i32,
                    protocol: Protocol::Tcp as i32,
                    streams: 4,
                    start_unix_ns: t,
                    duration_ns: 10 * S,
                    bytes: (gbps * 1e9 / 8.0 * 10.0) as u64,
                    bits_per_second: gbps * 1e9,
                    ..Default::default()
                }),
            ));
        }
    }
    *rx_bytes += 1_000_000 + mix(s) % 100_000;
    out.push((
        t + 900_000_000,
        Payload::Counters(InterfaceCounters {
            interface: "bridge0".into(),
            receive_bytes: *rx_bytes,
            transmit_bytes: *rx_bytes / 2,
            receive_packets: *rx_bytes / 1500,
            transmit_packets: *rx_bytes / 3000,
            carrier: true,
            carrier_known: true,
            carrier_up_count: 1,
            speed_bits_per_second: 80_000_000_000,
            mtu: 9000,
            ..Default::default()
        }),
    ));
    if s.is_multiple_of(5) {
        let case = 36.0 + i as f64 * 0.5 + (mix(s) % 300) as f64 / 100.0;
        let sensor = |name: &str, celsius| TemperatureSensor {
            name: name.into(),
            celsius,
            source: "smc".into(),
            critical_celsius: 0.0,
        };
        out.push((
            t + 950_000_000,
            Payload::Thermal(ThermalReading {
                sensors: vec![sensor("case", case), sensor("ssd", case - 6.0)],
                throttle: Some(Throttle {
                    cpu_frequency_ratio: 1.0,
                    source: "pmset".into(),
                    ..Default::default()
                }),
            }),
        ));
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

/// Node `i`'s run as encoded `AgentMessage`s: the Hello, then the batches.
fn encode_node(i: usize, nodes: &[String], hours: u64, batch: usize) -> (Vec<Bytes>, u64, u64) {
    let node = &nodes[i];
    let boot = format!("{:032x}", mix(i as u64 + 1) as u128 * mix(i as u64 + 7) as u128);
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
    let mut flush = |records: &mut Vec<Record>, msgs: &mut Vec<Bytes>| {
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

/// Sends one node's messages; returns the watermark of the last ack.
async fn send_node(grpc: String, msgs: Vec<Bytes>, window: usize) -> anyhow::Result<u64> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{grpc}"))?
        .connect()
        .await?;
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await?;
    let (tx, rx) = mpsc::channel::<PreEncoded>(window + 1);
    let mut msgs = msgs.into_iter();
    tx.send(PreEncoded(msgs.next().context("a Hello")?)).await?;
    let codec = tonic_prost::ProstCodec::<PreEncoded, CollectorMessage>::default();
    let mut inbound = client
        .streaming(
            tonic::Request::new(ReceiverStream::new(rx)),
            "/boltwatch.v1.Telemetry/Stream".parse()?,
            codec,
        )
        .await?
        .into_inner();
    let welcome = inbound.message().await?.context("a Welcome")?;
    ensure!(
        matches!(welcome.msg, Some(collector_message::Msg::Welcome(_))),
        "expected a Welcome, got {welcome:?}"
    );
    let mut in_flight = VecDeque::new();
    let mut highest = 0;
    let mut pending = msgs.peekable();
    while pending.peek().is_some() || !in_flight.is_empty() {
        while in_flight.len() < window {
            let Some(m) = pending.next() else { break };
            tx.send(PreEncoded(m)).await?;
            in_flight.push_back(());
        }
        let m = inbound.message().await?.context("stream ended early")?;
        let Some(collector_message::Msg::Ack(ack)) = m.msg else {
            bail!("expected an Ack, got {m:?}");
        };
        in_flight.pop_front();
        highest = ack.boots.iter().map(|b| b.highest_seq).max().unwrap_or(0);
    }
    Ok(highest)
}

/// utime + stime of `pid`, seconds.
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command name; utime and stime are 14
    // and 15 of the full line.
    let rest = stat.rsplit_once(')').context("/proc stat format")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    // CLK_TCK is 100 on Linux.
    Ok(ticks / 100.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let nodes: Vec<String> = (0..a.nodes)
        .map(|i| format!("mini-{}", (b'a' + i as u8) as char))
        .collect();
    let t = Instant::now();
    let encoded: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..a.nodes)
            .map(|i| {
                let nodes = &nodes;
                s.spawn(move || encode_node(i, nodes, a.hours, a.batch))
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("encoder")).collect()
    });
    let records: u64 = encoded.iter().map(|e| e.1).sum();
    let bytes: u64 = encoded.iter().map(|e| e.2).sum();
    eprintln!(
        "encoded {records} records ({bytes} bytes) in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let cpu0 = a.pid.map(cpu_seconds).transpose()?;
    let t = Instant::now();
    let mut tasks = Vec::new();
    let mut expect = Vec::new();
    for (msgs, last, _) in encoded {
        expect.push(last);
        tasks.push(tokio::spawn(send_node(a.grpc.clone(), msgs, a.window)));
    }
    for (task, last) in tasks.into_iter().zip(expect) {
        let got = task.await??;
        ensure!(got == last, "last ack watermark {got}, sent up to {last}");
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = match (a.pid, cpu0) {
        (Some(pid), Some(c0)) => cpu_seconds(pid)? - c0,
        _ => f64::NAN,
    };
    println!(
        "records={records} bytes={bytes} seconds={secs:.2} records_per_second={:.0} collector_cpu_seconds={cpu:.2} records_per_cpu_second={:.0}",
        records as f64 / secs,
        records as f64 / cpu
    );
    Ok(())
}
