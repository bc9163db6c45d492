//! The agent's own health counters, shared by every task and thread.
//!
//! They travel to the collector in `AgentStats` records, so a malformed
//! packet or a dropped record is counted where operators look (`/metrics`),
//! not only in a log line.

use std::sync::atomic::{AtomicU64, Ordering};

/// Cumulative counters since the agent started.
#[derive(Debug, Default)]
pub struct Health {
    /// STAMP packets dropped as malformed (too short, bad fields).
    pub malformed_packets: AtomicU64,
    /// STAMP packets the reflector answered.
    pub reflected_packets: AtomicU64,
    /// Datagrams the reflector refused as already reflected (octets 16-43
    /// not zero): what would otherwise start a reflector loop.
    pub stamp_refused_reflected: AtomicU64,
    /// Datagrams the reflector refused for coming from its own address.
    pub stamp_refused_own_address: AtomicU64,
    /// Datagrams the reflector refused over a source's rate limit.
    pub stamp_refused_rate_limited: AtomicU64,
    /// Records dropped: spool over its cap, or a failed spool write.
    pub dropped_records: AtomicU64,
    /// Connections made to the collector after the first.
    pub reconnects: AtomicU64,
    /// Records waiting for the collector's ack (in the spool).
    pub queued_records: AtomicU64,
    /// Bytes of the spool's segment files.
    pub spool_bytes: AtomicU64,
    /// When the oldest record waiting for the collector's ack was made,
    /// unix ns; 0 when none waits.
    pub spool_oldest_unacked_unix_ns: AtomicU64,
    /// Turns of the sampler's loop (it naps at most 100 ms between turns):
    /// the systemd watchdog's proof that the thread is not stuck in a read.
    pub sampler_turns: AtomicU64,
    /// RTT windows the STAMP senders closed, all peers together: the
    /// watchdog's proof that probing goes on.
    pub probe_windows: AtomicU64,
}

impl Health {
    /// Adds one to `counter`.
    pub fn incr(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads `counter`.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
