//! The `export` command and `report --baseline-*` on a real store: a
//! simulated hour of three nodes through the real gRPC ingest, then the
//! real `boltwatch-collector` binary. Export: every stored record comes
//! out once, in range, in both formats, filtered by kind and node, and a
//! missing store is an error that creates nothing. Baseline: each figure
//! beside the baseline's, the difference what the two reports say.

mod cli;
mod common;
mod sim;

use cli::{collector_cli, collector_cli_ok};
use common::Collector;
use serde_json::Value;
use sim::{Scenario, S};

/// 2026-11-30T00:00:00Z.
const T0: u64 = 1_795_996_800 * S;
const HOUR: u64 = 3600 * S;

fn secs(ns: u64) -> String {
    (ns / S).to_string()
}

fn jsonl(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_streams_every_record_of_a_range_and_baselines_compare() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::start_with(dir.path(), |cfg| cfg.max_records_per_second = 10_000_000).await;
    let mut sc = Scenario::standard(3, T0, HOUR);
    sc.keep_samples = false;
    let truth = sim::run(&sc, c.grpc, 4000).await;
    let stored = c.stored().await;
    assert_eq!(stored, truth.records);
    let d = dir.path();

    export_checks(d, stored, truth.stored_windows);
    baseline_checks(d);
    c.stop().await;
}

/// `export` of the store in `d`, which holds `stored` records, `windows` of them RTT windows.
fn export_checks(d: &std::path::Path, stored: u64, windows: u64) {
    // Everything, as JSON lines (the default), while serve runs.
    let (all_from, all_to) = (secs(T0 - HOUR), secs(T0 + 2 * HOUR));
    let all = jsonl(&collector_cli_ok(
        &["export", "--from", &all_from, "--to", &all_to],
        d,
    ));
    assert_eq!(all.len() as u64, stored);
    assert!(all
        .windows(2)
        .all(|w| w[0]["unix_ns"].as_u64() <= w[1]["unix_ns"].as_u64()));
    // By kind: the RTT windows the simulator stored, each an `rtt` object.
    let rtt = jsonl(&collector_cli_ok(
        &[
            "export", "--from", &all_from, "--to", &all_to, "--kind", "rtt",
        ],
        d,
    ));
    assert_eq!(rtt.len() as u64, windows);
    assert!(rtt
        .iter()
        .all(|r| r["kind"] == "rtt" && r["payload"]["kind"] == "rtt"));
    let by_kind = |k: &str| all.iter().filter(|r| r["kind"] == k).count();
    assert_eq!(rtt.len(), by_kind("rtt"));
    // A sub-range and one node, as CSV: a header, then the same records.
    let (from, to) = (T0 + 600 * S, T0 + 1200 * S);
    let csv = collector_cli_ok(
        &[
            "export",
            "--from",
            &secs(from),
            "--to",
            &secs(to),
            "--nodes",
            "mini-a",
            "--format",
            "csv",
        ],
        d,
    );
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("time,unix_ns,node,boot_id,seq,kind,payload")
    );
    let want = all
        .iter()
        .filter(|r| {
            let t = r["unix_ns"].as_u64().unwrap();
            r["node"] == "mini-a" && from <= t && t < to
        })
        .count();
    let rows: Vec<&str> = lines.collect();
    assert!(want > 1000, "{want} records of mini-a in ten minutes");
    assert_eq!(rows.len(), want);
    for row in &rows {
        let cells: Vec<&str> = row.splitn(7, ',').collect();
        let t: u64 = cells[1].parse().unwrap();
        assert!(from <= t && t < to && cells[2] == "mini-a", "{row}");
        assert!(
            cells[6].starts_with("\"{") && cells[6].ends_with("}\""),
            "{row}"
        );
    }

    export_refuses(d, &all_from, &all_to);
}

/// `report --baseline-*` on the store in `d`.
fn baseline_checks(d: &std::path::Path) {
    // Two halves of the hour, the second against the first.
    let half = T0 + HOUR / 2;
    for (name, a, b) in [("first", T0, half), ("second", half, T0 + HOUR)] {
        collector_cli_ok(
            &["soak", "start", name, "--from", &secs(a), "--to", &secs(b)],
            d,
        );
    }
    let report = |args: &[&str]| -> Value {
        let mut all = vec!["report", "--format", "json"];
        all.extend(args);
        serde_json::from_str(&collector_cli_ok(&all, d)).unwrap()
    };
    let (first, second) = (report(&["--soak", "first"]), report(&["--soak", "second"]));
    let cmp = report(&["--soak", "second", "--baseline-soak", "first"]);
    let b = &cmp["baseline"];
    assert_eq!(b["baseline"], "first");
    assert_eq!(
        b["verdict"],
        first["verdict"]["pass"]
            .as_bool()
            .map(|p| if p { "PASS" } else { "FAIL" })
            .unwrap()
    );
    let row = |f: &str| {
        b["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["figure"] == f)
            .unwrap()
            .clone()
    };
    let rtt = row("RTT mean");
    let (now, then) = (
        second["headline"]["rtt_mean_ms"].as_f64().unwrap(),
        first["headline"]["rtt_mean_ms"].as_f64().unwrap(),
    );
    assert_eq!(rtt["current"].as_f64(), Some(now));
    assert_eq!(rtt["baseline"].as_f64(), Some(then));
    assert!((rtt["difference"].as_f64().unwrap() - (now - then)).abs() < 1e-12);
    let slo = b["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["current_result"].is_null())
        .count();
    assert_eq!(slo, second["verdict"]["lines"].as_array().unwrap().len());
    // The rest of the document is the report without a baseline.
    let mut plain = cmp.clone();
    plain.as_object_mut().unwrap().remove("baseline");
    assert_eq!(plain, second);

    baseline_range_checks(d, half);
}

/// Bad `export` input: a clear error; a missing store is not created.
fn export_refuses(d: &std::path::Path, all_from: &str, all_to: &str) {
    // Bad input: a clear error; a missing store is not created.
    let bad = collector_cli(
        &[
            "export", "--from", all_from, "--to", all_to, "--kind", "rrt",
        ],
        d,
    )
    .output()
    .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("kind `rrt`: use one of"));
    let nowhere = d.join("nowhere");
    let missing = collector_cli(&["export", "--from", all_from, "--to", all_to], &nowhere)
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no store at"));
    assert!(!nowhere.exists(), "export created a store");
}

/// A range as the baseline, in the text formats and the page.
fn baseline_range_checks(d: &std::path::Path, half: u64) {
    // A baseline range, in the text formats and the page.
    let range = ["--baseline-from", &secs(T0), "--baseline-to", &secs(half)];
    for (format, heading) in [
        (
            "table",
            "compared with baseline 2026-11-30T00:00:00Z..2026-11-30T00:30:00Z",
        ),
        (
            "md",
            "## compared with baseline 2026-11-30T00:00:00Z..2026-11-30T00:30:00Z",
        ),
        (
            "html",
            "<h2>compared with baseline 2026-11-30T00:00:00Z..2026-11-30T00:30:00Z",
        ),
    ] {
        let mut args = vec!["report", "--soak", "second", "--format", format];
        args.extend(range);
        let out = collector_cli_ok(&args, d);
        assert!(out.contains(heading), "{format}: {out}");
        assert!(out.contains("SLO RTT p99"), "{format}");
    }
    let half_only = collector_cli(&["report", "--soak", "second", "--baseline-from", "0"], d)
        .output()
        .unwrap();
    assert!(
        !half_only.status.success(),
        "--baseline-from needs --baseline-to"
    );
}
