//! macOS interface counters from the per-interface MIB.
//!
//! `sysctl {CTL_NET, PF_LINK, NETLINK_GENERIC, IFMIB_IFDATA, ifindex,
//! IFDATA_GENERAL}` fills an `ifmibdata` whose `ifmd_data` is an
//! `if_data64`: 64-bit byte counters and a 64-bit baudrate. The `if_data`
//! that `getifaddrs` exposes is 32-bit (wraps in 0.4 s at 80 Gb/s, baudrate
//! capped at 4.29 Gb/s) and `NET_RT_IFLIST2` truncates bytes to 32 bits on
//! recent macOS, so neither is used. Carrier comes from `SIOCGIFMEDIA`
//! (`IFM_AVALID|IFM_ACTIVE`, what ifconfig prints as `status: active`);
//! interfaces without media support (bridge0, lo0) report carrier unknown.
//! macOS keeps no carrier up/down counts, so those stay 0; the link watcher
//! counts transitions from kernel events instead.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::mem;

use super::{CounterSource, CountersError, InterfaceCounters};

/// `struct ifmediareq` from `<net/if_media.h>`; libc does not carry it.
#[repr(C)]
struct IfMediaReq {
    ifm_name: [libc::c_char; libc::IFNAMSIZ],
    ifm_current: libc::c_int,
    ifm_mask: libc::c_int,
    ifm_status: libc::c_int,
    ifm_active: libc::c_int,
    ifm_count: libc::c_int,
    ifm_ulist: *mut libc::c_int,
}

const IFM_AVALID: libc::c_int = 0x1;
const IFM_ACTIVE: libc::c_int = 0x2;
/// `_IOWR('i', 56, struct ifmediareq)`, computed from the struct size so it
/// stays right on any pointer width.
const SIOCGIFMEDIA: libc::c_ulong = 0xc000_0000
    | (((mem::size_of::<IfMediaReq>() as libc::c_ulong) & 0x1fff) << 16)
    | ((b'i' as libc::c_ulong) << 8)
    | 56;
// The value ifconfig uses on 64-bit macOS (`struct ifmediareq` is 48 bytes).
#[cfg(target_pointer_width = "64")]
const _: () = assert!(SIOCGIFMEDIA == 0xc030_6938);

/// Reads counters through `sysctl(IFMIB_IFDATA)`.
#[derive(Debug, Default)]
pub struct MibCounters {
    _private: (),
}

impl MibCounters {
    /// A new reader; it holds no resources between reads.
    pub fn new() -> Self {
        MibCounters::default()
    }
}

fn sys_err(call: &'static str, interface: &str, source: io::Error) -> CountersError {
    CountersError::Sys {
        call,
        interface: interface.to_string(),
        source,
    }
}

/// The generic MIB data of the interface with index `ifindex`.
fn ifmib(ifindex: libc::c_uint, interface: &str) -> Result<libc::ifmibdata, CountersError> {
    let mut name = [
        libc::CTL_NET,
        libc::PF_LINK,
        libc::NETLINK_GENERIC,
        libc::IFMIB_IFDATA,
        ifindex as libc::c_int,
        libc::IFDATA_GENERAL,
    ];
    // SAFETY: ifmibdata is plain old data (integers and arrays), so all-zero
    // bytes are a valid value.
    let mut data: libc::ifmibdata = unsafe { mem::zeroed() };
    let mut len: libc::size_t = mem::size_of::<libc::ifmibdata>();
    // SAFETY: `name` has 6 valid entries; `data` is a writable buffer of
    // `len` bytes that outlives the call; no new value is set (null, 0).
    let rc = unsafe {
        libc::sysctl(
            name.as_mut_ptr(),
            name.len() as libc::c_uint,
            (&mut data as *mut libc::ifmibdata).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(sys_err(
            "sysctl(IFMIB_IFDATA)",
            interface,
            io::Error::last_os_error(),
        ));
    }
    if len < mem::size_of::<libc::ifmibdata>() {
        return Err(sys_err(
            "sysctl(IFMIB_IFDATA)",
            interface,
            io::Error::new(io::ErrorKind::UnexpectedEof, "short ifmibdata"),
        ));
    }
    Ok(data)
}

/// Carrier from SIOCGIFMEDIA; `None` when the interface has no media
/// status (bridge, loopback) or the ioctl fails.
fn media_carrier(c_name: &CString) -> Option<bool> {
    let bytes = c_name.as_bytes_with_nul();
    if bytes.len() > libc::IFNAMSIZ {
        return None;
    }
    // SAFETY: plain socket(2) call; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: IfMediaReq is integers, a char array and a pointer; all-zero
    // (null ifm_ulist, ifm_count 0) is valid and asks for no media list.
    let mut req: IfMediaReq = unsafe { mem::zeroed() };
    for (dst, src) in req.ifm_name.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a properly sized, writable ifmediareq for the
    // duration of the call, matching the size encoded in SIOCGIFMEDIA.
    let rc = unsafe { libc::ioctl(fd, SIOCGIFMEDIA, &mut req as *mut IfMediaReq) };
    // SAFETY: `fd` came from socket(2) above and is closed exactly once.
    unsafe { libc::close(fd) };
    if rc != 0 || req.ifm_status & IFM_AVALID == 0 {
        return None;
    }
    Some(req.ifm_status & IFM_ACTIVE != 0)
}

impl CounterSource for MibCounters {
    fn read(&mut self, interface: &str) -> Result<InterfaceCounters, CountersError> {
        let c_name = CString::new(interface)
            .map_err(|_| CountersError::NoSuchInterface(interface.to_string()))?;
        // SAFETY: `c_name` is a valid NUL-terminated string for the call.
        let ifindex = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
        if ifindex == 0 {
            return Err(CountersError::NoSuchInterface(interface.to_string()));
        }
        let mib = ifmib(ifindex, interface)?;
        let d = mib.ifmd_data;
        let carrier = media_carrier(&c_name);
        Ok(InterfaceCounters {
            interface: interface.to_string(),
            receive_bytes: d.ifi_ibytes,
            transmit_bytes: d.ifi_obytes,
            receive_packets: d.ifi_ipackets,
            transmit_packets: d.ifi_opackets,
            receive_errors: d.ifi_ierrors,
            transmit_errors: d.ifi_oerrors,
            receive_drops: d.ifi_iqdrops,
            transmit_drops: u64::from(mib.ifmd_snd_drops),
            carrier: carrier.unwrap_or(false),
            carrier_known: carrier.is_some(),
            carrier_up_count: 0,
            carrier_down_count: 0,
            speed_bits_per_second: d.ifi_baudrate,
            mtu: d.ifi_mtu,
        })
    }
}
