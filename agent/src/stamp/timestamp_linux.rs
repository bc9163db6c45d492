//! Linux receive path: kernel software RX timestamps (`SO_TIMESTAMPNS`,
//! CLOCK_REALTIME, nanoseconds) and the arriving TTL or hop limit
//! (`IP_RECVTTL`, `IPV6_RECVHOPLIMIT`), read from `recvmsg` control
//! messages; `SO_BINDTODEVICE` for pinning probes to an interface.
//!
//! Same functions, same signatures as `timestamp_macos.rs` and
//! `timestamp_other.rs`; `stamp/mod.rs` picks one.

use std::io;
use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrLike, SockaddrStorage,
};

use super::Received;

/// Kernel RX timestamps are available on this OS.
pub(crate) const KERNEL_RX_TIMESTAMPS: bool = true;

/// Asks the kernel for RX timestamps and TTLs on `sock`. Timestamps are
/// required (an error is returned); TTL reporting is best effort.
pub(crate) fn enable_rx_metadata(sock: &UdpSocket) -> io::Result<()> {
    setsockopt(sock, sockopt::ReceiveTimestampns, &true).map_err(io::Error::from)?;
    // A v6 socket may also carry v4-mapped traffic; ask for both and ignore
    // whichever the family refuses.
    let _ = setsockopt(sock, sockopt::Ipv4RecvTtl, &true);
    let _ = setsockopt(sock, sockopt::Ipv6RecvHopLimit, &true);
    Ok(())
}

/// Receives one datagram with its metadata. `nonblocking` returns
/// `WouldBlock` at once when nothing is queued.
pub(crate) fn recv(sock: &UdpSocket, buf: &mut [u8], nonblocking: bool) -> io::Result<Received> {
    let mut iov = [IoSliceMut::new(buf)];
    let mut cmsg = nix::cmsg_space!(libc::timespec, libc::c_int, libc::c_int);
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
            match c {
                ControlMessageOwned::ScmTimestampns(ts) => {
                    let ns = ts.tv_sec() as i128 * 1_000_000_000 + ts.tv_nsec() as i128;
                    out.kernel_rx_unix_ns = u64::try_from(ns).ok();
                }
                ControlMessageOwned::Ipv4Ttl(t) | ControlMessageOwned::Ipv6HopLimit(t) => {
                    out.ttl = u8::try_from(t).ok();
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// `SO_BINDTODEVICE`: probes leave through `device` whatever the routing
/// table says. Needs CAP_NET_RAW.
pub(crate) fn bind_device(sock: &UdpSocket, device: &str, _v6: bool) -> io::Result<()> {
    socket2::SockRef::from(sock).bind_device(Some(device.as_bytes()))
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
