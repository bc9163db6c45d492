//! Turning a finished test into records: our results document for the
//! peer, and one `BandwidthResult` per direction from both sides' counts.

use std::time::Duration;

use boltwatch_proto::v1::{BandwidthInterval, BandwidthResult, Direction, Protocol};

use super::super::engine::Finished;
use super::super::iperf3::{Results, StreamResult};

/// Bits per second over `dur`.
pub fn bps(bytes: u64, dur: Duration) -> f64 {
    let s = dur.as_secs_f64();
    if s > 0.0 {
        bytes as f64 * 8.0 / s
    } else {
        0.0
    }
}

/// The intervals this side sampled during a test, per direction.
#[derive(Debug, Default)]
pub(crate) struct Sampled {
    /// Of data this side sent.
    pub up: Vec<BandwidthInterval>,
    /// Of data this side received.
    pub down: Vec<BandwidthInterval>,
}

/// What this side measured: the engine's totals and the intervals it
/// sampled, per direction.
#[derive(Debug)]
pub(crate) struct Measured {
    /// The engine's totals at the stop.
    pub fin: Finished,
    /// The intervals.
    pub sampled: Sampled,
}

/// Our side's results document, shaped as iperf3 shapes it.
pub(crate) fn our_results(fin: &Finished) -> Results {
    let has_tcp_sender = fin.streams.iter().any(|s| s.count.sender && !s.udp);
    let any_sender = fin.streams.iter().any(|s| s.count.sender);
    let sender_has_retransmits =
        if has_tcp_sender && cfg!(any(target_os = "linux", target_os = "macos")) {
            1
        } else if any_sender {
            0
        } else {
            -1
        };
    Results {
        cpu_util_total: fin.cpu_percent,
        cpu_util_user: fin.cpu_user_percent,
        cpu_util_system: fin.cpu_system_percent,
        sender_has_retransmits,
        congestion_used: None,
        streams: fin
            .streams
            .iter()
            .map(|s| StreamResult {
                id: s.count.id,
                bytes: s.count.bytes,
                retransmits: if s.count.sender && !s.udp {
                    s.count.retransmits as i64
                } else {
                    -1
                },
                jitter: if s.count.sender {
                    0.0
                } else {
                    s.udp_stats.jitter
                },
                errors: if s.count.sender {
                    0
                } else {
                    s.udp_stats.lost as i64
                },
                packets: if s.count.sender {
                    s.packets_sent as i64
                } else {
                    s.udp_stats.highest as i64
                },
                start_time: 0.0,
                end_time: fin.elapsed.as_secs_f64(),
            })
            .collect(),
        server_output_json: None,
        server_output_text: None,
    }
}

/// Receiver-side intervals from our own server's `server_output_json`
/// (`intervals[].sum` with `sender: false`); None from a stock server.
pub(crate) fn receiver_intervals(peer: &Results) -> Option<Vec<BandwidthInterval>> {
    let list = peer
        .server_output_json
        .as_ref()?
        .get("intervals")?
        .as_array()?;
    let mut out = Vec::with_capacity(list.len());
    for iv in list {
        let sum = iv.get("sum")?;
        if sum.get("sender").and_then(|v| v.as_bool()) != Some(false) {
            return None;
        }
        let start = sum.get("start")?.as_f64()?;
        let secs = sum.get("seconds")?.as_f64()?;
        let bytes = sum.get("bytes")?.as_u64()?;
        let dur = Duration::from_secs_f64(secs.max(0.0));
        out.push(BandwidthInterval {
            offset_ns: (start.max(0.0) * 1e9) as u64,
            duration_ns: dur.as_nanos() as u64,
            bytes,
            bits_per_second: bps(bytes, dur),
            retransmits: 0,
        });
    }
    Some(out)
}

/// One record per direction, from `template` (peer, address, interface,
/// protocol, streams, start), what we measured and the peer's results.
pub(crate) fn build_results(
    template: &BandwidthResult,
    measured: &Measured,
    peer: &Results,
) -> Vec<BandwidthResult> {
    let Measured {
        fin,
        sampled: Sampled { up, down },
    } = measured;
    let udp = template.protocol == Protocol::Udp as i32;
    let peer_by_id = |id: i64| peer.streams.iter().find(|s| s.id == id);
    let mut out = Vec::new();
    for sender in [true, false] {
        let ours: Vec<_> = fin
            .streams
            .iter()
            .filter(|s| s.count.sender == sender)
            .collect();
        if ours.is_empty() {
            continue;
        }
        let mut r = BandwidthResult {
            direction: if sender {
                Direction::Upload
            } else {
                Direction::Download
            } as i32,
            duration_ns: fin.elapsed.as_nanos() as u64,
            cpu_percent: fin.cpu_percent,
            ..template.clone()
        };
        let mut missing = Vec::new();
        let mut jitter_sum = 0.0;
        for s in &ours {
            let p = peer_by_id(s.count.id);
            if p.is_none() {
                missing.push(s.count.id);
            }
            if sender {
                // The peer received: its count is the truth.
                let p = p.cloned().unwrap_or_default();
                r.bytes += p.bytes;
                r.retransmits += s.count.retransmits;
                if udp {
                    let lost = p.errors.max(0) as u64;
                    r.udp_lost += lost;
                    r.udp_packets += (p.packets.max(0) as u64).saturating_sub(lost);
                    jitter_sum += p.jitter;
                }
            } else {
                r.bytes += s.count.bytes;
                if let Some(p) = p {
                    r.retransmits += p.retransmits.max(0) as u64;
                }
                if udp {
                    r.udp_lost += s.udp_stats.lost;
                    r.udp_packets += s.udp_stats.received;
                    jitter_sum += s.udp_stats.jitter;
                }
            }
        }
        if udp {
            r.udp_jitter_seconds = jitter_sum / ours.len() as f64;
        }
        r.bits_per_second = bps(r.bytes, fin.elapsed);
        r.intervals = if sender {
            receiver_intervals(peer).unwrap_or(up.clone())
        } else {
            down.clone()
        };
        if !missing.is_empty() {
            r.error = format!("peer results lack stream ids {missing:?}");
        } else if let Some(e) = ours.iter().find_map(|s| s.error.clone()) {
            r.error = format!("stream ended early: {e}");
        }
        out.push(r);
    }
    out
}
