//! Availability against the simulator's truth: errored and severely
//! errored windows at known seconds (`sim/errored.rs`), outages and an
//! agent restart, sent through the real gRPC ingest; the real
//! `boltwatch-collector report` binary's JSON must give every link's UAS,
//! ES and SES and the worst quarter hour (per link and overall) exactly,
//! and the error-budget line from them.

mod cli;
mod common;
mod sim;

use cli::collector_cli_ok;
use common::Collector;
use serde_json::Value;
use sim::errored::{self, QUARTER};
use sim::{Scenario, S};

/// 2026-11-30T00:00:00Z.
const T0: u64 = 1_795_996_800 * S;
const HOURS: u64 = 2;

/// The report's quarter hour `q` as (start, (UAS, SES, ES, p99 ns)).
fn quarter(q: &Value) -> (u64, (u64, u64, u64, u64)) {
    let n = |k: &str| q[k].as_f64().unwrap() as u64;
    (
        q["start_unix_ns"].as_u64().unwrap(),
        (
            n("uas_seconds"),
            n("ses_seconds"),
            n("es_seconds"),
            (q["p99_ms"].as_f64().unwrap() * 1e6).round() as u64,
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uas_es_ses_and_the_worst_quarter_hour_equal_the_truth() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::start_with(dir.path(), |cfg| {
        cfg.max_records_per_second = 10_000_000;
    })
    .await;
    let sc = Scenario::standard(3, T0, HOURS * 3600 * S);
    let truth = sim::run(&sc, c.grpc, 4000).await;
    let (from, to) = ((T0 / S).to_string(), ((T0 + sc.duration) / S).to_string());
    let json = collector_cli_ok(
        &["report", "--from", &from, "--to", &to, "--format", "json"],
        dir.path(),
    );
    let r: Value = serde_json::from_str(&json).unwrap();
    let links = r["links"].as_array().unwrap();
    assert_eq!(links.len(), truth.links.len());
    let mut budget_worst: f64 = 0.0;
    for l in links {
        let key = (
            l["node"].as_str().unwrap().to_string(),
            l["peer"].as_str().unwrap().to_string(),
        );
        let t = &truth.links[&key];
        let a = &l["availability"];
        let got = |k: &str| a[k].as_f64().unwrap();
        assert_eq!(
            (got("uas_seconds"), got("es_seconds"), got("ses_seconds")),
            (t.uas as f64, t.es as f64, t.ses as f64),
            "{key:?}"
        );
        let range = sc.duration as f64 / 1e9;
        let budget = t.uas as f64 / ((1.0 - 99.99 / 100.0) * range) * 100.0;
        let b = got("budget_consumed_percent");
        assert!(
            (b - budget).abs() <= 1e-9 * budget.max(1.0),
            "{key:?}: {b} vs {budget}"
        );
        budget_worst = budget_worst.max(budget);
        let want = errored::worst(&t.quarters).unwrap();
        assert_eq!(
            quarter(&l["worst_quarter"]),
            want,
            "{key:?} worst quarter hour"
        );
        assert_eq!(want.0 % QUARTER, 0);
        // The per-hour rows add up to the link's seconds.
        let sum = |k: &str| -> f64 {
            l["hourly"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h[k].as_f64().unwrap())
                .sum()
        };
        assert_eq!(
            (sum("uas_seconds"), sum("es_seconds")),
            (t.uas as f64, t.es as f64)
        );
        assert_eq!(l["hourly"].as_array().unwrap().len() as u64, HOURS);
    }
    // The truth has a link whose worst quarter hour is decided by SES
    // (the burst on mini-c -> mini-b), one by UAS, and ES apart from SES.
    let cb = &truth.links[&("mini-c".to_string(), "mini-b".to_string())];
    assert_eq!(errored::worst(&cb.quarters).unwrap().1 .0, 0);
    assert_eq!(errored::worst(&cb.quarters).unwrap().1 .1, 20);
    let ab = &truth.links[&("mini-a".to_string(), "mini-b".to_string())];
    assert_eq!(errored::worst(&ab.quarters).unwrap().1 .0, 37);
    assert!(truth.links.values().map(|l| l.es - l.ses).sum::<u64>() >= 3);
    let all = errored::overall(truth.links.values());
    assert_eq!(
        quarter(&r["overall"]["worst_quarter"]),
        errored::worst(&all).unwrap()
    );
    let events: Vec<&str> = r["overall"]["worst_quarter"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("outage mini-a -> mini-c")),
        "{events:?}"
    );
    // The budget line judges the worst link.
    let line = r["verdict"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["key"] == "error_budget")
        .unwrap();
    let m = line["measured"].as_f64().unwrap();
    assert!((m - budget_worst).abs() <= 1e-9 * budget_worst, "{line}");
    assert_eq!(line["pass"], false);
    let table = collector_cli_ok(&["report", "--from", &from, "--to", &to], dir.path());
    for s in [
        "availability per directed link",
        "worst quarter hour",
        "fleet, worst first",
        "time above threshold",
        "per hour, all links",
        "definitions",
    ] {
        assert!(table.contains(s), "{s} missing:\n{table}");
    }
    c.stop().await;
}
