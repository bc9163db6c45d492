//! What the engine hands each stream thread and reads back from it: the
//! test's knobs ([`EngineConfig`]), the stream's counters ([`Shared`]) and
//! [`locked`], which reads them even after a thread panicked. Both the
//! engine and the stream loops take them from here.

use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard};

use super::super::iperf3::UdpReceiverStats;

/// Knobs shared by all streams of a test.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Bytes per write (TCP) or per datagram (UDP).
    pub block_size: usize,
    /// Target rate per sending stream in bits/s; 0 = as fast as possible.
    pub rate_bps: u64,
    /// UDP sequence numbers are 64-bit.
    pub udp_64bit: bool,
}

/// One stream's counters, written by its thread and read by the engine.
#[derive(Debug, Default)]
pub(super) struct Shared {
    /// Bytes sent (sender) or received (receiver).
    pub(super) bytes: AtomicU64,
    /// UDP datagrams sent.
    pub(super) packets: AtomicU64,
    /// UDP receiver bookkeeping, as last updated.
    pub(super) udp: Mutex<UdpReceiverStats>,
    /// The error that ended the stream early, if any.
    pub(super) error: Mutex<Option<String>>,
}

/// A poisoned lock still holds the figures: a panicking stream thread must
/// not hide them.
pub(super) fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
