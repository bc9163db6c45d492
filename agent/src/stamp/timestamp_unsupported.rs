//! Receive path for targets without kernel RX timestamps: plain
//! `recv_from`; the sender then stamps t4 in userspace and reports
//! `TIMESTAMP_SOURCE_USERSPACE`, and `SUPPORT` lists kernel timestamps as
//! unsupported so the agent says so at start. Binding to a device fails
//! with [`Unsupported`].
//!
//! Same functions, same signatures as `timestamp_linux.rs`.

use std::io;
use std::net::UdpSocket;

use boltwatch_proto::v1::TimestampClock;

use super::Received;
use crate::platform::{Source, Unsupported};

/// No kernel timestamps and no device binding here: probes fall back to
/// userspace stamps (and say so in `timestamp_source`).
pub(crate) const SUPPORT: crate::platform::Support = crate::platform::Support::Unsupported;

/// Kernel RX timestamps are not available on this target.
pub(crate) const KERNEL_RX_TIMESTAMPS: bool = false;

/// Every stamp is a userspace read.
pub(crate) const CLOCK: TimestampClock = TimestampClock::UserSpace;

/// Not known for `SystemTime` on this target.
pub(crate) fn clock_resolution_ns() -> u64 {
    0
}

/// Now on the probe clock: the agent's timeline.
pub(crate) fn now_ns() -> u64 {
    crate::clock::now_ns()
}

/// Nothing to enable.
pub(crate) fn enable_rx_metadata(_sock: &UdpSocket) -> io::Result<()> {
    Ok(())
}

/// Not available on this target: t1 stays a userspace read.
pub(crate) fn enable_tx_timestamps(_sock: &UdpSocket) -> bool {
    false
}

/// Never called when [`enable_tx_timestamps`] returned false.
pub(crate) fn read_tx_timestamps(_sock: &UdpSocket, _out: &mut Vec<(u32, u64, u64)>) {}

/// Receives one datagram; no kernel timestamp, no TTL.
pub(crate) fn recv(sock: &UdpSocket, buf: &mut [u8], nonblocking: bool) -> io::Result<Received> {
    sock.set_nonblocking(nonblocking)?;
    let (len, from) = sock.recv_from(buf)?;
    Ok(Received {
        len,
        from: Some(from),
        kernel_rx_unix_ns: None,
        ttl: None,
    })
}

/// Not supported on this target.
pub(crate) fn bind_device<S>(_sock: &S, _device: &str, _v6: bool) -> io::Result<()> {
    Err(Unsupported::new(Source::KernelTimestamps).into())
}

/// Not supported on this target: datagrams may leave in fragments.
pub(crate) fn set_dont_fragment(_sock: &UdpSocket, _v6: bool) -> io::Result<()> {
    Err(Unsupported::new(Source::KernelTimestamps).into())
}

/// No way to raise a thread's priority is known here.
pub(crate) fn prioritize_current_thread() -> io::Result<()> {
    Err(Unsupported::new(Source::KernelTimestamps).into())
}
