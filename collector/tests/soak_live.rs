//! The live soak series on `/metrics` after writes (issue 24, items 6 and
//! 7): a write costs bounded work (a mark rereads its soak's marks, a new
//! soak builds its own verdict, a stop takes its soak off) and never
//! rebuilds every running soak's verdict; marks with the same text stay
//! distinct series. A real collector on loopback, writes over HTTP.

mod common;

use boltwatch_common::clock::now_unix_ns;
use common::*;
use serde_json::json;

const ELAPSED_A: &str = "boltwatch_soak_elapsed_seconds{soak=\"a\"}";

async fn created(c: &Collector, path: &str, body: serde_json::Value) {
    let (code, answer) = c.post(path, body).await;
    assert!(code == 201 || code == 200, "{code} {answer}");
}

#[tokio::test]
async fn a_write_rebuilds_only_the_soak_it_changed() {
    let (_dir, c) = Collector::temp().await;
    let start = now_unix_ns() / 1_000_000_000 - 100;
    created(&c, "/api/v1/soaks", json!({"name": "a", "start": start})).await;
    // The elapsed time is as of the soak's last verdict refresh: it moves
    // only when that verdict is rebuilt.
    let elapsed = metric(&c.metrics().await, ELAPSED_A).expect("soak a is live");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    for _ in 0..3 {
        created(&c, "/api/v1/soaks/a/marks", json!({"text": "xcode build"})).await;
    }
    let m = c.metrics().await;
    assert_eq!(
        metric(&m, ELAPSED_A),
        Some(elapsed),
        "a mark rebuilt the verdict"
    );
    for label in ["xcode build", "xcode build #2", "xcode build #3"] {
        let series = format!(
            "boltwatch_soak_mark_timestamp_seconds{{soak=\"a\",mark=\"{label}\",edge=\"start\"}}"
        );
        assert!(metric(&m, &series).is_some(), "{series} missing:\n{m}");
    }

    // Another soak gets its own verdict; a's stays as it was.
    created(&c, "/api/v1/soaks", json!({"name": "b", "start": start})).await;
    let m = c.metrics().await;
    assert!(
        metric(&m, "boltwatch_soak_pass{soak=\"b\"}").is_some(),
        "{m}"
    );
    assert_eq!(
        metric(&m, ELAPSED_A),
        Some(elapsed),
        "b's creation rebuilt a"
    );
    created(&c, "/api/v1/soaks/b/stop", json!({})).await;
    let m = c.metrics().await;
    assert!(!m.contains("soak=\"b\""), "{m}");
    assert_eq!(metric(&m, ELAPSED_A), Some(elapsed), "b's stop rebuilt a");
    c.stop().await;
}
