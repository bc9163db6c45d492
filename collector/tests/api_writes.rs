//! HTTP writes are not open to strangers: with the defaults (no write
//! token) every soak write answers 403 and changes nothing, while the
//! `soak` command on the collector host still works; with a write token,
//! the read token does not write; soaks are bounded and can be deleted.
//! A real collector on loopback, a real HTTP client.

mod common;

use boltwatch_collector::soak::{stored, Mark, Slo, Soak, SoakError};
use boltwatch_store::{Db, MarkRow};
use common::*;
use serde_json::{json, Value};

/// A request's status and JSON answer (`Null` when it has none).
async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let r = req.send().await.unwrap();
    let code = r.status().as_u16();
    (code, r.json().await.unwrap_or(Value::Null))
}

/// A soak created on the host, as the `soak` command does.
fn soak_on_the_host(dir: &std::path::Path, name: &str) {
    let db = Db::open_writer(&dir.join("boltwatch.db")).unwrap();
    let s = Soak {
        name: name.into(),
        start_unix_ns: 1,
        end_unix_ns: None,
        nodes: vec![],
        slo: Slo::default(),
        labels: Default::default(),
    };
    stored::create(&db, &s, 1).unwrap();
}

#[tokio::test]
async fn without_a_write_token_strangers_write_nothing() {
    let (dir, c) = Collector::temp_with(|cfg| cfg.api_write_token_file = None).await;
    soak_on_the_host(dir.path(), "running");
    let http = reqwest::Client::new();
    let writes = [
        http.post(c.url("/api/v1/soaks"))
            .json(&json!({"name": "x"})),
        http.post(c.url("/api/v1/soaks/running/stop"))
            .json(&json!({})),
        http.post(c.url("/api/v1/soaks/running/marks"))
            .json(&json!({"text": "t"})),
        http.delete(c.url("/api/v1/soaks/running")),
        // Not even a guess at the token opens them.
        http.post(c.url("/api/v1/soaks/running/stop"))
            .bearer_auth(WRITE_TOKEN)
            .json(&json!({})),
    ];
    for w in writes {
        let (code, body) = send(w).await;
        assert_eq!(code, 403, "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("api_write_token_file"),
            "{body}"
        );
    }
    // Nothing changed: the soak still runs, has no marks, no other soak.
    let show = c.json("/api/v1/soaks/running").await;
    assert!(
        show["soak"]["end_unix_ns"].is_null() && show["marks"] == json!([]),
        "{show}"
    );
    assert_eq!(
        c.json("/api/v1/soaks").await["soaks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    c.stop().await;
}

#[tokio::test]
async fn the_read_token_reads_only_and_the_write_token_writes() {
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), "read-token").unwrap();
    let (_dir, c) =
        Collector::temp_with(|cfg| cfg.api_token_file = Some(token.path().into())).await;
    let http = reqwest::Client::new();
    let create = |t: Option<&str>| {
        let r = http
            .post(c.url("/api/v1/soaks"))
            .json(&json!({"name": "s"}));
        match t {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    };
    assert_eq!(send(create(None)).await.0, 401);
    assert_eq!(send(create(Some("read-token"))).await.0, 401);
    assert_eq!(send(create(Some(WRITE_TOKEN))).await.0, 201);
    // The write token reads too; the read token reads.
    for t in ["read-token", WRITE_TOKEN] {
        let (code, body) = send(http.get(c.url("/api/v1/soaks/s")).bearer_auth(t)).await;
        assert_eq!((code, body["soak"]["name"].as_str()), (200, Some("s")));
    }
    c.stop().await;
}

#[tokio::test]
async fn a_soak_is_bounded_and_can_be_deleted() {
    let (_dir, c) = Collector::temp().await;
    let http = reqwest::Client::new();
    let post =
        |path: &str, body: Value| http.post(c.url(path)).bearer_auth(WRITE_TOKEN).json(&body);
    let nodes: Vec<String> = (0..1000).map(|i| format!("node-{i}")).collect();
    let (code, body) = send(post(
        "/api/v1/soaks",
        json!({"name": "big", "nodes": nodes}),
    ))
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("at most 64"),
        "{body}"
    );
    let labels: serde_json::Map<String, Value> =
        (0..100).map(|i| (format!("k{i}"), json!("v"))).collect();
    let (code, body) = send(post(
        "/api/v1/soaks",
        json!({"name": "big", "labels": labels}),
    ))
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("at most 32"),
        "{body}"
    );

    let (code, _) = send(post(
        "/api/v1/soaks",
        json!({"name": "s", "nodes": ["a", "b"]}),
    ))
    .await;
    assert_eq!(code, 201);
    let (code, body) = send(post(
        "/api/v1/soaks/s/marks",
        json!({"text": "\u{1b}[2Jgone"}),
    ))
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("control"),
        "{body}"
    );
    let (code, _) = send(post(
        "/api/v1/soaks/s/marks",
        json!({"text": "xcode build"}),
    ))
    .await;
    assert_eq!(code, 201);

    // Deleting needs the write token, then takes the soak and its marks.
    assert_eq!(send(http.delete(c.url("/api/v1/soaks/s"))).await.0, 401);
    let (code, _) = send(
        http.delete(c.url("/api/v1/soaks/s"))
            .bearer_auth(WRITE_TOKEN),
    )
    .await;
    assert_eq!(code, 204);
    assert_eq!(c.get("/api/v1/soaks/s").await.status().as_u16(), 404);
    let (code, _) = send(
        http.delete(c.url("/api/v1/soaks/s"))
            .bearer_auth(WRITE_TOKEN),
    )
    .await;
    assert_eq!(code, 404);
    c.stop().await;
}

