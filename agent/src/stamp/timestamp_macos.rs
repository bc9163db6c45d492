//! macOS receive path: kernel RX timestamps from `SO_TIMESTAMP`
//! (CLOCK_REALTIME, microseconds) read from `recvmsg` control messages;
//! `IP_BOUND_IF`/`IPV6_BOUND_IF` for pinning probes to an interface.
//!
//! nix has no `IP_RECVTTL` for Apple targets, so the TTL is not reported
//! and the reflector writes 255. `SO_TIMESTAMP_MONOTONIC` (mach ticks) would
//! give finer stamps but on a different clock from the realtime t1/t3 the
//! packets carry, so the realtime stamp is used on both ends.
//!
//! Same functions, same signatures as `timestamp_linux.rs`.

use std::io;
use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::num::NonZeroU32;
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrLike, SockaddrStorage,
};

use super::Received;

/// Kernel RX timestamps and device binding work on macOS.
pub(crate) const SUPPORT: crate::platform::Support = crate::platform::Support::Supported;

/// Kernel RX timestamps are available on this OS.
pub(crate) const KERNEL_RX_TIMESTAMPS: bool = true;

/// Asks the kernel for RX timestamps on `sock`.
pub(crate) fn enable_rx_metadata(sock: &UdpSocket) -> io::Result<()> {
    setsockopt(sock, sockopt::ReceiveTimestamp, &true).map_err(io::Error::from)
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
    let mut iov = [IoSliceMut::new(buf)];
    let mut cmsg = nix::cmsg_space!(libc::timeval);
    let flags = if nonblocking {
        MsgFlags::MSG_DONTWAIT
    } else {
        MsgFlags::empty()
    };
    let msg = recvmsg::<SockaddrStorage>(sock.as_raw_fd(), &mut iov, Some(&mut cmsg), flags)
        .map_err(io::Error::from)?;
    let mut out = Received {
        len: msg.bytes,
        from: msg.address.as_ref().and_then(to_socket_addr),
        kernel_rx_unix_ns: None,
        ttl: None,
    };
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmTimestamp(tv) = c {
                let ns = tv.tv_sec() as i128 * 1_000_000_000 + tv.tv_usec() as i128 * 1_000;
                out.kernel_rx_unix_ns = u64::try_from(ns).ok();
            }
        }
    }
    Ok(out)
}

/// `IP_BOUND_IF` / `IPV6_BOUND_IF`: probes leave through `device`.
pub(crate) fn bind_device(sock: &UdpSocket, device: &str, v6: bool) -> io::Result<()> {
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

fn to_socket_addr(s: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    if let Some(v6) = s.as_sockaddr_in6() {
        return Some(SocketAddr::V6((*v6).into()));
    }
    let _ = s.family();
    None
}
