//! Which links the RDMA probe runs on, pure: each peer's interface (from
//! the topology) paired with the verbs device the inventory
//! ([`crate::fabric::rdma`]) pairs with it, that device listed by the verbs
//! library, its port active; and the GID index 1 check against the paired
//! interface's addresses.

use std::net::{IpAddr, Ipv6Addr};

use thiserror::Error;

use super::window::LinkId;
use crate::fabric::rdma::RdmaPort;

/// The GID index Apple's (and RoCE v2's) IP-derived GID sits at.
pub const GID_INDEX: i32 = 1;

/// Why the probe does not run on this node, or on one link.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NotReady {
    /// The verbs library or one of its symbols is missing.
    #[error("verbs library not usable: {0}")]
    Library(String),
    /// The library loads but lists no device.
    #[error("the verbs library lists no RDMA device")]
    NoDevice,
    /// macOS: `rdma_ctl status` says disabled.
    #[error("rdma_ctl status: disabled (run `rdma_ctl enable` from Recovery)")]
    Disabled,
    /// No device is paired with the interface towards the peer.
    #[error("peer {peer}: no RDMA device paired with {interface}")]
    Unpaired {
        /// Peer name.
        peer: String,
        /// Interface towards it.
        interface: String,
    },
    /// The inventory pairs a device the library does not list.
    #[error("peer {peer}: {device} is not listed by the verbs library")]
    NotListed {
        /// Peer name.
        peer: String,
        /// The device.
        device: String,
    },
    /// The device's port is not active.
    #[error("peer {peer}: {device} port {port} is {state}")]
    PortDown {
        /// Peer name.
        peer: String,
        /// The device.
        device: String,
        /// Its port.
        port: u32,
        /// The state word.
        state: String,
    },
}

/// A link the probe may run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// Peer, interface, device.
    pub link: LinkId,
    /// The device's port number.
    pub port: u32,
}

/// The links to probe and the peers skipped with why; `Err` when the
/// probe cannot run on this node at all. `peers` are (name, interface).
pub fn plan(
    enabled: Option<bool>,
    devices: &[String],
    ports: &[RdmaPort],
    peers: &[(String, String)],
) -> Result<(Vec<Planned>, Vec<NotReady>), NotReady> {
    if enabled == Some(false) {
        return Err(NotReady::Disabled);
    }
    if devices.is_empty() {
        return Err(NotReady::NoDevice);
    }
    let mut ready = Vec::new();
    let mut skipped = Vec::new();
    for (peer, interface) in peers {
        match pair(devices, ports, peer, interface) {
            Ok(p) => ready.push(p),
            Err(e) => skipped.push(e),
        }
    }
    Ok((ready, skipped))
}

fn pair(
    devices: &[String],
    ports: &[RdmaPort],
    peer: &str,
    interface: &str,
) -> Result<Planned, NotReady> {
    let Some(p) = ports.iter().find(|p| p.interface == interface) else {
        return Err(NotReady::Unpaired {
            peer: peer.into(),
            interface: interface.into(),
        });
    };
    if !devices.contains(&p.device) {
        return Err(NotReady::NotListed {
            peer: peer.into(),
            device: p.device.clone(),
        });
    }
    if !p.active() {
        return Err(NotReady::PortDown {
            peer: peer.into(),
            device: p.device.clone(),
            port: p.port,
            state: p.state.clone(),
        });
    }
    Ok(Planned {
        link: LinkId {
            peer: peer.into(),
            interface: interface.into(),
            device: p.device.clone(),
        },
        port: p.port,
    })
}

/// Whether a GID is one of the interface's addresses: an IPv4 address
/// appears IPv4-mapped (`::ffff:a.b.c.d`), an IPv6 one as itself.
pub fn gid_matches(gid: &[u8; 16], addrs: &[IpAddr]) -> bool {
    let v6 = Ipv6Addr::from(*gid);
    let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
    !v6.is_unspecified() && addrs.contains(&ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(device: &str, interface: &str, state: &str) -> RdmaPort {
        RdmaPort {
            device: device.into(),
            port: 1,
            interface: interface.into(),
            state: state.into(),
            ..RdmaPort::default()
        }
    }

    #[test]
    fn peers_pair_with_listed_active_devices_and_others_say_why() {
        let devices = ["rdma_en2".to_string(), "rdma_en3".to_string()];
        let ports = [
            port("rdma_en2", "en2", "PORT_ACTIVE"),
            port("rdma_en3", "en3", "PORT_DOWN"),
            port("rdma_en4", "en4", "PORT_ACTIVE"),
        ];
        let peers = [("b", "en2"), ("c", "en3"), ("d", "en4"), ("e", "en5")]
            .map(|(p, i)| (p.to_string(), i.to_string()));
        let (ready, skipped) = plan(Some(true), &devices, &ports, &peers).unwrap();
        assert_eq!(ready.len(), 1);
        assert_eq!(
            (ready[0].link.device.as_str(), ready[0].link.peer.as_str()),
            ("rdma_en2", "b")
        );
        let why: Vec<String> = skipped.iter().map(ToString::to_string).collect();
        assert_eq!(
            why,
            [
                "peer c: rdma_en3 port 1 is PORT_DOWN",
                "peer d: rdma_en4 is not listed by the verbs library",
                "peer e: no RDMA device paired with en5",
            ]
        );
        assert_eq!(plan(None, &[], &ports, &peers), Err(NotReady::NoDevice));
        assert_eq!(
            plan(Some(false), &devices, &ports, &peers),
            Err(NotReady::Disabled)
        );
    }

    #[test]
    fn gid_index_1_matches_the_paired_address_mapped_or_not() {
        let v4: IpAddr = "169.254.10.2".parse().unwrap();
        let mapped = Ipv6Addr::from(0xffff_a9fe_0a02u128).octets();
        assert!(gid_matches(&mapped, &[v4]));
        assert!(!gid_matches(&mapped, &["169.254.10.3".parse().unwrap()]));
        let v6: IpAddr = "fe80::1".parse().unwrap();
        let IpAddr::V6(a) = v6 else { unreachable!() };
        assert!(gid_matches(&a.octets(), &[v6]));
        assert!(!gid_matches(&[0; 16], &["::".parse().unwrap()]));
    }
}
