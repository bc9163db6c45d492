//! Simulates a soak (default: 72 hours, 3 nodes, time-compressed) into a
//! collector on loopback through the real gRPC ingest, records it as a soak
//! with workload marks over the HTTP API, and prints the report's table;
//! `--html FILE` also writes the HTML report. The store stays in
//! `--data-dir` for `boltwatch-collector report --data-dir DIR --soak sim`.
//!
//! ```sh
//! cargo run -p boltwatch-collector --example soak_sim -- --hours 72 --data-dir /tmp/sim
//! ```

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/sim/mod.rs"]
mod sim;

use std::path::PathBuf;
use std::time::Instant;

use boltwatch_collector::report::format::Format;
use boltwatch_collector::report::render;
use boltwatch_collector::soak::load;
use clap::Parser;
use serde_json::json;
use sim::S;

/// A simulated soak, recorded and reported.
#[derive(Parser)]
struct Flags {
    /// Hours of soak.
    #[arg(long, default_value_t = 72)]
    hours: u64,
    /// Simulated nodes.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Where the store stays.
    #[arg(long)]
    data_dir: PathBuf,
    /// Also write the HTML report here.
    #[arg(long)]
    html: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let flags = Flags::parse();
    let dir = flags.data_dir;
    // 2026-11-30T00:00:00Z
    let start = 1_795_996_800 * S;
    let (c, sc, truth, took) = sim::fill(&dir, flags.nodes, start, flags.hours * 3600 * S).await;
    let ingest = took.as_secs_f64();
    let http = reqwest::Client::new();
    let r = http
        .post(c.url("/api/v1/soaks"))
        .bearer_auth(common::WRITE_TOKEN)
        .json(&json!({"name": "sim", "start": start / S, "end": (start + sc.duration) / S, "nodes": sc.nodes,
                      "slo": {"bandwidth_mean_min_gbps": 60, "temperature_worst_max_celsius": 45},
                      "labels": {"cluster": "tb5-sim"}}))
        .send()
        .await?;
    anyhow::ensure!(r.status() == 201, "creating the soak: {}", r.text().await?);
    for (at, until, text) in &sc.marks {
        http.post(c.url("/api/v1/soaks/sim/marks"))
            .bearer_auth(common::WRITE_TOKEN)
            .json(&json!({"text": text, "at": at / S, "until": until.map(|u| u / S)}))
            .send()
            .await?
            .error_for_status()?;
    }
    c.stop().await;
    let conn = load::open_reader(&dir.join("boltwatch.db"))?;
    let t = Instant::now();
    let report = load::soak_report(&conn, "sim", u64::MAX)?;
    let build = t.elapsed().as_secs_f64();
    eprintln!(
        "{} records ingested over gRPC in {ingest:.1} s ({:.0}/s); report built in {build:.1} s",
        truth.records,
        truth.records as f64 / ingest
    );
    print!("{}", render::table(&report));
    if let Some(p) = flags.html {
        std::fs::write(&p, Format::Html.render(&report))?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}
