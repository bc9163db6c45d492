//! Hostile input, round two (issue 24), on loopback through the real
//! gRPC ingest: a flood of half-open connections from many addresses, a
//! record stamped a day ahead, and a node multiplying label combinations.
//! Every loop is bounded in count, every wait by [`WAIT`] or less.

mod common;

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Record, ServiceCheck};
use common::*;
use tokio::io::AsyncWriteExt;

/// A TCP connection from `from` that sends only the first bytes of the
/// HTTP/2 preface and then nothing: a half-open client. `None` when the
/// collector's door is so full that the connection did not open in 2 s.
async fn half_preface(from: IpAddr, to: SocketAddr) -> Option<tokio::net::TcpStream> {
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.bind(SocketAddr::new(from, 0)).unwrap();
    let mut s = tokio::time::timeout(Duration::from_secs(2), s.connect(to))
        .await
        .ok()?
        .unwrap();
    s.write_all(b"PRI").await.unwrap();
    Some(s)
}

#[tokio::test]
async fn half_open_connections_from_many_addresses_leave_room_for_an_agent() {
    const SOURCES: u8 = 80;
    const PER_SOURCE: usize = 6;
    let (_dir, c) = Collector::temp_with(|c| {
        // Neither deadline frees a slot during the test: only the pending
        // gate's per-address cap and eviction can let the agent in.
        c.preface_timeout = Duration::from_secs(60);
        c.hello_timeout = Duration::from_secs(60);
        c.max_connections = 4096;
        c.max_connections_per_address = 64;
        c.max_pending_per_address = 4;
    })
    .await;
    let mut held = Vec::new();
    'attack: for s in 0..SOURCES {
        let from = IpAddr::V4(Ipv4Addr::new(127, 0, 1, 10 + s));
        for _ in 0..PER_SOURCE {
            match half_preface(from, c.grpc).await {
                Some(conn) => held.push(conn),
                // The door is shut already: the agent's turn.
                None => break 'attack,
            }
        }
    }
    // A real agent gets through beside them, and its record is stored.
    let through = tokio::time::timeout(Duration::from_secs(10), async {
        let (mut a, _) = c.agent("a", "b1").await;
        a.send(vec![record("a", "b1", 1, agent_stats(0, 0))])
            .await
            .unwrap();
    })
    .await;
    assert!(
        through.is_ok(),
        "the agent did not get through {} half-open connections",
        held.len()
    );
    assert_eq!(c.stored().await, 1);
    assert_eq!(held.len(), usize::from(SOURCES) * PER_SOURCE);
    // Two of each source's six were over its pending cap; 80 x 4 = 320
    // pending do not fit the gate of 256, so at least 64 were evicted
    // (65 if the agent's own connection found the gate full).
    c.wait_metric(
        "boltwatch_ingest_errors_total{kind=\"pending_per_address\"}",
        f64::from(SOURCES) * 2.0,
    )
    .await;
    let evicted = c.errors("pending_evicted").await;
    assert!((64.0..=65.0).contains(&evicted), "{evicted} evicted");
    drop(held);
    c.stop().await;
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn reading(seq: u64, unix_ns: u64, celsius: f64) -> Record {
    Record {
        unix_ns,
        ..record("t", "b1", seq, thermal("cpu", celsius))
    }
}

