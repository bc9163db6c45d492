//! What the collector tests share beyond `common`: records by seq, a full
//! set of payloads for one node, and the promtool check.

use crate::common::*;

/// Agent-stats records of `node`'s boot `boot` with these seqs.
pub fn seqs(
    node: &str,
    boot: &str,
    range: impl IntoIterator<Item = u64>,
) -> Vec<boltwatch_proto::v1::Record> {
    range
        .into_iter()
        .map(|s| record(node, boot, s, agent_stats(s, 0)))
        .collect()
}

/// Both directions of a link: a probes b, b probes a.
pub async fn send_everything(agent: &mut Agent, node: &str, peer: &str) {
    let boot = format!("{node}-boot");
    let rtts = [40_000, 80_000, 85_000, 120_000, 9_000_000];
    let records = vec![
        record(node, &boot, 1, rtt(peer, 1_000, &rtts, 1)),
        record(node, &boot, 2, rtt(peer, 2_000, &rtts[..2], 0)),
        record(node, &boot, 3, counters("tb0", 1_000_000, true)),
        record(node, &boot, 4, thermal("cpu \"die\" 0", 47.5)),
        record(node, &boot, 5, link_event("tb0", true)),
        record(node, &boot, 6, agent_stats(2, 1)),
    ];
    assert_eq!(agent.send(records).await.unwrap(), [wm(&boot, 6)]);
}

/// The real `promtool check metrics` must find nothing in `body`; a
/// missing promtool is a failure.
pub fn promtool_clean(body: &str) {
    if let Err(said) = boltwatch_common::testing::promtool_check(body) {
        panic!("promtool check metrics failed:\n{said}\n--- body ---\n{body}");
    }
}
