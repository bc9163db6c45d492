//! The report's acceptance parts against the simulator's truth: a soak of
//! three nodes sent through the real gRPC ingest (a level shift on one
//! link, counter growth across an agent restart and a counter reset, an
//! MTU mismatch in the Hellos, agent load), the soak and its marks made
//! over the real HTTP API, the report written by the real binary.
//! Changepoints within the stated tolerance and none on the stationary
//! links; counter growth exact; the mismatch flagged and said in words.

mod cli;
mod common;
mod sim;

use cli::collector_cli_ok;
use common::Collector;
use serde_json::{json, Value};
use sim::{shift, Scenario, Truth, BW_EVERY, S};

/// 2026-11-30T00:00:00Z.
const T0: u64 = 1_795_996_800 * S;
const HOURS: u64 = 4;
/// The RTT changepoint tolerance: five minutes.
const RTT_TOLERANCE: u64 = 5 * 60 * S;

fn at(c: &Value) -> u64 {
    c["at_unix_ns"].as_u64().unwrap()
}

fn of<'a>(r: &'a Value, series: &str, node: &str, peer: &str) -> Vec<&'a Value> {
    r["changepoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["series"] == series && c["node"] == node && c["peer"] == peer)
        .collect()
}

/// The level shift is found at both edges, in RTT and bandwidth; no other
/// link's RTT shows a change; every bandwidth change sits at a truth edge.
fn check_changepoints(r: &Value, sc: &Scenario) {
    let s = sc.shift.as_ref().unwrap();
    let (b, c) = (sc.nodes[s.from].as_str(), sc.nodes[s.to].as_str());
    let rtt = of(r, "rtt_p50", b, c);
    assert_eq!(rtt.len(), 2, "{rtt:?}");
    assert!(at(rtt[0]).abs_diff(s.start) <= RTT_TOLERANCE, "{rtt:?}");
    assert!(at(rtt[1]).abs_diff(s.end) <= RTT_TOLERANCE, "{rtt:?}");
    let up = rtt[0]["relative_change_percent"].as_f64().unwrap();
    assert!((up - 30.0).abs() < 5.0, "{up}");
    // The shift begins with the NFS copy's mark.
    assert_eq!(rtt[0]["event"], "workload mark `NFS copy 200 GB` began");
    for i in 0..sc.nodes.len() {
        for j in (0..sc.nodes.len()).filter(|j| *j != i && (i, *j) != (s.from, s.to)) {
            let (x, y) = (&sc.nodes[i], &sc.nodes[j]);
            assert_eq!(of(r, "rtt_p50", x, y), Vec::<&Value>::new(), "{x} -> {y}");
        }
    }
    let bw = of(r, "bandwidth", b, c);
    let near = |t: u64| bw.iter().find(|c| at(c).abs_diff(t) <= BW_EVERY);
    let down = near(s.start).unwrap_or_else(|| panic!("no change at the start: {bw:?}"));
    let rel = down["relative_change_percent"].as_f64().unwrap();
    assert!((rel + 25.0).abs() < 5.0, "{rel}");
    assert!(near(s.end).is_some(), "no change at the end: {bw:?}");
    // Truth edges: the shift and each end's throttling (two test
    // intervals: a segment holds three tests at least).
    for cp in r["changepoints"].as_array().unwrap() {
        if cp["series"] != "bandwidth" {
            continue;
        }
        let ends = [cp["node"].as_str().unwrap(), cp["peer"].as_str().unwrap()];
        let mut edges = vec![s.start, s.end];
        for (n, a, z) in &sc.throttles {
            if ends.contains(&sc.nodes[*n].as_str()) {
                edges.extend([*a, *z]);
            }
        }
        assert!(
            edges.iter().any(|e| e.abs_diff(at(cp)) <= 2 * BW_EVERY),
            "false bandwidth change {cp}"
        );
    }
}

/// Counter growth per node and interface, exact, and its verdict line.
fn check_counters(r: &Value, truth: &Truth) {
    let got = r["counter_growth"].as_array().unwrap();
    assert_eq!(got.len(), truth.acceptance.growth.len());
    for g in got {
        let key = (
            g["node"].as_str().unwrap().to_string(),
            g["interface"].as_str().unwrap().to_string(),
        );
        let want = truth.acceptance.growth[&key];
        let c = &g["growth"];
        let have = [
            "receive_errors",
            "transmit_errors",
            "receive_drops",
            "transmit_drops",
            "carrier_changes",
        ]
        .map(|k| c[k].as_u64().unwrap());
        assert_eq!(have, want, "{key:?}");
    }
    let errors: u64 = truth.acceptance.growth.values().map(|g| g[0] + g[1]).sum();
    assert!(errors > 0);
    let line = r["verdict"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["key"] == "interface_errors")
        .unwrap();
    assert_eq!(line["measured"].as_f64(), Some(errors as f64));
    assert_eq!(
        (line["threshold"].as_f64(), &line["pass"]),
        (Some(0.0), &json!(false))
    );
}

