//! The server's own figures, as iperf3 embeds them in its results.

use std::time::Duration;

use crate::bandwidth::client::bps;

/// Receiver-side intervals in iperf3's JSON shape (`intervals[].sum`).
pub(super) fn intervals_json(list: &[boltwatch_proto::v1::BandwidthInterval]) -> serde_json::Value {
    let ivs: Vec<serde_json::Value> = list
        .iter()
        .map(|iv| {
            let start = iv.offset_ns as f64 / 1e9;
            let secs = iv.duration_ns as f64 / 1e9;
            serde_json::json!({"sum": {
                "start": start,
                "end": start + secs,
                "seconds": secs,
                "bytes": iv.bytes,
                "bits_per_second": bps(iv.bytes, Duration::from_nanos(iv.duration_ns)),
                "sender": false,
            }})
        })
        .collect();
    serde_json::json!({ "intervals": ivs })
}
