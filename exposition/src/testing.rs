//! Record and exposition fixtures for the tests of this crate and of the
//! collector's exporter, which wraps it: records built the way agents send
//! them, and one sample read back from rendered text.

use boltwatch_proto::histogram::sparse_buckets;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Record, RttSummary};

use crate::agent::AgentInfo;

/// A record of `node`'s boot `boot`.
pub fn rec(node: &str, boot: &str, seq: u64, unix_ns: u64, payload: Payload) -> Record {
    Record {
        node: node.into(),
        boot_id: boot.into(),
        seq,
        unix_ns,
        payload: Some(payload),
    }
}

/// An RTT window to `peer` starting at `start` with the given replies (ns).
pub fn window(peer: &str, start: u64, rtts_ns: &[u64], lost: u64, under_load: bool) -> Payload {
    let mut sorted = rtts_ns.to_vec();
    sorted.sort();
    Payload::Rtt(RttSummary {
        peer: peer.into(),
        window_start_unix_ns: start,
        sent: rtts_ns.len() as u64 + lost,
        received: rtts_ns.len() as u64,
        lost,
        min_ns: sorted.first().copied().unwrap_or(0),
        max_ns: sorted.last().copied().unwrap_or(0),
        p50_ns: sorted.get(sorted.len() / 2).copied().unwrap_or(0),
        p99_ns: sorted.last().copied().unwrap_or(0),
        sum_ns: rtts_ns.iter().sum(),
        buckets: sparse_buckets(rtts_ns.iter().copied()),
        under_load,
        ..Default::default()
    })
}

/// A Linux agent's info of boot `boot`.
pub fn agent_info(version: &str, boot: &str) -> AgentInfo {
    AgentInfo {
        version: version.into(),
        os: "linux 6.1".into(),
        boot_id: boot.into(),
    }
}

/// The value of the sample in `text` whose name and labels are exactly
/// `series`.
pub fn sample(text: &str, series: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')
            .map(str::to_string)
    })
}
