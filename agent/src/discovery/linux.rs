//! Linux interface classification and Thunderbolt links from sysfs.
//!
//! Everything is read under a configurable root so fixture trees stand in
//! for `/sys`; only addresses come from the live `getifaddrs`.
//!
//! Classification, first match wins:
//! 1. `loopback`: `type` is 772 (ARPHRD_LOOPBACK), or the name is `lo`.
//! 2. `thunderbolt`: `device/driver` links to `thunderbolt-net`.
//! 3. `bridge`: a `bridge/` directory; members from `brif/`.
//! 4. `wifi`: a `wireless/` or `phy80211` entry.
//! 5. `veth`: virtual (no `device`), Ethernet `type` 1, no `DEVTYPE` in
//!    `uevent` (vlan, bond, macvlan... all set one), no `tun_flags` (tun/tap),
//!    no `lower_*` link (stacked devices), and `iflink != ifindex` (a dummy
//!    has `iflink == ifindex`). A veth whose peer sits in another namespace
//!    at the same index is missed (reported `other`): sysfs cannot tell it
//!    from a dummy; only the ethtool driver name could.
//! 6. `ethernet`: a `device` link (real hardware) with `type` 1.
//! 7. `other`.

use std::fs;
use std::path::{Path, PathBuf};

use super::{addresses, kind, parse_link_speed, Interface, ThunderboltLink};
use crate::counters::parse_speed_mbps;
use crate::platform::{Support, Unsupported};

/// Linux classifies interfaces and finds Thunderbolt links in sysfs.
pub(super) const SUPPORT: Support = Support::Supported;

const TB_DRIVER: &str = "thunderbolt-net";
const ARPHRD_ETHER: u32 = 1;
const ARPHRD_LOOPBACK: u32 = 772;

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_num<T: std::str::FromStr>(path: &Path) -> Option<T> {
    read_trimmed(path)?.parse().ok()
}

fn net_dir(root: &Path, name: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return None;
    }
    Some(root.join("class/net").join(name))
}

