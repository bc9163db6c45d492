//! Pure parsers for the macOS discovery commands' output.
//!
//! They take text and return values, so they build and are tested on every
//! OS (fixtures under `agent/tests/fixtures/macos/`); running the commands
//! is `macos.rs`'s job.
//! - `networksetup -listallhardwareports`: blocks of `Hardware Port: X`,
//!   `Device: Y`, `Ethernet Address: Z`.
//! - `ifconfig bridge0`: `member: en2 flags=3<LEARNING,DISCOVER>` lines.
//! - `system_profiler SPThunderboltDataType -json`: one entry per bus with
//!   `receptacle_N_tag { receptacle_id_key, current_speed_key,
//!   receptacle_status_key, link_status_key }`, `domain_uuid_key` (this
//!   host's domain) and `_items[].domain_uuid_key` (the peer's domain).

use serde_json::Value;

use super::{kind, parse_link_speed};

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

/// One Thunderbolt receptacle (port) from system_profiler.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TbReceptacle {
    /// The bus entry's `_name`, e.g. `thunderboltusb4_bus_1`.
    pub bus: String,
    /// `receptacle_id_key`: the N of "Thunderbolt N" in networksetup.
    pub receptacle_id: Option<u32>,
    /// `receptacle_status_key`, e.g. `receptacle_connected`.
    pub status: String,
    /// Something is plugged in (status is not `..._no_devices_connected`).
    pub connected: bool,
    /// Negotiated speed in bits per second when something is connected;
    /// 0 otherwise (system_profiler then prints the port's capability,
    /// "Up to 120 Gb/s", which goes to `max_speed_bits_per_second`).
    pub current_speed_bits_per_second: u64,
    /// The port's capability from an "Up to N Gb/s" value, 0 if not given.
    pub max_speed_bits_per_second: u64,
    /// `link_status_key`, e.g. `0x2`.
    pub link_status: Option<String>,
    /// This host's domain UUID on that bus (`domain_uuid_key`).
    pub domain_uuid: Option<String>,
    /// Domain UUIDs of what is connected (`_items[].domain_uuid_key`): a
    /// peer Mac's domain, i.e. the other end of a topology edge.
    pub peer_domain_uuids: Vec<String>,
    /// Names of connected devices (`_items[]._name`/`device_name_key`).
    pub peer_names: Vec<String>,
}

impl TbReceptacle {
    /// "5" when the negotiated speed is above 40 Gb/s (only TB5 gets
    /// there), empty otherwise: 40 Gb/s may be TB3, TB4 or a TB5 port
    /// talking to a TB4 peer.
    pub fn generation(&self) -> &'static str {
        if self.current_speed_bits_per_second > 40_000_000_000 {
            "5"
        } else {
            ""
        }
    }
}

fn str_field(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Parses `system_profiler SPThunderboltDataType -json` into one entry per
/// receptacle, in bus order. Unknown keys are ignored, missing ones left
/// empty; only malformed JSON is an error.
pub fn parse_system_profiler_thunderbolt(
    json: &str,
) -> Result<Vec<TbReceptacle>, serde_json::Error> {
    let root: Value = serde_json::from_str(json)?;
    let mut out = Vec::new();
    let Some(buses) = root.get("SPThunderboltDataType").and_then(Value::as_array) else {
        return Ok(out);
    };
    for bus in buses {
        let items: Vec<&Value> = bus
            .get("_items")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let Some(obj) = bus.as_object() else {
            continue;
        };
        let mut tags: Vec<(&String, &Value)> = obj
            .iter()
            .filter(|(k, v)| k.starts_with("receptacle_") && k.ends_with("_tag") && v.is_object())
            .collect();
        tags.sort_by_key(|(k, _)| k.to_string());
        for (_, tag) in tags {
            let status = str_field(tag, "receptacle_status_key").unwrap_or_default();
            let connected = !status.is_empty() && !status.contains("no_devices");
            let speed_text = str_field(tag, "current_speed_key").unwrap_or_default();
            let speed = parse_link_speed(&speed_text).unwrap_or(0);
            let capability_only = speed_text
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("up to");
            out.push(TbReceptacle {
                bus: str_field(bus, "_name").unwrap_or_default(),
                receptacle_id: str_field(tag, "receptacle_id_key")
                    .and_then(|s| s.trim().parse().ok()),
                connected,
                // macOS may print "Up to" on a connected port too [verify]:
                // connected means the number is the negotiated speed.
                current_speed_bits_per_second: if connected { speed } else { 0 },
                max_speed_bits_per_second: if capability_only { speed } else { 0 },
                link_status: str_field(tag, "link_status_key"),
                domain_uuid: str_field(bus, "domain_uuid_key"),
                peer_domain_uuids: items
                    .iter()
                    .filter_map(|i| str_field(i, "domain_uuid_key"))
                    .collect(),
                peer_names: items
                    .iter()
                    .filter_map(|i| {
                        str_field(i, "device_name_key").or_else(|| str_field(i, "_name"))
                    })
                    .collect(),
                status,
            });
        }
    }
    Ok(out)
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

    #[test]
    fn empty_or_bad_profiler_json() {
        assert!(parse_system_profiler_thunderbolt("{}").unwrap().is_empty());
        assert!(parse_system_profiler_thunderbolt("not json").is_err());
    }
}
