//! Failures that used to pass in silence: a gRPC
//! message the collector cannot take ends the stream with an error status,
//! `/healthz` fails on a full disk, a damaged store or a read-only data
//! directory stops the start naming the path. The disk cases mount a small
//! tmpfs (root required; the tests fail, never skip, without it) that a
//! guard unmounts however the test ends.

mod common;

use boltwatch_collector::{Config, Listeners};
use boltwatch_proto::v1::{Hello, Record};
use common::*;
use tonic::Code;

/// A message the server reads as `AgentMessage`, able to carry a field 2
/// of the wrong wire type (a fixed32 where a `RecordBatch` belongs).
#[derive(Clone, PartialEq, prost::Message)]
struct Mixed {
    #[prost(message, optional, tag = "1")]
    hello: Option<Hello>,
    #[prost(fixed32, optional, tag = "2")]
    bogus: Option<u32>,
    #[prost(message, optional, tag = "3")]
    padding: Option<Record>,
}

/// Sends a Hello then `second` on one stream; returns how the stream ended
/// after the Welcome.
async fn hello_then(addr: std::net::SocketAddr, second: Mixed) -> Result<(), tonic::Status> {
    let first = Mixed {
        hello: Some(hello("a", "b1")),
        ..Default::default()
    };
    let (tx, mut inbound) = raw_stream(addr, vec![first, second]).await?;
    let welcome = tokio::time::timeout(WAIT, inbound.message())
        .await
        .expect("Welcome in time")?;
    assert!(welcome.is_some(), "a Welcome first");
    let end = tokio::time::timeout(WAIT, inbound.message())
        .await
        .expect("the stream ends in time");
    drop(tx);
    end.map(|m| {
        assert!(
            m.is_none(),
            "no Ack for a message that did not decode: {m:?}"
        )
    })
}

#[tokio::test]
async fn undecodable_and_oversized_messages_end_the_stream_with_an_error() {
    let (_dir, c) = Collector::temp_with(|c| c.max_message_bytes = 65_536).await;
    let bad = Mixed {
        bogus: Some(7),
        ..Default::default()
    };
    let e = hello_then(c.grpc, bad)
        .await
        .expect_err("an undecodable message must not end the stream with OK");
    assert_ne!(e.code(), Code::Ok, "{e:?}");
    assert!(e.message().contains("decode"), "{e:?}");

    let big = Mixed {
        padding: Some(Record {
            node: "x".repeat(100_000),
            ..Default::default()
        }),
        ..Default::default()
    };
    let e = hello_then(c.grpc, big)
        .await
        .expect_err("an oversized message must not end the stream with OK");
    assert_eq!(e.code(), Code::OutOfRange, "{e:?}");
    assert!(c.errors("transport").await >= 2.0);
    assert_eq!(c.stored().await, 0);
    c.stop().await;
}

#[tokio::test]
async fn healthz_fails_on_a_full_disk_and_recovers() {
    let fs = Tmpfs::mount("size=8m");
    let mnt = fs.path();
    let data = mnt.join("data");
    let c = Collector::start_with(&data, |_| {}).await;
    assert_eq!(c.get("/healthz").await.status(), 200);
    let filler = fill(mnt);
    let r = c.get("/healthz").await;
    assert_eq!(r.status(), 503, "a full disk is not healthy");
    let body = r.text().await.unwrap();
    assert!(body.contains("full"), "{body}");
    std::fs::remove_file(filler).unwrap();
    assert_eq!(c.get("/healthz").await.status(), 200);
    c.stop().await;
}

/// Runs a collector on `dir` and returns how `run` ended at once (it must
/// not start).
async fn start_error(dir: &std::path::Path) -> String {
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = Config {
        data_dir: dir.to_path_buf(),
        ..Config::default()
    };
    let run = boltwatch_collector::run(
        config,
        Listeners {
            grpc,
            http,
            api: None,
        },
        std::future::pending(),
    );
    match tokio::time::timeout(WAIT, run).await {
        Ok(Err(e)) => e.to_string(),
        Ok(Ok(())) => panic!("the collector ran on {}", dir.display()),
        Err(_) => panic!("the collector started on {}", dir.display()),
    }
}

#[tokio::test]
async fn a_store_damaged_mid_file_stops_the_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::start(dir.path()).await;
    let (mut a, _) = c.agent("a", "b1").await;
    // Enough records for a file of hundreds of pages (rows are packed
    // and compressed: about 50 bytes a record).
    for k in 0..16u64 {
        let batch = (1..=1000)
            .map(|s| record("a", "b1", k * 1000 + s, agent_stats(s, 0)))
            .collect();
        a.send(batch).await.unwrap();
    }
    drop(a);
    c.stop().await;
    let db = dir.path().join("boltwatch.db");
    let mut bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 64 * 4096, "{} bytes", bytes.len());
    // Pages in the middle of the records' b-tree, garbage from here on for
    // eight pages (the header and schema on page 1 stay intact).
    let page = 4096;
    let mid = bytes.len() / 2 / page * page;
    for (i, b) in bytes[mid..mid + 8 * page].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(151) ^ 0x5a;
    }
    std::fs::write(&db, &bytes).unwrap();
    let e = start_error(dir.path()).await;
    assert!(e.contains(&db.display().to_string()), "{e}");
    assert!(e.contains("damaged") || e.contains("malformed"), "{e}");
}

#[tokio::test]
async fn a_read_only_data_dir_stops_the_start_naming_it() {
    let fs = Tmpfs::mount("ro,size=2m");
    let mnt = fs.path();
    let e = start_error(mnt).await;
    assert!(e.contains(&mnt.display().to_string()), "{e}");

    // A store that exists, on a file system remounted read-only.
    fs.remount("rw");
    let c = Collector::start(mnt).await;
    let (mut a, _) = c.agent("a", "b1").await;
    a.send(vec![record("a", "b1", 1, agent_stats(1, 0))])
        .await
        .unwrap();
    drop(a);
    c.stop().await;
    fs.remount("ro");
    let e = start_error(mnt).await;
    assert!(e.contains(&mnt.display().to_string()), "{e}");
}
