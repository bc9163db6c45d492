//! Gratuitous ARP when a carrier returns: why, and the frame. Pure; the
//! Linux watcher sends it (`linux.rs`).
//!
//! # Why
//! On Linux a carrier change reaches the qdisc through linkwatch, a
//! deferred work item that runs up to a second late for devices without
//! an iflink (thunderbolt-net, veth ends sharing an ifindex) and, even when
//! "urgent", only once a worker gets the RTNL lock. Until it runs, the
//! device whose carrier came back still has `noop_qdisc` attached and
//! drops everything it sends. Captured on the batched bed (`ip -ts monitor
//! link neigh` in both namespaces, flap 0 of a failing run, ms after the
//! drop):
//!
//! ```text
//! node 0 1254.3  tb1 admin up (carrier on; its qdisc activated by dev_open)
//! node 1 1256.8  10.77.0.1 lladdr .. DELAY   <- node 0's ARP request arrived,
//!                                               node 1's reply went to noop_qdisc
//! node 1 1258.0  tb0 carrier UP               <- linkwatch ran: qdisc active
//! node 0 2302.4  10.77.0.2 lladdr .. REACHABLE <- node 0's ARP retry, 1 s later
//! ```
//!
//! One ARP reply lost in a 1.2 ms window costs a whole neighbour
//! retransmit interval (`retrans_time_ms`, 1 s): both agents' probes sat in
//! node 0's ARP queue, and both recorded a true 2.3 s outage for a 1.25 s
//! drop. The fix is on the side that lost the reply: when its own
//! carrier-up notification arrives (netlink sends it from linkwatch right
//! after the qdisc is activated, so sending now cannot be dropped the same
//! way), it announces each IPv4 address on the interface with a gratuitous
//! ARP request. Linux updates an existing neighbour entry from it, an
//! INCOMPLETE one included (`arp_process`), which releases the queued
//! packets at once; without an entry the frame is ignored (`arp_accept` is
//! off by default), so it changes nothing for hosts that did not ask.

use std::net::Ipv4Addr;

/// Octets of an Ethernet/IPv4 ARP packet.
pub const ARP_LEN: usize = 28;
/// `ETH_P_ARP`.
pub const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IP: u16 = 0x0800;
const ARPHRD_ETHER: u16 = 1;
const ARPOP_REQUEST: u16 = 1;

/// A gratuitous ARP request (RFC 5227 announcement form: sender and target
/// protocol address both `ip`, target hardware address zero) from `mac`.
pub fn gratuitous_arp(mac: [u8; 6], ip: Ipv4Addr) -> [u8; ARP_LEN] {
    let mut p = [0u8; ARP_LEN];
    p[0..2].copy_from_slice(&ARPHRD_ETHER.to_be_bytes());
    p[2..4].copy_from_slice(&ETH_P_IP.to_be_bytes());
    p[4] = 6;
    p[5] = 4;
    p[6..8].copy_from_slice(&ARPOP_REQUEST.to_be_bytes());
    p[8..14].copy_from_slice(&mac);
    p[14..18].copy_from_slice(&ip.octets());
    // 18..24: target hardware address, zero.
    p[24..28].copy_from_slice(&ip.octets());
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcement_layout() {
        let mac = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
        let p = gratuitous_arp(mac, Ipv4Addr::new(10, 77, 0, 2));
        assert_eq!(
            p,
            [
                0, 1, 8, 0, 6, 4, 0, 1, // Ethernet, IPv4, 6, 4, request
                0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 10, 77, 0, 2, // sender
                0, 0, 0, 0, 0, 0, 10, 77, 0, 2, // target
            ]
        );
    }
}
