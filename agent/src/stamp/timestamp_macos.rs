//! macOS receive path: kernel RX timestamps from `SO_TIMESTAMP_CONTINUOUS`
//! (or, where the kernel refuses that private option,
//! `SO_TIMESTAMP_MONOTONIC`) read from `recvmsg` control messages;
//! `IP_BOUND_IF`/`IPV6_BOUND_IF` for pinning probes to an interface.
//!
//! Why not `SO_TIMESTAMP`: it is `microtime`, 1 us steps (Libc's
//! `CLOCK_REALTIME` is `gettimeofday` too), +-2 us on a 40-80 us RTT.
//! `SO_TIMESTAMP_CONTINUOUS` is `mach_continuous_time` taken at the same
//! point of the stack, 41.7 ns a tick on Apple silicon, and it is the clock
//! the agent's timeline runs on ([`crate::clock`]), so t2/t4 need no
//! conversion but the timebase and t1/t3 (userspace reads right before
//! `sendto`) are on the same clock: `t4 - t1` and `t3 - t2` are exact to a
//! tick through sleep and wall-clock steps. A `SO_TIMESTAMP_MONOTONIC`
//! stamp (`mach_absolute_time`, which stops in sleep) gets the time slept
//! so far added, read when the packet is handled.
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
pub(crate) const CLOCK: TimestampClock = TimestampClock::KernelContinuousMach;

/// One mach tick in ns, rounded up.
pub(crate) fn clock_resolution_ns() -> u64 {
    macos::timebase().resolution_ns()
}

/// Now on the probe clock: the agent's timeline.
pub(crate) fn now_ns() -> u64 {
    crate::clock::now_ns()
}

/// Asks the kernel for continuous (else monotonic) RX timestamps on `sock`.
pub(crate) fn enable_rx_metadata(sock: &UdpSocket) -> io::Result<()> {
    macos::enable_packet_stamps(sock.as_fd())
}

/// A kernel stamp on the timeline.
fn on_timeline(stamp: xnu::PacketTicks) -> u64 {
    let tb = macos::timebase();
    let continuous_ns = match stamp {
        xnu::PacketTicks::Continuous(t) => tb.ns(t),
        xnu::PacketTicks::Absolute(t) => {
            // The time slept so far: what mach_absolute_time lacks.
            let slept = tb
                .ns(macos::mach_continuous_ticks())
                .saturating_sub(tb.ns(macos::mach_ticks()));
            tb.ns(t).saturating_add(slept)
        }
    };
    crate::clock::clock().at(continuous_ns)
}

/// macOS has no SO_TIMESTAMPING: t1 stays a userspace read.
pub(crate) fn enable_tx_timestamps(_sock: &UdpSocket) -> bool {
    false
}

/// Never called when [`enable_tx_timestamps`] returned false.
pub(crate) fn read_tx_timestamps(_sock: &UdpSocket, _out: &mut Vec<(u32, u64, u64)>) {}

/// Receives one datagram with its metadata. `nonblocking` returns
/// `WouldBlock` at once when nothing is queued.
pub(crate) fn recv(sock: &UdpSocket, buf: &mut [u8], nonblocking: bool) -> io::Result<Received> {
    let cmsg = nix::cmsg_space!(u64);
    recv_with(sock, buf, cmsg, nonblocking, |c, out| {
        // nix knows neither stamp on Apple targets.
        if let ControlMessageOwned::Unknown(u) = c {
            let h = &u.cmsg_header;
            if let Some(stamp) = xnu::packet_ticks(h.cmsg_level, h.cmsg_type, &u.data_bytes) {
                out.kernel_rx_unix_ns = Some(on_timeline(stamp));
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

/// Don't fragment (`IP_DONTFRAG` / `IPV6_DONTFRAG`): a datagram larger
/// than the interface MTU fails with `EMSGSIZE` instead of leaving in
/// fragments. The reflector's replies and the path MTU probes use it.
pub(crate) fn set_dont_fragment(sock: &UdpSocket, v6: bool) -> io::Result<()> {
    macos::set_dont_fragment(sock.as_fd(), v6)
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
