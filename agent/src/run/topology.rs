//! Who the agent probes and through which interfaces: each peer's interface
//! from discovery (unless the operator named one), and the `Hello` that
//! introduces the agent on every stream.

use boltwatch_common::clock::now_unix_ns;
use boltwatch_proto::v1::{Hello, Interface, Peer};
use tracing::warn;

use crate::config::Config;
use crate::discovery;

/// Interface name of a peer whose route is not known yet.
const UNKNOWN: &str = "unknown";

/// The peers as probed, in configuration order, and the interfaces they
/// are reached through.
#[derive(Debug, Clone)]
pub(super) struct Topology {
    /// One per configured peer, same order (the outage tracker's index).
    pub peers: Vec<Peer>,
    /// Distinct known interfaces towards the peers, sorted.
    pub interfaces: Vec<String>,
}

impl Topology {
    /// Resolves each peer's interface now.
    pub fn discover(config: &Config) -> Topology {
        let peers: Vec<Peer> = config
            .peers
            .iter()
            .map(|p| {
                // A scoped peer's interface is its scope: the probes are
                // bound to it whatever the routing table says.
                let interface = match p.interface.as_ref().or(config.interface.as_ref()) {
                    Some(i) => i.clone(),
                    None => discovery::route_interface(p.addr).unwrap_or_else(|e| {
                        warn!(peer = %p.name, addr = %p.addr, error = %e, "no route to peer yet");
                        UNKNOWN.to_string()
                    }),
                };
                Peer {
                    name: p.name.clone(),
                    address: p.scoped().to_string(),
                    interface,
                }
            })
            .collect();
        let mut interfaces: Vec<String> = peers
            .iter()
            .map(|p| p.interface.clone())
            .filter(|i| i != UNKNOWN)
            .collect();
        interfaces.sort();
        interfaces.dedup();
        Topology { peers, interfaces }
    }

    /// The `Hello` of this boot: the interfaces towards the peers, and
    /// the members of those that are bridges (each member port's cable is
    /// an edge the collector needs to see a loop through bridges).
    pub fn hello(&self, config: &Config, boot_id: &str) -> Hello {
        let describe = |n: &String| discovery::describe(n, &config.sysfs_root);
        let mut interfaces: Vec<Interface> = self.interfaces.iter().map(describe).collect();
        let members: Vec<String> = interfaces
            .iter()
            .flat_map(|i| i.members.iter())
            .filter(|m| !self.interfaces.contains(m))
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        interfaces.extend(members.iter().map(describe));
        Hello {
            schema_revision: boltwatch_proto::SCHEMA_REVISION,
            node: config.node.clone(),
            agent_version: env!("CARGO_PKG_VERSION").to_string(),
            os: os_description(),
            boot_id: boot_id.to_string(),
            interfaces,
            peers: self.peers.clone(),
            hostname: sysinfo::System::host_name().unwrap_or_default(),
            started_unix_ns: now_unix_ns(),
            // The transport fills it from the spool at each connect.
            spooled_boots: Vec::new(),
        }
    }
}

fn os_description() -> String {
    let version = sysinfo::System::os_version()
        .or_else(|_| sysinfo::System::kernel_version())
        .unwrap_or_default();
    format!("{} {}", std::env::consts::OS, version)
        .trim()
        .to_string()
}
