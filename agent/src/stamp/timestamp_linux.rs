//! Linux receive path: kernel software RX timestamps (`SO_TIMESTAMPNS`,
//! CLOCK_REALTIME, nanoseconds) and the arriving TTL or hop limit
//! (`IP_RECVTTL`, `IPV6_RECVHOPLIMIT`), read from `recvmsg` control
//! messages; kernel software TX timestamps (`SO_TIMESTAMPING` with
//! `TX_SOFTWARE | OPT_ID | OPT_TSONLY`) read back from the error queue;
//! `SO_BINDTODEVICE` for pinning probes to an interface.
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

/// Control-message buffer size; generous, since truncation loses them all.
const CMSG_ROOM: usize = 512;

/// Kernel RX and TX timestamps and device binding work on Linux.
pub(crate) const SUPPORT: crate::platform::Support = crate::platform::Support::Supported;

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
    // SCM_TIMESTAMPNS, SCM_TIMESTAMPING (three timespecs, present once TX
    // stamping is on), TTL or hop limit, with headers: about 150 octets. A
    // truncated control buffer would lose the RX stamp, so leave room.
    let mut cmsg = vec![0u8; CMSG_ROOM];
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
                    out.kernel_rx_unix_ns = timespec_ns(&ts);
                }
                ControlMessageOwned::ScmTimestampsns(ts) if out.kernel_rx_unix_ns.is_none() => {
                    out.kernel_rx_unix_ns = timespec_ns(&ts.system);
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

/// Turns on kernel software TX timestamps, keyed by a per-socket counter
/// that starts at 0 and counts datagrams handed to the kernel. Returns
/// false when the kernel refuses.
pub(crate) fn enable_tx_timestamps(sock: &UdpSocket) -> bool {
    use nix::sys::socket::TimestampingFlag as F;
    use sockopt::Timestamping;
    let flags = F::SOF_TIMESTAMPING_TX_SOFTWARE
        | F::SOF_TIMESTAMPING_SOFTWARE
        | F::SOF_TIMESTAMPING_OPT_ID
        | F::SOF_TIMESTAMPING_OPT_TSONLY;
    setsockopt(sock, Timestamping, &flags).is_ok()
}

/// Reads every queued TX timestamp as `(counter, unix ns)` into `out`.
/// Never blocks.
pub(crate) fn read_tx_timestamps(sock: &UdpSocket, out: &mut Vec<(u32, u64)>) {
    // Bounded: a burst's worth per call; the rest stays queued for the next.
    for _ in 0..64 {
        let mut data = [0u8; 64];
        let mut iov = [IoSliceMut::new(&mut data)];
        // IPv6 adds more control messages (the offender address, and the
        // socket's IPV6_RECV* options); a truncated buffer loses them all.
        let mut cmsg = vec![0u8; CMSG_ROOM];
        let flags = MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT;
        let Ok(msg) =
            recvmsg::<SockaddrStorage>(sock.as_raw_fd(), &mut iov, Some(&mut cmsg), flags)
        else {
            return;
        };
        let (mut id, mut ns) = (None, None);
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                match c {
                    ControlMessageOwned::ScmTimestampsns(ts) => ns = timespec_ns(&ts.system),
                    ControlMessageOwned::Ipv4RecvErr(e, _)
                    | ControlMessageOwned::Ipv6RecvErr(e, _)
                        if e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING =>
                    {
                        id = Some(e.ee_data)
                    }
                    _ => {}
                }
            }
        }
        if let (Some(id), Some(ns)) = (id, ns) {
            out.push((id, ns));
        }
    }
}

fn timespec_ns(ts: &nix::sys::time::TimeSpec) -> Option<u64> {
    let ns = ts.tv_sec() as i128 * 1_000_000_000 + ts.tv_nsec() as i128;
    u64::try_from(ns).ok().filter(|&n| n > 0)
}

/// `SO_BINDTODEVICE`: probes leave through `device` whatever the routing
/// table says. Needs CAP_NET_RAW.
pub(crate) fn bind_device(sock: &UdpSocket, device: &str, _v6: bool) -> io::Result<()> {
    socket2::SockRef::from(sock).bind_device(Some(device.as_bytes()))
}

/// Nice value of the probe threads (reflector and senders): a loaded host
/// must not leave a reply or an overdue check waiting behind other work.
const PROBE_NICE: libc::c_int = -10;

/// Raises the calling thread's scheduling weight (nice -10) so the probe
/// threads are not the ones a busy CPU makes wait: with a 20 ms interval
/// and 3 probes to an outage, a 60 ms wait of the reflector or sender
/// thread read as a probe-loss outage although every packet crossed the
/// link in microseconds (seen on the 2-core test bed under load: the
/// window counted no loss, its RTTs stayed under 40 us). Needs
/// CAP_SYS_NICE; without it the thread keeps its priority.
#[allow(unsafe_code)]
pub(crate) fn prioritize_current_thread() -> io::Result<()> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: plain setpriority(2) on this thread's own id; the cast is
    // how the libc prototype spells PRIO_PROCESS's `which` argument.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, PROBE_NICE) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
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
