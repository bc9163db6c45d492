//! Which local interface reaches a peer, and what kind of link it is.
//!
//! This module owns the portable pieces: [`route_interface`] (ask the
//! kernel's routing table by connecting a UDP socket, then match the chosen
//! source address against `getifaddrs`), interface addresses, and the pure
//! Thunderbolt speed parsing shared by both OSes. The OS files are chosen
//! as [`crate::platform`] describes: `linux.rs` classifies interfaces and
//! finds Thunderbolt links in sysfs under a configurable root; `macos.rs`
//! runs `networksetup`, `ifconfig` and `system_profiler` (slow: call it off
//! the probe path) and [`parse`] holds their pure, fixture-tested parsers;
//! `unsupported.rs` describes interfaces from `getifaddrs` alone and fails
//! the Thunderbolt look-up with [`Unsupported`]. [`downshift`] judges,
//! purely, whether a Thunderbolt port negotiated less than it can. Watching
//! links come and go is `link`'s job, not this one's.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::Path;

pub use boltwatch_proto::v1::Interface;

use crate::platform::{Support, Unsupported};

pub mod downshift;
pub mod ioreg;
pub mod parse;
pub mod scoped;

crate::platform::os_module!(mod imp);

#[cfg(target_os = "linux")]
pub(crate) use imp::names_in;
#[cfg(target_os = "macos")]
pub use imp::{bridge_members, hardware_ports, thunderbolt_receptacles};

/// Whether this OS can classify interfaces and find Thunderbolt links.
pub const SUPPORT: Support = imp::SUPPORT;

/// Interface kinds, as carried in `Interface.kind`.
pub mod kind {
    /// A Thunderbolt networking port (`thunderbolt-net`, macOS "Thunderbolt N").
    pub const THUNDERBOLT: &str = "thunderbolt";
    /// A software bridge (`bridge0`, Linux `br0`).
    pub const BRIDGE: &str = "bridge";
    /// A wired Ethernet port.
    pub const ETHERNET: &str = "ethernet";
    /// The loopback interface.
    pub const LOOPBACK: &str = "loopback";
    /// One end of a Linux veth pair.
    pub const VETH: &str = "veth";
    /// A wireless interface.
    pub const WIFI: &str = "wifi";
    /// Anything else (tun, dummy, vlan, ...).
    pub const OTHER: &str = "other";
}

/// The interface traffic to a scoped peer leaves through: a socket bound
/// to `device` (as the probes are) can only leave through `device`, so the
/// answer is `device` when the kernel has a route for `peer` out of it,
/// and an error when it has none (the interface is gone, or has no
/// address to send from).
pub fn bound_route_interface(peer: SocketAddr, device: &str) -> io::Result<String> {
    let bind: SocketAddr = match peer {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(bind)?;
    crate::stamp::imp::bind_device(&socket, device, peer.is_ipv6())?;
    socket.connect(peer)?;
    Ok(device.to_string())
}

/// The local interface the kernel routes traffic for `peer` through.
///
/// Connecting a UDP socket sends nothing; it only makes the kernel pick a
/// route and a source address, which is then looked up in `getifaddrs`. An
/// IPv6 link-local source names its interface by scope id. Traffic to one of
/// the node's own non-loopback addresses is reported on the interface that
/// holds that address, although Linux carries it over `lo`.
pub fn route_interface(peer: SocketAddr) -> io::Result<String> {
    let bind: SocketAddr = match peer {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(bind)?;
    socket.connect(peer)?;
    let local = socket.local_addr()?;
    if let SocketAddr::V6(v6) = local {
        if v6.scope_id() != 0 {
            let name = nix::net::if_::if_indextoname(v6.scope_id()).map_err(io::Error::from)?;
            return name.into_string().map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, "interface name is not UTF-8")
            });
        }
    }
    interface_with_address(local.ip())?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no interface holds source address {} for {peer}",
                local.ip()
            ),
        )
    })
}

