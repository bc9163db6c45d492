//! The worst case of every dashboard query over 72 hours of an 8-node full
//! mesh, in samples, against Prometheus' default `--query.max-samples`
//! (50,000,000; a query that loads more fails with "query processing would
//! load too many samples into memory").
//!
//! The bound of one query is the sum over its selectors of
//! `series × (2 × steps + window)`: `steps` is 1 for an instant query and,
//! for a range query, the panel's `maxDataPoints` (11,000 when unset, the
//! most points Prometheus returns per series); an aggregation or function
//! holds its input and its output for every step (hence 2 ×); `window` is
//! the samples one series has in a range selector (`range / interval + 1`),
//! where the interval is the scrape interval (5 s, dashboards/prometheus/
//! prometheus.yml) for a scraped series and the rule group's interval for
//! a recorded one. Prometheus loads a range selector's window one series
//! at a time, so counting every series' window at once over-counts: the
//! bound is safe.
//!
//! Cardinalities of an 8-node mesh are in [`series`]; dashboards/README.md
//! ("Query cost") shows the figures this test prints.

use std::collections::BTreeMap;

use boltwatch_tests::grafana::{queries, substitute, Vars};
use boltwatch_tests::promql::selectors;

use crate::files::{dashboard, dashboards, yaml};

/// Prometheus' default `--query.max-samples`.
const MAX_SAMPLES: u64 = 50_000_000;
/// The range the verdict is read over.
const RANGE_S: u64 = 72 * 3600;
/// The shipped scrape and rule evaluation interval.
const SCRAPE_S: u64 = 5;
/// Most points Prometheus returns per series of a range query.
const MAX_STEPS: u64 = 11_000;

const NODES: u64 = 8;
/// Interfaces per node: one per peer plus the bridge.
const INTERFACES: u64 = NODES;
/// Sensors per node: a Mac's SMC lists dozens.
const SENSORS: u64 = 64;
/// Services checked per peer.
const SERVICES: u64 = 4;
/// RTT histogram buckets: 2^(k/8) s from 10 µs to 5 s is 153 bounds, plus
/// +Inf; rounded up.
const LE: u64 = 160;
/// RDMA probe error classes (docs/rdma.md): port_down to watchdog_timeout.
const RDMA_CLASSES: u64 = 9;
/// Label values of small enumerations (record kinds, refusal reasons,
/// ingest error kinds, bandwidth direction × protocol).
const KINDS: u64 = 8;

/// Series of `name` in an 8-node full mesh.
fn series(name: &str) -> u64 {
    let links = NODES * (NODES - 1);
    let parts: Vec<&str> = name.split(':').collect();
    if parts.len() == 3 {
        return parts[0]
            .split('_')
            .map(|label| match label {
                "node" => NODES,
                "peer" => NODES - 1,
                "interface" => INTERFACES,
                "sensor" => SENSORS,
                "service" => SERVICES,
                "le" => LE,
                "direction" | "protocol" => 2,
                "device" => INTERFACES,
                "class" => RDMA_CLASSES,
                other => panic!("{name}: no cardinality for level {other}"),
            })
            .product();
    }
    let m = name;
    if m == "boltwatch_store_commit_seconds_bucket" {
        // One collector's 13 bounds and +Inf, per scraped collector.
        KINDS * 16
    } else if m.ends_with("_bucket") {
        links * LE
    } else if m.starts_with("boltwatch_service_") {
        links * SERVICES
    } else if m.starts_with("boltwatch_bandwidth_") {
        links * KINDS
    } else if [
        "boltwatch_rtt_",
        "boltwatch_probe_",
        "boltwatch_outage",
        "boltwatch_path_ok",
        "boltwatch_link_mtu_mismatch",
        "boltwatch_path_mtu_bytes",
    ]
    .iter()
    .any(|p| m.starts_with(p))
    {
        links
    } else if m.starts_with("boltwatch_interface_")
        || m.starts_with("boltwatch_link_")
        || m.starts_with("boltwatch_bridge_")
    {
        // Two directions of lanes per interface at most.
        NODES * INTERFACES * 2
    } else if m == "boltwatch_fabric_check_ok" {
        // Five checks of the node, four per interface (docs/fabric.md).
        NODES * (5 + 4 * INTERFACES)
    } else if m == "boltwatch_rdma_port_up" {
        NODES * INTERFACES
    } else if m == "boltwatch_rdma_errors_total" {
        // Every class on every device (one per interface).
        NODES * INTERFACES * RDMA_CLASSES
    } else if m.starts_with("boltwatch_rdma_") {
        links
    } else if m == "boltwatch_temperature_celsius" {
        NODES * SENSORS
    } else if m.starts_with("boltwatch_agent_") || m == "boltwatch_records_received_total" {
        NODES * KINDS
    } else if m.starts_with("boltwatch_thermal_") || m.starts_with("boltwatch_cpu_") {
        NODES
    } else if m.starts_with("boltwatch_ingest_")
        || m.starts_with("boltwatch_soak_")
        || m.starts_with("boltwatch_store_")
        || m.starts_with("boltwatch_remote_write_")
        || m.starts_with("boltwatch_tls_")
        || m == "up"
    {
        KINDS * 8
    } else {
        panic!("{m}: no cardinality for an 8-node mesh; add it to samples.rs")
    }
}

