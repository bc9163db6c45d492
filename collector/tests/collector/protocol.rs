//! The stream protocol under bad input: garbage connections are counted
//! and agents still served; Hello first; foreign nodes refused.

use boltwatch_proto::v1::{agent_message, collector_message, RecordBatch};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::*;
use crate::support::*;

#[tokio::test]
async fn garbage_connection_is_counted_and_agents_still_served() {
    let (_dir, c) = Collector::temp().await;
    for garbage in [
        &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        &[0u8, 1, 2, 3, 0xff][..],
    ] {
        let mut s = tokio::net::TcpStream::connect(c.grpc).await.unwrap();
        s.write_all(garbage).await.unwrap();
        // The collector closes it: read returns EOF (or a reset).
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(WAIT, s.read(&mut buf))
            .await
            .expect("closed in time")
            .unwrap_or(0);
        assert_eq!(n, 0, "collector answered garbage with {:?}", &buf[..n]);
    }
    // A connection that sends nothing is closed at the preface timeout.
    let mut silent = tokio::net::TcpStream::connect(c.grpc).await.unwrap();
    let mut buf = [0u8; 8];
    let n = tokio::time::timeout(WAIT, silent.read(&mut buf))
        .await
        .expect("closed in time")
        .unwrap_or(0);
    assert_eq!(n, 0);
    c.wait_metric("boltwatch_ingest_malformed_connections_total", 3.0)
        .await;

    // This agent sends its Hello only after the response headers came.
    let mut a = Agent::open_hello_after_headers(c.grpc, hello("a", "b1")).await;
    let welcome = a.next().await.unwrap();
    assert!(matches!(welcome.msg, Some(collector_message::Msg::Welcome(w)) if w.boots.is_empty()));
    assert_eq!(a.send(seqs("a", "b1", 1..=2)).await.unwrap(), [wm("b1", 2)]);
    drop(a);
    c.stop().await;
}

#[tokio::test]
async fn first_message_must_be_hello_and_foreign_nodes_are_refused() {
    let (_dir, c) = Collector::temp().await;

    let first_batch = agent_message::Msg::Batch(RecordBatch {
        records: seqs("a", "b1", 1..=2),
    });
    let status = match Agent::open_with(c.grpc, first_batch).await {
        Err(s) => s,
        Ok(mut agent) => agent.next().await.expect_err("must be refused"),
    };
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("Hello"), "{status:?}");

    // Records of another node on a's stream: refused, nothing stored, not
    // even the good record in the same batch.
    let (mut a, _) = c.agent("a", "b1").await;
    let mut batch = seqs("a", "b1", [1]);
    batch.extend(seqs("x", "b1", [2]));
    let status = a.send(batch).await.expect_err("must be refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("`x`"), "{status:?}");

    // A Hello without a node.
    let status = match Agent::open(c.grpc, hello("", "b1")).await {
        Err(s) => s,
        Ok(mut agent) => agent.next().await.expect_err("must be refused"),
    };
    assert_eq!(status.code(), tonic::Code::InvalidArgument);

    let recs = c.json("/api/v1/records").await;
    assert_eq!(recs["records"].as_array().unwrap().len(), 0, "{recs}");
    let expect = r#"
        boltwatch_ingest_errors_total{kind="no_hello"} 1
        boltwatch_ingest_errors_total{kind="node_mismatch"} 1
        boltwatch_ingest_errors_total{kind="bad_hello"} 1
        boltwatch_store_records 0
    "#;
    expect_exposition(&c.metrics().await, expect);
    c.stop().await;
}
