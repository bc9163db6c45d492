//! Where an ingested record's collector time goes, stage by stage, on the
//! mesh of `bench/store.sh`, in one thread (so each figure is per core):
//!
//! 1. decode: the gRPC message into raw records (`RawAgentMessage` from a
//!    `Bytes`, as the service does), then `validate::batch_into` (each
//!    record decoded into the storage of the batch before, as a stream
//!    does, checked, its kind named);
//! 2. metrics: `apply_record` of every record into the `/metrics` state;
//! 3. insert: the store writer's statements for a batch (the same
//!    `store::insert` and `queries` calls as `Store`'s writer, ids cached),
//!    before the commit;
//! 4. commit: `COMMIT` with `synchronous = FULL` (the WAL write and fsync,
//!    and SQLite's automatic checkpoint when due), then dropping the batch.
//!
//! The connection has the collector writer's settings
//! (`store::writer_settings`); `--pragma NAME=VALUE` overrides one, to
//! measure an alternative.
//!
//! Each stage is timed in wall time and in the thread's CPU time: on a
//! shared machine the CPU figure is the one to compare.
//!
//! What it leaves out is the transport (HTTP/2 framing, tonic, the tokio
//! hops between stream task and writer thread): `bench/store.sh`'s
//! collector CPU seconds minus these four.
//!
//! ```sh
//! cargo run --release -p boltwatch-collector --example store_split -- --hours 6
//! ```

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use boltwatch_collector::export::SharedMetrics;
use boltwatch_collector::ingest::decode::Decoded;
use boltwatch_collector::ingest::raw::{RawAgentMessage, RawMsg};
use boltwatch_collector::ingest::validate::{self, Rules};
use boltwatch_collector::store::{self, layout::Keys, queries, schema};
use prost::Message;
use rusqlite::TransactionBehavior;

#[path = "support/mesh.rs"]
mod mesh;

fn main() -> anyhow::Result<()> {
    let (mut hours, mut nodes, mut batch) = (6u64, 4usize, 4096usize);
    // Overrides of the writer's settings, to measure alternatives.
    let mut pragmas: Vec<(String, String)> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(k) = args.next() {
        let mut v = || args.next().with_context(|| format!("{k} needs a value"));
        match k.as_str() {
            "--hours" => hours = v()?.parse()?,
            "--nodes" => nodes = v()?.parse()?,
            "--batch" => batch = v()?.parse()?,
            "--pragma" => {
                let kv = v()?;
                let (k, val) = kv.split_once('=').context("--pragma NAME=VALUE")?;
                pragmas.push((k.into(), val.into()));
            }
            _ => bail!(
                "usage: store_split [--hours H] [--nodes N] [--batch RECORDS] [--pragma NAME=VALUE]..."
            ),
        }
    }
    let names = mesh::node_names(nodes);
    // Batches of every node, interleaved as concurrent streams would be.
    let per_node: Vec<_> = (0..nodes)
        .map(|i| mesh::encode_node(i, &names, hours, batch).0)
        .collect();
    let most = per_node.iter().map(Vec::len).max().unwrap_or(0);
    let mut messages = Vec::new();
    for k in 1..most {
        for (i, msgs) in per_node.iter().enumerate() {
            if let Some(m) = msgs.get(k) {
                messages.push((i, m.clone()));
            }
        }
    }
    let boots: Vec<String> = per_node
        .iter()
        .map(|m| match RawAgentMessage::decode(m[0].as_ref()) {
            Ok(RawAgentMessage {
                msg: Some(RawMsg::Hello(h)),
            }) => h.boot_id,
            _ => panic!("first message is the Hello"),
        })
        .collect();

    let dir = tempfile::tempdir()?;
    let mut conn = rusqlite::Connection::open(dir.path().join("boltwatch.db"))?;
    store::writer_settings(&conn)?;
    for (k, v) in &pragmas {
        conn.pragma_update(None, k, v)?;
    }
    schema::migrate(&mut conn)?;
    let metrics = SharedMetrics::new();
    let mut keys = Keys::default();
    let (mut decode, mut apply, mut insert, mut commit) = <(Spent, Spent, Spent, Spent)>::default();
    let mut records = 0u64;
    // One per stream, as each stream task keeps its own.
    let mut decoders: Vec<Decoded> = (0..nodes).map(|_| Decoded::default()).collect();
    // Made once per stream, after its Hello, as the service does.
    let rules: Vec<Rules> = boots.iter().map(|b| Rules::any_size(&[b])).collect();
    for (i, bytes) in &messages {
        let t0 = Stamp::now();
        // From a `Bytes`, as tonic hands the frame over: the records are
        // slices of it.
        let Some(RawMsg::Batch(b)) = RawAgentMessage::decode(bytes.clone())?.msg else {
            bail!("not a batch");
        };
        let decoded = &mut decoders[*i];
        let news = validate::batch_into(&names[*i], b.records, &rules[*i], decoded)?;
        let t1 = Stamp::now();
        {
            let mut m = metrics.lock();
            for r in decoded.records() {
                m.apply_record(r);
            }
        }
        let t2 = Stamp::now();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut inserted = Vec::with_capacity(news.len());
        let added = store::insert::insert_batch(&tx, &mut keys, &news, &mut inserted)?;
        for ((node, boot), a) in news.boots.iter().zip(&added) {
            queries::add_boot_records(&tx, node, boot, 1, a.added, a.max_seq)?;
            queries::boot_highest_seq(&tx, node, boot)?;
        }
        let n = news.len() as u64;
        let t3 = Stamp::now();
        tx.commit()?;
        // The batch is dropped where the collector drops it: after the
        // commit (its decoded records stay for the stream's next batch).
        drop((news, inserted));
        let t4 = Stamp::now();
        decode.add(t0, t1);
        apply.add(t1, t2);
        insert.add(t2, t3);
        commit.add(t3, t4);
        records += n;
    }
    let line = |name: &str, d: Spent| {
        let per = |d: Duration| d.as_secs_f64() * 1e6 / records as f64;
        println!(
            "{name:<8} {:>6.2} s  {:>5.2} us/record wall  {:>5.2} us/record CPU  {:>9.0} records/CPU-s",
            d.wall.as_secs_f64(),
            per(d.wall),
            per(d.cpu),
            1e6 / per(d.cpu)
        );
    };
    println!(
        "{records} records in {} batches of up to {batch}, {nodes} nodes, {hours} h",
        messages.len()
    );
    line("decode", decode);
    line("metrics", apply);
    line("insert", insert);
    line("commit", commit);
    line("total", decode + apply + insert + commit);
    Ok(())
}

/// A point in wall time and in this thread's CPU time.
#[derive(Clone, Copy)]
struct Stamp {
    wall: Instant,
    cpu: Duration,
}

impl Stamp {
    fn now() -> Stamp {
        let cpu = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
            .map(Duration::from)
            .unwrap_or_default();
        Stamp {
            wall: Instant::now(),
            cpu,
        }
    }
}

/// Wall and CPU (this thread's, so a stage waiting on fsync or preempted
/// by other work on a shared machine is not charged for the wait) time.
#[derive(Clone, Copy, Default)]
struct Spent {
    wall: Duration,
    cpu: Duration,
}

impl Spent {
    fn add(&mut self, from: Stamp, to: Stamp) {
        self.wall += to.wall - from.wall;
        self.cpu += to.cpu.saturating_sub(from.cpu);
    }
}

impl std::ops::Add for Spent {
    type Output = Spent;
    fn add(self, o: Spent) -> Spent {
        Spent {
            wall: self.wall + o.wall,
            cpu: self.cpu + o.cpu,
        }
    }
}