fn seconds(d: &str) -> u64 {
    let (n, unit) = d.split_at(d.len() - 1);
    let n: u64 = n.parse().unwrap_or_else(|_| panic!("duration {d}"));
    n * match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => panic!("duration {d}"),
    }
}

/// Each recording rule's evaluation interval, seconds.
fn rule_intervals() -> BTreeMap<String, u64> {
    let doc = yaml(&dashboards().join("prometheus/recording.yml"));
    let mut out = BTreeMap::new();
    for group in doc["groups"].as_array().expect("groups") {
        let every = group["interval"].as_str().map_or(SCRAPE_S, seconds);
        for rule in group["rules"].as_array().expect("rules") {
            if let Some(name) = rule["record"].as_str() {
                out.insert(name.to_string(), every);
            }
        }
    }
    out
}

/// The worst-case samples of `expr` (variables substituted) over `steps`.
fn bound(expr: &str, steps: u64, intervals: &BTreeMap<String, u64>) -> u64 {
    selectors(expr)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .map(|s| {
            let every = intervals.get(&s.name).copied().unwrap_or(SCRAPE_S);
            let window = s.range.as_deref().map_or(0, |r| seconds(r) / every + 1);
            series(&s.name) * (2 * steps + window)
        })
        .sum()
}

#[test]
fn every_72_hour_query_of_an_8_node_mesh_stays_under_max_samples() {
    let intervals = rule_intervals();
    let mut report = Vec::new();
    let mut over = Vec::new();
    for q in queries(&dashboard()) {
        let steps = if q.instant {
            1
        } else {
            q.max_data_points.unwrap_or(MAX_STEPS).min(MAX_STEPS)
        };
        // Grafana's step: the range over the points, at least a scrape.
        let step_s = RANGE_S.div_ceil(steps).max(SCRAPE_S);
        let expr = substitute(&q.expr, &Vars::all(RANGE_S, step_s, SCRAPE_S));
        let n = bound(&expr, steps, &intervals);
        report.push((n, format!("{} {}", q.panel, q.ref_id)));
        if n > MAX_SAMPLES {
            over.push(format!("{} {}: {n} samples: {expr}", q.panel, q.ref_id));
        }
    }
    report.sort();
    report.reverse();
    for (n, what) in report.iter().take(8) {
        println!("{n:>12} {what}");
    }
    assert!(
        over.is_empty(),
        "queries over query.max-samples ({MAX_SAMPLES}) at 72 h of an 8-node mesh:\n{}",
        over.join("\n")
    );
}

#[test]
fn the_bound_sees_why_raw_buckets_over_72_hours_fail() {
    // The verdict's p99 read from raw buckets would load 8960 series of
    // 51,841 samples each; from the once-a-minute rule, 4321 each.
    let intervals = rule_intervals();
    let raw = "histogram_quantile(0.99, sum by (cluster, node, peer, le) \
               (rate(boltwatch_rtt_seconds_bucket[259200s])))";
    assert_eq!(bound(raw, 1, &intervals), 8960 * (2 + 51_841));
    assert!(bound(raw, 1, &intervals) > MAX_SAMPLES);
    let recorded = "histogram_quantile(0.99, sum by (cluster, node, peer, le) \
                    (avg_over_time(node_peer_le:boltwatch_rtt_seconds_bucket:rate2m[259200s])))";
    assert_eq!(bound(recorded, 1, &intervals), 8960 * (2 + 4321));
    assert!(bound(recorded, 1, &intervals) < MAX_SAMPLES);
}