/// The name of the interface holding `ip`, if any.
pub fn interface_with_address(ip: IpAddr) -> io::Result<Option<String>> {
    for ifa in nix::ifaddrs::getifaddrs().map_err(io::Error::from)? {
        if ifa.address.as_ref().and_then(ip_of) == Some(ip) {
            return Ok(Some(ifa.interface_name));
        }
    }
    Ok(None)
}

fn ip_of(addr: &nix::sys::socket::SockaddrStorage) -> Option<IpAddr> {
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(IpAddr::V4(v4.ip()));
    }
    addr.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
}

/// Prefix length of a netmask (count of leading one bits).
pub fn prefix_len(mask: IpAddr) -> u32 {
    match mask {
        IpAddr::V4(m) => u32::from(m).leading_ones(),
        IpAddr::V6(m) => u128::from(m).leading_ones(),
    }
}

/// Addresses on `name` as "ip/prefix", IPv4 first, in `getifaddrs` order.
/// An unknown interface has none.
pub fn addresses(name: &str) -> Vec<String> {
    let Ok(all) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for ifa in all.filter(|i| i.interface_name == name) {
        let Some(ip) = ifa.address.as_ref().and_then(ip_of) else {
            continue;
        };
        let text = match ifa.netmask.as_ref().and_then(ip_of) {
            Some(mask) => format!("{ip}/{}", prefix_len(mask)),
            None => ip.to_string(),
        };
        if ip.is_ipv4() {
            v4.push(text);
        } else {
            v6.push(text);
        }
    }
    v4.extend(v6);
    v4
}

/// Whether `getifaddrs` flags `name` as the loopback interface.
pub fn is_loopback(name: &str) -> bool {
    nix::ifaddrs::getifaddrs()
        .map(|mut all| {
            all.any(|i| {
                i.interface_name == name
                    && i.flags
                        .contains(nix::net::if_::InterfaceFlags::IFF_LOOPBACK)
            })
        })
        .unwrap_or(false)
}

/// Describes interface `name`: kind, speed, generation, bridge members,
/// addresses, MTU. Never fails: what cannot be learned stays empty or 0.
/// `sysfs_root` (normally `/sys`) is used on Linux only.
pub fn describe(name: &str, sysfs_root: &Path) -> Interface {
    imp::describe(name, sysfs_root)
}

/// What any OS can say about `name` from `getifaddrs` alone: loopback or
/// other, and its addresses.
pub fn describe_basic(name: &str) -> Interface {
    Interface {
        name: name.to_string(),
        kind: if is_loopback(name) {
            kind::LOOPBACK
        } else {
            kind::OTHER
        }
        .to_string(),
        addresses: addresses(name),
        ..Interface::default()
    }
}

/// A Thunderbolt networking link found in Linux sysfs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThunderboltLink {
    /// The netdev (`thunderbolt0`, or a udev name such as `en05`).
    pub interface: String,
    /// The XDomain (remote host) directory name, e.g. `0-1`, if found.
    pub xdomain: Option<String>,
    /// The remote host's name (`device_name`), if known.
    pub peer_name: Option<String>,
    /// The remote host's UUID (`unique_id`), if known.
    pub peer_uid: Option<String>,
    /// This host's UUID as the remote host sees it: the `unique_id` of the
    /// domain's host router (`N-0`), if known.
    pub local_uid: Option<String>,
    /// Receive speed per lane, bits per second (0 unknown).
    pub rx_lane_bits_per_second: u64,
    /// Transmit speed per lane, bits per second (0 unknown).
    pub tx_lane_bits_per_second: u64,
    /// Receive lanes (0 unknown).
    pub rx_lanes: u32,
    /// Transmit lanes (0 unknown).
    pub tx_lanes: u32,
    /// Router `generation` (1-3 Thunderbolt, 4 USB4), empty if unknown.
    pub generation: String,
}

impl ThunderboltLink {
    /// Receive link speed: per-lane speed times lanes.
    pub fn rx_bits_per_second(&self) -> u64 {
        self.rx_lane_bits_per_second
            .saturating_mul(u64::from(self.rx_lanes))
    }

    /// Transmit link speed: per-lane speed times lanes.
    pub fn tx_bits_per_second(&self) -> u64 {
        self.tx_lane_bits_per_second
            .saturating_mul(u64::from(self.tx_lanes))
    }

