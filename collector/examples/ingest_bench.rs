//! Ingest throughput: one in-process collector on loopback, one agent stream
//! sending `BATCHES` batches of `PER_BATCH` RTT records, each awaited for its
//! Ack (as the agent does). Prints records/s and the store's commit times.
//!
//! `cargo run --release -p boltwatch-collector --example ingest_bench -- 200 500`
//! Keep it short on shared machines: every batch is an fsync.

use std::time::{Duration, Instant};

use boltwatch_collector::{Config, Listeners};
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::telemetry_client::TelemetryClient;
use boltwatch_proto::v1::{
    agent_message, collector_message, AgentMessage, Hello, HistogramBucket, Record, RecordBatch,
    RttSummary,
};
use tokio_stream::wrappers::ReceiverStream;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers: BATCHES PER_BATCH"))
        .collect();
    let batches = args.first().copied().unwrap_or(100).min(10_000);
    let per_batch = args.get(1).copied().unwrap_or(500).min(20_000);

    let dir = tempfile::tempdir()?;
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let (gaddr, haddr) = (grpc.local_addr()?, http.local_addr()?);
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        ..Config::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(boltwatch_collector::run(
        config,
        Listeners {
            grpc,
            http,
            api: None,
        },
        async move {
            let _ = stopped.await;
        },
    ));

    let mut client = TelemetryClient::connect(format!("http://{gaddr}")).await?;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let hello = Hello {
        node: "bench".into(),
        boot_id: "boot".into(),
        agent_version: "bench".into(),
        ..Default::default()
    };
    tx.send(AgentMessage {
        msg: Some(agent_message::Msg::Hello(hello)),
    })
    .await?;
    let mut inbound = client.stream(ReceiverStream::new(rx)).await?.into_inner();
    inbound.message().await?.expect("Welcome");

    let mut seq = 0u64;
    let mut acks = Vec::with_capacity(batches as usize);
    let start = Instant::now();
    for _ in 0..batches {
        let records: Vec<Record> = (0..per_batch)
            .map(|_| {
                seq += 1;
                Record {
                    node: "bench".into(),
                    boot_id: "boot".into(),
                    seq,
                    unix_ns: 1_700_000_000_000_000_000 + seq,
                    payload: Some(Payload::Rtt(RttSummary {
                        peer: "peer".into(),
                        sent: 10,
                        received: 10,
                        sum_ns: 800_000,
                        buckets: vec![HistogramBucket {
                            index: -109,
                            count: 10,
                        }],
                        ..Default::default()
                    })),
                }
            })
            .collect();
        let t = Instant::now();
        tx.send(AgentMessage {
            msg: Some(agent_message::Msg::Batch(RecordBatch { records })),
        })
        .await?;
        let ack = tokio::time::timeout(Duration::from_secs(30), inbound.message()).await??;
        assert!(matches!(
            ack.and_then(|m| m.msg),
            Some(collector_message::Msg::Ack(_))
        ));
        acks.push(t.elapsed());
    }
    let elapsed = start.elapsed();
    acks.sort();
    let total = batches * per_batch;
    println!(
        "{total} records in {batches} batches of {per_batch}: {:.2} s, {:.0} records/s; ack latency p50 {:?} p99 {:?}",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64(),
        acks[acks.len() / 2],
        acks[acks.len() * 99 / 100],
    );
    let body = reqwest::get(format!("http://{haddr}/metrics"))
        .await?
        .text()
        .await?;
    for l in body.lines().filter(|l| {
        l.starts_with("boltwatch_store_commit_seconds_sum")
            || l.starts_with("boltwatch_store_commit_seconds_count")
            || l.starts_with("boltwatch_store_records ")
    }) {
        println!("{l}");
    }
    drop(tx);
    let _ = stop.send(());
    server.await??;
    Ok(())
}
