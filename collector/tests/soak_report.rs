//! The soak report's ground truth: a simulated multi-day soak of three nodes sent
//! through the real gRPC ingest, a soak object and marks created over the
//! real HTTP API, and the report produced by the real `boltwatch-collector
//! report` binary on the same store, compared with the simulator's truth:
//! counts and durations exact, means within 0.1 %, percentiles within one
//! histogram bucket, completeness exact.

mod cli;
mod common;
mod sim;

use boltwatch_proto::histogram::upper_bound_seconds;
use cli::{collector_cli, collector_cli_ok};
use common::Collector;
use serde_json::{json, Value};
use sim::{Scenario, Truth, S};

/// 2026-11-30T00:00:00Z.
const T0: u64 = 1_795_996_800 * S;
/// Long enough for every event of the scenario; the same code paths as 72 h.
const HOURS: u64 = 4;

fn within(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        (got - want).abs() <= rel * want.abs().max(1e-12),
        "{what}: got {got}, want {want}"
    );
}

/// One schema-3 bucket: neighbouring bounds are 2^(1/8) apart.
fn within_a_bucket(got_ms: f64, want_ns: u64, what: &str) {
    let ratio = got_ms * 1e6 / want_ns as f64;
    let bucket = upper_bound_seconds(1) / upper_bound_seconds(0);
    assert!(
        ratio <= bucket && ratio >= 1.0 / bucket,
        "{what}: got {got_ms} ms, truth {want_ns} ns"
    );
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

fn check_links(r: &Value, truth: &Truth) {
    let links = r["links"].as_array().unwrap();
    assert_eq!(links.len(), truth.links.len());
    for l in links {
        let key = (
            l["node"].as_str().unwrap().to_string(),
            l["peer"].as_str().unwrap().to_string(),
        );
        let t = &truth.links[&key];
        let what = format!("{} -> {}", key.0, key.1);
        let rtt = &l["rtt"];
        assert_eq!(rtt["windows"], t.windows, "{what} windows");
        assert_eq!(rtt["probes"], t.probes, "{what} probes");
        assert_eq!(rtt["lost"], t.lost, "{what} lost");
        within(
            rtt["mean_ms"].as_f64().unwrap(),
            t.sum_ns as f64 / t.received as f64 / 1e6,
            0.001,
            &format!("{what} RTT mean"),
        );
        assert_eq!(
            rtt["worst_ms"].as_f64().unwrap(),
            t.worst_ns as f64 / 1e6,
            "{what} worst"
        );
        let mut sorted = t.samples.clone();
        sorted.sort_unstable();
        within_a_bucket(
            rtt["p50_ms"].as_f64().unwrap(),
            quantile(&sorted, 0.5),
            &format!("{what} p50"),
        );
        within_a_bucket(
            rtt["p99_ms"].as_f64().unwrap(),
            quantile(&sorted, 0.99),
            &format!("{what} p99"),
        );
        let bw = &l["bandwidth"];
        assert_eq!(
            (bw["tests"].as_u64(), bw["failed"].as_u64()),
            (Some(t.tests), Some(t.failed)),
            "{what} tests"
        );
        let mean = t.gbps.iter().sum::<f64>() / t.gbps.len() as f64;
        within(
            bw["mean_gbps"].as_f64().unwrap(),
            mean,
            0.001,
            &format!("{what} bandwidth mean"),
        );
        let worst = t.gbps.iter().copied().fold(f64::INFINITY, f64::min);
        within(
            bw["worst_gbps"].as_f64().unwrap(),
            worst,
            1e-9,
            &format!("{what} bandwidth worst"),
        );
        let got: Vec<(u64, u64)> = l["interruptions"]["outages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["start_unix_ns"].as_u64().unwrap(),
                    o["end_unix_ns"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, t.outages, "{what} outages, exact");
        let down: u64 = t.outages.iter().map(|(s, e)| e - s).sum();
        assert_eq!(
            l["interruptions"]["total_down_seconds"].as_f64().unwrap(),
            down as f64 / 1e9,
            "{what} down time"
        );
    }
}

fn check_rest(r: &Value, truth: &Truth) {
    let c = &r["completeness"];
    assert_eq!(c["expected_windows"], truth.expected_windows);
    assert_eq!(c["stored_windows"], truth.stored_windows);
    assert_eq!(c["gaps"], truth.gaps);
    assert_eq!(c["records"], truth.records);
    assert_eq!(c["sequence_holes"], truth.sequence_holes);
    assert_eq!(c["spool_drops"], truth.spool_drops);
    // The counts are exact; the percentage only differs in float rounding.
    within(
        c["percent"].as_f64().unwrap(),
        100.0 * truth.stored_windows as f64 / truth.expected_windows as f64,
        1e-12,
        "completeness",
    );
    for t in r["thermal"].as_array().unwrap() {
        let node = t["node"].as_str().unwrap();
        let (episodes, secs, mean, worst) = truth.thermal[node];
        assert_eq!(t["throttle_episodes"], episodes, "{node}");
        assert_eq!(t["throttled_seconds"].as_f64().unwrap(), secs, "{node}");
        assert_eq!(t["sensor"], "case", "{node}");
        within(t["mean_celsius"].as_f64().unwrap(), mean, 0.001, node);
        assert_eq!(t["worst_celsius"].as_f64().unwrap(), worst, "{node}");
    }
    for s in r["services"].as_array().unwrap() {
        let key = (
            s["node"].as_str().unwrap().to_string(),
            s["peer"].as_str().unwrap().to_string(),
        );
        let (checks, up) = truth.ssh[&key];
        assert_eq!(
            (s["checks"].as_u64(), s["up"].as_u64()),
            (Some(checks), Some(up)),
            "{key:?}"
        );
    }
    let corr = &r["correlation"];
    let m = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert_eq!(corr["throttled"]["tests"], truth.bw_throttled.len());
    assert_eq!(corr["normal"]["tests"], truth.bw_normal.len());
    within(
        corr["throttled"]["mean_gbps"].as_f64().unwrap(),
        m(&truth.bw_throttled),
        0.001,
        "throttled mean",
    );
    within(
        corr["normal"]["mean_gbps"].as_f64().unwrap(),
        m(&truth.bw_normal),
        0.001,
        "normal mean",
    );
    assert!(
        corr["bandwidth_difference_gbps"].as_f64().unwrap() < -5.0,
        "{corr}"
    );
    let interruptions: usize = truth.links.values().map(|l| l.outages.len()).sum();
    assert_eq!(r["headline"]["interruptions"], interruptions);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_reproduces_the_simulated_truth() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::start_with(dir.path(), |cfg| {
        cfg.max_records_per_second = 10_000_000;
    })
    .await;
    let sc = Scenario::standard(3, T0, HOURS * 3600 * S);
    let truth = sim::run(&sc, c.grpc, 4000).await;
    assert_eq!(c.stored().await, truth.records);

    // The soak and its marks over HTTP, times in both notations.
    let (code, body) = c.post("/api/v1/soaks",
        json!({"name": "sim", "start": "2026-11-30T00:00:00Z", "end": (T0 + sc_duration(&sc)) / S,
               "nodes": sc.nodes, "slo": {"bandwidth_mean_min_gbps": 60, "temperature_worst_max_celsius": 45}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    for (at, until, text) in &sc.marks {
        let (code, body) = c
            .post(
                "/api/v1/soaks/sim/marks",
                json!({"text": text, "at": at / S, "until": until.map(|u| u / S)}),
            )
            .await;
        assert_eq!(code, 201, "{body}");
    }
    let (code, _) = c.post("/api/v1/soaks", json!({"name": "sim"})).await;
    assert_eq!(code, 409);
    let (code, body) = c
        .post(
            "/api/v1/soaks",
            json!({"name": "bad", "slo": {"rtt_p99": 1}}),
        )
        .await;
    assert_eq!(code, 400);
    assert!(
        body["error"].as_str().unwrap().contains("rtt_p99"),
        "{body}"
    );

    // The report of the running collector's store, by the real binary.
    let json = collector_cli_ok(&["report", "--soak", "sim", "--format", "json"], dir.path());
    let r: Value = serde_json::from_str(&json).unwrap();
    check_links(&r, &truth);
    check_rest(&r, &truth);
    assert_eq!(r["marks"].as_array().unwrap().len(), sc.marks.len());
    // Interruptions and completeness fail the default SLO.
    assert_eq!(r["verdict"]["pass"], false);
    let line = |k: &str| {
        r["verdict"]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["key"] == k)
            .unwrap()
            .clone()
    };
    assert_eq!(line("interruptions")["pass"], false);
    assert_eq!(line("rtt_worst")["pass"], true);
    assert_eq!(line("bandwidth_mean")["threshold"], 60.0);

    // The HTTP report is the same document.
    let http: Value = c.json("/api/v1/soaks/sim/report?format=json").await;
    assert_eq!(http, r);
    // --check gates on the verdict: 3 on FAIL.
    let check = collector_cli(&["report", "--soak", "sim", "--check"], dir.path())
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(3));
    let table = String::from_utf8(check.stdout).unwrap();
    assert!(
        table.contains("RTT (ms)") && table.contains("verdict: FAIL"),
        "{table}"
    );
    c.stop().await;
}

fn sc_duration(sc: &Scenario) -> u64 {
    sc.duration
}

/// A running soak is on `/metrics` with its verdict so far, from the moment
/// it is created over HTTP, and leaves when it is stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_soak_is_on_metrics_until_stopped() {
    let (_dir, c) = Collector::temp().await;
    let before = c.metrics().await;
    assert!(
        before.contains("# TYPE boltwatch_soak_info gauge"),
        "{before}"
    );
    assert!(!before.contains("boltwatch_soak_info{"), "{before}");
    let (code, body) = c
        .post(
            "/api/v1/soaks",
            json!({"name": "live", "nodes": ["a", "b"]}),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["running"], true);
    let m = c.metrics().await;
    common::expect_metrics(
        &m,
        &[
            ("boltwatch_soak_info{soak=\"live\",nodes=\"a,b\"}", 1.0),
            ("boltwatch_soak_pass{soak=\"live\"}", 0.0),
            // No records yet: no RTT, so that line fails for lack of data.
            (
                "boltwatch_soak_slo_pass{soak=\"live\",slo=\"rtt_worst\"}",
                0.0,
            ),
            (
                "boltwatch_soak_slo_pass{soak=\"live\",slo=\"interruptions\"}",
                1.0,
            ),
        ],
    );
    assert!(
        common::metric(&m, "boltwatch_soak_elapsed_seconds{soak=\"live\"}")
            .is_some_and(|v| v >= 0.0)
    );
    // bandwidth_mean has no threshold: not judged, no series.
    assert!(!m.contains("slo=\"bandwidth_mean\""), "{m}");
    // A workload mark shows as its start and end times, the values the
    // dashboard's annotation query uses as annotation times.
    let (code, body) = c
        .post(
            "/api/v1/soaks/live/marks",
            json!({"text": "xcode build", "at": 1_900_000_000u64, "until": 1_900_000_300u64}),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let m = c.metrics().await;
    common::expect_metrics(
        &m,
        &[
            (
                "boltwatch_soak_mark_timestamp_seconds{soak=\"live\",mark=\"xcode build\",edge=\"start\"}",
                1_900_000_000.0,
            ),
            (
                "boltwatch_soak_mark_timestamp_seconds{soak=\"live\",mark=\"xcode build\",edge=\"end\"}",
                1_900_000_300.0,
            ),
        ],
    );
    let show = c.json("/api/v1/soaks/live").await;
    assert_eq!(show["verdict"]["pass"], false);
    let (code, body) = c.post("/api/v1/soaks/live/stop", json!({})).await;
    assert_eq!(code, 200, "{body}");
    assert!(!c.metrics().await.contains("boltwatch_soak_info{"));
    let (code, _) = c.post("/api/v1/soaks/nope/stop", json!({})).await;
    assert_eq!(code, 404);
    c.stop().await;
}
