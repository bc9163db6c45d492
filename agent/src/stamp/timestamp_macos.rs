//! macOS receive path: kernel RX timestamps from `SO_TIMESTAMP_MONOTONIC`
//! read from `recvmsg` control messages; `IP_BOUND_IF`/`IPV6_BOUND_IF` for
//! pinning probes to an interface.
//!
//! Why not `SO_TIMESTAMP`: it is `microtime`, 1 us steps (Libc's
//! `CLOCK_REALTIME` is `gettimeofday` too), +-2 us on a 40-80 us RTT.
//! `SO_TIMESTAMP_MONOTONIC` is `mach_absolute_time` taken at the same point
//! of the stack, 41.7 ns a tick on Apple silicon. So every stamp here, t1
//! and t3 (userspace reads right before `sendto`) as well as t2 and t4
//! (kernel RX), is mach ticks converted through one realtime anchor taken
//! at agent start ([`crate::platform::macos::mach_anchor`]): `t4 - t1` and
//! `t3 - t2` are both on the monotonic clock and exact to a tick. The
//! packets' absolute times (and the RTT windows') drift from NTP time by
//! the host's clock error (ppm) over the agent's life, which STAMP's RTT
//! does not use; a realtime step after agent start (a clock set at boot
//! after launchd started the agent) shifts them by the step until the
//! agent restarts, and leaves the RTTs exact.
//!
//! nix has no `IP_RECVTTL` for Apple targets, so the TTL is not reported
//! and the reflector writes 255.
//!
//! Same functions, same signatures as `timestamp_linux.rs`.

use std::io;
use std::net::UdpSocket;
use std::num::NonZeroU32;
use std::os::fd::AsFd;

use boltwatch_proto::v1::TimestampClock;
use nix::sys::socket::ControlMessageOwned;

use super::recvmsg::recv_with;
use super::Received;
use crate::platform::{macos, xnu};

/// Kernel RX timestamps and device binding work on macOS.
pub(crate) const SUPPORT: crate::platform::Support = crate::platform::Support::Supported;

/// Kernel RX timestamps are available on this OS.
pub(crate) const KERNEL_RX_TIMESTAMPS: bool = true;

/// The clock every probe timestamp here is read from.
pub(crate) const CLOCK: TimestampClock = TimestampClock::KernelMonotonicMach;

/// One mach tick in ns, rounded up.
pub(crate) fn clock_resolution_ns() -> u64 {
    macos::mach_anchor().resolution_ns()
}

/// Now on the probe clock: mach ticks through the anchor, unix ns.
pub(crate) fn now_ns() -> u64 {
    macos::mach_anchor().unix_ns_at(macos::mach_ticks())
}

/// Asks the kernel for monotonic RX timestamps on `sock`.
pub(crate) fn enable_rx_metadata(sock: &UdpSocket) -> io::Result<()> {
    macos::enable_timestamp_monotonic(sock.as_fd())
}

/// macOS has no SO_TIMESTAMPING: t1 stays a userspace read.
pub(crate) fn enable_tx_timestamps(_sock: &UdpSocket) -> bool {
    false
}

/// Never called when [`enable_tx_timestamps`] returned false.
pub(crate) fn read_tx_timestamps(_sock: &UdpSocket, _out: &mut Vec<(u32, u64)>) {}

/// Receives one datagram with its metadata. `nonblocking` returns
/// `WouldBlock` at once when nothing is queued.
pub(crate) fn recv(sock: &UdpSocket, buf: &mut [u8], nonblocking: bool) -> io::Result<Received> {
    let cmsg = nix::cmsg_space!(u64);
    recv_with(sock, buf, cmsg, nonblocking, |c, out| {
        // nix does not know SCM_TIMESTAMP_MONOTONIC on Apple targets.
        if let ControlMessageOwned::Unknown(u) = c {
            let h = &u.cmsg_header;
            if let Some(ticks) = xnu::monotonic_ticks(h.cmsg_level, h.cmsg_type, &u.data_bytes) {
                out.kernel_rx_unix_ns = Some(macos::mach_anchor().unix_ns_at(ticks));
            }
        }
    })
}

/// `IP_BOUND_IF` / `IPV6_BOUND_IF`: probes leave through `device`.
pub(crate) fn bind_device<S: std::os::fd::AsFd>(
    sock: &S,
    device: &str,
    v6: bool,
) -> io::Result<()> {
    let index = nix::net::if_::if_nametoindex(device).map_err(io::Error::from)?;
    let index = NonZeroU32::new(index);
    let s = socket2::SockRef::from(sock);
    if v6 {
        s.bind_device_by_index_v6(index)
    } else {
        s.bind_device_by_index_v4(index)
    }
}

/// Puts the calling thread in the user-interactive QoS class, so probe
/// threads run on P-cores and ahead of background work rather than
/// waiting behind it (the macOS counterpart of Linux's nice -10).
#[allow(unsafe_code)]
pub(crate) fn prioritize_current_thread() -> io::Result<()> {
    // SAFETY: sets only the calling thread's own QoS class; no pointers.
    let rc = unsafe {
        libc::pthread_set_qos_class_self_np(libc::qos_class_t::QOS_CLASS_USER_INTERACTIVE, 0)
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}
