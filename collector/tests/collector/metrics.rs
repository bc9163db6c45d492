//! `/metrics`: two nodes' series pass promtool; a disconnected agent goes
//! stale; gzip on request.

use std::time::Duration;

use crate::common::*;
use crate::support::*;

#[tokio::test]
async fn metrics_cover_two_nodes_and_pass_promtool() {
    let (_dir, c) = Collector::temp().await;
    let (mut a, _) = c.agent("a", "a-boot").await;
    let (mut b, _) = c.agent("b", "b-boot").await;
    send_everything(&mut a, "a", "b").await;
    send_everything(&mut b, "b", "a").await;
    let body = c.metrics().await;

    for (node, peer) in [("a", "b"), ("b", "a")] {
        let np = format!("{{node=\"{node}\",peer=\"{peer}\"}}");
        let ni = format!("{{node=\"{node}\",interface=\"tb0\"}}");
        let n = format!("{{node=\"{node}\"}}");
        let expect = [
            (format!("boltwatch_agent_up{n}"), 1.0),
            (
                format!(
                    "boltwatch_agent_info{{node=\"{node}\",version=\"0.1.0\",os=\"linux 6.1.0\"}}"
                ),
                1.0,
            ),
            (format!("boltwatch_rtt_seconds_count{np}"), 7.0),
            (
                format!("boltwatch_rtt_seconds_sum{np}"),
                (9_325_000.0 + 120_000.0) / 1e9,
            ),
            (
                format!(
                    "boltwatch_rtt_seconds_bucket{{node=\"{node}\",peer=\"{peer}\",le=\"+Inf\"}}"
                ),
                7.0,
            ),
            (format!("boltwatch_rtt_min_seconds{np}"), 40e-6),
            (format!("boltwatch_rtt_p50_seconds{np}"), 80e-6),
            (format!("boltwatch_rtt_p99_seconds{np}"), 80e-6),
            (format!("boltwatch_rtt_max_seconds{np}"), 80e-6),
            (format!("boltwatch_probe_sent_total{np}"), 8.0),
            (format!("boltwatch_probe_received_total{np}"), 7.0),
            (format!("boltwatch_probe_lost_total{np}"), 1.0),
            (
                format!("boltwatch_interface_receive_bytes_total{ni}"),
                1_000_000.0,
            ),
            (
                format!("boltwatch_interface_transmit_bytes_total{ni}"),
                2_000_000.0,
            ),
            (
                format!("boltwatch_interface_receive_packets_total{ni}"),
                10.0,
            ),
            (
                format!("boltwatch_interface_transmit_packets_total{ni}"),
                20.0,
            ),
            (format!("boltwatch_interface_receive_errors_total{ni}"), 1.0),
            (
                format!("boltwatch_interface_transmit_errors_total{ni}"),
                2.0,
            ),
            (format!("boltwatch_interface_receive_drops_total{ni}"), 3.0),
            (format!("boltwatch_interface_transmit_drops_total{ni}"), 4.0),
            (format!("boltwatch_link_up{ni}"), 1.0),
            (
                format!(
                    "boltwatch_temperature_celsius{{node=\"{node}\",sensor=\"cpu \\\"die\\\" 0\"}}"
                ),
                47.5,
            ),
            (
                format!("boltwatch_records_received_total{{node=\"{node}\",kind=\"rtt\"}}"),
                2.0,
            ),
            (format!("boltwatch_records_duplicate_total{n}"), 0.0),
            (format!("boltwatch_agent_malformed_packets_total{n}"), 2.0),
            (format!("boltwatch_agent_dropped_records_total{n}"), 1.0),
        ];
        let expect: Vec<(&str, f64)> = expect.iter().map(|(s, v)| (s.as_str(), *v)).collect();
        expect_metrics(&body, &expect);
        // The classic buckets: 80 us falls in the first bound >= 80 us.
        let bounds = boltwatch_exposition::histogram::rtt_bounds();
        let le80 = bounds.iter().find(|b| **b >= 80e-6).unwrap();
        let series = format!(
            "boltwatch_rtt_seconds_bucket{{node=\"{node}\",peer=\"{peer}\",le=\"{le80}\"}}"
        );
        // Window 1 has 40, 80 and 85 us at or below it, window 2 has 40 and 80.
        assert!(*le80 >= 85e-6, "{le80}");
        assert_eq!(metric(&body, &series), Some(5.0), "{series}");
        assert_eq!(
            body.matches(&format!(
                "boltwatch_rtt_seconds_bucket{{node=\"{node}\",peer=\"{peer}\""
            ))
            .count(),
            bounds.len() + 1
        );
    }
    for name in [
        "boltwatch_ingest_malformed_connections_total",
        "boltwatch_ingest_errors_total{kind=\"no_hello\"}",
        "boltwatch_store_commit_seconds_count",
        "boltwatch_store_records",
        "boltwatch_collector_build_info{version=\"0.1.0\"}",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
    ] {
        assert!(metric(&body, name).is_some(), "missing {name}");
    }
    promtool_clean(&body);

    // Closing a's stream turns its agent_up to 0; the series stays.
    drop(a);
    let body = c.wait_metric("boltwatch_agent_up{node=\"a\"}", 0.0).await;
    assert_eq!(metric(&body, "boltwatch_agent_up{node=\"b\"}"), Some(1.0));
    let nodes = c.json("/api/v1/nodes").await;
    assert_eq!(nodes["nodes"][0]["connected"], false);
    assert_eq!(nodes["nodes"][1]["connected"], true);
    promtool_clean(&body);
    drop(b);
    c.stop().await;
}

