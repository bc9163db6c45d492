//! Where an ingested record's collector time goes, stage by stage, on the
//! mesh of `bench/store.sh`, in one thread (so each figure is per core):
//!
//! 1. decode: the gRPC message into raw records (`RawAgentMessage`, as the
//!    service does), then `validate::batch` (each record decoded, checked,
//!    its kind named);
//! 2. metrics: `apply_record` of every record into the `/metrics` state;
//! 3. insert: the store writer's statements for a batch (the same
//!    `queries` calls as `Store`'s writer, ids cached), before the commit;
//! 4. commit: `COMMIT` with `synchronous = FULL` (the WAL fsync).
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
use boltwatch_collector::ingest::raw::{RawAgentMessage, RawMsg};
use boltwatch_collector::ingest::validate::{self, Rules};
use boltwatch_collector::store::{layout::Keys, queries, schema, NewRecord};
use prost::Message;
use rusqlite::TransactionBehavior;

#[path = "support/mesh.rs"]
mod mesh;

fn main() -> anyhow::Result<()> {
    let (mut hours, mut nodes, mut batch) = (6u64, 4usize, 4096usize);
    let mut args = std::env::args().skip(1);
    while let Some(k) = args.next() {
        let mut v = || args.next().with_context(|| format!("{k} needs a value"));
        match k.as_str() {
            "--hours" => hours = v()?.parse()?,
            "--nodes" => nodes = v()?.parse()?,
            "--batch" => batch = v()?.parse()?,
            _ => bail!("usage: store_split [--hours H] [--nodes N] [--batch RECORDS]"),
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
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "cache_size", -256)?;
    schema::migrate(&mut conn)?;
    let metrics = SharedMetrics::new();
    let mut keys = Keys::default();
    let (mut decode, mut apply, mut insert, mut commit) = (
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
    );
    let mut records = 0u64;
    for (i, bytes) in &messages {
        let t0 = Instant::now();
        let Some(RawMsg::Batch(b)) = RawAgentMessage::decode(bytes.as_ref())?.msg else {
            bail!("not a batch");
        };
        let rules = Rules::any_size(&[boots[*i].as_str()]);
        let checked = validate::batch(&names[*i], b.records, &rules)?;
        let (decoded, news): (Vec<_>, Vec<NewRecord>) =
            checked.into_iter().map(|c| (c.record, c.new)).unzip();
        let t1 = Instant::now();
        {
            let mut m = metrics.lock();
            for r in &decoded {
                m.apply_record(r);
            }
        }
        let t2 = Instant::now();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut inserted = Vec::with_capacity(news.len());
        queries::insert_batch(&tx, &mut keys, &news, &mut inserted)?;
        let added = inserted.iter().filter(|n| **n).count() as u64;
        let last = news.last().context("empty batch")?;
        queries::add_boot_records(&tx, &last.node, &last.boot_id, 1, added, last.seq)?;
        queries::boot_highest_seq(&tx, &last.node, &last.boot_id)?;
        let t3 = Instant::now();
        tx.commit()?;
        let t4 = Instant::now();
        decode += t1 - t0;
        apply += t2 - t1;
        insert += t3 - t2;
        commit += t4 - t3;
        records += news.len() as u64;
    }
    let line = |name: &str, d: Duration| {
        let us = d.as_secs_f64() * 1e6 / records as f64;
        println!(
            "{name:<8} {:>8.2} s  {us:>6.2} us/record  {:>10.0} records/s/core",
            d.as_secs_f64(),
            1e6 / us
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
