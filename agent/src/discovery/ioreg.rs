//! The Thunderbolt lane adapters of the host's ports as IOKit shows them:
//! a pure parser of `ioreg -r -d 1 -c IOThunderboltPort -l -w0`, and what
//! its registers mean. Running the command is `macos.rs`'s job.
//!
//! Each `IOThunderboltPort` object is one adapter of a Thunderbolt switch
//! (`+-o IOThunderboltPort@N  <class IOThunderboltPort, ...>` followed by
//! its properties, one `"Key" = value` a line, behind the tree's `|`). The
//! host's own port (a receptacle) is a *lane* adapter (`Adapter Type` 1)
//! with a `Socket ID`, the receptacle number of "Thunderbolt N" in
//! `networksetup`; a receptacle has two lane adapters, the first carrying
//! the bonded link. The link registers are the USB4 lane adapter's, raw,
//! decoded as Linux decodes the same registers
//! (`drivers/thunderbolt/tb_regs.h`, `LANE_ADP_CS_1`, and `tb.h`'s
//! `enum tb_link_width`):
//!
//! - `Current Link Speed`: 0x8 Gen 2 (10 Gb/s a lane), 0x4 Gen 3
//!   (20 Gb/s), 0x2 Gen 4 (40 Gb/s, Thunderbolt 5); 0 no link.
//! - `Current Link Width`: 0x1 one lane each way, 0x2 two, 0x4 three to
//!   transmit and one to receive, 0x8 one to transmit and three to receive
//!   (TB5's asymmetric "Bandwidth Boost"); 0 no link.
//! - `Supported Link Speed`: a mask of the same speed codes; 0x2 in it is
//!   a Thunderbolt 5 port (Apple's TB4-class hosts report 12, 0x4 | 0x8).
//!
//! Hostile input is bounded: at most [`MAX_PORTS`] objects are read and
//! lines longer than [`MAX_LINE`] bytes are skipped.

use super::ThunderboltLink;

/// Most `IOThunderboltPort` objects read.
pub const MAX_PORTS: usize = 256;
/// Longest property line read, bytes.
pub const MAX_LINE: usize = 4096;

const GBPS: u64 = 1_000_000_000;

/// One `IOThunderboltPort` object's properties that matter here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoregPort {
    /// `Port Number` (the adapter number in its switch).
    pub port_number: Option<u64>,
    /// `Socket ID`: the receptacle number, on the host's own ports.
    pub socket_id: Option<String>,
    /// `Adapter Type` (1: lane).
    pub adapter_type: Option<u64>,
    /// `Current Link Speed` code.
    pub current_speed: u64,
    /// `Current Link Width` bits.
    pub current_width: u64,
    /// `Supported Link Speed` mask.
    pub supported_speed: u64,
}

/// `Adapter Type` of a lane adapter.
const LANE_ADAPTER: u64 = 1;

impl IoregPort {
    /// A lane adapter of one of this host's receptacles.
    pub fn is_receptacle_lane(&self) -> bool {
        self.adapter_type == Some(LANE_ADAPTER) && self.socket_id.is_some()
    }

    /// Lanes (receive, transmit) of the current width.
    pub fn lanes(&self) -> (u32, u32) {
        match self.current_width {
            0x1 => (1, 1),
            0x2 => (2, 2),
            0x4 => (1, 3),
            0x8 => (3, 1),
            _ => (0, 0),
        }
    }

    /// Per-lane speed of the current link, bits per second (0: none or
    /// unknown).
    pub fn lane_bits_per_second(&self) -> u64 {
        speed_of(self.current_speed).unwrap_or(0)
    }

    /// The port's generation as the downshift rule names it: "5" when it
    /// supports 40 Gb/s lanes, "4" when 20 Gb/s, "2" when 10 Gb/s, empty
    /// when unknown.
    pub fn generation(&self) -> &'static str {
        let m = self.supported_speed;
        if m & 0x2 != 0 {
            "5"
        } else if m & 0x4 != 0 {
            "4"
        } else if m & 0x8 != 0 {
            "2"
        } else {
            ""
        }
    }

    /// As a link of `interface`, for the downshift rule.
    pub fn link(&self, interface: &str) -> ThunderboltLink {
        let (rx_lanes, tx_lanes) = self.lanes();
        let speed = self.lane_bits_per_second();
        ThunderboltLink {
            interface: interface.to_string(),
            rx_lanes,
            tx_lanes,
            rx_lane_bits_per_second: speed,
            tx_lane_bits_per_second: speed,
            generation: self.generation().to_string(),
            ..ThunderboltLink::default()
        }
    }
}

/// Per-lane speed of a `Current Link Speed` code.
fn speed_of(code: u64) -> Option<u64> {
    match code {
        0x8 => Some(10 * GBPS),
        0x4 => Some(20 * GBPS),
        0x2 => Some(40 * GBPS),
        _ => None,
    }
}

/// A `"Key" = value` line, behind the tree's `|` and blanks.
fn property(line: &str) -> Option<(&str, &str)> {
    let line = line.trim_start_matches(|c: char| c == '|' || c.is_whitespace());
    let rest = line.strip_prefix('"')?;
    let (key, rest) = rest.split_once('"')?;
    let value = rest.trim_start().strip_prefix('=')?.trim();
    Some((key, value))
}

