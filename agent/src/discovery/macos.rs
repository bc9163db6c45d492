//! macOS discovery: runs `networksetup`, `ifconfig` and `system_profiler`
//! and feeds their output to the pure parsers in [`super::parse`].
//!
//! These are blocking child processes (`system_profiler` takes seconds):
//! call them from a blocking task, never from the probe thread. Speed and
//! MTU come from the 64-bit interface MIB (see `counters::macos`).

use std::io;
use std::path::Path;
use std::process::Command;

use super::parse::{
    hardware_port_kind, parse_bridge_members, parse_hardware_ports,
    parse_system_profiler_thunderbolt, HardwarePort, TbReceptacle,
};
use super::ioreg::{parse_ioreg_ports, receptacle_links};
use super::{addresses, is_loopback, kind, Interface, ThunderboltLink};
use crate::counters::{CounterSource, MibCounters};
use crate::platform::{Support, Unsupported};

/// macOS classifies interfaces through networksetup and system_profiler.
pub(super) const SUPPORT: Support = Support::Supported;

/// The lanes and lane speed of each Thunderbolt port, from the lane
/// adapters IOKit shows (`ioreg`, fast enough for the sampler, unlike
/// `system_profiler`), named by the `enX` of its "Thunderbolt N" hardware
/// port (`Socket ID` N). A port whose receptacle has no `enX` is left out;
/// `ioreg` or `networksetup` failing is no reading this round (an empty
/// list), not an unsupported OS.
pub(super) fn thunderbolt_interfaces(
    _sysfs_root: &Path,
) -> Result<Vec<ThunderboltLink>, Unsupported> {
    let text = run("/usr/sbin/ioreg", &["-r", "-d", "1", "-c", "IOThunderboltPort", "-l", "-w0"]);
    let (Ok(text), Ok(ports)) = (text, hardware_ports()) else {
        return Ok(Vec::new());
    };
    let links = receptacle_links(&parse_ioreg_ports(&text))
        .into_iter()
        .filter_map(|(socket, port)| {
            let n: u32 = socket.parse().ok()?;
            let device = ports.iter().find(|p| p.thunderbolt_number() == Some(n))?;
            Some(port.link(&device.device))
        })
        .collect();
    Ok(links)
}

fn run(program: &str, args: &[&str]) -> io::Result<String> {
    let out = Command::new(program).args(args).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{program} {} exited with {}",
            args.join(" "),
            out.status
        )));
    }
    String::from_utf8(out.stdout).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// `networksetup -listallhardwareports`, parsed.
pub fn hardware_ports() -> io::Result<Vec<HardwarePort>> {
    Ok(parse_hardware_ports(&run(
        "/usr/sbin/networksetup",
        &["-listallhardwareports"],
    )?))
}

/// Members of a bridge from `ifconfig <bridge>`.
pub fn bridge_members(bridge: &str) -> io::Result<Vec<String>> {
    Ok(parse_bridge_members(&run("/sbin/ifconfig", &[bridge])?))
}

/// `system_profiler SPThunderboltDataType -json`, parsed (slow).
pub fn thunderbolt_receptacles() -> io::Result<Vec<TbReceptacle>> {
    let json = run(
        "/usr/sbin/system_profiler",
        &["SPThunderboltDataType", "-json"],
    )?;
    parse_system_profiler_thunderbolt(&json)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Who is at the far end of the port's cable: the one host cabled
/// directly (no hub between), with the receptacle's own domain UUID, which
/// that host reports as its peer's.
fn cabling(iface: &mut Interface, r: &TbReceptacle) {
    iface.local_uid = r.domain_uuid.clone().unwrap_or_default();
    if let Some(peer) = r.direct_peer() {
        iface.remote_uid = peer.domain_uuid.clone();
        iface.remote_name = peer.name.clone();
    }
}

pub(super) fn describe(name: &str, _sysfs_root: &Path) -> Interface {
    let mut iface = Interface {
        name: name.to_string(),
        addresses: addresses(name),
        ..Interface::default()
    };
    if let Ok(c) = MibCounters::new().read(name) {
        iface.mtu = c.mtu;
        iface.speed_bits_per_second = c.speed_bits_per_second;
    }
    let port = hardware_ports()
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.device == name);
    let k = if is_loopback(name) {
        kind::LOOPBACK
    } else if let Some(p) = &port {
        hardware_port_kind(&p.port)
    } else if name.starts_with("bridge") {
        kind::BRIDGE
    } else {
        kind::OTHER
    };
    iface.kind = k.to_string();
    if k == kind::BRIDGE {
        iface.members = bridge_members(name).unwrap_or_default();
    }
    if k == kind::THUNDERBOLT {
        // The MIB baudrate of a TB port is not the negotiated link speed;
        // system_profiler's receptacle is.
        let number = port.as_ref().and_then(HardwarePort::thunderbolt_number);
        let receptacle = thunderbolt_receptacles()
            .unwrap_or_default()
            .into_iter()
            .find(|r| r.receptacle_id.is_some() && r.receptacle_id == number);
        if let Some(r) = receptacle {
            if r.current_speed_bits_per_second > 0 {
                iface.speed_bits_per_second = r.current_speed_bits_per_second;
            }
            iface.generation = r.generation().to_string();
            cabling(&mut iface, &r);
        }
    }
    iface
}
