//! RDMA, read passively (no queue pair is touched): whether it is switched
//! on, each verbs device's port state and the interface it is paired with,
//! and the two checks made of them. Pure: the OS file reads `rdma_ctl`,
//! `ibv_devinfo` or sysfs and hands the text here.
//!
//! macOS 26.2+ (Apple TN3205): `rdma_ctl status` prints `enabled` or
//! `disabled`; `ibv_devinfo` lists one device `rdma_<bsd name>` per
//! Thunderbolt port in rdma-core's layout (`hca_id:` opens a device,
//! `port:` a port, `state: PORT_ACTIVE (4)`, `active_mtu: 4096 (5)`). A
//! port is active only once the other end has RDMA on too, and Thunderbolt
//! 4 ports get devices that never become active: said so in the detail.
//! Linux: `/sys/class/infiniband/<dev>/ports/<n>/state` (`4: ACTIVE`).

use super::Outcome;
use boltwatch_proto::fabric::Check;

/// What the node's RDMA looks like.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rdma {
    /// `rdma_ctl status` (macOS); `None` where the OS has no switch.
    pub enabled: Option<bool>,
    /// Every port of every device.
    pub ports: Vec<RdmaPort>,
}

/// One port of a verbs device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RdmaPort {
    /// `rdma_en2`, `mlx5_0`.
    pub device: String,
    /// Port number, from 1.
    pub port: u32,
    /// The network interface it is paired with, empty when unknown.
    pub interface: String,
    /// The state word: `PORT_ACTIVE`, `ACTIVE`, `PORT_DOWN`, `DOWN`.
    pub state: String,
    /// Active MTU in bytes, when printed.
    pub active_mtu: Option<u32>,
    /// Thunderbolt generation of the paired interface ("4", "5"), when known.
    pub generation: String,
}

impl RdmaPort {
    /// `PORT_ACTIVE` (ibv_devinfo) or `ACTIVE` (sysfs).
    pub fn active(&self) -> bool {
        matches!(self.state.as_str(), "PORT_ACTIVE" | "ACTIVE")
    }
}

/// `rdma_ctl status`: enabled, disabled, or neither word.
pub fn parse_rdma_ctl(text: &str) -> Option<bool> {
    let t = text.to_ascii_lowercase();
    // "disabled" contains no "enabled", but check it first for clarity.
    if t.contains("disabled") {
        Some(false)
    } else if t.contains("enabled") {
        Some(true)
    } else {
        None
    }
}

/// The ports `ibv_devinfo` prints. Apple names a device `rdma_<bsd>`, so
/// the paired interface is the name's tail; other devices' pairing is
/// not printed and stays empty.
pub fn parse_ibv_devinfo(text: &str) -> Vec<RdmaPort> {
    let mut out: Vec<RdmaPort> = Vec::new();
    let mut device = String::new();
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        let value = value.trim();
        let first = value.split_whitespace().next().unwrap_or("");
        match key.trim() {
            "hca_id" => device = value.to_string(),
            "port" => out.push(RdmaPort {
                device: device.clone(),
                port: first.parse().unwrap_or(0),
                interface: device.strip_prefix("rdma_").unwrap_or("").to_string(),
                ..Default::default()
            }),
            "state" => set_last(&mut out, &device, |p| p.state = first.to_string()),
            "active_mtu" => set_last(&mut out, &device, |p| p.active_mtu = first.parse().ok()),
            _ => {}
        }
    }
    out
}

/// Applies `f` to the last port when it belongs to `device` (a `state:`
/// before any `port:` line is the device's, not a port's).
fn set_last(out: &mut [RdmaPort], device: &str, f: impl FnOnce(&mut RdmaPort)) {
    if let Some(p) = out.last_mut().filter(|p| p.device == device) {
        f(p);
    }
}

/// A sysfs port `state` file (`4: ACTIVE`): the word.
pub fn parse_sysfs_state(text: &str) -> String {
    let t = text.trim();
    t.split_once(':').map_or(t, |(_, w)| w.trim()).to_string()
}

/// One outcome per port, then `rdma_ready` when RDMA is on, expected, or
/// has devices where the OS has no switch: ready when every device paired
/// with a cluster link is active.
pub fn checks(r: &Rdma, links: &[String], expect: bool) -> Vec<Outcome> {
    let mut out: Vec<Outcome> = r.ports.iter().map(port_check).collect();
    let on = r.enabled.unwrap_or(!r.ports.is_empty());
    if !(on || expect) {
        return out;
    }
    let ours: Vec<&RdmaPort> = r
        .ports
        .iter()
        .filter(|p| links.contains(&p.interface))
        .collect();
    let active = ours.iter().filter(|p| p.active()).count();
    let (ok, detail) = match r.enabled {
        Some(false) => (false, "rdma_ctl status: disabled".to_string()),
        _ if ours.is_empty() => (
            false,
            "no RDMA device paired with a cluster link".to_string(),
        ),
        _ => (
            active == ours.len(),
            format!("{active} of {} cluster-link devices active", ours.len()),
        ),
    };
    out.push(Outcome::node(Check::RdmaReady, ok, detail));
    out
}

fn port_check(p: &RdmaPort) -> Outcome {
    let mut detail = format!("{} port {} {}", p.device, p.port, p.state);
    if let Some(m) = p.active_mtu {
        detail.push_str(&format!(", active_mtu {m}"));
    }
    if p.generation == "4" && !p.active() {
        detail.push_str(": a Thunderbolt 4 port, RDMA needs Thunderbolt 5");
    }
    Outcome {
        check: Check::RdmaPortActive,
        interface: p.interface.clone(),
        device: p.device.clone(),
        ok: p.active(),
        detail,
    }
}
