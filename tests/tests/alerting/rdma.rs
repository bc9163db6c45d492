//! The RDMA probe's alerts in the shared stack. No RDMA device runs here,
//! so a stand-in ([`boltwatch_tests::rdma_feed`]) streams node `rdma`'s
//! windows to the collector over its real gRPC ingest: a port that wedged
//! before the first window and wedges again a little later (reset, agent
//! restarted: the collector's count goes from 1 to 2), and a probed link
//! that loses one ping in eight, with CRC mismatches and sequence gaps.
//! The wedge pages; the loss and the corruption go to chat.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use boltwatch_tests::rdma_feed::{Feed, Link, RdmaFeed};

use super::stack::{Delivered, Stack, CHAT, PAGER};

/// The stand-in's node: no real agent has this name.
pub const NODE: &str = "rdma";
const WEDGED: &str = "BoltwatchRdmaPortWedged";
const LOSS: &str = "BoltwatchRdmaProbeLoss";
const CORRUPTION: &str = "BoltwatchRdmaCorruption";

fn link(interface: &str, device: &str) -> Link {
    Link {
        peer: "rdma-peer".into(),
        interface: interface.into(),
        device: device.into(),
    }
}

/// Starts the stand-in and waits for the page and the two chat alerts;
/// returns the stand-in still streaming (stopped, its node would page
/// agent-down).
pub fn wedged_port_pages_and_corruption_goes_to_chat(stack: &Stack, dir: &Path) -> RdmaFeed {
    let feed = RdmaFeed::start(
        &stack.collector.grpc_url(),
        &dir.join("spool-rdma"),
        Feed {
            node: NODE.into(),
            probed: link("en1", "rdma_en1"),
            wedged: link("en2", "rdma_en2"),
            every: Duration::from_secs(1),
            // Prometheus scrapes every second: the first count is in its
            // series long before.
            wedge_again_after: Some(20),
        },
    );
    stack.wait("the wedged port paged", |x| {
        x.is("firing", WEDGED, NODE) && x.receiver == PAGER && x.label("device") == "rdma_en2"
    });
    stack.wait("RDMA corruption to chat", |x| {
        x.is("firing", CORRUPTION, NODE) && x.receiver == CHAT && x.label("device") == "rdma_en1"
    });
    stack.wait("RDMA loss to chat", |x| {
        x.is("firing", LOSS, NODE) && x.receiver == CHAT && x.label("peer") == "rdma-peer"
    });
    feed
}

/// What the stand-in's node may have sent: one page, the wedge of its
/// wedged port (re-sends of it are the same alert), and to chat the loss
/// and the corruption, nothing else. Returns what is wrong.
pub fn one_page_for_the_wedge(all: &[Delivered]) -> Vec<String> {
    let fired = |receiver: &str| -> BTreeSet<(String, String)> {
        all.iter()
            .filter(|x| x.receiver == receiver && x.status == "firing" && x.label("node") == NODE)
            .map(|x| (x.label("alertname").to_string(), x.labels.to_string()))
            .collect()
    };
    let names = |receiver: &str| -> BTreeSet<String> {
        fired(receiver).into_iter().map(|(name, _)| name).collect()
    };
    let mut wrong = Vec::new();
    let pages = fired(PAGER);
    if pages.len() != 1 || names(PAGER) != BTreeSet::from([WEDGED.to_string()]) {
        wrong.push(format!("rdma: pages {pages:#?}, want one {WEDGED}"));
    }
    let chat = BTreeSet::from([LOSS.to_string(), CORRUPTION.to_string()]);
    if names(CHAT) != chat {
        wrong.push(format!("rdma: to chat {:?}, want {chat:?}", names(CHAT)));
    }
    wrong
}