/// The inventory lists every node and flags the one mismatched link.
fn check_inventory(r: &Value, truth: &Truth) {
    let inv = &r["inventory"];
    for n in inv["nodes"].as_array().unwrap() {
        assert_eq!(n["os"], "macOS 15.1 (24B83)");
        assert_eq!(n["agent_version"], "0.9.0");
        assert_eq!(n["interfaces"].as_array().unwrap().len(), 2);
    }
    let (a, c) = &truth.acceptance.mtu_mismatch;
    for l in inv["links"].as_array().unwrap() {
        if (&l["node"], &l["peer"]) == (&json!(a), &json!(c)) {
            assert_eq!(l["mismatches"], json!(["mtu"]));
            assert_eq!(l["node_end"]["mtu"], 9000);
            assert_eq!(l["peer_end"]["mtu"], 1500);
            let f = l["findings"][0].as_str().unwrap();
            assert!(
                f.starts_with(&format!(
                    "MTU mismatch: {a}'s tb2 has MTU 9000 and {c}'s tb0 has MTU 1500"
                )),
                "{f}"
            );
        } else {
            assert_eq!(l["mismatches"], json!([]), "{l}");
        }
    }
}

/// Agent CPU and memory as injected; the soak's tests ran inside marks.
fn check_overhead(r: &Value, truth: &Truth) {
    let o = &r["overhead"];
    for (i, a) in o["agents"].as_array().unwrap().iter().enumerate() {
        let cpu = a["cpu_percent"].as_f64().unwrap();
        assert!((cpu - shift::CPU_PERCENT).abs() < 1e-9, "{a}");
        assert_eq!(a["rss_max_bytes"], (30 + i as u64) << 20);
    }
    for l in o["links"].as_array().unwrap() {
        let key = (
            l["node"].as_str().unwrap().to_string(),
            l["peer"].as_str().unwrap().to_string(),
        );
        let t = &truth.links[&key];
        assert_eq!(l["probe_bytes"], t.probes * 86 * 2);
        assert_eq!(l["tests"], t.tests);
        assert_eq!(l["speed_gbps"], 80.0);
    }
    assert_eq!(o["disturbed"], true);
    assert!(
        o["sentence"].as_str().unwrap().contains("workload mark"),
        "{o}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acceptance_parts_reproduce_the_simulated_truth() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::start_with(dir.path(), |cfg| {
        cfg.max_records_per_second = 10_000_000;
    })
    .await;
    let mut sc = Scenario::standard(3, T0, HOURS * 3600 * S);
    sc.shift = Some(shift::standard(&sc));
    let truth = sim::run(&sc, c.grpc, 4000).await;
    assert_eq!(c.stored().await, truth.records);
    let (code, body) = c
        .post(
            "/api/v1/soaks",
            json!({"name": "sim", "start": T0 / S, "end": (T0 + sc.duration) / S, "nodes": sc.nodes}),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    for (at, until, text) in &sc.marks {
        let body = json!({"text": text, "at": at / S, "until": until.map(|u| u / S)});
        let (code, body) = c.post("/api/v1/soaks/sim/marks", body).await;
        assert_eq!(code, 201, "{body}");
    }
    let json = collector_cli_ok(&["report", "--soak", "sim", "--format", "json"], dir.path());
    let r: Value = serde_json::from_str(&json).unwrap();
    check_changepoints(&r, &sc);
    check_counters(&r, &truth);
    check_inventory(&r, &truth);
    check_overhead(&r, &truth);
    // The table says the same in words.
    let table = collector_cli_ok(&["report", "--soak", "sim"], dir.path());
    for want in [
        "changepoints (RTT level and bandwidth)",
        "workload mark `NFS copy 200 GB` began (+0 s)",
        "counter growth over the range",
        "MISMATCH: mtu",
        "MTU mismatch: mini-a's tb2 has MTU 9000 and mini-c's tb0 has MTU 1500",
        "probe overhead: agents. The soak disturbed the workload it judged",
        "interface errors grown",
    ] {
        assert!(table.contains(want), "{want} not in\n{table}");
    }
    // The page: each table real HTML, the shifted link's note under its
    // charts.
    let html = collector_cli_ok(&["report", "--soak", "sim", "--format", "html"], dir.path());
    for want in [
        "<p class=\"note changepoints\">Changepoints: RTT p50 +",
        "<h2>inventory: link ends side by side</h2><table>",
        "<td>MISMATCH: mtu</td>",
        "<h2>counter growth over the range</h2>",
    ] {
        assert!(html.contains(want), "{want} not in the page");
    }
    c.stop().await;
}
