//! What the macOS code passes to and reads from the xnu kernel, as numbers:
//! struct sizes, field offsets and ioctl request numbers, taken from the
//! xnu headers (macOS 15 line). Pure and compiled on every OS, so the Linux
//! CI tests the request numbers against the values golang/sys publishes for
//! darwin/arm64 (`unix/zerrors_darwin_arm64.go`); the `repr(C)` structs in
//! `platform/macos.rs` assert at compile time that they have exactly these
//! sizes and offsets, so the `aarch64-apple-darwin` check fails on a wrong
//! layout.
//!
//! Sources:
//! - `bsd/sys/ioccom.h`: `_IOC(inout, group, num, len)` =
//!   `inout | (len & IOCPARM_MASK) << 16 | group << 8 | num`.
//! - `bsd/net/if.h`: `struct ifmediareq` sits inside `#pragma pack(4)`: a
//!   16-byte name, five `int`s and an `int *` at offset 36, 44 bytes in
//!   all. A naive LP64 `repr(C)` pads the pointer to offset 40 and makes it
//!   48 bytes, and `_IOWR('i', 56, 48)` = `0xC0306938` matches no case of
//!   `ifioctl`: every call fails.
//! - `bsd/netinet/tcp.h`: `struct tcp_connection_info`: 15 one-bit TFO
//!   flags share one `u_int32_t` (with `__pad2:17`), then seven 8-aligned
//!   `u_int64_t`: 112 bytes, `tcpi_maxseg` at 16, `tcpi_txretransmitbytes`
//!   at 72, `tcpi_txretransmitpackets` at 104. The `libc` crate spells the
//!   bitfields as 15 separate `u32`s (176 bytes, retransmitted bytes at
//!   136), which the kernel never fills.
//! - `bsd/net/if_mib.h`: `struct ifmibdata`: name, five `u_int`, four
//!   filler `u_int`, then the packed(4) `struct if_data64` (128 bytes) at
//!   52: 180 bytes.
//! - `bsd/sys/kern_event.h`: `struct kern_event_msg`: six `u_int32_t`
//!   then `event_data[1]` (header 24, `sizeof` 28); `struct kev_request`:
//!   three `u_int32_t`. `bsd/net/net_kev.h`: `struct net_event_data {
//!   u_int32_t if_family, if_unit; char if_name[IFNAMSIZ]; }`: 24 bytes.
//! - `bsd/sys/socket.h`: `SO_TIMESTAMP_MONOTONIC 0x0800` ("Monotonically
//!   increasing timestamp on rcvd dgram"), delivered as a `SOL_SOCKET`
//!   control message `SCM_TIMESTAMP_MONOTONIC 0x04` holding one `uint64_t`
//!   of `mach_absolute_time` ticks, taken right after `SO_TIMESTAMP`'s
//!   `microtime` in `ip_savecontrol` (`bsd/netinet/ip_input.c`) and
//!   `ip6_savecontrol` (`bsd/netinet6/ip6_input.c`), for v4 and v6 alike.
//!   `bsd/sys/socket_private.h` (10.14 and later, not in the SDK; ntpsec's
//!   macOS packet-stamp test declares the same two values):
//!   `SO_TIMESTAMP_CONTINUOUS 0x40000`, delivered as
//!   `SCM_TIMESTAMP_CONTINUOUS 0x07` with one `uint64_t` of
//!   `mach_continuous_time` ticks, which keep counting while the Mac
//!   sleeps. `osfmk/mach/mach_time.h`: `struct
//!   mach_timebase_info { uint32_t numer, denom; }`; ns = ticks * numer /
//!   denom (125/3 on Apple silicon: 41.67 ns a tick).
//! - `bsd/netinet/in.h`: `#define IP_DONTFRAG 28` ("don't fragment
//!   packet", an `int` at `IPPROTO_IP`); `bsd/netinet6/in6.h`: `#define
//!   IPV6_DONTFRAG 62` (the RFC 3542 option, at `IPPROTO_IPV6`). With
//!   either set, a datagram larger than the interface MTU fails `sendto`
//!   with `EMSGSIZE` instead of leaving in fragments.

/// `IOCPARM_MASK`: parameter length, 13 bits.
pub const IOCPARM_MASK: u64 = 0x1fff;
/// `IOC_OUT`: copy out parameters.
pub const IOC_OUT: u64 = 0x4000_0000;
/// `IOC_IN`: copy in parameters.
pub const IOC_IN: u64 = 0x8000_0000;
/// `IOC_INOUT`: both.
pub const IOC_INOUT: u64 = IOC_IN | IOC_OUT;