#[tokio::test]
async fn a_disconnected_agent_goes_stale_and_metrics_are_gzipped_on_request() {
    let (_dir, c) = Collector::temp_with(|cfg| {
        cfg.stale_after = Duration::from_secs(1);
    })
    .await;
    let (mut a, _) = c.agent("a", "a-boot").await;
    let (mut b, _) = c.agent("b", "b-boot").await;
    send_everything(&mut a, "a", "b").await;
    send_everything(&mut b, "b", "a").await;
    let temp = |n: &str| {
        format!("boltwatch_temperature_celsius{{node=\"{n}\",sensor=\"cpu \\\"die\\\" 0\"}}")
    };
    let body = c.wait_metric(&temp("a"), 47.5).await;
    assert_eq!(metric(&body, &temp("b")), Some(47.5));

    // gzip when asked, the same exposition.
    let r = tokio::time::timeout(
        WAIT,
        reqwest::Client::new()
            .get(c.url("/metrics"))
            .header("accept-encoding", "gzip")
            .send(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    let gz = r.bytes().await.unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut text).unwrap();
    assert!(gz.len() * 3 < text.len(), "{} vs {}", gz.len(), text.len());
    assert_eq!(metric(&text, &temp("a")), Some(47.5));

    // a goes: its gauges leave after the grace (polled, bounded), b's and
    // a's counters stay.
    drop(a);
    let deadline = tokio::time::Instant::now() + WAIT;
    let body = loop {
        let body = c.metrics().await;
        if metric(&body, &temp("a")).is_none() {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a never went stale:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(metric(&body, "boltwatch_agent_up{node=\"a\"}"), Some(0.0));
    assert_eq!(metric(&body, &temp("b")), Some(47.5));
    assert!(metric(&body, "boltwatch_rtt_p50_seconds{node=\"a\",peer=\"b\"}").is_none());
    assert_eq!(
        metric(&body, "boltwatch_probe_sent_total{node=\"a\",peer=\"b\"}"),
        Some(8.0)
    );
    assert_eq!(
        metric(
            &body,
            "boltwatch_interface_receive_bytes_total{node=\"a\",interface=\"tb0\"}"
        ),
        Some(1_000_000.0)
    );
    promtool_clean(&body);
    drop(b);
    c.stop().await;
}
