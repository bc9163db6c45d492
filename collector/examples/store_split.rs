//! Where an ingested record's collector time goes, stage by stage, on the
//! mesh of `bench/store.sh`, in one thread (so each figure is per core):
//!
//! 1. decode: the gRPC message into raw records (`RawAgentMessage` from a
//!    `Bytes`, as the service does), then `validate::batch_into` (each
//!    record decoded into the storage of the batch before, as a stream
//!    does, checked, its kind named);
//! 2. metrics: `apply_record` of every record into the `/metrics` state;
//! 3. insert: the store writer's statements for a batch (the same
//!    insert calls (`boltwatch_store::testing`) as `Store`'s writer, ids cached),
//!    before the commit;
//! 4. commit: `COMMIT` with `synchronous = FULL` (the WAL write and fsync,
//!    and SQLite's automatic checkpoint when due), then dropping the batch.
//!
//! The connection has the collector writer's settings
//! (the store's writer settings, `boltwatch_store::testing::writer`); `--pragma NAME=VALUE` overrides one, to
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
use boltwatch_store::testing::rusqlite::{Connection, TransactionBehavior};
use boltwatch_store::testing::{self, Keys};
use prost::bytes::Bytes;
use prost::Message;

#[path = "support/mesh.rs"]
mod mesh;

fn main() -> anyhow::Result<()> {
    let opts = Opts::parse()?;
    let names = mesh::node_names(opts.nodes);
    let per_node: Vec<_> = (0..opts.nodes)
        .map(|i| mesh::encode_node(i, &names, opts.hours, opts.batch).0)
        .collect();
    let messages = interleaved(&per_node);
    let boots = hello_boots(&per_node);
    let dir = tempfile::tempdir()?;
    let mut pipeline = Pipeline::new(
        &dir.path().join("boltwatch.db"),
        &opts.pragmas,
        names,
        &boots,
    )?;
    let mut stages = Stages::default();
    for (i, bytes) in &messages {
        pipeline.batch(*i, bytes, &mut stages)?;
    }
    println!(
        "{} records in {} batches of up to {}, {} nodes, {} h",
        stages.records,
        messages.len(),
        opts.batch,
        opts.nodes,
        opts.hours
    );
    stages.print();
    Ok(())
}

/// The command line.
struct Opts {
    hours: u64,
    nodes: usize,
    batch: usize,
    /// Overrides of the writer's settings, to measure alternatives.
    pragmas: Vec<(String, String)>,
}

impl Opts {
    fn parse() -> anyhow::Result<Opts> {
        let mut o = Opts {
            hours: 6,
            nodes: 4,
            batch: 4096,
            pragmas: Vec::new(),
        };
        let mut args = std::env::args().skip(1);
        while let Some(k) = args.next() {
            let mut v = || args.next().with_context(|| format!("{k} needs a value"));
            match k.as_str() {
                "--hours" => o.hours = v()?.parse()?,
                "--nodes" => o.nodes = v()?.parse()?,
                "--batch" => o.batch = v()?.parse()?,
                "--pragma" => {
                    let kv = v()?;
                    let (k, val) = kv.split_once('=').context("--pragma NAME=VALUE")?;
                    o.pragmas.push((k.into(), val.into()));
                }
                _ => bail!(
                    "usage: store_split [--hours H] [--nodes N] [--batch RECORDS] [--pragma NAME=VALUE]..."
                ),
            }
        }
        Ok(o)
    }
}

/// Batches of every node (after their Hellos), interleaved as concurrent
/// streams would be: (node, message).
fn interleaved(per_node: &[Vec<Bytes>]) -> Vec<(usize, Bytes)> {
    let most = per_node.iter().map(Vec::len).max().unwrap_or(0);
    let mut messages = Vec::new();
    for k in 1..most {
        for (i, msgs) in per_node.iter().enumerate() {
            if let Some(m) = msgs.get(k) {
                messages.push((i, m.clone()));
            }
        }
    }
    messages
}

