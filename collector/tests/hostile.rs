//! Collector resources under attack, on loopback: label and series caps keep `/metrics` bounded, records of
//! unannounced boots make no boot rows, record size and byte budgets, the
//! connection caps and the Hello deadline, and paged API answers behind an
//! optional token. Every loop is bounded in count, every wait by [`WAIT`].

mod common;

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{BandwidthResult, Interface, Outage};
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn rtt_to(node: &str, seq: u64, peer: &str) -> boltwatch_proto::v1::Record {
    record(
        node,
        "b1",
        seq,
        rtt(peer, seq * 1_000_000_000, &[100_000], 0),
    )
}

/// Fails unless `node`, not seen before, can still connect and have a
/// record stored: what an attack by others must leave working.
async fn serves_a_fresh_node(c: &Collector, node: &str) {
    let (mut a, _) = c.agent(node, "b1").await;
    a.send(vec![record(node, "b1", 1, agent_stats(0, 0))])
        .await
        .unwrap();
}

/// Scrapes `/metrics` `n` times from three tasks at once while `node`
/// sends `batches` one-record batches; returns each ack's latency (ms).
async fn acks_under_scrapes(c: &Collector, node: &str, batches: u64) -> Vec<f64> {
    let url = c.url("/metrics");
    let scrapers: Vec<_> = (0..3)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                for _ in 0..20 {
                    let r = reqwest::get(&url).await.unwrap();
                    r.bytes().await.unwrap();
                }
            })
        })
        .collect();
    let (mut a, _) = c.agent(node, "b1").await;
    let mut ms = Vec::new();
    for seq in 1..=batches {
        let t = Instant::now();
        a.send(vec![record(node, "b1", seq, agent_stats(seq, 0))])
            .await
            .unwrap();
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    for s in scrapers {
        tokio::time::timeout(WAIT, s).await.unwrap().unwrap();
    }
    ms.sort_by(f64::total_cmp);
    ms
}

#[tokio::test]
async fn a_huge_label_and_20k_peer_names_leave_metrics_bounded() {
    const CAP: usize = 64;
    let (_dir, c) = Collector::temp_with(|c| {
        c.max_series_per_node = CAP;
        c.max_batch_records = 10_000;
        // Let the 1 MiB record past the size cap: the label check is the
        // one under test here.
        c.max_record_bytes = 4 << 20;
    })
    .await;
    let (mut a, _) = c.agent("x", "b1").await;
    let empty = c.metrics().await.len();

    // One 1 MiB peer name: the batch is refused and counted.
    let e = a
        .send(vec![rtt_to("x", 1, &"p".repeat(1 << 20))])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert_eq!(c.errors("bad_label").await, 1.0);

    // One peer's series, to size what each admitted peer may add.
    let (mut a, _) = c.agent("x", "b1").await;
    a.send(vec![rtt_to("x", 1, "p00000")]).await.unwrap();
    let one = c.metrics().await.len() - empty;

    // 20k distinct peer names, all stored, at most CAP of them on /metrics.
    for k in 0..20u64 {
        let batch = (0..1000)
            .map(|i| k * 1000 + i + 2)
            .map(|seq| rtt_to("x", seq, &format!("p{:05}", seq - 1)))
            .collect();
        a.send(batch).await.unwrap();
    }
    // And a Hello with 40k interfaces.
    let mut h = hello("x", "b1");
    h.interfaces = (0..40_000)
        .map(|i| Interface {
            name: format!("en{i}"),
            kind: "ethernet".into(),
            ..Default::default()
        })
        .collect();
    let (_a2, _) = c.agent_with(h).await;

    let body = c.metrics().await;
    // Each admitted peer adds at most what the first did; the interfaces
    // (one `lo` of the RTT records plus CAP - 1 from the Hello) at most a
    // few families each; 16 KiB covers the counters' longer values.
    let bound = empty + CAP * one + CAP * 1024 + 16 * 1024;
    eprintln!(
        "/metrics: {} bytes empty, {} for one peer, {} after the attack (bound {bound})",
        empty,
        empty + one,
        body.len()
    );
    assert!(body.len() <= bound, "{} > {bound}", body.len());
    assert_eq!(c.stored().await, 20_001, "refused series are still stored");
    let refused = metric(
        &body,
        "boltwatch_ingest_series_refused_total{kind=\"peer\"}",
    );
    assert_eq!(refused, Some((20_001 - CAP) as f64));
    let ifs = metric(
        &body,
        "boltwatch_ingest_series_refused_total{kind=\"interface\"}",
    );
    // The peers' label sets filled the node's budget: no interface fits.
    assert_eq!(ifs, Some(40_000.0));

    let ms = acks_under_scrapes(&c, "victim", 50).await;
    eprintln!(
        "victim ack latency with 3 scrapers: p50 {:.2} ms, max {:.2} ms",
        ms[ms.len() / 2],
        ms[ms.len() - 1]
    );
    c.stop().await;
}

