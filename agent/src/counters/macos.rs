//! macOS interface counters from the per-interface MIB.
//!
//! `sysctl {CTL_NET, PF_LINK, NETLINK_GENERIC, IFMIB_IFDATA, ifindex,
//! IFDATA_GENERAL}` fills an `ifmibdata` (180 bytes, layout asserted in
//! `platform::macos`) whose `ifmd_data` is an `if_data64`: 64-bit byte
//! counters and a 64-bit baudrate. The `if_data` that `getifaddrs` exposes
//! is 32-bit (wraps in 0.4 s at 80 Gb/s, baudrate capped at 4.29 Gb/s) and
//! `NET_RT_IFLIST2` truncates bytes to 32 bits on recent macOS, so neither
//! is used. Carrier comes from `SIOCGIFMEDIA` (`IFM_AVALID|IFM_ACTIVE`,
//! what ifconfig prints as `status: active`), through the one definition
//! the link watcher uses too; `bridge0` answers it (active while any member
//! is), loopback and tunnels fail it and report carrier unknown. macOS
//! keeps no carrier up/down counts, so those stay 0; the link watcher
//! counts transitions from kernel events instead.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::AsFd;
use std::path::Path;

use super::{CounterSource, CountersError, InterfaceCounters};
use crate::platform::macos::{ioctl_socket, media_status};
use crate::platform::{xnu, Support};

/// macOS reads counters from the interface MIB.
pub(super) const SUPPORT: Support = Support::Supported;

/// The source of this OS; `_sysfs_root` is a Linux notion.
pub(super) fn default_source(_sysfs_root: &Path) -> Box<dyn CounterSource> {
    Box::new(MibCounters::new())
}

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

/// Carrier from `SIOCGIFMEDIA`; `None` (unknown) when the interface has
/// no media status or the ioctl fails.
fn media_carrier(interface: &str) -> Option<bool> {
    let sock = ioctl_socket().ok()?;
    xnu::carrier_from_media(media_status(sock.as_fd(), interface).ok())
}

/// `(received, sent)` multicast packets of `interface`, broadcast
/// included (xnu counts both in `ifi_imcasts`/`ifi_omcasts`), for the
/// bridge loop detector; not part of [`InterfaceCounters`].
pub fn multicast_packets(interface: &str) -> Result<(u64, u64), CountersError> {
    let c_name = CString::new(interface)
        .map_err(|_| CountersError::NoSuchInterface(interface.to_string()))?;
    // SAFETY: `c_name` is a valid NUL-terminated string for the call.
    let ifindex = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if ifindex == 0 {
        return Err(CountersError::NoSuchInterface(interface.to_string()));
    }
    let d = ifmib(ifindex, interface)?.ifmd_data;
    Ok((d.ifi_imcasts, d.ifi_omcasts))
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
        let carrier = media_carrier(interface);
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
