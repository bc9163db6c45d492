//! Fabric facts on Linux: RDMA from sysfs. A Linux node has no `pmset`,
//! its DHCP client is not one well-known daemon, and its TCP stack has no
//! 49.7-day limit, so those facts are `None` and their checks not run.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Duration;

use super::rdma::{parse_sysfs_state, Rdma, RdmaPort};
use super::Pmset;
use crate::discovery::names_in;

pub fn pmset() -> Option<Pmset> {
    None
}

pub fn dhcp(_links: &[String]) -> Option<BTreeMap<String, bool>> {
    None
}

pub fn uptime() -> Option<Duration> {
    None
}

/// The bridge's ports (`brif/`); none when `link` is no bridge.
pub fn bridge_members(link: &str, sysfs_root: &Path) -> Vec<String> {
    names_in(&sysfs_root.join("class/net").join(link).join("brif"))
}

/// `<root>/class/infiniband/<dev>/ports/<n>/state`, each port paired with
/// the netdev of its GID table (`gid_attrs/ndevs/0`: RoCE and soft-RoCE)
/// or the device's `device/net/` entry. `None` when the class is absent
/// (no RDMA stack loaded).
pub fn rdma(sysfs_root: &Path) -> Option<Rdma> {
    let class = sysfs_root.join("class/infiniband");
    if !class.is_dir() {
        return None;
    }
    let devices = names_in(&class);
    let mut ports = Vec::new();
    for dev in devices {
        let dir = class.join(&dev);
        for n in names_in(&dir.join("ports")) {
            let port = dir.join("ports").join(&n);
            let state = fs::read_to_string(port.join("state")).unwrap_or_default();
            let interface = read_trim(&port.join("gid_attrs/ndevs/0"))
                .or_else(|| names_in(&dir.join("device/net")).into_iter().next())
                .unwrap_or_default();
            ports.push(RdmaPort {
                device: dev.clone(),
                port: n.parse().unwrap_or(0),
                interface,
                state: parse_sysfs_state(&state),
                ..Default::default()
            });
        }
    }
    Some(Rdma {
        enabled: None,
        ports,
    })
}

fn read_trim(p: &Path) -> Option<String> {
    let t = fs::read_to_string(p).ok()?;
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_string())
}
