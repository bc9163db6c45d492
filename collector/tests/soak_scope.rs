//! A soak judges its own links over the time that has passed (issue 24,
//! items 13 and 14): an outage towards a node outside the soak does not
//! count against it, and a soak created with its planned end is judged on
//! its elapsed part while it runs. A real collector on loopback: records
//! through the real gRPC ingest, the soak and its report over HTTP.

mod common;

use boltwatch_common::clock::now_unix_ns;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Outage, Record};
use common::*;
use serde_json::{json, Value};

const S: u64 = 1_000_000_000;

/// A record of `node` stamped at `unix_ns`.
fn at(node: &str, seq: u64, unix_ns: u64, payload: Payload) -> Record {
    Record {
        unix_ns,
        ..record(node, "b1", seq, payload)
    }
}

/// `n` one-second RTT windows of `node` towards `peer`, from `start`.
fn windows(node: &str, peer: &str, start: u64, n: u64) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let t = start + i * S;
            at(node, i + 1, t + S, rtt(peer, t, &[80_000, 90_000], 0))
        })
        .collect()
}

async fn post(c: &Collector, path: &str, body: Value) {
    let (code, answer) = c.post(path, body).await;
    assert_eq!(code, 201, "{answer}");
}

/// The verdict line `key` of the soak's JSON report: (measured, pass).
async fn line(c: &Collector, soak: &str, key: &str) -> (Option<f64>, Option<bool>) {
    let r = c.json(&format!("/api/v1/soaks/{soak}/report")).await;
    let l = r["verdict"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["key"] == key)
        .unwrap_or_else(|| panic!("no line {key}: {r}"))
        .clone();
    (l["measured"].as_f64(), l["pass"].as_bool())
}

#[tokio::test]
async fn an_outage_towards_a_node_outside_the_soak_is_not_the_soaks() {
    let (_dir, c) = Collector::temp().await;
    let start = now_unix_ns() / S * S - 120 * S;
    let (mut a, _) = c.agent("a", "b1").await;
    let mut batch = windows("a", "b", start, 100);
    // a loses its link to c, which the soak of a and b does not cover.
    let outage = Outage {
        peer: "c".into(),
        interface: "tb2".into(),
        cause: 1,
        start_unix_ns: start + 10 * S,
        end_unix_ns: Some(start + 20 * S),
        outage_id: 1,
        ..Default::default()
    };
    batch.push(at("a", 101, start + 20 * S, Payload::Outage(outage)));
    a.send(batch).await.unwrap();
    let body = json!({"name": "ab", "start": start / S, "end": (start + 100 * S) / S,
                      "nodes": ["a", "b"]});
    post(&c, "/api/v1/soaks", body).await;
    post(
        &c,
        "/api/v1/soaks",
        json!({"name": "abc", "start": start / S,
                                       "end": (start + 100 * S) / S, "nodes": ["a", "b", "c"]}),
    )
    .await;

    assert_eq!(
        line(&c, "ab", "interruptions").await,
        (Some(0.0), Some(true))
    );
    // The soak that covers c counts it.
    assert_eq!(
        line(&c, "abc", "interruptions").await,
        (Some(1.0), Some(false))
    );
    c.stop().await;
}

#[tokio::test]
async fn a_soak_with_its_planned_end_is_judged_on_the_elapsed_part() {
    let (_dir, c) = Collector::temp().await;
    // Ten minutes of windows, up to about now, of a soak planned for 72 h.
    let start = now_unix_ns() / S * S - 600 * S;
    for (node, peer) in [("a", "b"), ("b", "a")] {
        let (mut agent, _) = c.agent(node, "b1").await;
        agent.send(windows(node, peer, start, 600)).await.unwrap();
    }
    let end = start + 72 * 3600 * S;
    post(
        &c,
        "/api/v1/soaks",
        json!({"name": "planned", "start": start / S, "end": end / S, "nodes": ["a", "b"]}),
    )
    .await;

    let (completeness, _) = line(&c, "planned", "completeness").await;
    // Judged over the whole plan it would be 600 windows of 259,200
    // (0.2 %); over the elapsed part all but the windows of the seconds
    // this test took are there.
    let completeness = completeness.expect("a completeness figure");
    assert!(completeness > 50.0, "completeness {completeness} %");
    let show = c.json("/api/v1/soaks/planned").await;
    assert_eq!(show["running"], true);
    let elapsed = show["elapsed_seconds"].as_f64().unwrap();
    assert!(elapsed < 72.0 * 3600.0, "elapsed {elapsed} s");
    c.stop().await;
}