    /// The link speed: the slower direction where both are known (TB5 may
    /// run asymmetric, 120/40), else whichever is known, else 0.
    pub fn bits_per_second(&self) -> u64 {
        match (self.rx_bits_per_second(), self.tx_bits_per_second()) {
            (0, tx) => tx,
            (rx, 0) => rx,
            (rx, tx) => rx.min(tx),
        }
    }
}

/// The Thunderbolt networking ports and what each negotiated. Linux: the
/// interfaces under `sysfs_root`, found by driver (`device/driver` →
/// `thunderbolt-net`) rather than by name, since udev renames them, sorted
/// by name. macOS: the host's lane adapters in IOKit ([`ioreg`]), named by
/// their `enX`. Everywhere else this fails with [`Unsupported`].
pub fn thunderbolt_interfaces(sysfs_root: &Path) -> Result<Vec<ThunderboltLink>, Unsupported> {
    imp::thunderbolt_interfaces(sysfs_root)
}

/// Parses a speed such as `20.0 Gb/s`, `10 Gb/s`, `40 Gbps` or `800 Mb/s`
/// into bits per second. Leading words ("Up to") are skipped; `None` when
/// no number with a known unit is found.
pub fn parse_link_speed(text: &str) -> Option<u64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        // Accept "20.0 Gb/s" and "20.0Gb/s".
        let split = w
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(w.len());
        let (num, glued_unit) = w.split_at(split);
        let Ok(value) = num.parse::<f64>() else {
            continue;
        };
        let unit = if glued_unit.is_empty() {
            words.get(i + 1).copied().unwrap_or("")
        } else {
            glued_unit
        };
        let scale = match unit.to_ascii_lowercase().as_str() {
            "gb/s" | "gbps" | "gbit/s" => 1e9,
            "mb/s" | "mbps" | "mbit/s" => 1e6,
            "kb/s" | "kbps" | "kbit/s" => 1e3,
            _ => continue,
        };
        if value.is_finite() && value >= 0.0 {
            return Some((value * scale).round() as u64);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_speeds() {
        assert_eq!(parse_link_speed("20.0 Gb/s\n"), Some(20_000_000_000));
        assert_eq!(parse_link_speed("10 Gb/s"), Some(10_000_000_000));
        assert_eq!(parse_link_speed("Up to 40 Gb/s"), Some(40_000_000_000));
        assert_eq!(parse_link_speed("40Gb/s"), Some(40_000_000_000));
        assert_eq!(parse_link_speed("800 Mb/s"), Some(800_000_000));
        assert_eq!(parse_link_speed("fast"), None);
        assert_eq!(parse_link_speed("3 lanes"), None);
        assert_eq!(parse_link_speed(""), None);
    }

    #[test]
    fn link_speed_is_lanes_times_per_lane() {
        let link = ThunderboltLink {
            rx_lane_bits_per_second: 40_000_000_000,
            tx_lane_bits_per_second: 40_000_000_000,
            rx_lanes: 3,
            tx_lanes: 1,
            ..ThunderboltLink::default()
        };
        assert_eq!(link.rx_bits_per_second(), 120_000_000_000);
        assert_eq!(link.tx_bits_per_second(), 40_000_000_000);
        assert_eq!(link.bits_per_second(), 40_000_000_000);
        let rx_only = ThunderboltLink {
            rx_lane_bits_per_second: 20_000_000_000,
            rx_lanes: 2,
            ..ThunderboltLink::default()
        };
        assert_eq!(rx_only.bits_per_second(), 40_000_000_000);
        assert_eq!(ThunderboltLink::default().bits_per_second(), 0);
    }

    #[test]
    fn prefixes() {
        assert_eq!(prefix_len("255.255.0.0".parse().unwrap()), 16);
        assert_eq!(prefix_len("255.0.0.0".parse().unwrap()), 8);
        assert_eq!(prefix_len("ffff:ffff:ffff:ffff::".parse().unwrap()), 64);
        assert_eq!(prefix_len("0.0.0.0".parse().unwrap()), 0);
    }
}
