//! End-to-end tests of the collector: real gRPC over loopback into `run`, a
//! real SQLite store in a temp dir, HTTP via reqwest, `/metrics` linted by
//! the real `promtool`.

mod common;

use boltwatch_collector::ingest::raw::{RawAgentMessage, RawMsg, RawRecordBatch};
use boltwatch_proto::v1::{agent_message, collector_message, CollectorMessage, RecordBatch};
use common::*;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn seqs(
    node: &str,
    boot: &str,
    range: impl IntoIterator<Item = u64>,
) -> Vec<boltwatch_proto::v1::Record> {
    range
        .into_iter()
        .map(|s| record(node, boot, s, agent_stats(s, 0)))
        .collect()
}

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
async fn nodes_api_reports_gaps() {
    let (_dir, c) = Collector::temp().await;
    let (mut a, _) = c.agent("a", "ba").await;
    assert_eq!(a.send(seqs("a", "ba", 1..=4)).await.unwrap(), [wm("ba", 4)]);
    let (mut g, _) = c.agent("g", "bg").await;
    assert_eq!(
        g.send(seqs("g", "bg", [1, 2, 5])).await.unwrap(),
        [wm("bg", 5)]
    );

    let v = c.json("/api/v1/nodes").await;
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{v}");
    assert_eq!(nodes[0]["node"], "a");
    assert_eq!(nodes[0]["connected"], true);
    assert!(nodes[0]["last_seen_unix_ns"].as_u64().unwrap() > 0);
    let ba = &nodes[0]["boots"][0];
    assert_eq!(
        (
            ba["boot_id"].as_str(),
            ba["records"].as_u64(),
            ba["highest_seq"].as_u64(),
            ba["gaps"].as_u64()
        ),
        (Some("ba"), Some(4), Some(4), Some(0))
    );
    let bg = &nodes[1]["boots"][0];
    assert_eq!(
        (
            bg["records"].as_u64(),
            bg["highest_seq"].as_u64(),
            bg["gaps"].as_u64()
        ),
        (Some(3), Some(5), Some(2))
    );

    // Filling the gap closes it.
    assert_eq!(
        g.send(seqs("g", "bg", [3, 4])).await.unwrap(),
        [wm("bg", 5)]
    );
    let v = c.json("/api/v1/nodes").await;
    assert_eq!(v["nodes"][1]["boots"][0]["gaps"], 0);
    drop((a, g));
    c.stop().await;
}

/// Both directions of a link: a probes b, b probes a.
async fn send_everything(agent: &mut Agent, node: &str, peer: &str) {
    let boot = format!("{node}-boot");
    let rtts = [40_000, 80_000, 85_000, 120_000, 9_000_000];
    let records = vec![
        record(node, &boot, 1, rtt(peer, 1_000, &rtts, 1)),
        record(node, &boot, 2, rtt(peer, 2_000, &rtts[..2], 0)),
        record(node, &boot, 3, counters("tb0", 1_000_000, true)),
        record(node, &boot, 4, thermal("cpu \"die\" 0", 47.5)),
        record(node, &boot, 5, link_event("tb0", true)),
        record(node, &boot, 6, agent_stats(2, 1)),
    ];
    assert_eq!(agent.send(records).await.unwrap(), [wm(&boot, 6)]);
}

