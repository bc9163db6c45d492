//! Which bridge member port each peer sits behind: the peer's IP gives its
//! MAC (the neighbour table), the MAC gives the member port the bridge
//! learnt it on (the bridge's forwarding table). Pure: the OS file reads
//! the two tables into [`Tables`], the watcher loop feeds them here once a
//! poll and passes on what changed.
//!
//! Why: xnu posts link-off for the member (`en2`) that lost its cable and
//! for `bridge0` only when the last member goes, so a peer reached over
//! `bridge0` must follow its member port's carrier to see its cable drop.

use std::collections::HashMap;
use std::net::IpAddr;

use super::neigh::Mac;
use super::state::PeerPort;

/// The two tables as the OS has them now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tables {
    /// Neighbour IP -> MAC (resolved or stale entries only).
    pub neighbours: HashMap<IpAddr, Mac>,
    /// MAC -> the bridge member port it was learnt on.
    pub ports: HashMap<Mac, String>,
}

/// The current port of every peer, by peer index.
#[derive(Debug, Clone)]
pub struct PeerPorts {
    peers: Vec<IpAddr>,
    known: Vec<Option<String>>,
}

impl PeerPorts {
    /// For the peers at `peers` (their configured order).
    pub fn new(peers: Vec<IpAddr>) -> PeerPorts {
        let known = vec![None; peers.len()];
        PeerPorts { peers, known }
    }

    /// The port of peer `i`, once known.
    pub fn port(&self, i: usize) -> Option<&str> {
        self.known.get(i)?.as_deref()
    }

    /// Applies what the tables say now; returns the peers whose port is
    /// new or moved. A peer missing from either table keeps its last port:
    /// the bridge forgets the MACs of a port that loses carrier, and the
    /// neighbour entry of an unreachable peer fails, exactly when the
    /// outage tracker needs the port.
    pub fn update(&mut self, tables: &Tables) -> Vec<PeerPort> {
        let mut changed = Vec::new();
        for (i, ip) in self.peers.iter().enumerate() {
            let Some(port) = tables
                .neighbours
                .get(ip)
                .and_then(|mac| tables.ports.get(mac))
            else {
                continue;
            };
            if self.known[i].as_deref() != Some(port.as_str()) {
                self.known[i] = Some(port.clone());
                changed.push(PeerPort {
                    peer: i,
                    port: port.clone(),
                });
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Mac = [2, 0, 0, 0, 0, 0x0b];
    const C: Mac = [2, 0, 0, 0, 0, 0x0c];

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn tables(neigh: &[(&str, Mac)], ports: &[(Mac, &str)]) -> Tables {
        Tables {
            neighbours: neigh.iter().map(|(i, m)| (ip(i), *m)).collect(),
            ports: ports.iter().map(|(m, p)| (*m, p.to_string())).collect(),
        }
    }

    fn pp(peer: usize, port: &str) -> PeerPort {
        PeerPort {
            peer,
            port: port.into(),
        }
    }

    #[test]
    fn ports_are_found_kept_and_moved() {
        let mut m = PeerPorts::new(vec![ip("10.0.0.2"), ip("10.0.0.3"), ip("10.0.0.4")]);
        assert_eq!(m.update(&Tables::default()), vec![]);
        let t = tables(
            &[("10.0.0.2", B), ("10.0.0.3", C)],
            &[(B, "en2"), (C, "en3")],
        );
        assert_eq!(m.update(&t), vec![pp(0, "en2"), pp(1, "en3")]);
        assert_eq!(m.update(&t), vec![], "nothing changed, nothing sent");
        // en2 lost carrier: the bridge forgot B, the neighbour entry stays.
        let t = tables(&[("10.0.0.2", B), ("10.0.0.3", C)], &[(C, "en3")]);
        assert_eq!(m.update(&t), vec![]);
        assert_eq!(m.port(0), Some("en2"), "kept through the outage");
        // B recabled to en4.
        let t = tables(&[("10.0.0.2", B)], &[(B, "en4")]);
        assert_eq!(m.update(&t), vec![pp(0, "en4")]);
        assert_eq!((m.port(1), m.port(2)), (Some("en3"), None));
        assert_eq!(m.port(9), None);
    }

    #[test]
    fn a_mac_without_a_port_or_an_ip_without_a_mac_says_nothing() {
        let mut m = PeerPorts::new(vec![ip("10.0.0.2")]);
        assert_eq!(m.update(&tables(&[("10.0.0.2", B)], &[])), vec![]);
        assert_eq!(m.update(&tables(&[], &[(B, "en2")])), vec![]);
        assert_eq!(m.port(0), None);
    }
}
