//! Ingest into the store: records stored and acked once, resends store
//! nothing, watermarks survive a restart, unknown payload kinds are kept
//! verbatim.

use boltwatch_collector::ingest::raw::{RawAgentMessage, RawMsg, RawRecordBatch};
use boltwatch_proto::v1::collector_message;
use prost::Message;

use crate::common::*;
use crate::support::*;

#[tokio::test]
async fn records_are_stored_and_acked_and_resends_store_nothing() {
    let (_dir, c) = Collector::temp().await;
    assert_eq!(c.get("/healthz").await.text().await.unwrap(), "ok");

    // The spool still holds records of boot0, which the collector never
    // saw: the Hello announces it.
    let mut h = hello("a", "boot1");
    h.spooled_boots = vec!["boot0".into()];
    let (mut a, welcome) = c.agent_with(h).await;
    assert!(welcome.is_empty(), "{welcome:?}");
    let batch = seqs("a", "boot1", 1..=3);
    assert_eq!(a.send(batch.clone()).await.unwrap(), [wm("boot1", 3)]);
    // The same batch again: nothing new, same watermark.
    assert_eq!(a.send(batch).await.unwrap(), [wm("boot1", 3)]);
    // Two boots in one batch (a spool replaying an older boot): one
    // watermark each, in order of appearance.
    let mut mixed = seqs("a", "boot0", [7]);
    mixed.extend(seqs("a", "boot1", [4]));
    assert_eq!(
        a.send(mixed).await.unwrap(),
        [wm("boot0", 7), wm("boot1", 4)]
    );
    // An empty batch is acked with no watermarks.
    assert_eq!(a.send(vec![]).await.unwrap(), []);

    let recs = c.json("/api/v1/records?node=a&kind=agent_stats").await;
    let recs = recs["records"].as_array().unwrap();
    assert_eq!(recs.len(), 5);
    assert_eq!(recs[0]["seq"], 1);
    assert_eq!(recs[0]["payload"]["kind"], "agent_stats");
    assert_eq!(recs[0]["payload"]["malformed_packets"], 1);
    let limited = c.json("/api/v1/records?limit=2").await;
    assert_eq!(limited["records"].as_array().unwrap().len(), 2);
    let since = c
        .json(&format!(
            "/api/v1/records?node=a&since={}",
            1_700_000_000_000_000_000u64 + 3_000_000_000
        ))
        .await;
    assert_eq!(since["records"].as_array().unwrap().len(), 3, "{since}");
    assert_eq!(c.get("/api/v1/records?limit=0").await.status(), 400);

    // Malformed packets are summed per boot, last value of each: boot1 seq
    // 4 (4) + boot0 seq 7 (7).
    let expect = r#"
        boltwatch_records_received_total{node="a",kind="agent_stats"} 5
        boltwatch_records_duplicate_total{node="a"} 3
        boltwatch_store_records 5
        boltwatch_agent_malformed_packets_total{node="a"} 11
        boltwatch_store_commit_seconds_count 4
    "#;
    expect_exposition(&c.metrics().await, expect);
    // Stopping with the stream still open ends it with UNAVAILABLE.
    c.stop().await;
    drop(a);
}

#[tokio::test]
async fn restart_keeps_records_and_watermarks() {
    let (dir, c) = Collector::temp().await;
    let (mut a, _) = c.agent("a", "old").await;
    a.send(seqs("a", "old", 1..=5)).await.unwrap();
    drop(a);
    let (mut a, _) = c.agent("a", "new").await;
    a.send(seqs("a", "new", [1, 2, 4])).await.unwrap();
    // The agent is still connected when the collector stops: its stream
    // ends with UNAVAILABLE and shutdown completes.
    c.stop().await;
    let status = a.next().await.expect_err("stream ends at shutdown");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");

    let c = Collector::start(dir.path()).await;
    // Before the agent reconnects its series exist with agent_up 0.
    let expect = [
        ("boltwatch_agent_up{node=\"a\"}", 0.0),
        ("boltwatch_store_records", 8.0),
    ];
    expect_metrics(&c.metrics().await, &expect);
    let mut hello = hello("a", "newest");
    hello.started_unix_ns += 1;
    let mut agent = Agent::open(c.grpc, hello).await.unwrap();
    let Some(collector_message::Msg::Welcome(w)) = agent.next().await.unwrap().msg else {
        panic!("no Welcome")
    };
    assert_eq!(w.boots, [wm("new", 4), wm("old", 5)]);
    // Resending what is already stored after the restart counts as duplicate.
    assert_eq!(
        agent.send(seqs("a", "new", [4])).await.unwrap(),
        [wm("new", 4)]
    );
    let nodes = c.json("/api/v1/nodes").await;
    let boots = nodes["nodes"][0]["boots"].as_array().unwrap();
    let gaps: Vec<_> = boots
        .iter()
        .map(|b| (b["boot_id"].as_str().unwrap(), b["gaps"].as_u64().unwrap()))
        .collect();
    assert_eq!(gaps, [("old", 0), ("new", 1), ("newest", 0)]);
    let duplicates = [("boltwatch_records_duplicate_total{node=\"a\"}", 1.0)];
    expect_metrics(&c.metrics().await, &duplicates);
    c.stop().await;
}

#[tokio::test]
async fn unknown_payload_kinds_are_stored_verbatim() {
    let (dir, c) = Collector::temp().await;
    // A record from a newer agent: envelope fields plus payload field 42.
    let mut raw = boltwatch_proto::v1::Record {
        node: "a".into(),
        boot_id: "b1".into(),
        seq: 1,
        unix_ns: 5,
        payload: None,
    }
    .encode_to_vec();
    raw.extend_from_slice(&[0xd2, 0x02, 0x03, 0x08, 0x96, 0x01]); // field 42, {1: 150}

    let msgs = vec![
        RawAgentMessage {
            msg: Some(RawMsg::Hello(hello("a", "b1"))),
        },
        RawAgentMessage {
            msg: Some(RawMsg::Batch(RawRecordBatch {
                records: vec![raw.clone().into()],
            })),
        },
    ];
    let (tx, mut inbound) = raw_stream(c.grpc, msgs).await.unwrap();
    let mut answers = Vec::new();
    for _ in 0..2 {
        let m = tokio::time::timeout(WAIT, inbound.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        answers.push(m.msg.unwrap());
    }
    assert!(matches!(answers[0], collector_message::Msg::Welcome(_)));
    assert!(matches!(&answers[1], collector_message::Msg::Ack(a) if a.boots == [wm("b1", 1)]));
    drop(tx);

    let recs = c.json("/api/v1/records?kind=unknown").await;
    assert_eq!(recs["records"][0]["seq"], 1, "{recs}");
    assert!(recs["records"][0]["payload"].is_null());
    c.stop().await;

    // The stored bytes are exactly what was sent.
    let db = boltwatch_store::Db::open_reader(&dir.path().join("boltwatch.db")).unwrap();
    let stored = db
        .records(&boltwatch_store::RecordFilter {
            node: Some("a".into()),
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].raw, raw);
}
