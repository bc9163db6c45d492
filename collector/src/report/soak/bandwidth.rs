//! Bandwidth tests: each TCP test as the direction its data moved, and the
//! report's figures of a set of them.

use boltwatch_proto::v1::{BandwidthResult, Direction, Protocol};

use super::{mean, Bandwidth};

/// One TCP test, by the direction of its data.
#[derive(Debug, Clone)]
pub(super) struct Test {
    /// Sending node.
    pub from: String,
    /// Receiving node.
    pub to: String,
    /// Start, unix ns.
    pub t: u64,
    /// Throughput (None: failed).
    pub gbps: Option<f64>,
    /// Length, ns.
    pub ns: u64,
}

impl Test {
    /// The test `bw` that `node` recorded at `unix_ns`: an upload moves
    /// data node -> peer, a download peer -> node. UDP tests are not the
    /// report's (None).
    pub fn of(node: &str, bw: &BandwidthResult, unix_ns: u64) -> Option<Test> {
        if bw.protocol == Protocol::Udp as i32 {
            return None;
        }
        let (from, to) = if bw.direction == Direction::Download as i32 {
            (bw.peer.clone(), node.to_string())
        } else {
            (node.to_string(), bw.peer.clone())
        };
        let ok = bw.error.is_empty() && bw.bits_per_second > 0.0;
        Some(Test {
            from,
            to,
            t: if bw.start_unix_ns > 0 {
                bw.start_unix_ns
            } else {
                unix_ns
            },
            gbps: ok.then_some(bw.bits_per_second / 1e9),
            ns: bw.duration_ns,
        })
    }
}

/// Tests, failures and the successful tests' mean, worst and best.
pub(super) fn bandwidth<'a>(tests: impl Iterator<Item = &'a Test>) -> Bandwidth {
    let mut b = Bandwidth::default();
    let mut ok = Vec::new();
    for t in tests {
        b.tests += 1;
        match t.gbps {
            Some(g) => ok.push(g),
            None => b.failed += 1,
        }
    }
    b.mean_gbps = mean(&ok);
    b.worst_gbps = ok.iter().copied().reduce(f64::min);
    b.best_gbps = ok.iter().copied().reduce(f64::max);
    b
}
