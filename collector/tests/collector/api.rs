//! The JSON API: nodes with their boots and gaps.

use crate::common::*;
use crate::support::*;

#[tokio::test]
async fn nodes_api_reports_gaps() {
    let (_dir, c) = Collector::temp().await;
    let (mut a, _) = c.agent("a", "ba").await;
    assert_eq!(a.send(seqs("a", "ba", 1..=4)).await.unwrap(), [wm("ba", 4)]);
    let (mut g, _) = c.agent("g", "bg").await;
    assert_eq!(
        g.send(seqs("g", "bg", [1, 2, 5])).await.unwrap(),
        [wm("bg", 5)]
    );

    let v = c.json("/api/v1/nodes").await;
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{v}");
    assert_eq!(nodes[0]["node"], "a");
    assert_eq!(nodes[0]["connected"], true);
    assert!(nodes[0]["last_seen_unix_ns"].as_u64().unwrap() > 0);
    let ba = &nodes[0]["boots"][0];
    assert_eq!(
        (
            ba["boot_id"].as_str(),
            ba["records"].as_u64(),
            ba["highest_seq"].as_u64(),
            ba["gaps"].as_u64()
        ),
        (Some("ba"), Some(4), Some(4), Some(0))
    );
    let bg = &nodes[1]["boots"][0];
    assert_eq!(
        (
            bg["records"].as_u64(),
            bg["highest_seq"].as_u64(),
            bg["gaps"].as_u64()
        ),
        (Some(3), Some(5), Some(2))
    );

    // Filling the gap closes it.
    assert_eq!(
        g.send(seqs("g", "bg", [3, 4])).await.unwrap(),
        [wm("bg", 5)]
    );
    let v = c.json("/api/v1/nodes").await;
    assert_eq!(v["nodes"][1]["boots"][0]["gaps"], 0);
    drop((a, g));
    c.stop().await;
}