/// Basename of the driver `dir/device/driver` links to.
fn driver_of(dir: &Path) -> Option<String> {
    let target = fs::read_link(dir.join("device/driver")).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// Entry names of `dir`, sorted; a missing directory has none.
pub(crate) fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|it| {
            it.filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn looks_like_veth(dir: &Path) -> bool {
    if dir.join("device").exists() || dir.join("tun_flags").exists() {
        return false;
    }
    if read_num::<u32>(&dir.join("type")) != Some(ARPHRD_ETHER) {
        return false;
    }
    let uevent = read_trimmed(&dir.join("uevent")).unwrap_or_default();
    if uevent.lines().any(|l| l.starts_with("DEVTYPE=")) {
        return false;
    }
    if names_in(dir).iter().any(|n| n.starts_with("lower_")) {
        return false;
    }
    match (
        read_num::<u64>(&dir.join("iflink")),
        read_num::<u64>(&dir.join("ifindex")),
    ) {
        (Some(iflink), Some(ifindex)) => iflink != ifindex,
        _ => false,
    }
}

/// The kind of interface `dir` (see the module docs for the rules).
fn classify(name: &str, dir: &Path) -> &'static str {
    let arp_type = read_num::<u32>(&dir.join("type"));
    if arp_type == Some(ARPHRD_LOOPBACK) || name == "lo" {
        kind::LOOPBACK
    } else if driver_of(dir).as_deref() == Some(TB_DRIVER) {
        kind::THUNDERBOLT
    } else if dir.join("bridge").is_dir() {
        kind::BRIDGE
    } else if dir.join("wireless").is_dir() || dir.join("phy80211").exists() {
        kind::WIFI
    } else if looks_like_veth(dir) {
        kind::VETH
    } else if dir.join("device").exists() && arp_type == Some(ARPHRD_ETHER) {
        kind::ETHERNET
    } else {
        kind::OTHER
    }
}

pub(super) fn describe(name: &str, root: &Path) -> Interface {
    let mut iface = Interface {
        name: name.to_string(),
        addresses: addresses(name),
        ..Interface::default()
    };
    let Some(dir) = net_dir(root, name) else {
        iface.kind = kind::OTHER.to_string();
        return iface;
    };
    if !dir.exists() {
        // Not in this sysfs: at least recognise loopback from the flags.
        return super::describe_basic(name);
    }
    let k = classify(name, &dir);
    iface.kind = k.to_string();
    iface.mtu = read_num(&dir.join("mtu")).unwrap_or(0);
    iface.speed_bits_per_second = read_trimmed(&dir.join("speed"))
        .map(|t| parse_speed_mbps(&t))
        .unwrap_or(0);
    if k == kind::BRIDGE {
        iface.members = names_in(&dir.join("brif"));
    }
    if k == kind::THUNDERBOLT {
        let link = thunderbolt_link(root, name, &dir);
        if iface.speed_bits_per_second == 0 {
            iface.speed_bits_per_second = link.bits_per_second();
        }
        iface.generation = link.generation;
        iface.remote_name = link.peer_name.unwrap_or_default();
        iface.remote_uid = link.peer_uid.unwrap_or_default();
        iface.local_uid = link.local_uid.unwrap_or_default();
    }
    iface
}

/// The XDomain directory of a Thunderbolt netdev: the parent of the
/// service its `device` points at (`.../0-1/0-1.0`), or, when the link does
/// not resolve that way, `<root>/bus/thunderbolt/devices/<service minus .N>`.
fn xdomain_dir(root: &Path, dir: &Path) -> Option<PathBuf> {
    let service = fs::canonicalize(dir.join("device")).ok()?;
    if let Some(parent) = service.parent() {
        if parent.join("rx_speed").exists() || parent.join("tx_speed").exists() {
            return Some(parent.to_path_buf());
        }
    }
    let service_name = service.file_name()?.to_string_lossy().into_owned();
    let xdomain = service_name.rsplit_once('.').map(|(x, _)| x)?;
    let candidate = root.join("bus/thunderbolt/devices").join(xdomain);
    candidate.is_dir().then_some(candidate)
}

/// `generation` of the XDomain, else of the domain's host router (`N-0`).
fn generation(root: &Path, xdomain: &Path) -> String {
    if let Some(g) = read_trimmed(&xdomain.join("generation")) {
        return g;
    }
    host_router_file(root, xdomain, "generation").unwrap_or_default()
}

/// A file of the host router (`N-0`) of the XDomain's domain `N`: the
/// XDomain `0-1` hangs off domain 0, whose host router is `0-0`.
fn host_router_file(root: &Path, xdomain: &Path, file: &str) -> Option<String> {
    let name = xdomain.file_name()?.to_string_lossy().into_owned();
    let (domain, _) = name.split_once('-')?;
    read_trimmed(
        &root
            .join("bus/thunderbolt/devices")
            .join(format!("{domain}-0"))
            .join(file),
    )
    .filter(|s| !s.is_empty())
}

fn thunderbolt_link(root: &Path, name: &str, dir: &Path) -> ThunderboltLink {
    let mut link = ThunderboltLink {
        interface: name.to_string(),
        ..ThunderboltLink::default()
    };
    let Some(xd) = xdomain_dir(root, dir) else {
        return link;
    };
    let speed = |f: &str| {
        read_trimmed(&xd.join(f))
            .and_then(|t| parse_link_speed(&t))
            .unwrap_or(0)
    };
    link.rx_lane_bits_per_second = speed("rx_speed");
    link.tx_lane_bits_per_second = speed("tx_speed");
    link.rx_lanes = read_num(&xd.join("rx_lanes")).unwrap_or(0);
    link.tx_lanes = read_num(&xd.join("tx_lanes")).unwrap_or(0);
    link.generation = generation(root, &xd);
    link.peer_name = read_trimmed(&xd.join("device_name")).filter(|s| !s.is_empty());
    link.peer_uid = read_trimmed(&xd.join("unique_id")).filter(|s| !s.is_empty());
    // What the host at the far end reads as this host's `unique_id`.
    link.local_uid = host_router_file(root, &xd, "unique_id");
    link.xdomain = xd.file_name().map(|n| n.to_string_lossy().into_owned());
    link
}

pub(super) fn thunderbolt_interfaces(root: &Path) -> Result<Vec<ThunderboltLink>, Unsupported> {
    let net = root.join("class/net");
    Ok(names_in(&net)
        .into_iter()
        .filter_map(|name| {
            let dir = net.join(&name);
            (driver_of(&dir).as_deref() == Some(TB_DRIVER))
                .then(|| thunderbolt_link(root, &name, &dir))
        })
        .collect())
}
