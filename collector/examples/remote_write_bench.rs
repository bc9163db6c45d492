//! Remote write figures: fills a store with a simulated soak (N nodes,
//! H hours ending now, through the real gRPC ingest), times the startup
//! rebuild of the `/metrics` state from it, then starts a collector that
//! remote-writes the whole store to `--url` (VictoriaMetrics, say) and
//! times the backfill until the endpoint's saved position reaches the end
//! of the store. `bench/remote-write.sh` runs it against a local
//! `victoria-metrics`.
//!
//! ```sh
//! cargo run --release -p boltwatch-collector --example remote_write_bench -- \
//!     --hours 1 --nodes 4 --data-dir /tmp/rw --url http://127.0.0.1:8428/api/v1/write
//! ```

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/sim/mod.rs"]
mod sim;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use boltwatch_collector::export::SharedMetrics;
use boltwatch_collector::rebuild;
use boltwatch_store::{Db, Store};
use clap::Parser;
use sim::S;

/// Remote write figures of a simulated soak.
#[derive(Parser)]
struct Flags {
    /// Hours of soak, ending now.
    #[arg(long, default_value_t = 1)]
    hours: u64,
    /// Simulated nodes.
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// The store to fill.
    #[arg(long)]
    data_dir: PathBuf,
    /// The remote write endpoint.
    #[arg(long)]
    url: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let flags = Flags::parse();
    let (dir, url) = (flags.data_dir, flags.url);

    // 1. The store: a soak ending now.
    let now = boltwatch_common::clock::now_unix_ns() / (60 * S) * (60 * S);
    let duration = flags.hours * 3600 * S;
    let (c, _, truth, took) = sim::fill(&dir, flags.nodes, now - duration, duration).await;
    eprintln!(
        "ingest: {} records in {:.1} s",
        truth.records,
        took.as_secs_f64()
    );
    c.stop().await;

    // 2. The startup rebuild, alone.
    let store = Store::open(&dir)?;
    let (n, secs) = rebuild::rebuild(&store.handle(), &SharedMetrics::new()).await?;
    store.close().await;
    eprintln!(
        "rebuild: {n} records in {secs:.2} s ({:.0} records/s)",
        n as f64 / secs
    );

    // 3. The backfill.
    let t = Instant::now();
    let u = url.clone();
    let c = common::Collector::start_with(&dir, move |cfg| {
        cfg.remote_write.urls = vec![u];
        cfg.remote_write.external_labels = vec![("cluster".into(), "bench".into())];
        cfg.remote_write.batch_records = 2000;
        cfg.remote_write.max_backlog_records = 100_000_000;
        cfg.remote_write.timeout = Duration::from_secs(30);
    })
    .await;
    let db = dir.join("boltwatch.db");
    let end = { Db::open_reader(&db)?.log_newest()? };
    // Bounded: an hour of wall time at most.
    for _ in 0..36_000 {
        if Db::open_reader(&db)?.log_position(&url)? >= end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let secs = t.elapsed().as_secs_f64();
    let body = c.metrics().await;
    let sent = common::metric(
        &body,
        &format!(r#"boltwatch_remote_write_samples_sent_total{{endpoint="{url}"}}"#),
    )
    .unwrap_or(0.0);
    c.stop().await;
    eprintln!(
        "backfill: {end} records, {sent} samples in {secs:.1} s (incl. the rebuild at startup): {:.0} samples/s",
        sent / secs
    );
    Ok(())
}