/// `_IOC(inout, group, num, len)` from `bsd/sys/ioccom.h`.
pub const fn ioc(inout: u64, group: u8, num: u8, len: u64) -> u64 {
    inout | ((len & IOCPARM_MASK) << 16) | ((group as u64) << 8) | num as u64
}

/// `_IOW(group, num, T)` with `len = sizeof(T)`.
pub const fn iow(group: u8, num: u8, len: u64) -> u64 {
    ioc(IOC_IN, group, num, len)
}

/// `_IOWR(group, num, T)` with `len = sizeof(T)`.
pub const fn iowr(group: u8, num: u8, len: u64) -> u64 {
    ioc(IOC_INOUT, group, num, len)
}

/// `IFNAMSIZ`.
pub const IFNAMSIZ: usize = 16;
/// `sizeof(struct ifreq)` (name plus a 16-byte union).
pub const IFREQ_SIZE: u64 = 32;

/// `sizeof(struct ifmediareq)` under `#pragma pack(4)`.
pub const IFMEDIAREQ_SIZE: usize = 44;
/// `offsetof(struct ifmediareq, ifm_status)`.
pub const IFMEDIAREQ_STATUS: usize = 24;
/// `offsetof(struct ifmediareq, ifm_count)`.
pub const IFMEDIAREQ_COUNT: usize = 32;
/// `offsetof(struct ifmediareq, ifm_ulist)`: packed to 4, not 40.
pub const IFMEDIAREQ_ULIST: usize = 36;

/// `sizeof(struct tcp_connection_info)`; the kernel copies at most this.
pub const TCP_CONNECTION_INFO_SIZE: usize = 112;
/// `offsetof(struct tcp_connection_info, tcpi_maxseg)`.
pub const TCPI_MAXSEG: usize = 16;
/// `offsetof(struct tcp_connection_info, tcpi_txretransmitbytes)`.
pub const TCPI_TXRETRANSMITBYTES: usize = 72;
/// `offsetof(struct tcp_connection_info, tcpi_txretransmitpackets)`.
pub const TCPI_TXRETRANSMITPACKETS: usize = 104;

/// `sizeof(struct ifmibdata)`.
pub const IFMIBDATA_SIZE: usize = 180;
/// `offsetof(struct ifmibdata, ifmd_data)`.
pub const IFMIBDATA_DATA: usize = 52;
/// `sizeof(struct if_data64)` (packed(4)).
pub const IF_DATA64_SIZE: usize = 128;

/// `sizeof(struct kev_request)`.
pub const KEV_REQUEST_SIZE: usize = 12;
/// `offsetof(struct kern_event_msg, event_data)`: the header before the
/// event's own data (`KEV_MSG_HEADER_SIZE`).
pub const KERN_EVENT_MSG_HEADER: usize = 24;
/// `sizeof(struct kern_event_msg)` (header plus `event_data[1]`).
pub const KERN_EVENT_MSG_SIZE: usize = 28;
/// `offsetof(struct kern_event_msg, id)`.
pub const KERN_EVENT_MSG_ID: usize = 16;
/// `offsetof(struct kern_event_msg, event_code)`.
pub const KERN_EVENT_MSG_CODE: usize = 20;
/// `sizeof(struct net_event_data)`.
pub const NET_EVENT_DATA_SIZE: usize = 24;
/// `offsetof(struct net_event_data, if_unit)`.
pub const NET_EVENT_DATA_UNIT: usize = 4;
/// `offsetof(struct net_event_data, if_name)`.
pub const NET_EVENT_DATA_NAME: usize = 8;

/// `SIOCGIFMEDIA = _IOWR('i', 56, struct ifmediareq)` (`bsd/sys/sockio.h`).
pub const SIOCGIFMEDIA: u64 = iowr(b'i', 56, IFMEDIAREQ_SIZE as u64);
/// `SIOCGIFFLAGS = _IOWR('i', 17, struct ifreq)`: not used by the agent;
/// a second anchor for the encoding.
pub const SIOCGIFFLAGS: u64 = iowr(b'i', 17, IFREQ_SIZE);
/// `SIOCGIFMTU = _IOWR('i', 51, struct ifreq)`: likewise an anchor.
pub const SIOCGIFMTU: u64 = iowr(b'i', 51, IFREQ_SIZE);
/// `SIOCSKEVFILT = _IOW('e', 2, struct kev_request)` (`bsd/sys/kern_event.h`).
pub const SIOCSKEVFILT: u64 = iow(b'e', 2, KEV_REQUEST_SIZE as u64);