/// Each node's boot, from its first message, the Hello.
fn hello_boots(per_node: &[Vec<Bytes>]) -> Vec<String> {
    per_node
        .iter()
        .map(|m| match RawAgentMessage::decode(m[0].as_ref()) {
            Ok(RawAgentMessage {
                msg: Some(RawMsg::Hello(h)),
            }) => h.boot_id,
            _ => panic!("first message is the Hello"),
        })
        .collect()
}

/// The collector's stages, one thread: what each stream and the writer
/// keep from batch to batch.
struct Pipeline {
    names: Vec<String>,
    conn: Connection,
    metrics: SharedMetrics,
    keys: Keys,
    /// One per stream, as each stream task keeps its own.
    decoders: Vec<Decoded>,
    /// Made once per stream, after its Hello, as the service does.
    rules: Vec<Rules>,
}

impl Pipeline {
    /// A store at `db` with the writer's settings and `pragmas` over them.
    fn new(
        db: &std::path::Path,
        pragmas: &[(String, String)],
        names: Vec<String>,
        boots: &[String],
    ) -> anyhow::Result<Pipeline> {
        let conn = testing::writer(db)?;
        for (k, v) in pragmas {
            conn.pragma_update(None, k, v)?;
        }
        Ok(Pipeline {
            decoders: names.iter().map(|_| Decoded::default()).collect(),
            names,
            conn,
            metrics: SharedMetrics::new(),
            keys: Keys::default(),
            rules: boots.iter().map(|b| Rules::any_size(&[b])).collect(),
        })
    }

    /// Node `i`'s message `bytes` through every stage, each timed into
    /// `stages`.
    fn batch(&mut self, i: usize, bytes: &Bytes, stages: &mut Stages) -> anyhow::Result<()> {
        let t0 = Stamp::now();
        // From a `Bytes`, as tonic hands the frame over: the records are
        // slices of it.
        let Some(RawMsg::Batch(b)) = RawAgentMessage::decode(bytes.clone())?.msg else {
            bail!("not a batch");
        };
        let decoded = &mut self.decoders[i];
        let news = validate::batch_into(&self.names[i], b.records, &self.rules[i], decoded)?;
        let t1 = Stamp::now();
        {
            let mut m = self.metrics.lock();
            for r in decoded.records() {
                m.apply_record(r);
            }
        }
        let t2 = Stamp::now();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut inserted = Vec::with_capacity(news.len());
        let added = testing::insert_batch(&tx, &mut self.keys, &news, &mut inserted)?;
        for ((node, boot), a) in news.boots.iter().zip(&added) {
            testing::add_boot_records(&tx, node, boot, 1, a.added, a.max_seq)?;
            testing::boot_highest_seq(&tx, node, boot)?;
        }
        let n = news.len() as u64;
        let t3 = Stamp::now();
        tx.commit()?;
        // The batch is dropped where the collector drops it: after the
        // commit (its decoded records stay for the stream's next batch).
        drop((news, inserted));
        let t4 = Stamp::now();
        stages.decode.add(t0, t1);
        stages.apply.add(t1, t2);
        stages.insert.add(t2, t3);
        stages.commit.add(t3, t4);
        stages.records += n;
        Ok(())
    }
}

/// Time spent in each stage, and the records that went through.
#[derive(Default)]
struct Stages {
    decode: Spent,
    apply: Spent,
    insert: Spent,
    commit: Spent,
    records: u64,
}

impl Stages {
    /// A line per stage and the total, per record and per CPU second.
    fn print(&self) {
        let line = |name: &str, d: Spent| {
            let per = |d: Duration| d.as_secs_f64() * 1e6 / self.records as f64;
            println!(
                "{name:<8} {:>6.2} s  {:>5.2} us/record wall  {:>5.2} us/record CPU  {:>9.0} records/CPU-s",
                d.wall.as_secs_f64(),
                per(d.wall),
                per(d.cpu),
                1e6 / per(d.cpu)
            );
        };
        line("decode", self.decode);
        line("metrics", self.apply);
        line("insert", self.insert);
        line("commit", self.commit);
        line(
            "total",
            self.decode + self.apply + self.insert + self.commit,
        );
    }
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
