//! Pure parsers for the macOS discovery commands' output.
//!
//! They take text and return values, so they build and are tested on every
//! OS (fixtures under `agent/tests/fixtures/macos/`); running the commands
//! is `macos.rs`'s job.
//! - `networksetup -listallhardwareports`: blocks of `Hardware Port: X`,
//!   `Device: Y`, `Ethernet Address: Z`.
//! - `ifconfig bridge0`: `member: en2 flags=3<LEARNING,DISCOVER>` lines.
//! - `system_profiler SPThunderboltDataType -json`, as real captures show
//!   it (`agent/tests/fixtures/macos/system_profiler/`, whose README cites
//!   each source): one top-level entry per host bus
//!   (`thunderboltusb4_bus_N` on Apple silicon) with this host's
//!   `domain_uuid_key` and a `receptacle_1_tag { receptacle_id_key,
//!   current_speed_key, receptacle_status_key, link_status_key }` (Intel
//!   buses carry two). What is plugged in hangs off the bus in `_items`: a
//!   peer host is an entry with a `domain_uuid_key` (an XDomain host), its
//!   `device_name_key` the model identifier ("Mac15,14") and `_name` the
//!   marketing name ("Mac Studio"); drives, docks, hubs and displays have a
//!   `switch_uid_key` and `mode_key` and no domain: [`TbDevice`]s, never
//!   peers. What sits behind a hub nests in that hub's own `_items`.
//!   Hostile input is bounded: at most [`MAX_DEPTH`] levels and
//!   [`MAX_NODES`] entries are walked per bus, the rest counted in
//!   [`TbReceptacle::skipped`] and dropped.

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

/// Member ports from `ifconfig bridgeN`: the link watcher's parser, one
/// copy for both.
pub use crate::link::kev::parse_bridge_members;

/// One Thunderbolt receptacle (port) from system_profiler.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TbReceptacle {
    /// The bus entry's `_name`, e.g. `thunderboltusb4_bus_1`.
    pub bus: String,
    /// `receptacle_id_key`: the N of "Thunderbolt N" in networksetup.
    pub receptacle_id: Option<u32>,
    /// `receptacle_status_key`, e.g. `receptacle_connected`.
    pub status: String,
    /// Something is plugged in: the status says so, or (status missing)
    /// something enumerated behind the port.
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
    /// Hosts reached through this port, directly or behind hubs.
    pub peers: Vec<TbPeer>,
    /// Drives, docks, hubs and displays on this port.
    pub devices: Vec<TbDevice>,
    /// `_items` entries not walked (too deep or too many).
    pub skipped: usize,
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

    /// The one host cabled straight to this port (no hub or dock between),
    /// if exactly one is: the far end of this port's cable.
    pub fn direct_peer(&self) -> Option<&TbPeer> {
        let mut direct = self.peers.iter().filter(|p| p.via.is_empty());
        match (direct.next(), direct.next()) {
            (Some(peer), None) => Some(peer),
            _ => None,
        }
    }
}

/// Deepest `_items` nesting walked below a bus. A route string has six
/// hops; one more for the XDomain peer at the end.
pub const MAX_DEPTH: usize = 7;
/// Most `_items` entries walked below one bus.
pub const MAX_NODES: usize = 256;

/// A host at the far end of a Thunderbolt link (an XDomain peer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TbPeer {
    /// `_name`: the marketing name ("Mac Studio", "MacBook Pro").
    pub name: String,
    /// `device_name_key` as given: a Mac's model identifier ("Mac16,10"),
    /// or whatever another host (a Linux box) announces; see
    /// [`TbPeer::mac_model`].
    pub device_name: Option<String>,
    /// The peer's domain UUID (`domain_uuid_key`): the other end of a
    /// topology edge, which that host reports as its own bus domain.
    pub domain_uuid: String,
    /// Hubs or docks between this port and the peer, nearest first; empty
    /// for a direct cable.
    pub via: Vec<String>,
}

