//! The HTTP ports under attack, on loopback (issue 24, items 3 and 4):
//! connections over `http_max_connections` are closed at once, a request
//! head that drips is cut off at `http_header_timeout`, API requests over
//! `api_max_concurrent` get 503 with `Retry-After`, and every list of the
//! API comes in pages. Meanwhile `/metrics` answers and agents are
//! ingested. Every loop is bounded in count, every wait by [`WAIT`].
//!
//! Connections that must stay open are held deterministically, not by
//! timing: a request whose head is complete but whose body is not has no
//! header deadline, and its `http_idle_timeout` (60 s by default) is longer
//! than any wait here, so it is open until the test finishes its body.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A soak creation whose head is sent whole and whose body is not: the
/// collector reads the body, so the request stays in flight (holding its
/// connection and its API slot) until [`finish_body`].
async fn half_post(to: SocketAddr, soak: &str) -> TcpStream {
    let body = format!("{{\"name\":\"{soak}\"}}");
    let head = format!(
        "POST /api/v1/soaks HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {WRITE_TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{}",
        body.len(),
        &body[..1]
    );
    let mut s = TcpStream::connect(to).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s
}

/// Sends the rest of [`half_post`]'s body and returns the status line of
/// the answer (the connection stays open, keep-alive).
async fn finish_body(s: &mut TcpStream, soak: &str) -> String {
    let body = format!("{{\"name\":\"{soak}\"}}");
    s.write_all(&body.as_bytes()[1..]).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // Read the answer up to its end: the head says its length.
    for _ in 0..1000 {
        let n = tokio::time::timeout(WAIT, s.read(&mut buf))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(n > 0, "closed before the answer ended");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .expect("a content-length");
            if rest.len() >= len {
                return head.lines().next().unwrap().to_string();
            }
        }
    }
    panic!("the answer never ended");
}

/// Reads until the collector closes the connection (bounded by [`WAIT`]).
async fn closed(s: &mut TcpStream) {
    let mut buf = [0u8; 1024];
    let end = tokio::time::timeout(WAIT, async {
        for _ in 0..100_000 {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
        panic!("the collector kept sending");
    });
    end.await.expect("the collector closed the connection");
}

/// Sends a request head one byte every 100 ms, never ending it, until the
/// collector closes the connection (bounded by [`WAIT`]).
async fn drip_until_closed(s: &mut TcpStream) {
    let head = b"GET /api/v1/nodes HTTP/1.1\r\nhost: x\r\nx-drip: ";
    let mut buf = [0u8; 1024];
    let steps = (WAIT.as_millis() / 100) as usize;
    for i in 0..steps {
        let byte = head.get(i).copied().unwrap_or(b'a');
        if s.write_all(&[byte]).await.is_err() {
            return;
        }
        match tokio::time::timeout(Duration::from_millis(100), s.read(&mut buf)).await {
            Err(_) => {}
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) => panic!(
                "an answer to an unfinished head: {}",
                String::from_utf8_lossy(&buf[..n])
            ),
        }
    }
    panic!("a dripped head stayed open for {WAIT:?}");
}

/// A client that keeps one connection (it never lingers past the short
/// header timeout of these tests, so the pool never hands out one the
/// collector is closing).
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_millis(300))
        .timeout(WAIT)
        .build()
        .unwrap()
}

