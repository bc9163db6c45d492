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
//! `--write-batches FILE` writes the encoded messages to FILE and exits;
//! `--read-batches FILE` sends FILE's messages instead of encoding its
//! own, so another protobuf library's encoding of the same records
//! (`bench/reencode.py`) goes over the same transport. The file: `BWB1`,
//! the node count (u32 LE), then per node its highest seq (u64 LE, also
//! its record count: seqs start at 1), its message count (u32 LE) and
//! each message as a u32 LE length and the bytes.
//!
//! ```sh
//! cargo run --release -p boltwatch-collector --example store_load -- \
//!     --grpc 127.0.0.1:50051 --hours 72 --nodes 4 --pid $COLLECTOR_PID
//! ```

use std::collections::VecDeque;
use std::time::Instant;

use anyhow::{bail, ensure, Context};
use boltwatch_proto::v1::{collector_message, CollectorMessage};
use prost::bytes::{BufMut, Bytes};
use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

#[path = "support/mesh.rs"]
mod mesh;
use mesh::{encode_node, node_names};

/// An `AgentMessage` already encoded: written to the wire as is.
#[derive(Debug, Clone, Default)]
struct PreEncoded(Bytes);

impl Message for PreEncoded {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.0);
    }
    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        // Never decoded (the client only sends it).
        prost::encoding::skip_field(wire_type, tag, buf, ctx)
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
    write: Option<String>,
    read: Option<String>,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        grpc: String::new(),
        hours: 72,
        nodes: 4,
        batch: 4096,
        window: 2,
        pid: None,
        write: None,
        read: None,
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
            "--write-batches" => a.write = Some(v()?),
            "--read-batches" => a.read = Some(v()?),
            _ => bail!("usage: store_load (--grpc ADDR | --write-batches FILE) [--read-batches FILE] [--hours H] [--nodes N] [--batch RECORDS] [--window BATCHES] [--pid COLLECTOR_PID]"),
        }
    }
    ensure!(!a.grpc.is_empty() || a.write.is_some(), "--grpc ADDR");
    ensure!((2..=26).contains(&a.nodes), "--nodes 2..=26");
    ensure!(a.batch > 0 && a.window > 0, "--batch and --window > 0");
    Ok(a)
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

/// One node's messages, its highest seq and their bytes.
type NodeMessages = (Vec<Bytes>, u64, u64);

fn encode_all(a: &Args) -> Vec<NodeMessages> {
    let nodes = node_names(a.nodes);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..a.nodes)
            .map(|i| {
                let nodes = &nodes;
                s.spawn(move || encode_node(i, nodes, a.hours, a.batch))
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("encoder")).collect()
    })
}

fn write_batches(path: &str, all: &[NodeMessages]) -> anyhow::Result<()> {
    let mut out = b"BWB1".to_vec();
    out.extend((all.len() as u32).to_le_bytes());
    for (msgs, last, _) in all {
        out.extend(last.to_le_bytes());
        out.extend((msgs.len() as u32).to_le_bytes());
        for m in msgs {
            out.extend((m.len() as u32).to_le_bytes());
            out.extend_from_slice(m);
        }
    }
    std::fs::write(path, out).with_context(|| format!("writing {path}"))
}

fn read_batches(path: &str) -> anyhow::Result<Vec<NodeMessages>> {
    let raw = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let mut at = 4;
    ensure!(raw.get(..4) == Some(b"BWB1"), "{path}: not a batches file");
    let mut take = |n: usize| -> anyhow::Result<&[u8]> {
        let s = raw.get(at..at + n).context("batches file cut short")?;
        at += n;
        Ok(s)
    };
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let nodes = u32_of(take(4)?);
    let mut all = Vec::new();
    for _ in 0..nodes {
        let last = u64_of(take(8)?);
        let count = u32_of(take(4)?);
        let mut msgs = Vec::new();
        for _ in 0..count {
            let len = u32_of(take(4)?) as usize;
            msgs.push(Bytes::copy_from_slice(take(len)?));
        }
        let bytes = msgs.iter().map(|m| m.len() as u64).sum();
        all.push((msgs, last, bytes));
    }
    Ok(all)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let t = Instant::now();
    let encoded = match &a.read {
        Some(path) => read_batches(path)?,
        None => encode_all(&a),
    };
    if let Some(path) = &a.write {
        return write_batches(path, &encoded);
    }
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
