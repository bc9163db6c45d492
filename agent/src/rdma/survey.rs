//! What the RDMA probe finds on this node, read once (blocking: it opens
//! the verbs library, reads the fabric inventory, asks each device for its
//! GID, lists bridges): shared by the agent's RDMA role, which logs it and
//! probes the ready links, and `doctor --rdma`, which prints it.

use std::net::IpAddr;
use std::path::Path;

use super::links::{self, gid_matches, NotReady, Planned, GID_INDEX};
use super::verbs::{Verbs, LIBRARY};
use crate::fabric::rdma::Rdma;

/// The node's RDMA readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survey {
    /// The library file tried, and whether it opened (with every symbol).
    pub library: (&'static str, Result<(), String>),
    /// The devices it lists.
    pub devices: Vec<String>,
    /// The passive inventory (switch, ports, pairing), where the OS has it.
    pub inventory: Option<Rdma>,
    /// The links to probe and those skipped, or why none.
    pub plan: Result<(Vec<Planned>, Vec<NotReady>), NotReady>,
    /// Each planned link's GID index 1 check: whether it is one of its
    /// interface's addresses, or why it could not be read.
    pub gids: Vec<Result<bool, String>>,
    /// Paired interfaces that are members of a bridge (RTR then fails with
    /// errno 22 on macOS).
    pub bridged: Vec<(String, String)>,
}

impl Survey {
    /// The planned links whose GID checked out.
    pub fn ready(&self) -> Vec<&Planned> {
        let Ok((planned, _)) = &self.plan else {
            return Vec::new();
        };
        planned
            .iter()
            .zip(&self.gids)
            .filter(|(p, g)| matches!(g, Ok(true)) && !self.is_bridged(&p.link.interface))
            .map(|(p, _)| p)
            .collect()
    }

    fn is_bridged(&self, interface: &str) -> bool {
        self.bridged.iter().any(|(_, m)| m == interface)
    }
}

/// Surveys the node for `peers` (name, interface), with the Linux readers
/// under `sysfs_root`.
pub fn survey(peers: &[(String, String)], sysfs_root: &Path) -> Survey {
    let verbs = Verbs::open();
    let devices = verbs
        .as_ref()
        .map_or(Ok(Vec::new()), Verbs::device_names)
        .unwrap_or_default();
    let interfaces: Vec<String> = peers.iter().map(|(_, i)| i.clone()).collect();
    let generations = crate::fabric::generations(&interfaces, sysfs_root);
    let inventory = crate::fabric::gather(&interfaces, sysfs_root, &generations).rdma;
    let plan = match &verbs {
        Err(e) => Err(NotReady::Library(e.to_string())),
        Ok(_) => {
            let (enabled, ports) = inventory
                .as_ref()
                .map_or((None, &[][..]), |r| (r.enabled, &r.ports[..]));
            links::plan(enabled, &devices, ports, peers)
        }
    };
    let planned: &[Planned] = plan.as_ref().map_or(&[], |(p, _)| p);
    let gids = planned
        .iter()
        .map(|p| gid_check(verbs.as_ref().ok(), p))
        .collect();
    Survey {
        library: (
            LIBRARY,
            verbs.as_ref().map(|_| ()).map_err(|e| e.to_string()),
        ),
        devices,
        inventory,
        bridged: bridged(&interfaces, sysfs_root),
        plan,
        gids,
    }
}

fn gid_check(verbs: Option<&Verbs>, p: &Planned) -> Result<bool, String> {
    let verbs = verbs.ok_or("no verbs library")?;
    let port = u8::try_from(p.port).map_err(|_| format!("port {}", p.port))?;
    let gid = verbs
        .gid(&p.link.device, port, GID_INDEX)
        .map_err(|e| e.to_string())?;
    let addrs: Vec<IpAddr> = crate::discovery::addresses(&p.link.interface)
        .iter()
        .filter_map(|a| a.split('/').next()?.parse().ok())
        .collect();
    Ok(gid_matches(&gid.raw, &addrs))
}

/// (bridge, member) for every bridge holding one of `interfaces`.
fn bridged(interfaces: &[String], sysfs_root: &Path) -> Vec<(String, String)> {
    let Ok(all) = nix::net::if_::if_nameindex() else {
        return Vec::new();
    };
    all.iter()
        .filter_map(|i| i.name().to_str().ok().map(str::to_string))
        .map(|n| crate::discovery::describe(&n, sysfs_root))
        .filter(|d| d.kind == "bridge")
        .flat_map(|d| {
            let name = d.name.clone();
            d.members
                .into_iter()
                .filter(|m| interfaces.contains(m))
                .map(move |m| (name.clone(), m))
        })
        .collect()
}