/// `SOL_SOCKET` on Darwin (`bsd/sys/socket.h`): the level of
/// socket-layer control messages.
pub const SOL_SOCKET: i32 = 0xffff;
/// `SO_TIMESTAMP_MONOTONIC` (`bsd/sys/socket.h`).
pub const SO_TIMESTAMP_MONOTONIC: i32 = 0x0800;
/// `SCM_TIMESTAMP_MONOTONIC`: the control message type carrying it.
pub const SCM_TIMESTAMP_MONOTONIC: i32 = 0x04;
/// Payload of `SCM_TIMESTAMP_MONOTONIC`: one `uint64_t`.
pub const SCM_TIMESTAMP_MONOTONIC_LEN: usize = 8;
/// `sizeof(struct mach_timebase_info)`.
pub const MACH_TIMEBASE_INFO_SIZE: usize = 8;

/// `IP_DONTFRAG` (`bsd/netinet/in.h`).
pub const IP_DONTFRAG: i32 = 28;
/// `IPV6_DONTFRAG` (`bsd/netinet6/in6.h`).
pub const IPV6_DONTFRAG: i32 = 62;

/// `SO_TIMESTAMP_CONTINUOUS` (`bsd/sys/socket_private.h`).
pub const SO_TIMESTAMP_CONTINUOUS: i32 = 0x40000;
/// `SCM_TIMESTAMP_CONTINUOUS`: the control message type carrying it, one
/// `uint64_t` like `SCM_TIMESTAMP_MONOTONIC`.
pub const SCM_TIMESTAMP_CONTINUOUS: i32 = 0x07;

/// A kernel receive stamp, in mach ticks, by the clock it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketTicks {
    /// `mach_continuous_time` (`SCM_TIMESTAMP_CONTINUOUS`): counts sleep.
    Continuous(u64),
    /// `mach_absolute_time` (`SCM_TIMESTAMP_MONOTONIC`): stops in sleep.
    Absolute(u64),
}

/// The stamp in a received control message, if it is a
/// `SCM_TIMESTAMP_CONTINUOUS` or `SCM_TIMESTAMP_MONOTONIC` with exactly
/// one `uint64_t` (native endian).
pub fn packet_ticks(level: i32, kind: i32, data: &[u8]) -> Option<PacketTicks> {
    if level != SOL_SOCKET {
        return None;
    }
    let ticks = || data.try_into().ok().map(u64::from_ne_bytes);
    match kind {
        SCM_TIMESTAMP_CONTINUOUS => ticks().map(PacketTicks::Continuous),
        SCM_TIMESTAMP_MONOTONIC => ticks().map(PacketTicks::Absolute),
        _ => None,
    }
}

/// Mach ticks to nanoseconds (`mach_timebase_info`): the same for
/// `mach_absolute_time` and `mach_continuous_time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timebase {
    numer: u32,
    denom: u32,
}

impl Timebase {
    /// A timebase from `mach_timebase_info`'s `numer`/`denom`; a zero
    /// (a failed call) is taken as 1/1, the Intel timebase.
    pub fn new(numer: u32, denom: u32) -> Timebase {
        if numer == 0 || denom == 0 {
            Timebase { numer: 1, denom: 1 }
        } else {
            Timebase { numer, denom }
        }
    }

