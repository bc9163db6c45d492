//! A disconnected agent's gauges leave after the grace period; its
//! counters and `boltwatch_agent_up` 0 stay.

use std::time::{Duration, Instant};

use super::*;
use boltwatch_exposition::agent::AgentInfo;
use boltwatch_proto::v1::{
    BandwidthResult, Direction, ServiceCheck, TemperatureSensor, ThermalReading, Throttle,
};

fn info() -> AgentInfo {
    AgentInfo {
        version: "1".into(),
        os: "linux".into(),
        boot_id: "b".into(),
    }
}

#[test]
fn gauges_of_a_disconnected_agent_go_after_the_grace_counters_stay() {
    let mut m = Metrics::new();
    m.set_stale_after(Duration::from_secs(60));
    m.on_hello("a", info(), &[]);
    m.on_hello("c", info(), &[]);
    for node in ["a", "c"] {
        let thermal = Payload::Thermal(ThermalReading {
            sensors: vec![TemperatureSensor {
                name: "cpu".into(),
                celsius: 90.0,
                ..Default::default()
            }],
            throttle: Some(Throttle {
                throttled: true,
                ..Default::default()
            }),
        });
        let bw = Payload::Bandwidth(BandwidthResult {
            peer: "p".into(),
            direction: Direction::Upload as i32,
            start_unix_ns: 5,
            bits_per_second: 8e9,
            ..Default::default()
        });
        let svc = Payload::Service(ServiceCheck {
            peer: "p".into(),
            service: "ssh".into(),
            up: true,
            connect_ns: 1000,
            ..Default::default()
        });
        let records = [thermal, bw, svc, window("p", 1, &[50_000], 0, false)];
        for (seq, p) in (1..).zip(records) {
            m.apply_record(&rec(node, "b", seq, seq, p));
        }
    }
    let gauges = |node: &str| {
        [
            format!("boltwatch_temperature_celsius{{node=\"{node}\",sensor=\"cpu\"}}"),
            format!("boltwatch_thermal_throttled{{node=\"{node}\"}}"),
            format!("boltwatch_bandwidth_bytes_per_second{{node=\"{node}\",peer=\"p\",direction=\"transmit\",protocol=\"unspecified\"}}"),
            format!("boltwatch_service_up{{node=\"{node}\",peer=\"p\",service=\"ssh\"}}"),
            format!("boltwatch_rtt_p50_seconds{{node=\"{node}\",peer=\"p\"}}"),
        ]
    };
    let t0 = Instant::now();
    m.on_stream_closed("a");
    m.sweep(t0);
    m.sweep(t0 + Duration::from_secs(59));
    for g in gauges("a") {
        assert!(value(&m, &g).is_some(), "{g} went before the grace");
    }
    m.sweep(t0 + Duration::from_secs(60));
    for g in gauges("a") {
        assert_eq!(value(&m, &g), None, "{g} stayed");
    }
    for g in gauges("c") {
        assert!(value(&m, &g).is_some(), "connected {g} went");
    }
    for (series, want) in [
        ("boltwatch_agent_up{node=\"a\"}", "0"),
        (
            "boltwatch_bandwidth_tests_total{node=\"a\",peer=\"p\"}",
            "1",
        ),
        ("boltwatch_probe_sent_total{node=\"a\",peer=\"p\"}", "1"),
        ("boltwatch_rtt_seconds_count{node=\"a\",peer=\"p\"}", "1"),
    ] {
        assert_eq!(value(&m, series).as_deref(), Some(want), "{series}");
    }
    // Back: new readings show again.
    m.on_hello("a", info(), &[]);
    m.sweep(t0 + Duration::from_secs(61));
    let svc = Payload::Service(ServiceCheck {
        peer: "p".into(),
        service: "ssh".into(),
        up: false,
        ..Default::default()
    });
    m.apply_record(&rec("a", "b2", 1, 100, svc));
    assert_eq!(value(&m, &gauges("a")[3]).as_deref(), Some("0"));
}