#[tokio::test]
async fn metrics_cover_two_nodes_and_pass_promtool() {
    let (_dir, c) = Collector::temp().await;
    let (mut a, _) = c.agent("a", "a-boot").await;
    let (mut b, _) = c.agent("b", "b-boot").await;
    send_everything(&mut a, "a", "b").await;
    send_everything(&mut b, "b", "a").await;
    let body = c.metrics().await;

    for (node, peer) in [("a", "b"), ("b", "a")] {
        let np = format!("{{node=\"{node}\",peer=\"{peer}\"}}");
        let ni = format!("{{node=\"{node}\",interface=\"tb0\"}}");
        let n = format!("{{node=\"{node}\"}}");
        let expect = [
            (format!("boltwatch_agent_up{n}"), 1.0),
            (format!("boltwatch_agent_info{{node=\"{node}\",version=\"0.1.0\",os=\"linux 6.1.0\",boot_id=\"{node}-boot\"}}"), 1.0),
            (format!("boltwatch_rtt_seconds_count{np}"), 7.0),
            (format!("boltwatch_rtt_seconds_sum{np}"), (9_325_000.0 + 120_000.0) / 1e9),
            (format!("boltwatch_rtt_seconds_bucket{{node=\"{node}\",peer=\"{peer}\",le=\"+Inf\"}}"), 7.0),
            (format!("boltwatch_rtt_min_seconds{np}"), 40e-6),
            (format!("boltwatch_rtt_p50_seconds{np}"), 80e-6),
            (format!("boltwatch_rtt_p99_seconds{np}"), 80e-6),
            (format!("boltwatch_rtt_max_seconds{np}"), 80e-6),
            (format!("boltwatch_probe_sent_total{np}"), 8.0),
            (format!("boltwatch_probe_received_total{np}"), 7.0),
            (format!("boltwatch_probe_lost_total{np}"), 1.0),
            (format!("boltwatch_interface_receive_bytes_total{ni}"), 1_000_000.0),
            (format!("boltwatch_interface_transmit_bytes_total{ni}"), 2_000_000.0),
            (format!("boltwatch_interface_receive_packets_total{ni}"), 10.0),
            (format!("boltwatch_interface_transmit_packets_total{ni}"), 20.0),
            (format!("boltwatch_interface_receive_errors_total{ni}"), 1.0),
            (format!("boltwatch_interface_transmit_errors_total{ni}"), 2.0),
            (format!("boltwatch_interface_receive_drops_total{ni}"), 3.0),
            (format!("boltwatch_interface_transmit_drops_total{ni}"), 4.0),
            (format!("boltwatch_link_up{ni}"), 1.0),
            (format!("boltwatch_temperature_celsius{{node=\"{node}\",sensor=\"cpu \\\"die\\\" 0\"}}"), 47.5),
            (format!("boltwatch_records_received_total{{node=\"{node}\",kind=\"rtt\"}}"), 2.0),
            (format!("boltwatch_records_duplicate_total{n}"), 0.0),
            (format!("boltwatch_agent_malformed_packets_total{n}"), 2.0),
            (format!("boltwatch_agent_dropped_records_total{n}"), 1.0),
        ];
        let expect: Vec<(&str, f64)> = expect.iter().map(|(s, v)| (s.as_str(), *v)).collect();
        expect_metrics(&body, &expect);
        // The classic buckets: 80 us falls in the first bound >= 80 us.
        let bounds = boltwatch_collector::export::histogram::rtt_bounds();
        let le80 = bounds.iter().find(|b| **b >= 80e-6).unwrap();
        let series = format!(
            "boltwatch_rtt_seconds_bucket{{node=\"{node}\",peer=\"{peer}\",le=\"{le80}\"}}"
        );
        // Window 1 has 40, 80 and 85 us at or below it, window 2 has 40 and 80.
        assert!(*le80 >= 85e-6, "{le80}");
        assert_eq!(metric(&body, &series), Some(5.0), "{series}");
        assert_eq!(
            body.matches(&format!(
                "boltwatch_rtt_seconds_bucket{{node=\"{node}\",peer=\"{peer}\""
            ))
            .count(),
            bounds.len() + 1
        );
    }
    for name in [
        "boltwatch_ingest_malformed_connections_total",
        "boltwatch_ingest_errors_total{kind=\"no_hello\"}",
        "boltwatch_store_commit_seconds_count",
        "boltwatch_store_records",
    ] {
        assert!(metric(&body, name).is_some(), "missing {name}");
    }
    promtool_check(&body);

    // Closing a's stream turns its agent_up to 0; the series stays.
    drop(a);
    let body = c.wait_metric("boltwatch_agent_up{node=\"a\"}", 0.0).await;
    assert_eq!(metric(&body, "boltwatch_agent_up{node=\"b\"}"), Some(1.0));
    let nodes = c.json("/api/v1/nodes").await;
    assert_eq!(nodes["nodes"][0]["connected"], false);
    assert_eq!(nodes["nodes"][1]["connected"], true);
    promtool_check(&body);
    drop(b);
    c.stop().await;
}

/// Runs the real `promtool check metrics` on `body`; a missing promtool is
/// a failure.
fn promtool_check(body: &str) {
    let dir = tempfile::tempdir().unwrap();
    let scrape = dir.path().join("metrics.prom");
    std::fs::write(&scrape, body).unwrap();
    let out = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&scrape).unwrap())
        .output()
        .expect("promtool must be installed (apt-get install prometheus)");
    let said = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "promtool check metrics failed ({}):\n{said}\n--- body ---\n{body}",
        out.status
    );
}

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

    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", c.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let msgs = vec![
        RawAgentMessage {
            msg: Some(RawMsg::Hello(hello("a", "b1"))),
        },
        RawAgentMessage {
            msg: Some(RawMsg::Batch(RawRecordBatch {
                records: vec![raw.clone()],
            })),
        },
    ];
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    for m in msgs {
        tx.send(m).await.unwrap();
    }
    let resp = grpc
        .streaming(
            tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx)),
            tonic::codegen::http::uri::PathAndQuery::from_static("/boltwatch.v1.Telemetry/Stream"),
            tonic_prost::ProstCodec::<RawAgentMessage, CollectorMessage>::default(),
        )
        .await
        .unwrap();
    let mut inbound = resp.into_inner();
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
    let db = rusqlite::Connection::open(dir.path().join("boltwatch.db")).unwrap();
    let stored: Vec<u8> = db
        .query_row("SELECT record FROM records WHERE node = 'a'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(stored, raw);
}

#[test]
fn bad_config_exits_78_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("collector.toml");
    std::fs::write(&cfg, "data_dir = \"/tmp/x\"\nhttp_listen = \"nowhere\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_boltwatch-collector"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("collector.toml:2: key `http_listen`"), "{err}");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_boltwatch-collector"))
        .args(["serve", "--grpc-listen", "bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--grpc-listen"));
}