/// A number as ioreg prints it (decimal, or `0x` hex).
fn number(v: &str) -> Option<u64> {
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

fn apply(port: &mut IoregPort, key: &str, value: &str) {
    match key {
        "Port Number" => port.port_number = number(value),
        "Socket ID" => port.socket_id = Some(value.trim_matches('"').to_string()),
        "Adapter Type" => port.adapter_type = number(value),
        "Current Link Speed" => port.current_speed = number(value).unwrap_or(0),
        "Current Link Width" => port.current_width = number(value).unwrap_or(0),
        "Supported Link Speed" => port.supported_speed = number(value).unwrap_or(0),
        _ => {}
    }
}

/// Every `IOThunderboltPort` object of the output, in order.
pub fn parse_ioreg_ports(text: &str) -> Vec<IoregPort> {
    let mut ports: Vec<IoregPort> = Vec::new();
    for line in text.lines().filter(|l| l.len() <= MAX_LINE) {
        if line.contains("+-o ") {
            if ports.len() == MAX_PORTS {
                break;
            }
            let is_port = line.contains("<class IOThunderboltPort");
            ports.push(IoregPort {
                // A child of another class (with `-d 1` there is none)
                // marks itself so its properties are not the port's.
                adapter_type: (!is_port).then_some(u64::MAX),
                ..IoregPort::default()
            });
            continue;
        }
        if let (Some(port), Some((key, value))) = (ports.last_mut(), property(line)) {
            if port.adapter_type != Some(u64::MAX) {
                apply(port, key, value);
            }
        }
    }
    ports.retain(|p| p.adapter_type != Some(u64::MAX));
    ports
}

/// The link of each receptacle: of its lane adapters, the one with the
/// most lanes (the second lane adapter of a bonded pair reports none), as
/// (socket id, port).
pub fn receptacle_links(ports: &[IoregPort]) -> Vec<(String, IoregPort)> {
    let mut best: Vec<(String, IoregPort)> = Vec::new();
    for p in ports.iter().filter(|p| p.is_receptacle_lane()) {
        let socket = p.socket_id.clone().unwrap_or_default();
        let lanes = |q: &IoregPort| {
            let (rx, tx) = q.lanes();
            rx + tx
        };
        match best.iter_mut().find(|(s, _)| *s == socket) {
            Some((_, kept)) if lanes(p) > lanes(kept) => *kept = p.clone(),
            Some(_) => {}
            None => best.push((socket, p.clone())),
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(speed: u64, width: u64, supported: u64) -> IoregPort {
        IoregPort {
            socket_id: Some("1".into()),
            adapter_type: Some(LANE_ADAPTER),
            current_speed: speed,
            current_width: width,
            supported_speed: supported,
            ..IoregPort::default()
        }
    }

    #[test]
    fn registers_decode_as_linux_decodes_them() {
        let tb5 = port(0x2, 0x2, 14);
        assert_eq!(tb5.lanes(), (2, 2));
        assert_eq!(tb5.lane_bits_per_second(), 40 * GBPS);
        assert_eq!(tb5.generation(), "5");
        // Bandwidth Boost: three lanes to transmit, one to receive.
        assert_eq!(port(0x2, 0x4, 14).lanes(), (1, 3));
        assert_eq!(port(0x2, 0x8, 14).lanes(), (3, 1));
        let tb4 = port(0x4, 0x1, 12);
        assert_eq!((tb4.lanes(), tb4.generation()), ((1, 1), "4"));
        assert_eq!(tb4.lane_bits_per_second(), 20 * GBPS);
        assert_eq!(port(0x8, 0x2, 8).lane_bits_per_second(), 10 * GBPS);
        // No link, and codes no spec defines: nothing, not a guess.
        let idle = port(0, 0, 12);
        assert_eq!((idle.lanes(), idle.lane_bits_per_second()), ((0, 0), 0));
        assert_eq!(port(0x1, 0x10, 0).lane_bits_per_second(), 0);
        assert_eq!(port(0x1, 0x10, 0).lanes(), (0, 0));
        assert_eq!(port(0x1, 0x10, 0).generation(), "");
    }

    #[test]
    fn the_bonded_lane_adapter_stands_for_its_receptacle() {
        let mut second = port(0x4, 0, 12);
        second.port_number = Some(2);
        let first = port(0x4, 0x2, 12);
        let links = receptacle_links(&[second, first.clone()]);
        assert_eq!(links, [("1".to_string(), first)]);
    }

    #[test]
    fn other_classes_and_long_lines_are_not_read_as_properties() {
        let long = format!("  |   \"Socket ID\" = \"{}\"", "9".repeat(MAX_LINE));
        let text = format!(
            "+-o IOThunderboltPort@1  <class IOThunderboltPort, id 0x1>\n  | {{\n  |   \"Adapter Type\" = 1\n{long}\n  | }}\n  +-o IOThunderboltSwitchType5  <class IOThunderboltSwitchType5, id 0x2>\n    |   \"Socket ID\" = \"7\"\n"
        );
        let ports = parse_ioreg_ports(&text);
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].socket_id, None);
        assert_eq!(ports[0].adapter_type, Some(1));
    }
}
