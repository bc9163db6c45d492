//! The RDMA probe role (`[rdma] enabled`, docs/rdma.md): surveys the node
//! once (verbs library, devices, inventory pairing, GID index 1, bridges),
//! logs what it found, and for the ready links runs the dead-peer side
//! channel. A node that is not ready says why once and the role ends: it
//! is not retried until the agent restarts, so it never spins.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::join_all;
use tracing::{info, warn};

use super::crew::Crew;
use super::topology::Topology;
use crate::config::Config;
use crate::rdma::side::{self, Side};
use crate::rdma::survey::{survey, Survey};

pub(super) fn start(crew: &mut Crew, config: &Config, topology: &Topology) {
    if !config.rdma_enabled {
        return;
    }
    let peers: Vec<(String, String)> = topology
        .peers
        .iter()
        .map(|p| (p.name.clone(), p.interface.clone()))
        .collect();
    let addrs: Vec<(String, IpAddr)> = config
        .peers
        .iter()
        .map(|p| (p.name.clone(), p.addr.ip()))
        .collect();
    let side = (config.rdma_side_port, config.rdma_interval, addrs);
    crew.task(role(peers, config.sysfs_root.clone(), side));
}

type SideSettings = (u16, std::time::Duration, Vec<(String, IpAddr)>);

async fn role(peers: Vec<(String, String)>, sysfs_root: PathBuf, side: SideSettings) {
    let Ok(s) = tokio::task::spawn_blocking(move || survey(&peers, &sysfs_root)).await else {
        return;
    };
    if !log(&s) {
        return;
    }
    let (port, every, addrs) = side;
    let bind = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
    let listener = match tokio::net::TcpListener::bind(bind).await {
        Ok(l) => l,
        Err(e) => return warn!(%bind, error = %e, "RDMA side channel cannot listen"),
    };
    let state = Arc::new(Side::default());
    let ready: Vec<String> = s.ready().iter().map(|p| p.link.peer.clone()).collect();
    let watchers = addrs
        .into_iter()
        .filter(|(name, _)| ready.contains(name))
        .map(|(name, ip)| side::watch(name, (ip, port).into(), every, Arc::clone(&state)));
    tokio::join!(
        side::serve(listener, Arc::clone(&state)),
        join_all(watchers)
    );
}

/// Logs the survey; true when a link is ready.
fn log(s: &Survey) -> bool {
    let (library, opened) = &s.library;
    let why = match (&s.plan, opened) {
        (Err(why), _) => why.to_string(),
        (Ok((_, skipped)), _) => {
            for why in skipped {
                warn!(reason = %why, "RDMA link not probed");
            }
            for (bridge, member) in &s.bridged {
                warn!(%bridge, %member, "RDMA link is a bridge member (RTR fails with errno 22): not probed");
            }
            String::new()
        }
    };
    let ready = s.ready();
    if !why.is_empty() || ready.is_empty() {
        let why = if why.is_empty() {
            "no ready link"
        } else {
            &why
        };
        warn!(%library, devices = s.devices.len(), reason = why,
            "RDMA probe not ready; not retried until the agent restarts");
        return false;
    }
    for p in &ready {
        // The verbs queue-pair port is not built yet (docs/rdma.md, Status).
        info!(peer = %p.link.peer, device = %p.link.device, interface = %p.link.interface,
            "RDMA link ready; this build runs its side channel but has no verbs queue-pair port to probe it");
    }
    true
}
