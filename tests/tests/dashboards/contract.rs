//! The metric contract, in one place: every metric name any PromQL
//! expression of `dashboards/` (rules, alerts, rule tests, panels,
//! annotations, variables) may select, besides recording rules. A metric
//! a dashboard reads needs a line here (the rule and layout tests refuse a
//! name outside it), and a line here must name a declared family (the test
//! below): a name missing from the exposition empties a panel silently.

/// Every metric the product exposes (foundation, link truth, bandwidth
/// and soak marks), as agreed in the metric contract. Histograms are listed in
/// [`HISTOGRAMS`] instead.
pub const CONTRACT: &[&str] = &[
    // Foundation.
    "boltwatch_agent_up",
    "boltwatch_agent_info",
    "boltwatch_rtt_min_seconds",
    "boltwatch_rtt_p50_seconds",
    "boltwatch_rtt_p99_seconds",
    "boltwatch_rtt_max_seconds",
    "boltwatch_probe_sent_total",
    "boltwatch_probe_received_total",
    "boltwatch_probe_lost_total",
    "boltwatch_interface_receive_bytes_total",
    "boltwatch_interface_receive_packets_total",
    "boltwatch_interface_receive_errors_total",
    "boltwatch_interface_receive_drops_total",
    "boltwatch_interface_transmit_bytes_total",
    "boltwatch_interface_transmit_packets_total",
    "boltwatch_interface_transmit_errors_total",
    "boltwatch_interface_transmit_drops_total",
    "boltwatch_temperature_celsius",
    "boltwatch_records_received_total",
    "boltwatch_agent_malformed_packets_total",
    "boltwatch_agent_dropped_records_total",
    // Shown beside the malformed packets.
    "boltwatch_agent_stamp_refused_total",
    "boltwatch_ingest_malformed_connections_total",
    "boltwatch_ingest_errors_total",
    // Link truth.
    "boltwatch_link_up",
    "boltwatch_link_down_events_total",
    "boltwatch_outages_total",
    "boltwatch_outage_seconds_total",
    "boltwatch_path_ok",
    // What a failed path check saw (BoltwatchPathNotOk's text).
    "boltwatch_path_route_info",
    "boltwatch_link_speed_bytes_per_second",
    "boltwatch_link_info",
    "boltwatch_link_downshifted",
    "boltwatch_link_lanes",
    "boltwatch_link_lane_speed_bytes_per_second",
    "boltwatch_path_mtu_bytes",
    // The fabric under the link.
    "boltwatch_fabric_check_ok",
    "boltwatch_rdma_port_up",
    // The RDMA probe (opt-in, docs/rdma.md), beside STAMP per link; its
    // RTT histogram is not read: STAMP's buckets start at 10 µs, where a
    // few-µs round trip has only the first.
    "boltwatch_rdma_rtt_p50_seconds",
    "boltwatch_rdma_probe_sent_total",
    "boltwatch_rdma_probe_received_total",
    "boltwatch_rdma_probe_lost_total",
    "boltwatch_rdma_errors_total",
    "boltwatch_bridge_loop_suspected",
    "boltwatch_bridge_cycle",
    "boltwatch_link_mtu_mismatch",
    "boltwatch_thermal_throttled",
    "boltwatch_thermal_throttled_seconds_total",
    "boltwatch_thermal_pressure_level",
    "boltwatch_cpu_frequency_ratio",
    "boltwatch_service_up",
    "boltwatch_service_connect_seconds",
    "boltwatch_service_outages_total",
    "boltwatch_service_outage_seconds_total",
    // Bandwidth.
    "boltwatch_bandwidth_bytes_per_second",
    "boltwatch_bandwidth_expected_bytes_per_second",
    "boltwatch_bandwidth_last_test_timestamp_seconds",
    "boltwatch_bandwidth_last_test_throttled",
    "boltwatch_bandwidth_last_test_max_temperature_celsius",
    "boltwatch_bandwidth_last_test_max_pressure_level",
    "boltwatch_bandwidth_tests_total",
    "boltwatch_bandwidth_test_failures_total",
    "boltwatch_bandwidth_retransmits_total",
    "boltwatch_interface_throughput_bytes_per_second",
    // Soak runs: workload marks as dashboard annotations, the verdict so
    // far (BoltwatchSoakFailing, the running soaks row).
    "boltwatch_soak_mark_timestamp_seconds",
    // The `$soak` variable of the repeated running-soak row.
    "boltwatch_soak_info",
    "boltwatch_soak_pass",
    "boltwatch_soak_slo_pass",
    "boltwatch_soak_slo_worst_link_info",
    // The collector watched (issue 25).
    "boltwatch_store_filesystem_free_bytes",
    "boltwatch_remote_write_lag_seconds",
    "boltwatch_tls_certificate_expiry_timestamp_seconds",
    // The agents' spool backlog (BoltwatchAgentSpoolBacklog, its panel).
    "boltwatch_agent_spool_bytes",
    "boltwatch_agent_spool_oldest_record_timestamp_seconds",
];

/// Classic histograms of the contract: queried as `_bucket`, `_sum`, `_count`.
pub const HISTOGRAMS: &[&str] = &[
    "boltwatch_rtt_seconds",
    // Windows a bandwidth test overlapped; at rest = rtt_seconds minus it.
    "boltwatch_rtt_under_load_seconds",
    // The collector's commit timings (BoltwatchStoreCommitSlow).
    "boltwatch_store_commit_seconds",
];

/// Series Prometheus itself synthesises for every scrape target.
pub const PROMETHEUS_SERIES: &[&str] = &["up"];

/// Contract metrics the product exposes but no panel, rule or alert reads,
/// each with the reason. A name here must not be read anywhere (the list
/// cannot rot), and every other contract metric must be.
pub const NOT_CHARTED: &[(&str, &str)] = &[(
    "boltwatch_interface_throughput_bytes_per_second",
    "the collector's 1-second gauge, sampled once per scrape, shows one second in \
     five and disagrees with rate() of the byte counters, which the throughput \
     panel shows instead",
)];

/// Every contract metric is a declared family: it has a row in the metric
/// reference, `docs/metrics.md`, which the collector's tests hold to the
/// declarations (`collector/src/export/tests/exposition.rs`). So a name
/// here cannot outlive its family, and a panel cannot read a family that
/// was never declared.
#[test]
fn every_contract_metric_is_in_the_metric_reference() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md");
    let docs = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let missing: Vec<&str> = CONTRACT
        .iter()
        .chain(HISTOGRAMS)
        .copied()
        .filter(|m| !docs.contains(&format!("| `{m}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "contract metrics with no row in docs/metrics.md (no family declares them): {missing:?}"
    );
}