/// A soak made on the host, ended unless `open`.
fn host_soak(db: &Db, name: &str, open: bool) {
    let s = Soak {
        name: name.into(),
        start_unix_ns: 1,
        end_unix_ns: (!open).then_some(2),
        nodes: vec![],
        slo: Slo::default(),
        labels: Default::default(),
    };
    stored::create(db, &s, 3).unwrap();
}

#[tokio::test]
async fn soak_writes_have_their_own_budget() {
    let (dir, c) = Collector::temp().await;
    let db = Db::open_writer(&dir.path().join("boltwatch.db")).unwrap();
    let http = reqwest::Client::new();
    let post =
        |path: &str, body: Value| http.post(c.url(path)).bearer_auth(WRITE_TOKEN).json(&body);
    // Running soaks are bounded: each one's verdict is rebuilt live.
    for i in 0..stored::MAX_OPEN_SOAKS {
        host_soak(&db, &format!("open-{i}"), true);
    }
    let (code, body) = send(post("/api/v1/soaks", json!({"name": "one-more"}))).await;
    assert_eq!(code, 507, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("running"),
        "{body}"
    );
    let (code, _) = send(post("/api/v1/soaks/open-0/stop", json!({}))).await;
    assert_eq!(code, 200);
    let (code, _) = send(post("/api/v1/soaks", json!({"name": "one-more"}))).await;
    assert_eq!(code, 201);

    // The bytes of soaks and marks are bounded, far below the store's room.
    // Fill the store with marks of the longest text up to the budget (rows
    // put straight in: the budget counts what the store holds, however it
    // got there), then the next one is refused.
    let text = "m".repeat(stored::MAX_MARK_TEXT);
    host_soak(&db, "ended", false);
    let row = MarkRow {
        text: text.clone(),
        at_unix_ns: 1,
        until_unix_ns: None,
    };
    let per_mark = row.stored_bytes("ended");
    let used = db.soak_usage(0).unwrap().bytes;
    for _ in 0..(stored::MAX_SOAK_BYTES - used) / per_mark {
        db.insert_mark("ended", &row).unwrap();
    }
    let mark = Mark {
        text: text.clone(),
        at_unix_ns: 1,
        until_unix_ns: None,
    };
    let spent = stored::add_mark(&db, "one-more", &mark).unwrap_err();
    assert!(matches!(spent, SoakError::Full(_)), "{spent}");
    // Over HTTP too: 507 naming what to do.
    let (code, body) = send(post("/api/v1/soaks/one-more/marks", json!({"text": text}))).await;
    assert_eq!(code, 507, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("delete a soak"),
        "{body}"
    );
    // Deleting a soak gives its bytes back.
    let (code, _) = send(
        http.delete(c.url("/api/v1/soaks/ended"))
            .bearer_auth(WRITE_TOKEN),
    )
    .await;
    assert_eq!(code, 204);
    let (code, _) = send(post("/api/v1/soaks/one-more/marks", json!({"text": "t"}))).await;
    assert_eq!(code, 201);
    c.stop().await;
}

#[tokio::test]
async fn soak_writes_leave_the_free_space_to_agents_records() {
    // A store on a file system with less free space than soak writes
    // leave for records: soak writes are refused, records still go in.
    let fs = Tmpfs::mount("size=48m");
    let c = Collector::start_with(fs.path(), |_| {}).await;
    let (code, body) = send(
        reqwest::Client::new()
            .post(c.url("/api/v1/soaks"))
            .bearer_auth(WRITE_TOKEN)
            .json(&json!({"name": "s"})),
    )
    .await;
    assert_eq!(code, 507, "{body}");
    assert!(body["error"].as_str().unwrap().contains("free"), "{body}");
    let (mut a, _) = c.agent("a", "b1").await;
    a.send(vec![record("a", "b1", 1, agent_stats(0, 0))])
        .await
        .unwrap();
    assert_eq!(c.stored().await, 1);
    assert_eq!(c.get("/healthz").await.status(), 200);
    c.stop().await;
}