    /// Nanoseconds of `ticks` (saturating at `u64::MAX`).
    pub fn ns(&self, ticks: u64) -> u64 {
        let ns = u128::from(ticks) * u128::from(self.numer) / u128::from(self.denom);
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// One tick in nanoseconds, rounded up (42 on Apple silicon, 1 on
    /// Intel Macs).
    pub fn resolution_ns(&self) -> u64 {
        u64::from(self.numer).div_ceil(u64::from(self.denom))
    }
}

/// `IFM_AVALID`: the media status word is valid (`bsd/net/if_media.h`).
pub const IFM_AVALID: i32 = 0x1;
/// `IFM_ACTIVE`: the link is up.
pub const IFM_ACTIVE: i32 = 0x2;

/// Carrier from the result of `SIOCGIFMEDIA`: `None` (unknown) when the
/// ioctl failed or the driver does not report link status (`IFM_AVALID`
/// clear). Unknown is never read as up: `IFF_RUNNING` is set by drivers at
/// init and stays set on an unplugged port, so it is no fallback.
pub fn carrier_from_media(status: Option<i32>) -> Option<bool> {
    let status = status?;
    (status & IFM_AVALID != 0).then_some(status & IFM_ACTIVE != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from golang.org/x/sys `unix/zerrors_darwin_arm64.go`.
    #[test]
    fn ioctl_numbers_match_golang_sys_darwin_arm64() {
        assert_eq!(SIOCGIFMEDIA, 0xc02c_6938);
        assert_eq!(SIOCGIFFLAGS, 0xc020_6911);
        assert_eq!(SIOCGIFMTU, 0xc020_6933);
        assert_eq!(SO_TIMESTAMP_MONOTONIC, 0x800);
        assert_eq!(SCM_TIMESTAMP_MONOTONIC, 0x4);
        assert_eq!(IP_DONTFRAG, 0x1c);
        assert_eq!(IPV6_DONTFRAG, 0x3e);
        // The old, wrong value came from a 48-byte struct.
        assert_ne!(SIOCGIFMEDIA, iowr(b'i', 56, 48));
        assert_eq!(iowr(b'i', 56, 48), 0xc030_6938);
    }

    /// golang/sys does not publish the kernel-event ioctls; this is the
    /// header's `_IOW('e', 2, struct kev_request)`, which configd and
    /// platform.md give as 0x800C6502.
    #[test]
    fn kernel_event_filter_ioctl() {
        assert_eq!(SIOCSKEVFILT, 0x800c_6502);
    }

    #[test]
    fn packed_layouts_add_up() {
        // 16-byte name, five ints, a pointer packed to 4.
        assert_eq!(IFNAMSIZ + 5 * 4, IFMEDIAREQ_ULIST);
        assert_eq!(IFMEDIAREQ_ULIST + 8, IFMEDIAREQ_SIZE);
        assert_eq!(IFMIBDATA_DATA + IF_DATA64_SIZE, IFMIBDATA_SIZE);
        assert_eq!(TCPI_TXRETRANSMITPACKETS + 8, TCP_CONNECTION_INFO_SIZE);
        assert_eq!(NET_EVENT_DATA_NAME + IFNAMSIZ, NET_EVENT_DATA_SIZE);
        assert_eq!(KERN_EVENT_MSG_HEADER + 4, KERN_EVENT_MSG_SIZE);
    }

    #[test]
    fn packet_stamp_control_messages() {
        let t = 123_456_789_u64.to_ne_bytes();
        let read = |level, kind, data: &[u8]| packet_ticks(level, kind, data);
        assert_eq!(
            read(SOL_SOCKET, SCM_TIMESTAMP_CONTINUOUS, &t),
            Some(PacketTicks::Continuous(123_456_789))
        );
        assert_eq!(
            read(SOL_SOCKET, SCM_TIMESTAMP_MONOTONIC, &t),
            Some(PacketTicks::Absolute(123_456_789))
        );
        // SCM_TIMESTAMP (a timeval) and other levels are not ours.
        assert_eq!(read(SOL_SOCKET, 0x02, &t), None);
        assert_eq!(read(0, SCM_TIMESTAMP_CONTINUOUS, &t), None);
        // A short or long payload is dropped, not misread.
        assert_eq!(read(SOL_SOCKET, SCM_TIMESTAMP_CONTINUOUS, &t[..4]), None);
        assert_eq!(read(SOL_SOCKET, SCM_TIMESTAMP_MONOTONIC, &[0; 16]), None);
        assert_eq!(SO_TIMESTAMP_CONTINUOUS, 0x40000);
        assert_eq!(SCM_TIMESTAMP_CONTINUOUS, 0x07);
    }

    #[test]
    fn mach_ticks_to_ns() {
        // Apple silicon: 24 MHz, numer/denom 125/3: 24 ticks are 1 us.
        let tb = Timebase::new(125, 3);
        assert_eq!(tb.ns(24), 1_000);
        // Eight weeks of uptime, no overflow.
        let weeks = 8 * 7 * 86_400 * 24_000_000u64;
        assert_eq!(tb.ns(weeks), 8 * 7 * 86_400 * 1_000_000_000);
        assert_eq!(tb.resolution_ns(), 42);
        // Intel Macs tick in nanoseconds; a failed timebase call is 1/1.
        assert_eq!(Timebase::new(1, 1).resolution_ns(), 1);
        assert_eq!(Timebase::new(0, 0).ns(15), 15);
        assert_eq!(Timebase::new(125, 3).ns(u64::MAX), u64::MAX);
    }

    #[test]
    fn media_status_words() {
        assert_eq!(
            carrier_from_media(Some(IFM_AVALID | IFM_ACTIVE)),
            Some(true)
        );
        assert_eq!(carrier_from_media(Some(IFM_AVALID)), Some(false));
        assert_eq!(carrier_from_media(Some(IFM_ACTIVE)), None);
        assert_eq!(carrier_from_media(Some(0)), None);
        assert_eq!(carrier_from_media(None), None, "a failed ioctl is unknown");
    }
}
