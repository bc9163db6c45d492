//! Pure parsers for the macOS discovery commands' output.
//!
//! They take text and return values, so they build and are tested on every
//! OS (fixtures under `agent/tests/fixtures/macos/`); running the commands
//! is `macos.rs`'s job.
//! - `networksetup -listallhardwareports`: blocks of `Hardware Port: X`,
//!   `Device: Y`, `Ethernet Address: Z`.
//! - `ifconfig bridge0`: `member: en2 flags=3<LEARNING,DISCOVER>` lines.
//! - `system_profiler SPThunderboltDataType -json`: in [`super::profiler`],
//!   re-exported here.

use super::kind;
pub use super::profiler::{
    is_mac_model_identifier, parse_system_profiler_thunderbolt, TbDevice, TbPeer, TbReceptacle,
};

/// One block of `networksetup -listallhardwareports`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardwarePort {
    /// The port name: "Thunderbolt Bridge", "Thunderbolt 1", "Wi-Fi".
    pub port: String,
    /// The BSD device: "bridge0", "en2".
    pub device: String,
    /// `Ethernet Address`, if given and not "N/A".
    pub mac: Option<String>,
}

impl HardwarePort {
    /// The interface kind this port name implies.
    pub fn kind(&self) -> &'static str {
        hardware_port_kind(&self.port)
    }

    /// N of "Thunderbolt N", which is system_profiler's `receptacle_id_key`.
    pub fn thunderbolt_number(&self) -> Option<u32> {
        self.port
            .strip_prefix("Thunderbolt ")
            .and_then(|n| n.trim().parse().ok())
    }
}

/// Kind implied by a hardware port name.
pub fn hardware_port_kind(port: &str) -> &'static str {
    let lower = port.to_ascii_lowercase();
    if lower == "thunderbolt bridge" || lower.contains("bridge") {
        kind::BRIDGE
    } else if lower.starts_with("thunderbolt") {
        kind::THUNDERBOLT
    } else if lower == "wi-fi" || lower == "airport" {
        kind::WIFI
    } else if lower.contains("ethernet") || lower.contains("lan") {
        kind::ETHERNET
    } else {
        kind::OTHER
    }
}

/// Parses `networksetup -listallhardwareports`. Blocks without a device
/// (and the trailing "VLAN Configurations" section) are skipped.
pub fn parse_hardware_ports(text: &str) -> Vec<HardwarePort> {
    let mut out = Vec::new();
    let mut port: Option<String> = None;
    let mut device: Option<String> = None;
    let mut mac: Option<String> = None;
    let mut flush =
        |port: &mut Option<String>, device: &mut Option<String>, mac: &mut Option<String>| {
            if let (Some(p), Some(d)) = (port.take(), device.take()) {
                out.push(HardwarePort {
                    port: p,
                    device: d,
                    mac: mac.take(),
                });
            }
            *port = None;
            *device = None;
            *mac = None;
        };
    for line in text.lines() {
        let line = line.trim();
        if let Some(p) = line.strip_prefix("Hardware Port:") {
            flush(&mut port, &mut device, &mut mac);
            port = Some(p.trim().to_string());
        } else if let Some(d) = line.strip_prefix("Device:") {
            device = Some(d.trim().to_string()).filter(|d| !d.is_empty());
        } else if let Some(m) = line.strip_prefix("Ethernet Address:") {
            let m = m.trim();
            mac = (!m.is_empty() && m != "N/A").then(|| m.to_string());
        } else if line.starts_with("VLAN Configurations") {
            flush(&mut port, &mut device, &mut mac);
        }
    }
    flush(&mut port, &mut device, &mut mac);
    out
}

/// Member ports from `ifconfig bridgeN` (`member: en2 flags=...` lines),
/// in the order listed.
pub fn parse_bridge_members(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("member:"))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_kinds() {
        assert_eq!(hardware_port_kind("Thunderbolt Bridge"), kind::BRIDGE);
        assert_eq!(hardware_port_kind("Thunderbolt 3"), kind::THUNDERBOLT);
        assert_eq!(hardware_port_kind("Wi-Fi"), kind::WIFI);
        assert_eq!(hardware_port_kind("Ethernet"), kind::ETHERNET);
        assert_eq!(hardware_port_kind("USB 10/100/1000 LAN"), kind::ETHERNET);
        assert_eq!(hardware_port_kind("iPhone USB"), kind::OTHER);
    }

    #[test]
    fn hardware_ports_inline() {
        let text = "\nHardware Port: Thunderbolt 2\nDevice: en3\nEthernet Address: 36:1a:2b:3c:4d:02\n\nHardware Port: Broken\nEthernet Address: N/A\n\nVLAN Configurations\n===================\n";
        let ports = parse_hardware_ports(text);
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].device, "en3");
        assert_eq!(ports[0].thunderbolt_number(), Some(2));
        assert_eq!(ports[0].mac.as_deref(), Some("36:1a:2b:3c:4d:02"));
    }

    #[test]
    fn bridge_members_inline() {
        let text = "bridge0: flags=8863<UP>\n\tmember: en2 flags=3<LEARNING,DISCOVER>\n\t        ifmaxaddr 0 port 9 priority 0 path cost 0\n\tmember: en3 flags=3<LEARNING,DISCOVER>\n";
        assert_eq!(parse_bridge_members(text), vec!["en2", "en3"]);
        assert!(parse_bridge_members("lo0: flags=8049<UP,LOOPBACK>").is_empty());
    }
}