impl TbPeer {
    /// The Mac model identifier, when `device_name_key` is one.
    pub fn mac_model(&self) -> Option<&str> {
        self.device_name
            .as_deref()
            .filter(|d| is_mac_model_identifier(d))
    }
}

/// A device on a Thunderbolt port that is not a host: a drive, dock, hub
/// or display.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TbDevice {
    /// `device_name_key` or, without one, `_name` ("Envoy Ultra",
    /// "SB-XTM5", "Thunderbolt 4 Docking Station (8-in-1)").
    pub name: String,
    /// `mode_key`: `usb_four_v2`, `usb_four`, `thunderbolt_three`, ...
    pub mode: Option<String>,
    /// Negotiated speed of its upstream link (the
    /// `receptacle_upstream_ambiguous_tag`) in bits per second, 0 unknown.
    pub upstream_bits_per_second: u64,
    /// Hubs or docks between the port and this device, nearest first.
    pub via: Vec<String>,
}

/// Whether `s` is an Apple model identifier for a Mac: a name starting
/// with "Mac" or "iMac" ("Mac", "Macmini", "MacBookPro", "iMacPro") and
/// then `major,minor` ("Mac16,10", "Macmini9,1"). "Mac mini" (a
/// marketing name) and "Envoy Ultra" are not.
pub fn is_mac_model_identifier(s: &str) -> bool {
    let Some(split) = s.find(|c: char| c.is_ascii_digit()) else {
        return false;
    };
    let (family, version) = s.split_at(split);
    let Some((major, minor)) = version.split_once(',') else {
        return false;
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    (family.starts_with("Mac") || family.starts_with("iMac"))
        && family.bytes().all(|b| b.is_ascii_alphabetic())
        && digits(major)
        && digits(minor)
}

fn str_field(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn items(v: &Value) -> &[Value] {
    v.get("_items")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// What hangs off one bus, walked depth first.
#[derive(Default)]
struct Walk {
    peers: Vec<TbPeer>,
    devices: Vec<TbDevice>,
    walked: usize,
    skipped: usize,
}

impl Walk {
    fn visit(&mut self, entries: &[Value], via: &mut Vec<String>) {
        for entry in entries {
            if via.len() >= MAX_DEPTH || self.walked >= MAX_NODES {
                self.skipped += 1;
                continue;
            }
            self.walked += 1;
            let name = str_field(entry, "_name").unwrap_or_default();
            let device_name = str_field(entry, "device_name_key");
            if let Some(domain_uuid) = str_field(entry, "domain_uuid_key") {
                // A host: its own buses are its business, not this port's.
                self.peers.push(TbPeer {
                    domain_uuid,
                    name,
                    device_name,
                    via: via.clone(),
                });
                continue;
            }
            let upstream = entry
                .get("receptacle_upstream_ambiguous_tag")
                .and_then(|t| str_field(t, "current_speed_key"))
                .and_then(|s| parse_link_speed(&s))
                .unwrap_or(0);
            let label = device_name.unwrap_or(name);
            self.devices.push(TbDevice {
                name: label.clone(),
                mode: str_field(entry, "mode_key"),
                upstream_bits_per_second: upstream,
                via: via.clone(),
            });
            via.push(label);
            self.visit(items(entry), via);
            via.pop();
        }
    }
}

/// Parses `system_profiler SPThunderboltDataType -json` into one entry per
/// receptacle, in bus order. What hangs off a bus belongs to its connected
/// receptacles (Apple silicon has one per bus; on an Intel bus with two
/// ports in use the profiler does not say which port holds what, and both
/// list it). Unknown keys are ignored, missing ones left empty; only
/// malformed JSON is an error.
pub fn parse_system_profiler_thunderbolt(
    json: &str,
) -> Result<Vec<TbReceptacle>, serde_json::Error> {
    let root: Value = serde_json::from_str(json)?;
    let mut out = Vec::new();
    let Some(buses) = root.get("SPThunderboltDataType").and_then(Value::as_array) else {
        return Ok(out);
    };
    for bus in buses {
        let Some(obj) = bus.as_object() else {
            continue;
        };
        let mut walk = Walk::default();
        walk.visit(items(bus), &mut Vec::new());
        let enumerated = !walk.peers.is_empty() || !walk.devices.is_empty();
        let mut tags: Vec<(&String, &Value)> = obj
            .iter()
            .filter(|(k, v)| k.starts_with("receptacle_") && k.ends_with("_tag") && v.is_object())
            .collect();
        tags.sort_by_key(|(k, _)| k.to_string());
        for (_, tag) in tags {
            let status = str_field(tag, "receptacle_status_key").unwrap_or_default();
            let connected = if status.is_empty() {
                enumerated
            } else {
                !status.contains("no_devices")
            };
            let speed_text = str_field(tag, "current_speed_key").unwrap_or_default();
            let speed = parse_link_speed(&speed_text).unwrap_or(0);
            let capability_only = speed_text
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("up to");
            let (peers, devices, skipped) = if connected {
                (walk.peers.clone(), walk.devices.clone(), walk.skipped)
            } else {
                (Vec::new(), Vec::new(), 0)
            };
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
                peers,
                devices,
                skipped,
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
        for (port, k) in [
            ("Thunderbolt Bridge", kind::BRIDGE),
            ("Thunderbolt 3", kind::THUNDERBOLT),
            ("Wi-Fi", kind::WIFI),
            ("Ethernet", kind::ETHERNET),
            ("USB 10/100/1000 LAN", kind::ETHERNET),
            ("iPhone USB", kind::OTHER),
        ] {
            assert_eq!(hardware_port_kind(port), k, "{port}");
        }
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
    fn model_identifiers() {
        for yes in [
            "Mac16,10",
            "Mac15,14",
            "Mac17,7",
            "Macmini9,1",
            "MacBookPro18,3",
            "iMac21,1",
        ] {
            assert!(is_mac_model_identifier(yes), "{yes}");
        }
        for no in [
            "Mac mini",
            "Mac Studio",
            "Envoy Ultra",
            "SB-XTM5",
            "TBU405Pro",
            "Device15,12",
            "Mac16,",
            "Mac,1",
            "Mac16,10a",
            "",
        ] {
            assert!(!is_mac_model_identifier(no), "{no}");
        }
    }

    #[test]
    fn empty_or_bad_json() {
        assert!(parse_system_profiler_thunderbolt("{}").unwrap().is_empty());
        assert!(parse_system_profiler_thunderbolt("not json").is_err());
    }

    /// A chain deeper than any route string, and a bus with more entries
    /// than the bound: both are walked up to the bound and counted.
    #[test]
    fn hostile_nesting_is_bounded() {
        let mut entry = serde_json::json!({"_name": "peer", "domain_uuid_key": "P"});
        for i in 0..50 {
            entry = serde_json::json!({"_name": format!("hub{i}"), "_items": [entry]});
        }
        let doc = serde_json::json!({"SPThunderboltDataType": [{
            "receptacle_1_tag": {"receptacle_status_key": "receptacle_connected"},
            "_items": [entry]
        }]});
        let r = parse_system_profiler_thunderbolt(&doc.to_string()).unwrap();
        assert_eq!(r[0].devices.len(), MAX_DEPTH);
        assert!(r[0].peers.is_empty());
        assert_eq!(r[0].skipped, 1);

        let wide: Vec<Value> = (0..MAX_NODES + 10)
            .map(|i| serde_json::json!({"_name": format!("d{i}")}))
            .collect();
        let doc = serde_json::json!({"SPThunderboltDataType": [{
            "receptacle_1_tag": {"receptacle_status_key": "receptacle_connected"},
            "_items": wide
        }]});
        let r = parse_system_profiler_thunderbolt(&doc.to_string()).unwrap();
        assert_eq!(r[0].devices.len(), MAX_NODES);
        assert_eq!(r[0].skipped, 10);
    }
}
