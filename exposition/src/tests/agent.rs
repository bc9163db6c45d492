//! The agent's own counters and info.

use super::*;
use boltwatch_proto::v1::AgentStats;

use agent_info as info;

#[test]
fn agent_stats_sum_the_newest_reading_of_each_boot() {
    let mut m = Metrics::new();
    let stats = |malformed, dropped| {
        Payload::AgentStats(AgentStats {
            malformed_packets: malformed,
            dropped_records: dropped,
            ..Default::default()
        })
    };
    m.apply_record(&rec("a", "boot1", 1, 1, stats(3, 1)));
    m.apply_record(&rec("a", "boot1", 5, 5, stats(7, 2)));
    // Replayed older record of boot1 must not lower it.
    m.apply_record(&rec("a", "boot1", 3, 3, stats(5, 1)));
    m.apply_record(&rec("a", "boot2", 1, 9, stats(4, 0)));
    let malformed = "boltwatch_agent_malformed_packets_total{node=\"a\"}";
    assert_eq!(value(&m, malformed).as_deref(), Some("11"));
    let dropped = "boltwatch_agent_dropped_records_total{node=\"a\"}";
    assert_eq!(value(&m, dropped).as_deref(), Some("2"));
}

#[test]
fn a_known_node_has_its_counters_at_zero_and_keeps_its_info() {
    let mut m = Metrics::new();
    m.on_node("c", Some(info("0.0.9", "old")));
    m.on_node("c", None);
    m.on_node("d", None);
    let text = m.render();
    for node in ["c", "d"] {
        let dropped = format!("boltwatch_agent_dropped_records_total{{node=\"{node}\"}}");
        assert_eq!(sample(&text, &dropped).as_deref(), Some("0"), "{text}");
    }
    assert!(
        text.contains("boltwatch_agent_info{node=\"c\",version=\"0.0.9\",os=\"linux 6.1\"} 1\n")
    );
    assert!(!text.contains("boltwatch_agent_info{node=\"d\""));
    m.on_node("c", Some(info("0.1.0", "new")));
    let text = m.render();
    // One series per node: a restart does not add one.
    assert_eq!(text.matches("boltwatch_agent_info{").count(), 1, "{text}");
    assert!(text.contains("boltwatch_agent_info{node=\"c\",version=\"0.1.0\""));
}

#[test]
fn the_spool_is_what_the_newest_reading_says_whatever_the_boot() {
    const S: u64 = 1_000_000_000;
    let mut m = Metrics::new();
    let spool = |bytes, oldest_s: u64| {
        Payload::AgentStats(AgentStats {
            spool_bytes: bytes,
            spool_oldest_unacked_unix_ns: oldest_s * S,
            ..Default::default()
        })
    };
    let bytes = "boltwatch_agent_spool_bytes{node=\"a\"}";
    let oldest = "boltwatch_agent_spool_oldest_record_timestamp_seconds{node=\"a\"}";
    assert_eq!(value(&m, bytes), None);
    m.apply_record(&rec("a", "boot1", 1, 100 * S, spool(4096, 40)));
    assert_eq!(value(&m, bytes).as_deref(), Some("4096"));
    assert_eq!(value(&m, oldest).as_deref(), Some("40"));
    // A newer boot's reading wins; a replayed older one does not.
    m.apply_record(&rec("a", "boot2", 1, 300 * S, spool(8192, 40)));
    m.apply_record(&rec("a", "boot1", 2, 200 * S, spool(1, 1)));
    assert_eq!(value(&m, bytes).as_deref(), Some("8192"));
    // Nothing waiting: the reading's own time, an age of 0.
    m.apply_record(&rec("a", "boot2", 2, 310 * S, spool(8192, 0)));
    assert_eq!(value(&m, oldest).as_deref(), Some("310"));
}

#[test]
fn a_node_gone_for_good_loses_its_spool_gauges() {
    let mut m = Metrics::new();
    let stats = Payload::AgentStats(AgentStats {
        spool_bytes: 10,
        ..Default::default()
    });
    m.apply_record(&rec("a", "boot1", 1, 1_000_000_000, stats));
    m.forget("a");
    assert_eq!(value(&m, "boltwatch_agent_spool_bytes{node=\"a\"}"), None);
}
