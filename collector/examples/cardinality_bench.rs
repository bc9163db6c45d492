//! The cardinality attack (a flood of distinct peer names), scaled: one in-process
//! collector on loopback, one stream sending a record with a 1 MiB peer
//! name and then `PEERS` distinct peer names; prints the size and time of a
//! scrape, then a victim node's ack latency while three scrapers run.
//!
//! `cargo run --release -p boltwatch-collector --example cardinality_bench -- 2000`
//! Before the caps (e1ca89a, debug build, 2000 peers): /metrics 200 MB,
//! 6.8 s a scrape, victim acks p50 27 ms, max 13.7 s during scrapes.

use std::time::Instant;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{HistogramBucket, Record, RttSummary};

mod support;
use support::{open, send, InProcess};

fn rtt(node: &str, seq: u64, peer: String) -> Record {
    Record {
        node: node.into(),
        boot_id: "boot".into(),
        seq,
        unix_ns: 1_700_000_000_000_000_000 + seq,
        payload: Some(Payload::Rtt(RttSummary {
            peer,
            interface: "lo".into(),
            sent: 1,
            received: 1,
            sum_ns: 80_000,
            buckets: vec![HistogramBucket {
                index: -109,
                count: 1,
            }],
            ..Default::default()
        })),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let peers: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("PEERS"))
        .unwrap_or(2000)
        .min(20_000);
    let collector = InProcess::start().await?;
    let (gaddr, haddr) = (collector.grpc, collector.http);
    let url = format!("http://{haddr}/metrics");

    let mut s = open(gaddr, "attacker").await?;
    let acked = send(&mut s, vec![rtt("attacker", 1, "p".repeat(1 << 20))]).await?;
    println!("1 MiB peer name acked: {acked}");
    let mut s = open(gaddr, "attacker").await?;
    let mut seq = 1;
    while seq <= peers {
        let end = (seq + 1000).min(peers + 1);
        let batch = (seq..end)
            .map(|i| rtt("attacker", i + 1, format!("p{i:05}")))
            .collect();
        send(&mut s, batch).await?;
        seq = end;
    }
    let t = Instant::now();
    let size = reqwest::get(&url).await?.bytes().await?.len();
    println!(
        "{peers} peers: /metrics {size} bytes, scrape {:?}",
        t.elapsed()
    );

    let mut victim = open(gaddr, "victim").await?;
    let scrapers: Vec<_> = (0..3)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                for _ in 0..3 {
                    let _ = reqwest::get(&url).await?.bytes().await?;
                }
                Ok::<_, reqwest::Error>(())
            })
        })
        .collect();
    let mut acks = Vec::new();
    let mut seq = 1;
    while scrapers.iter().any(|s| !s.is_finished()) && seq <= 100_000 {
        let t = Instant::now();
        send(&mut victim, vec![rtt("victim", seq, "peer".into())]).await?;
        acks.push(t.elapsed());
        seq += 1;
    }
    for s in scrapers {
        s.await??;
    }
    acks.sort();
    println!(
        "victim acks during 3x3 scrapes: {} acks, p50 {:?}, max {:?}",
        acks.len(),
        acks[acks.len() / 2],
        acks[acks.len() - 1]
    );
    drop(s);
    drop(victim);
    collector.stop().await
}