/// `/metrics` from `c` with `http`.
async fn scrape(http: &reqwest::Client, c: &Collector) -> String {
    let r = http.get(c.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

/// Scrapes until `series` has `value` (bounded by [`WAIT`]).
async fn wait_series(http: &reqwest::Client, c: &Collector, series: &str, value: f64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let body = scrape(http, c).await;
        if metric(&body, series) == Some(value) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{series} never became {value}; last:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn refused(kind: &str) -> String {
    format!("boltwatch_http_refused_total{{kind=\"{kind}\"}}")
}

#[tokio::test]
async fn connections_over_the_cap_and_dripped_heads_are_closed_while_metrics_and_ingest_go_on() {
    let (_dir, c) = Collector::temp_with(|c| {
        c.api_listen = Some("127.0.0.1:0".parse().unwrap());
        c.http_max_connections = 4;
        c.http_header_timeout = Duration::from_millis(1500);
        c.api_max_concurrent = 8;
    })
    .await;
    let api = c.api.unwrap();
    let http = client();

    // Four requests in flight fill the API listener's cap.
    let mut held = Vec::new();
    for i in 0..4 {
        held.push(half_post(api, &format!("s{i}")).await);
    }
    // Two more connections, idle: closed at once, and counted.
    for _ in 0..2 {
        let mut s = TcpStream::connect(api).await.unwrap();
        closed(&mut s).await;
    }
    wait_series(&http, &c, &refused("connection_limit"), 2.0).await;

    // Meanwhile /metrics (its own listener, its own cap) answers and an
    // agent's records are stored.
    let (mut a, _) = c.agent("a", "b1").await;
    a.send(vec![record("a", "b1", 1, agent_stats(0, 0))])
        .await
        .unwrap();
    wait_series(
        &http,
        &c,
        "boltwatch_records_received_total{node=\"a\",kind=\"agent_stats\"}",
        1.0,
    )
    .await;

    // One held request ends; its keep-alive connection then drips a head
    // and is closed by the header deadline, freeing its slot.
    let mut s = held.pop().unwrap();
    let status = finish_body(&mut s, "s3").await;
    assert!(status.starts_with("HTTP/1.1 201"), "{status}");
    drip_until_closed(&mut s).await;
    wait_series(&http, &c, &refused("header_timeout"), 1.0).await;

    // The freed slot serves the API again (the collector notices the
    // closed connection on its own time: retried, bounded).
    let mut answered = false;
    for _ in 0..200 {
        if let Ok(r) = http.get(format!("http://{api}/api/v1/nodes")).send().await {
            assert_eq!(r.status(), 200);
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(answered, "the API never answered after a slot was freed");

    // The held requests still complete. Their keep-alive connections,
    // quiet after the answer, are closed by the same deadline but are not
    // counted: nobody was refused.
    for (i, mut s) in held.into_iter().enumerate() {
        let status = finish_body(&mut s, &format!("s{i}")).await;
        assert!(status.starts_with("HTTP/1.1 201"), "{status}");
        closed(&mut s).await;
    }
    let body = scrape(&http, &c).await;
    assert_eq!(metric(&body, &refused("header_timeout")), Some(1.0));
    a.send(vec![record("a", "b1", 2, agent_stats(0, 0))])
        .await
        .unwrap();
    c.stop().await;
}

/// Reads what the collector sends until it closes the connection
/// (bounded by [`WAIT`]).
async fn read_to_close(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = tokio::time::timeout(WAIT, async {
        for _ in 0..100_000 {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        panic!("the collector kept sending");
    });
    end.await.expect("the collector closed the connection");
    String::from_utf8_lossy(&got).to_string()
}

#[tokio::test]
async fn a_stalled_body_and_an_unread_answer_are_cut_off_after_the_idle_timeout() {
    let (_dir, c) = Collector::temp_with(|c| {
        c.http_idle_timeout = Duration::from_millis(500);
    })
    .await;
    let http = client();

    // A body that stops: the request fails and the connection closes.
    let mut s = half_post(c.http, "never").await;
    let answer = read_to_close(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    // ... and is counted as the refusal it is.
    wait_series(&http, &c, &refused("idle_timeout"), 1.0).await;

    // An answer the client does not read: 1000 records of 4 KB make a
    // 4 MiB page; eight of them pipelined on a connection whose receive
    // buffer is small cannot all fit in the sockets' buffers.
    let (mut a, _) = c.agent("x", "b1").await;
    let records = (1..=1000u64)
        .map(|seq| {
            let p = boltwatch_proto::v1::record::Payload::Bandwidth(
                boltwatch_proto::v1::BandwidthResult {
                    peer: "p".into(),
                    error: "e".repeat(4096),
                    ..Default::default()
                },
            );
            record("x", "b1", seq, p)
        })
        .collect();
    a.send(records).await.unwrap();
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut s = sock.connect(c.http).await.unwrap();
    let get = "GET /api/v1/records?limit=100000 HTTP/1.1\r\nhost: x\r\n\r\n".repeat(8);
    s.write_all(get.as_bytes()).await.unwrap();
    wait_series(&http, &c, &refused("idle_timeout"), 2.0).await;
    read_to_close(&mut s).await;
    c.stop().await;
}

#[tokio::test]
async fn api_requests_over_the_concurrency_limit_get_503_with_retry_after() {
    let (_dir, c) = Collector::temp_with(|c| c.api_max_concurrent = 1).await;
    let http = client();
    // One request in flight (its body unfinished) holds the only slot.
    let mut held = half_post(c.http, "slow").await;
    // The collector admits it on its own time: ask until refused (bounded).
    let mut busy = None;
    for _ in 0..200 {
        let r = http.get(c.url("/api/v1/soaks")).send().await.unwrap();
        if r.status() == 503 {
            busy = Some(r);
            break;
        }
        assert_eq!(r.status(), 200);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let busy = busy.expect("a request over api_max_concurrent was answered 503");
    let retry: u64 = busy.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1, "Retry-After {retry}");
    let v: serde_json::Value = busy.json().await.unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("api_max_concurrent"),
        "{v}"
    );
    // /metrics is no API request: it answers, and counts the refusal.
    let body = scrape(&http, &c).await;
    assert!(
        metric(&body, &refused("api_busy")).unwrap() >= 1.0,
        "{body}"
    );

    let status = finish_body(&mut held, "slow").await;
    assert!(status.starts_with("HTTP/1.1 201"), "{status}");
    let r = http.get(c.url("/api/v1/soaks")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    c.stop().await;
}

/// Follows `next_cursor` from `path` (which ends in `limit=N`); returns
/// each page's items under `field`.
async fn pages(
    http: &reqwest::Client,
    c: &Collector,
    path: &str,
    field: &str,
) -> Vec<Vec<serde_json::Value>> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    for _ in 0..50 {
        let r = http
            .get(c.url(&format!("{path}&cursor={cursor}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let v: serde_json::Value = r.json().await.unwrap();
        out.push(v[field].as_array().unwrap().clone());
        match v["next_cursor"].as_str() {
            Some(next) => cursor = next.to_string(),
            None => return out,
        }
    }
    panic!("{path}: more than 50 pages");
}

/// Asserts pages of at most `limit` items, more than one page, and every
/// one of `want` exactly once.
fn every_item_once(pages: &[Vec<serde_json::Value>], limit: usize, key: &str, want: &[String]) {
    assert!(pages.len() > 1, "{} items in one page", want.len());
    let mut seen: Vec<String> = Vec::new();
    for p in pages {
        assert!(p.len() <= limit, "a page of {} items", p.len());
        seen.extend(p.iter().map(|i| i[key].as_str().unwrap().to_string()));
    }
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "an item twice: {seen:?}");
    let mut want = want.to_vec();
    want.sort();
    assert_eq!(sorted, want);
}

/// A page of `/api/v1/nodes` as `{"id": "NODE/BOOT"}` items, one a boot.
fn boot_ids(page: &[serde_json::Value]) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for n in page {
        for b in n["boots"].as_array().unwrap() {
            let id = format!(
                "{}/{}",
                n["node"].as_str().unwrap(),
                b["boot_id"].as_str().unwrap()
            );
            out.push(serde_json::json!({ "id": id }));
        }
    }
    out
}

#[tokio::test]
async fn every_list_comes_in_pages_with_every_item_once() {
    let (_dir, c) = Collector::temp().await;
    let http = client();
    let write = |path: String, body: serde_json::Value| {
        let r = http
            .post(c.url(&path))
            .bearer_auth(WRITE_TOKEN)
            .json(&body)
            .send();
        async move {
            let r = r.await.unwrap();
            assert_eq!(r.status(), 201, "{path}");
        }
    };
    // Five soaks, two of them starting at the same second (the order's
    // tie-break is the name).
    let names: Vec<String> = (0..5).map(|i| format!("soak{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        let start = 1_700_000_000 + (i as u64 / 2) * 60;
        write(
            "/api/v1/soaks".into(),
            serde_json::json!({ "name": n, "start": start }),
        )
        .await;
    }
    let got = pages(&http, &c, "/api/v1/soaks?limit=2", "soaks").await;
    let got: Vec<Vec<serde_json::Value>> = got
        .into_iter()
        .map(|p| p.into_iter().map(|s| s["soak"].clone()).collect())
        .collect();
    every_item_once(&got, 2, "name", &names);

    // Five marks on one soak, two at the same time.
    let texts: Vec<String> = (0..5).map(|i| format!("mark{i}")).collect();
    for (i, t) in texts.iter().enumerate() {
        let at = 1_700_000_100 + (i as u64 / 2);
        write(
            "/api/v1/soaks/soak0/marks".into(),
            serde_json::json!({ "text": t, "at": at }),
        )
        .await;
    }
    let got = pages(&http, &c, "/api/v1/soaks/soak0/marks?limit=2", "marks").await;
    every_item_once(&got, 2, "text", &texts);

    // Five boots of one node and one of another: boots are the unit.
    let mut boots = Vec::new();
    let mut agents = Vec::new();
    for (node, boot) in (0..5)
        .map(|i| ("x", format!("b{i}")))
        .chain([("y", "b0".into())])
    {
        agents.push(c.agent(node, &boot).await.0);
        boots.push(format!("{node}/{boot}"));
    }
    let got = pages(&http, &c, "/api/v1/nodes?limit=2", "nodes").await;
    let got: Vec<Vec<serde_json::Value>> = got.iter().map(|p| boot_ids(p)).collect();
    every_item_once(&got, 2, "id", &boots);

    // Out of range and foreign cursors are refused.
    for bad in [
        "/api/v1/soaks?limit=0",
        "/api/v1/soaks?cursor=zz",
        "/api/v1/nodes?limit=0",
        "/api/v1/soaks/soak0/marks?cursor=zz",
    ] {
        let r = http.get(c.url(bad)).send().await.unwrap();
        assert_eq!(r.status(), 400, "{bad}");
    }
    drop(agents);
    c.stop().await;
}
