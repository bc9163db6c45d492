//! Unit tests of the record domains, through [`RecordMetrics`]: records
//! in, exposition text out. One file per domain; the collector's tests
//! check its exposition as a whole.

use boltwatch_proto::histogram::sparse_buckets;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Record, RttSummary};

use crate::RecordMetrics as Metrics;

mod agent;
mod bandwidth;
mod link;
mod outage_service;
mod rtt;
mod thermal;

/// A record of `node`'s boot `boot`.
fn rec(node: &str, boot: &str, seq: u64, unix_ns: u64, payload: Payload) -> Record {
    Record {
        node: node.into(),
        boot_id: boot.into(),
        seq,
        unix_ns,
        payload: Some(payload),
    }
}

/// An RTT window to `peer` starting at `start` with the given replies (ns).
fn window(peer: &str, start: u64, rtts_ns: &[u64], lost: u64, under_load: bool) -> Payload {
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

/// The value of the sample whose name and labels are exactly `series`.
fn value(m: &Metrics, series: &str) -> Option<String> {
    sample(&m.render(), series)
}

/// [`value`] of rendered text.
fn sample(text: &str, series: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')
            .map(str::to_string)
    })
}
