//! Agent up and info as the collector feeds them (Hello, stream close,
//! the store); the agents' own counters are tested in the exposition crate.

use super::*;

use agent_info as info;

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
