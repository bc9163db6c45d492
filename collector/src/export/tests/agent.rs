//! Agent up, info and the agents' own counters.

use super::*;
use crate::export::agent::AgentInfo;
use boltwatch_proto::v1::AgentStats;

fn info(version: &str, boot: &str) -> AgentInfo {
    AgentInfo {
        version: version.into(),
        os: "linux 6.1".into(),
        boot_id: boot.into(),
    }
}

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
fn agent_up_stays_as_zero_after_close_and_info_tracks_latest_boot() {
    let mut m = Metrics::new();
    m.on_hello("a", info("0.1.0", "b1"), &[]);
    m.on_stream_closed("a");
    m.on_hello("a", info("0.1.1", "b2"), &[]);
    assert!(m.connected("a"));
    m.on_stream_closed("a");
    assert!(!m.connected("a"));
    let text = m.render();
    assert_eq!(
        sample(&text, "boltwatch_agent_up{node=\"a\"}").as_deref(),
        Some("0")
    );
    assert!(
        text.contains("boltwatch_agent_info{node=\"a\",version=\"0.1.1\",os=\"linux 6.1\"} 1\n")
    );
    // One series per node: a restart does not add one.
    assert_eq!(text.matches("boltwatch_agent_info{").count(), 1, "{text}");
}

#[test]
fn known_nodes_keep_their_stored_info_until_a_hello() {
    let mut m = Metrics::new();
    m.on_known_node("c", Some(info("0.0.9", "old")));
    m.on_known_node("c", None);
    m.on_known_node("d", None);
    let text = m.render();
    assert_eq!(
        sample(&text, "boltwatch_agent_up{node=\"d\"}").as_deref(),
        Some("0")
    );
    assert!(text.contains("boltwatch_agent_info{node=\"c\",version=\"0.0.9\""));
    assert!(!text.contains("boltwatch_agent_info{node=\"d\""));
    m.on_commit("d", 3, 10, 0.001);
    let dup = "boltwatch_records_duplicate_total{node=\"d\"}";
    assert_eq!(value(&m, dup).as_deref(), Some("3"));
}