#[tokio::test]
async fn records_of_unannounced_boots_make_no_boot_rows_and_hellos_are_limited() {
    let (_dir, c) = Collector::temp_with(|c| {
        c.max_batch_records = 100_000;
        c.max_records_per_second = 1_000_000;
    })
    .await;
    let (mut a, _) = c.agent("x", "b1").await;
    let batch = (0..100_000u64)
        .map(|i| record("x", &format!("forged-{i}"), 1, agent_stats(0, 0)))
        .collect();
    let e = a.send(batch).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("forged-0"), "{e:?}");
    let nodes = c.json("/api/v1/nodes").await;
    let boots = nodes["nodes"][0]["boots"].as_array().unwrap();
    assert_eq!(boots.len(), 1, "only the Hello's boot: {nodes}");
    assert_eq!(c.errors("unknown_boot").await, 1.0);

    // Reconnecting in a loop is refused once the burst is spent.
    let mut refused = 0;
    for _ in 0..30 {
        match Agent::open(c.grpc, hello("x", "b1")).await {
            Ok(mut s) => {
                if let Err(e) = s.next().await {
                    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
                    refused += 1;
                }
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(refused > 0, "30 Hellos at once all accepted");
    assert_eq!(c.errors("hello_rate_limited").await, refused as f64);
    // Another node is not affected.
    serves_a_fresh_node(&c, "y").await;
    c.stop().await;
}

fn bandwidth_with_error(seq: u64, error_bytes: usize) -> boltwatch_proto::v1::Record {
    let p = Payload::Bandwidth(BandwidthResult {
        peer: "p".into(),
        error: "e".repeat(error_bytes),
        ..Default::default()
    });
    record("x", "b1", seq, p)
}

#[tokio::test]
async fn oversized_records_are_refused_and_the_byte_budget_throttles() {
    let (_dir, c) = Collector::temp_with(|c| {
        c.max_record_bytes = 4096;
        c.max_bytes_per_second = 65_536; // burst 320 KiB
    })
    .await;
    let (mut a, _) = c.agent("x", "b1").await;
    let e = a
        .send(vec![bandwidth_with_error(1, 8000)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert_eq!(c.errors("record_too_large").await, 1.0);

    // 100 records of ~3 KB fit the burst once, not twice (the refill of
    // 64 KiB/s cannot add 300 KB however slow this machine is).
    let (mut a, _) = c.agent("x", "b1").await;
    let batch = |from: u64| {
        (from..from + 100)
            .map(|s| bandwidth_with_error(s, 3000))
            .collect()
    };
    a.send(batch(1)).await.unwrap();
    let e = a.send(batch(101)).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("bytes/s"), "{e:?}");
    assert_eq!(c.stored().await, 100);
    assert_eq!(c.errors("byte_rate_limited").await, 1.0);
    c.stop().await;
}

/// A TCP connection from `from` that sends the HTTP/2 preface and nothing
/// else.
async fn idle(from: IpAddr, to: SocketAddr) -> tokio::net::TcpStream {
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.bind(SocketAddr::new(from, 0)).unwrap();
    let mut s = s.connect(to).await.unwrap();
    s.write_all(PREFACE).await.unwrap();
    s
}

/// Reads until the collector closes the connection (bounded by [`WAIT`]).
async fn closed(mut s: tokio::net::TcpStream) {
    let mut buf = [0u8; 1024];
    let end = tokio::time::timeout(WAIT, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    });
    end.await.expect("the collector closed the connection");
}

#[tokio::test]
async fn idle_connections_beyond_the_caps_are_closed_and_agents_get_through() {
    let (_dir, c) = Collector::temp_with(|c| {
        c.max_connections = 9;
        c.max_connections_per_address = 4;
        c.hello_timeout = std::time::Duration::from_secs(2);
    })
    .await;
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    // One host: 4 held, 2 closed at once.
    let mut held = Vec::new();
    for _ in 0..6 {
        held.push(idle(ip("127.0.0.2"), c.grpc).await);
    }
    c.wait_metric(
        "boltwatch_ingest_errors_total{kind=\"connection_limit\"}",
        2.0,
    )
    .await;
    // A real agent gets through beside them.
    let (mut a, _) = c.agent("a", "b1").await;
    a.send(vec![record("a", "b1", 1, agent_stats(0, 0))])
        .await
        .unwrap();
    // Another host fills the total (4 + 1 agent + 4 = 9); a third is
    // closed at once.
    for _ in 0..4 {
        held.push(idle(ip("127.0.0.3"), c.grpc).await);
    }
    held.push(idle(ip("127.0.0.4"), c.grpc).await);
    c.wait_metric(
        "boltwatch_ingest_errors_total{kind=\"connection_limit\"}",
        3.0,
    )
    .await;
    // Without a Hello every held one is closed after hello_timeout.
    for s in held {
        closed(s).await;
    }
    c.wait_metric("boltwatch_ingest_errors_total{kind=\"hello_timeout\"}", 8.0)
        .await;
    // One more idle connection, opened after the agent's: once it is
    // closed, the agent's deadline has passed too, and its stream (which
    // sent an accepted Hello) is still served.
    closed(idle(ip("127.0.0.5"), c.grpc).await).await;
    a.send(vec![record("a", "b1", 2, agent_stats(0, 0))])
        .await
        .unwrap();
    serves_a_fresh_node(&c, "b").await;
    c.stop().await;
}

fn outage(seq: u64, id: u64) -> boltwatch_proto::v1::Record {
    let p = Payload::Outage(Outage {
        peer: "p".into(),
        interface: "lo".into(),
        cause: 1,
        start_unix_ns: 1_700_000_000_000_000_000 + id,
        end_unix_ns: Some(1_700_000_000_000_000_000 + id + 10),
        outage_id: id,
        ..Default::default()
    });
    record("x", "b1", seq, p)
}

#[tokio::test]
async fn large_api_answers_come_in_bounded_pages_behind_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("api-token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let data = dir.path().join("data");
    let c = Collector::start_with(&data, |c| {
        c.api_token_file = Some(token.clone());
        c.api_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let (mut a, _) = c.agent("x", "b1").await;
    // 3000 records of ~2 KB of JSON each: more than one page's budget.
    for k in 0..6u64 {
        let batch = (1..=500)
            .map(|s| bandwidth_with_error(k * 500 + s, 2000))
            .collect();
        a.send(batch).await.unwrap();
    }
    a.send((1..=5).map(|i| outage(3000 + i, i)).collect())
        .await
        .unwrap();

    let api = c.api.unwrap();
    let http = reqwest::Client::new();
    let get = |path: String, token: Option<&str>| {
        let mut r = http.get(format!("http://{api}{path}"));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        async move { tokio::time::timeout(WAIT, r.send()).await.unwrap().unwrap() }
    };
    assert_eq!(get("/api/v1/nodes".into(), None).await.status(), 401);
    assert_eq!(
        get("/api/v1/nodes".into(), Some("nope")).await.status(),
        401
    );
    // The metrics listener serves no API, and /metrics needs no token.
    assert_eq!(c.get("/api/v1/nodes").await.status(), 404);
    assert_eq!(c.get("/metrics").await.status(), 200);

    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(pages <= 20, "more pages than the records need");
        let path = format!("/api/v1/records?kind=bandwidth&limit=100000&cursor={cursor}");
        let r = get(path, Some("s3cret")).await;
        assert_eq!(r.status(), 200);
        let body = r.bytes().await.unwrap();
        assert!(
            body.len() <= (4 << 20) + 4096,
            "page of {} bytes",
            body.len()
        );
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        for rec in v["records"].as_array().unwrap() {
            assert!(seen.insert(rec["seq"].as_u64().unwrap()), "{rec} twice");
        }
        match v["next_cursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => break,
        }
    }
    assert!(pages >= 2, "3000 records of 2 KB must not fit one page");
    assert_eq!(seen.len(), 3000);
    assert_eq!(seen.first(), Some(&1));

    let page = get("/api/v1/outages?limit=2".into(), Some("s3cret")).await;
    let v: serde_json::Value = page.json().await.unwrap();
    assert_eq!(v["outages"].as_array().unwrap().len(), 2);
    let next = v["next_cursor"].as_str().unwrap().to_string();
    let page = get(
        format!("/api/v1/outages?limit=10&cursor={next}"),
        Some("s3cret"),
    )
    .await;
    let v: serde_json::Value = page.json().await.unwrap();
    let ids: Vec<u64> = v["outages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["outage_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [3, 4, 5]);
    assert!(v["next_cursor"].is_null());
    let bad = get("/api/v1/records?cursor=zz".into(), Some("s3cret")).await;
    assert_eq!(bad.status(), 400);
    c.stop().await;
}

/// A remote_write receiver that answers every request with a 503 and a
/// body of `body` bytes, writing it as long as the sender reads; keeps
/// the most bytes one answer got out, and how many answers ended.
type Counter = std::sync::Arc<std::sync::atomic::AtomicU64>;
fn hostile_receiver(body: u64) -> (String, Counter, Counter) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicU64, Ordering};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api/v1/write", l.local_addr().unwrap());
    let most = std::sync::Arc::new(AtomicU64::new(0));
    let done = Counter::default();
    let (seen, ended) = (most.clone(), done.clone());
    std::thread::spawn(move || {
        // Bounded: a sender retries a handful of times within a test.
        for conn in l.incoming().take(16) {
            let Ok(mut s) = conn else { return };
            s.set_read_timeout(Some(WAIT)).unwrap();
            s.set_write_timeout(Some(WAIT)).unwrap();
            let mut req = [0u8; 64 * 1024];
            let _ = s.read(&mut req);
            let head =
                format!("HTTP/1.1 503 Service Unavailable\r\nContent-Length: {body}\r\n\r\n");
            let _ = s.write_all(head.as_bytes());
            let chunk = [b'x'; 64 * 1024];
            let mut sent = 0u64;
            while sent < body && s.write_all(&chunk).is_ok() {
                sent += chunk.len() as u64;
                seen.fetch_max(sent, Ordering::Relaxed);
            }
            seen.fetch_max(sent, Ordering::Relaxed);
            ended.fetch_add(1, Ordering::Relaxed);
        }
    });
    (url, most, done)
}

#[tokio::test]
async fn a_huge_error_body_from_a_receiver_is_not_read() {
    // 256 MiB of error text: a sender that reads it all (as one did, to
    // keep 300 characters) takes it into memory.
    const BODY: u64 = 256 << 20;
    let (url, most, done) = hostile_receiver(BODY);
    let (_dir, c) = Collector::temp_with(move |cfg| {
        cfg.remote_write.urls = vec![url];
        cfg.remote_write.timeout = std::time::Duration::from_secs(10);
    })
    .await;
    let (mut a, _) = c.agent("a", "b1").await;
    a.send(vec![record("a", "b1", 1, thermal("cpu", 40.0))])
        .await
        .unwrap();
    // The first answer ends when the sender stops reading (the write
    // fails once the socket buffers are full), or when all was read.
    let t = Instant::now();
    while done.load(std::sync::atomic::Ordering::Relaxed) == 0 && t.elapsed() < WAIT {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let got = most.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        done.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "no answer ended"
    );
    // Socket buffers on loopback hold a few MiB at most.
    assert!(
        got < 16 << 20,
        "the sender read {got} bytes of an error body"
    );
    serves_a_fresh_node(&c, "b").await;
    drop(a);
    c.stop().await;
}