#[tokio::test]
async fn a_record_a_day_ahead_is_refused_and_gauges_follow_arrival() {
    let (_dir, c) = Collector::temp_with(|c| {
        c.max_clock_skew = Duration::from_secs(300);
    })
    .await;
    let (mut a, _) = c.agent("t", "b1").await;
    let day = 86_400 * 1_000_000_000;
    let now = now_ns();
    a.send(vec![reading(1, now + day, 99.0)]).await.unwrap();
    a.send(vec![reading(2, now, 40.0), reading(3, now + 1, 41.0)])
        .await
        .unwrap();
    let series = "boltwatch_temperature_celsius{node=\"t\",sensor=\"cpu\"}";
    let body = c.wait_metric(series, 41.0).await;
    assert_eq!(
        metric(&body, "boltwatch_ingest_errors_total{kind=\"clock_skew\"}"),
        Some(1.0),
        "{body}"
    );
    // Nothing the agent spooled is lost: the refused record is stored,
    // only kept off /metrics.
    assert_eq!(c.stored().await, 3);

    // Within the skew, a record ahead is applied, but the next one in
    // arrival order replaces it: time stamps do not decide.
    let now = now_ns();
    a.send(vec![reading(4, now + 60_000_000_000, 50.0)])
        .await
        .unwrap();
    c.wait_metric(series, 50.0).await;
    a.send(vec![reading(5, now, 42.0)]).await.unwrap();
    c.wait_metric(series, 42.0).await;
    c.stop().await;
}

fn service(seq: u64, peer: &str, name: &str) -> Record {
    let p = Payload::Service(ServiceCheck {
        peer: peer.into(),
        service: name.into(),
        address: "127.0.0.1:22".into(),
        up: true,
        connect_ns: 1_000_000,
        error: String::new(),
    });
    record("x", "b1", seq, p)
}

#[tokio::test]
async fn peer_by_service_combinations_are_capped_as_series() {
    const CAP: usize = 64;
    let (_dir, c) = Collector::temp_with(|c| c.max_series_per_node = CAP).await;
    let (mut a, _) = c.agent("x", "b1").await;
    // 12 peers x 12 services: 144 label sets, each label only 12 values,
    // far under a cap of 64 distinct values per label.
    let mut seq = 0;
    let batch: Vec<Record> = (0..12)
        .flat_map(|p| (0..12).map(move |s| (p, s)))
        .map(|(p, s)| {
            seq += 1;
            service(seq, &format!("p{p}"), &format!("svc{s}"))
        })
        .collect();
    a.send(batch).await.unwrap();
    assert_eq!(c.stored().await, 144, "refused series are still stored");
    let body = c.metrics().await;
    let sets: BTreeSet<&str> = body
        .lines()
        .filter(|l| l.starts_with("boltwatch_service_") && l.contains("node=\"x\""))
        .filter_map(|l| l.split_once('{')?.1.split_once('}').map(|(ls, _)| ls))
        .collect();
    assert_eq!(sets.len(), CAP, "distinct service label sets of node x");
    let refused = metric(
        &body,
        "boltwatch_ingest_series_refused_total{kind=\"peer\"}",
    );
    assert_eq!(refused, Some((144 - CAP) as f64), "{body}");
    c.stop().await;
}

#[tokio::test]
async fn node_names_differing_only_by_case_or_a_trailing_dot_are_refused_at_hello() {
    let (dir, c) = Collector::temp().await;
    let (mut a, _) = c.agent("node-a", "b1").await;
    a.send(vec![record("node-a", "b1", 1, agent_stats(0, 0))])
        .await
        .unwrap();
    for twin in ["NODE-A", "node-a.", "Node-A."] {
        let mut s = Agent::open(c.grpc, hello(twin, "b2")).await.unwrap();
        let e = s.next().await.expect_err("a twin's Hello is refused");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains("`node-a`"), "{e:?}");
    }
    assert_eq!(c.errors("node_name_twin").await, 3.0);
    // The real node and another one still connect; nothing of the twins
    // is stored.
    c.agent("node-a", "b3").await;
    c.agent("node-b", "b1").await;
    c.stop().await;
    // A restarted collector knows node-a from its store.
    let c = Collector::start(dir.path()).await;
    let mut s = Agent::open(c.grpc, hello("NODE-A", "b4")).await.unwrap();
    assert!(s.next().await.is_err());
    let nodes = c.json("/api/v1/nodes").await;
    let names: BTreeSet<&str> = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(names, BTreeSet::from(["node-a", "node-b"]));
    c.stop().await;
}
