//! Linux receive path: kernel software RX timestamps (`SO_TIMESTAMPNS`,
//! CLOCK_REALTIME, nanoseconds, moved onto the agent's timeline with
//! [`crate::clock::from_wall`]) and the arriving TTL or hop limit
//! (`IP_RECVTTL`, `IPV6_RECVHOPLIMIT`), read from `recvmsg` control
//! messages; kernel software TX timestamps (`SO_TIMESTAMPING` with
//! `TX_SOFTWARE | OPT_ID | OPT_TSONLY`) read back from the error queue;
//! `SO_BINDTODEVICE` for pinning probes to an interface.
//!
//! Same functions, same signatures as `timestamp_macos.rs` and
//! `timestamp_other.rs`; `stamp/mod.rs` picks one.

use std::io;
use std::io::IoSliceMut;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

use boltwatch_proto::v1::TimestampClock;
use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage,
};

use super::recvmsg::recv_with;
use super::Received;

/// Control-message buffer size; generous, since truncation loses them all.
const CMSG_ROOM: usize = 512;

/// Kernel RX and TX timestamps and device binding work on Linux.
pub(crate) const SUPPORT: crate::platform::Support = crate::platform::Support::Supported;

/// Kernel RX timestamps are available on this OS.
pub(crate) const KERNEL_RX_TIMESTAMPS: bool = true;

/// `SO_TIMESTAMPNS` and `SO_TIMESTAMPING`'s software stamps are
/// `ktime_get_real`: CLOCK_REALTIME in ns, converted onto the timeline
/// (`CLOCK_BOOTTIME`) that t1 and t3 are read from.
pub(crate) const CLOCK: TimestampClock = TimestampClock::KernelRealtimeNs;

/// `clock_getres(CLOCK_REALTIME)` in ns (1 with high-resolution timers);
/// 0 if the call fails.
pub(crate) fn clock_resolution_ns() -> u64 {
    use nix::time::{clock_getres, ClockId};
    clock_getres(ClockId::CLOCK_REALTIME)
        .ok()
        .and_then(|t| u64::try_from(t.tv_sec() * 1_000_000_000 + t.tv_nsec()).ok())
        .unwrap_or(0)
}

/// Now on the probe clock: the agent's timeline.
pub(crate) fn now_ns() -> u64 {
    crate::clock::now_ns()
}

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
    // SCM_TIMESTAMPNS, SCM_TIMESTAMPING (three timespecs, present once TX
    // stamping is on), TTL or hop limit, with headers: about 150 octets. A
    // truncated control buffer would lose the RX stamp, so leave room.
    let cmsg = vec![0u8; CMSG_ROOM];
    recv_with(sock, buf, cmsg, nonblocking, |c, out| {
            match c {
                ControlMessageOwned::ScmTimestampns(ts) => on_timeline(out, timespec_ns(&ts)),
                ControlMessageOwned::ScmTimestampsns(ts) if out.kernel_rx_unix_ns.is_none() => {
                    on_timeline(out, timespec_ns(&ts.system))
                }
                ControlMessageOwned::Ipv4Ttl(t) | ControlMessageOwned::Ipv6HopLimit(t) => {
                    out.ttl = u8::try_from(t).ok();
                }
                _ => {}
            }
    })
}

/// Puts a wall-clock kernel stamp on the timeline, with the step
/// generation it was converted under.
fn on_timeline(out: &mut Received, wall_ns: Option<u64>) {
    if let Some(wall) = wall_ns {
        let (t, generation) = crate::clock::from_wall(wall);
        out.kernel_rx_unix_ns = Some(t);
        out.generation = Some(generation);
    }
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

/// Reads every queued TX timestamp as `(counter, timeline ns, step
/// generation)` into `out`. Never blocks.
pub(crate) fn read_tx_timestamps(sock: &UdpSocket, out: &mut Vec<(u32, u64, u64)>) {
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
            let (t, generation) = crate::clock::from_wall(ns);
            out.push((id, t, generation));
        }
    }
}

fn timespec_ns(ts: &nix::sys::time::TimeSpec) -> Option<u64> {
    let ns = ts.tv_sec() as i128 * 1_000_000_000 + ts.tv_nsec() as i128;
    u64::try_from(ns).ok().filter(|&n| n > 0)
}

/// `SO_BINDTODEVICE`: probes leave through `device` whatever the routing
/// table says. Needs CAP_NET_RAW.
pub(crate) fn bind_device<S: std::os::fd::AsFd>(
    sock: &S,
    device: &str,
    _v6: bool,
) -> io::Result<()> {
    socket2::SockRef::from(sock).bind_device(Some(device.as_bytes()))
}

/// Don't fragment, by `IP_MTU_DISCOVER` (`IPV6_MTU_DISCOVER` on an IPv6
/// socket) = `IP_PMTUDISC_PROBE`: the DF bit is set and the kernel's
/// path-MTU cache is ignored, so a datagram larger than the interface MTU
/// fails with `EMSGSIZE` and a smaller one leaves whole, even after an
/// ICMP "fragmentation needed" lowered the cached path MTU (`_DO` would
/// then refuse the very sizes a path MTU search must retry). The
/// reflector's replies and the path MTU probes use it.
pub(crate) fn set_dont_fragment(sock: &UdpSocket, v6: bool) -> io::Result<()> {
    let (level, option, value) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_PROBE)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_PROBE)
    };
    crate::platform::set_int_sockopt(std::os::fd::AsFd::as_fd(sock), level, option, value)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn realtime_ns() -> u64 {
        let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME).unwrap();
        u64::try_from(t.tv_sec() * 1_000_000_000 + t.tv_nsec()).unwrap()
    }

    /// A datagram over real loopback: its `SO_TIMESTAMPNS` stamp is moved
    /// onto the timeline by the held correction of the generation it names,
    /// so undoing that correction gives back a wall-clock time between two
    /// wall-clock reads taken before the send and after the receive. (The
    /// timeline reads themselves may sit up to `REANCHOR_NS` off the wall
    /// clock by design, so they cannot bracket the stamp exactly.)
    #[test]
    fn kernel_rx_stamp_is_on_the_probe_clock() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_metadata(&rx).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        // A re-anchoring between the receive and the read below changes the
        // generation; a few tries see one that holds still.
        let (got, before, after, reading) = (0..8)
            .find_map(|_| {
                let before = realtime_ns();
                tx.send_to(b"stamp", rx.local_addr().unwrap()).unwrap();
                let mut buf = [0u8; 64];
                let got = recv(&rx, &mut buf, false).unwrap();
                let after = realtime_ns();
                let reading = crate::clock::read();
                (got.generation == Some(reading.generation)).then_some((got, before, after, reading))
            })
            .expect("the clock re-anchored on every try");
        let stamp = got.kernel_rx_unix_ns.expect("kernel RX stamp");
        let wall = reading.to_unix(stamp);
        assert!(before <= wall && wall <= after, "{before} {wall} {after}");
        assert_eq!(got.len, 5);
        assert_eq!(got.ttl, Some(64));
        assert_eq!(CLOCK, TimestampClock::KernelRealtimeNs);
        assert!(clock_resolution_ns() >= 1);
    }
}
