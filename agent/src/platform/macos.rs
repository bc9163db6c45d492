//! The xnu structs the macOS code passes to the kernel, defined once, with
//! compile-time checks of their size and field offsets against
//! [`super::xnu`] (which cites the headers). The `aarch64-apple-darwin`
//! check in CI compiles this file, so a wrong layout fails the build
//! rather than every call on a real Mac.
//!
//! Also the one `SIOCGIFMEDIA` call that the link watcher and the counters
//! share, and the mach clocks the timeline and the STAMP stamps read.
#![allow(unsafe_code)]

use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

use super::xnu;

/// `struct ifmediareq` (`bsd/net/if.h`, inside `#pragma pack(4)`).
#[repr(C, packed(4))]
pub(crate) struct IfMediaReq {
    pub ifm_name: [libc::c_char; xnu::IFNAMSIZ],
    pub ifm_current: libc::c_int,
    pub ifm_mask: libc::c_int,
    pub ifm_status: libc::c_int,
    pub ifm_active: libc::c_int,
    pub ifm_count: libc::c_int,
    pub ifm_ulist: *mut libc::c_int,
}
const _: () = assert!(size_of::<IfMediaReq>() == xnu::IFMEDIAREQ_SIZE);
const _: () = assert!(offset_of!(IfMediaReq, ifm_status) == xnu::IFMEDIAREQ_STATUS);
const _: () = assert!(offset_of!(IfMediaReq, ifm_count) == xnu::IFMEDIAREQ_COUNT);
const _: () = assert!(offset_of!(IfMediaReq, ifm_ulist) == xnu::IFMEDIAREQ_ULIST);

/// `struct tcp_connection_info` (`bsd/netinet/tcp.h`). The 15 TFO bits
/// and `__pad2:17` are one `u32` in C; they are one `u32` here.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TcpConnectionInfo {
    pub tcpi_state: u8,
    pub tcpi_snd_wscale: u8,
    pub tcpi_rcv_wscale: u8,
    pub pad1: u8,
    pub tcpi_options: u32,
    pub tcpi_flags: u32,
    pub tcpi_rto: u32,
    pub tcpi_maxseg: u32,
    pub tcpi_snd_ssthresh: u32,
    pub tcpi_snd_cwnd: u32,
    pub tcpi_snd_wnd: u32,
    pub tcpi_snd_sbbytes: u32,
    pub tcpi_rcv_wnd: u32,
    pub tcpi_rttcur: u32,
    pub tcpi_srtt: u32,
    pub tcpi_rttvar: u32,
    /// `tcpi_tfo_*:1` flags and `__pad2:17`.
    pub tfo_bits: u32,
    pub tcpi_txpackets: u64,
    pub tcpi_txbytes: u64,
    pub tcpi_txretransmitbytes: u64,
    pub tcpi_rxpackets: u64,
    pub tcpi_rxbytes: u64,
    pub tcpi_rxoutoforderbytes: u64,
    pub tcpi_txretransmitpackets: u64,
}
const _: () = assert!(size_of::<TcpConnectionInfo>() == xnu::TCP_CONNECTION_INFO_SIZE);
const _: () = assert!(offset_of!(TcpConnectionInfo, tcpi_maxseg) == xnu::TCPI_MAXSEG);
const _: () =
    assert!(offset_of!(TcpConnectionInfo, tcpi_txretransmitbytes) == xnu::TCPI_TXRETRANSMITBYTES);
const _: () = assert!(
    offset_of!(TcpConnectionInfo, tcpi_txretransmitpackets) == xnu::TCPI_TXRETRANSMITPACKETS
);

// `libc::ifmibdata` (`bsd/net/if_mib.h`) is used as libc declares it; these
// pin it to the header.
const _: () = assert!(size_of::<libc::ifmibdata>() == xnu::IFMIBDATA_SIZE);
const _: () = assert!(offset_of!(libc::ifmibdata, ifmd_data) == xnu::IFMIBDATA_DATA);
const _: () = assert!(size_of::<libc::if_data64>() == xnu::IF_DATA64_SIZE);

/// `struct kev_request` (`bsd/sys/kern_event.h`).
#[repr(C)]
pub(crate) struct KevRequest {
    pub vendor_code: u32,
    pub kev_class: u32,
    pub kev_subclass: u32,
}
const _: () = assert!(size_of::<KevRequest>() == xnu::KEV_REQUEST_SIZE);

/// `struct kern_event_msg` (`bsd/sys/kern_event.h`). Never built: the
/// parser in `link::kev` reads received bytes at these offsets, and this
/// definition pins the offsets to the header.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct KernEventMsg {
    pub total_size: u32,
    pub vendor_code: u32,
    pub kev_class: u32,
    pub kev_subclass: u32,
    pub id: u32,
    pub event_code: u32,
    pub event_data: [u32; 1],
}
const _: () = assert!(size_of::<KernEventMsg>() == xnu::KERN_EVENT_MSG_SIZE);
const _: () = assert!(offset_of!(KernEventMsg, id) == xnu::KERN_EVENT_MSG_ID);
const _: () = assert!(offset_of!(KernEventMsg, event_code) == xnu::KERN_EVENT_MSG_CODE);
const _: () = assert!(offset_of!(KernEventMsg, event_data) == xnu::KERN_EVENT_MSG_HEADER);

