//! Loops in the cabling, from the agents' `Hello`s over real gRPC: two
//! nodes joined by two Thunderbolt cables, both bridging both ports, are
//! a loop on `/metrics`; the same cables with one node's ports apart are
//! none; a far-end name too long to keep refuses the Hello.

use boltwatch_proto::v1::{Hello, Interface};

use crate::common::*;
use crate::support::*;

/// `node`'s Hello: ports `en1`, `en2` cabled to `other` (named as its
/// host name reads, `<other>.local`), in `bridge0` when `bridged`.
fn cabled(node: &str, boot: &str, other: &str, bridged: bool) -> Hello {
    let port = |name: &str| Interface {
        name: name.into(),
        kind: "thunderbolt".into(),
        remote_name: format!("{}.local", other.to_uppercase()),
        ..Default::default()
    };
    let mut h = hello(node, boot);
    h.interfaces = vec![port("en1"), port("en2")];
    if bridged {
        h.interfaces.push(Interface {
            name: "bridge0".into(),
            kind: "bridge".into(),
            members: vec!["en1".into(), "en2".into()],
            ..Default::default()
        });
    }
    h
}

fn cycle(body: &str, node: &str) -> Option<f64> {
    metric(
        body,
        &format!("boltwatch_bridge_cycle{{node=\"{node}\",interface=\"bridge0\"}}"),
    )
}

#[tokio::test]
async fn two_bridged_cables_are_a_loop_until_one_node_keeps_its_ports_apart() {
    let (_dir, c) = Collector::temp().await;
    let (_a, _) = c.agent_with(cabled("a", "a-1", "b", true)).await;
    let (b, _) = c.agent_with(cabled("b", "b-1", "a", true)).await;
    let body = c.metrics().await;
    assert_eq!(
        (cycle(&body, "a"), cycle(&body, "b")),
        (Some(1.0), Some(1.0)),
        "{body}"
    );
    promtool_clean(&body);

    // b's agent restarts with its ports apart: a's bridge closes no loop.
    drop(b);
    let (_b, _) = c.agent_with(cabled("b", "b-2", "a", false)).await;
    let body = c.metrics().await;
    assert_eq!(
        (cycle(&body, "a"), cycle(&body, "b")),
        (Some(0.0), None),
        "{body}"
    );
}

#[tokio::test]
async fn a_far_end_name_over_the_limit_refuses_the_hello() {
    let (_dir, c) = Collector::temp().await;
    let mut h = cabled("a", "a-1", "b", true);
    h.interfaces[0].remote_name = "x".repeat(100_000);
    let refused = Agent::open(c.grpc, h).await;
    let status = match refused {
        Err(s) => s,
        Ok(mut agent) => agent.next().await.expect_err("the Hello is refused"),
    };
    assert!(
        status.message().contains("interfaces.remote_name"),
        "{status:?}"
    );
}
