//! Pure parser for `system_profiler SPThunderboltDataType -json`.
//!
//! The shape, as real captures show it (`agent/tests/fixtures/macos/
//! system_profiler/`, README there cites each source):
//! - one top-level entry per host bus, `thunderboltusb4_bus_N` on Apple
//!   silicon, with this host's `domain_uuid_key` and one
//!   `receptacle_1_tag { receptacle_id_key, current_speed_key,
//!   receptacle_status_key, link_status_key }` (Intel buses carry two);
//! - what is plugged in hangs off the bus in `_items`. A peer host is an
//!   entry with a `domain_uuid_key` (an XDomain host); its
//!   `device_name_key` is the model identifier ("Mac15,14") and `_name`
//!   the marketing name ("Mac Studio"). Drives, docks, hubs and displays
//!   have a `switch_uid_key` and `mode_key` and no domain: they are
//!   [`TbDevice`]s, never peers;
//! - whatever sits behind a hub or dock nests in that device's own
//!   `_items`, to any depth a Thunderbolt route string allows.
//!
//! Hostile input is bounded: at most [`MAX_DEPTH`] levels and [`MAX_NODES`]
//! entries are walked per bus; what lies beyond is counted in
//! [`TbReceptacle::skipped`] and dropped.

use serde_json::Value;

use super::parse_link_speed;

/// Deepest `_items` nesting walked below a bus. A route string has six
/// hops; one more for the XDomain peer at the end.
pub const MAX_DEPTH: usize = 7;
/// Most `_items` entries walked below one bus.
pub const MAX_NODES: usize = 256;

/// A host at the far end of a Thunderbolt link (an XDomain peer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TbPeer {
    /// The peer's domain UUID (`domain_uuid_key`): the other end of a
    /// topology edge, which that host reports as its own bus domain.
    pub domain_uuid: String,
    /// `_name`: the marketing name ("Mac Studio", "MacBook Pro").
    pub name: String,
    /// `device_name_key` as given: a Mac's model identifier ("Mac16,10"),
    /// or whatever another host (a Linux box) announces.
    pub device_name: Option<String>,
    /// Names of the hubs or docks between this port and the peer, nearest
    /// first; empty for a direct cable.
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
    /// `device_name_key` or `_name` ("Envoy Ultra", "SB-XTM5").
    pub name: String,
    /// `vendor_name_key`, if given.
    pub vendor: Option<String>,
    /// `mode_key`: `usb_four_v2`, `usb_four`, `thunderbolt_three`, ...
    pub mode: Option<String>,
    /// Negotiated speed of its upstream link in bits per second, 0 unknown.
    pub upstream_bits_per_second: u64,
    /// Hubs or docks between the port and this device, nearest first.
    pub via: Vec<String>,
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
                vendor: str_field(entry, "vendor_name_key"),
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