/// `struct net_event_data` (`bsd/net/net_kev.h`), likewise a layout pin
/// for the parser.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct NetEventData {
    pub if_family: u32,
    pub if_unit: u32,
    pub if_name: [libc::c_char; xnu::IFNAMSIZ],
}
const _: () = assert!(size_of::<NetEventData>() == xnu::NET_EVENT_DATA_SIZE);
const _: () = assert!(offset_of!(NetEventData, if_unit) == xnu::NET_EVENT_DATA_UNIT);
const _: () = assert!(offset_of!(NetEventData, if_name) == xnu::NET_EVENT_DATA_NAME);

/// `SIOCGIFMEDIA` as the ioctl wants it.
const SIOCGIFMEDIA: libc::c_ulong = xnu::SIOCGIFMEDIA as libc::c_ulong;
/// `SIOCSKEVFILT` as the ioctl wants it.
pub(crate) const SIOCSKEVFILT: libc::c_ulong = xnu::SIOCSKEVFILT as libc::c_ulong;

/// An `AF_INET` datagram socket, the handle interface ioctls go through.
pub(crate) fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked, then owned.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// The `ifm_status` word of `name` from `SIOCGIFMEDIA`. Every interface
/// with a media layer answers, `bridge0` included (`if_bridge.c` reports
/// `IFM_ACTIVE` while any member is up); loopback and tunnels fail. Read
/// it with [`xnu::carrier_from_media`]: an error is carrier unknown.
pub(crate) fn media_status(sock: BorrowedFd<'_>, name: &str) -> io::Result<i32> {
    if name.is_empty() || name.len() >= xnu::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {name:?} does not fit IFNAMSIZ"),
        ));
    }
    let mut req = IfMediaReq {
        ifm_name: [0; xnu::IFNAMSIZ],
        ifm_current: 0,
        ifm_mask: 0,
        ifm_status: 0,
        ifm_active: 0,
        ifm_count: 0,
        ifm_ulist: std::ptr::null_mut(),
    };
    for (d, s) in req.ifm_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFMEDIA reads and writes a `struct ifmediareq`, which
    // `req` is (layout asserted above) and which outlives the call;
    // `ifm_count` 0 and a null `ifm_ulist` ask for no media list.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCGIFMEDIA, &mut req as *mut IfMediaReq) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(req.ifm_status)
}

// `SO_TIMESTAMP_MONOTONIC` as libc declares it, pinned to the header; its
// payload is one `uint64_t` of ticks.
const _: () = assert!(libc::SO_TIMESTAMP_MONOTONIC == xnu::SO_TIMESTAMP_MONOTONIC);
const _: () = assert!(libc::SOL_SOCKET == xnu::SOL_SOCKET);
const _: () = assert!(size_of::<u64>() == xnu::SCM_TIMESTAMP_MONOTONIC_LEN);
const _: () =
    assert!(size_of::<mach2::mach_time::mach_timebase_info>() == xnu::MACH_TIMEBASE_INFO_SIZE);

/// Turns on the socket option `option` (an `int` 1 at `SOL_SOCKET`).
fn enable(sock: BorrowedFd<'_>, option: libc::c_int) -> io::Result<()> {
    super::set_int_sockopt(sock, libc::SOL_SOCKET, option, 1)
}

// The don't-fragment options as libc declares them, pinned to the headers.
const _: () = assert!(libc::IP_DONTFRAG == xnu::IP_DONTFRAG);
const _: () = assert!(libc::IPV6_DONTFRAG == xnu::IPV6_DONTFRAG);

/// Sets the don't-fragment bit on what `sock` sends (`IP_DONTFRAG`, and
/// `IPV6_DONTFRAG` on an IPv6 socket): a datagram larger than the
/// interface MTU fails with `EMSGSIZE` rather than leaving in fragments.
pub(crate) fn set_dont_fragment(sock: BorrowedFd<'_>, v6: bool) -> io::Result<()> {
    let (level, option) = if v6 {
        (libc::IPPROTO_IPV6, xnu::IPV6_DONTFRAG)
    } else {
        (libc::IPPROTO_IP, xnu::IP_DONTFRAG)
    };
    super::set_int_sockopt(sock, level, option, 1)
}

/// Asks the kernel for a receive stamp on every datagram `sock` receives:
/// `SCM_TIMESTAMP_CONTINUOUS` (counts sleep) where the kernel takes the
/// private option, else `SCM_TIMESTAMP_MONOTONIC`.
pub(crate) fn enable_packet_stamps(sock: BorrowedFd<'_>) -> io::Result<()> {
    enable(sock, xnu::SO_TIMESTAMP_CONTINUOUS)
        .or_else(|_| enable(sock, libc::SO_TIMESTAMP_MONOTONIC))
}

/// `mach_absolute_time()`: the clock `SO_TIMESTAMP_MONOTONIC` stamps with.
pub(crate) fn mach_ticks() -> u64 {
    // SAFETY: no arguments, no preconditions.
    unsafe { mach2::mach_time::mach_absolute_time() }
}

/// `mach_continuous_time()`: `mach_absolute_time` plus the time slept.
pub(crate) fn mach_continuous_ticks() -> u64 {
    // SAFETY: no arguments, no preconditions.
    unsafe { mach2::mach_time::mach_continuous_time() }
}

/// The mach timebase, read once.
pub(crate) fn timebase() -> xnu::Timebase {
    static TIMEBASE: OnceLock<xnu::Timebase> = OnceLock::new();
    *TIMEBASE.get_or_init(|| {
        let mut tb = mach2::mach_time::mach_timebase_info::default();
        // SAFETY: writes the two u32 of `tb`, which outlives the call. A
        // failure leaves 0/0, which `Timebase::new` reads as 1/1.
        unsafe { mach2::mach_time::mach_timebase_info(&mut tb) };
        xnu::Timebase::new(tb.numer, tb.denom)
    })
}
