//! Parser for rtnetlink neighbour messages (`RTM_NEWNEIGH`), the answer to
//! an `RTM_GETNEIGH` dump: for `AF_INET`/`AF_INET6` the neighbour table (a
//! peer's IP -> its MAC), for `AF_BRIDGE` a bridge's forwarding database
//! (a MAC -> the member port it was learnt on, what `bridge fdb show`
//! reads). Pure; the socket lives in `linux.rs`. Tested on dumps captured
//! from this kernel (`agent/tests/fixtures/linux/rtnetlink/`).
//!
//! Layout (linux `neighbour.h`, host byte order): `nlmsghdr` (16 bytes),
//! `ndmsg { u8 family; u8 pad1; u16 pad2; i32 ifindex; u16 state; u8
//! flags; u8 type }` (12 bytes), then 4-byte aligned `rtattr`s:
//! `NDA_DST` (1), `NDA_LLADDR` (2), `NDA_MASTER` (9).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::netlink::{attributes, messages, u16_at, u32_at, ParseError};

const NLMSG_HDR: usize = 16;
const NDMSG: usize = 12;
/// A neighbour (or forwarding entry) appeared or is listed by a dump.
pub const RTM_NEWNEIGH: u16 = 28;
/// Dump request type.
pub const RTM_GETNEIGH: u16 = 30;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
const NDA_MASTER: u16 = 9;

/// `AF_INET`.
pub const AF_INET: u8 = 2;
/// `AF_INET6`.
pub const AF_INET6: u8 = 10;
/// `AF_BRIDGE` (`PF_BRIDGE`): forwarding database entries.
pub const AF_BRIDGE: u8 = 7;

/// `NUD_INCOMPLETE`: resolution under way, no address yet.
const NUD_INCOMPLETE: u16 = 0x01;
/// `NUD_FAILED`: resolution failed; a stale address may still be attached.
const NUD_FAILED: u16 = 0x20;
/// `NUD_NOARP`: no link-layer address (multicast, point-to-point).
const NUD_NOARP: u16 = 0x40;
/// `NUD_PERMANENT`: a static entry (for the FDB: the port's own address).
const NUD_PERMANENT: u16 = 0x80;

/// An Ethernet (MAC) address.
pub type Mac = [u8; 6];

/// One `RTM_NEWNEIGH` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// `AF_INET`, `AF_INET6` or `AF_BRIDGE`.
    pub family: u8,
    /// Interface the entry is on (the member port for an FDB entry).
    pub ifindex: u32,
    /// `NUD_*` state bits.
    pub state: u16,
    /// `NDA_DST`: the IP (neighbour tables only).
    pub ip: Option<IpAddr>,
    /// `NDA_LLADDR`, when six bytes long.
    pub mac: Option<Mac>,
    /// `NDA_MASTER`: the bridge an FDB entry belongs to.
    pub master: Option<u32>,
}

impl Neighbour {
    /// An IP neighbour with a usable MAC: resolved, or stale but not
    /// failed (a failed entry's MAC may belong to whoever held the IP).
    pub fn resolved(&self) -> Option<(IpAddr, Mac)> {
        let bad = NUD_INCOMPLETE | NUD_FAILED | NUD_NOARP;
        if self.family == AF_BRIDGE || self.state & bad != 0 {
            return None;
        }
        Some((self.ip?, self.mac?))
    }

    /// A MAC the bridge `master` learnt on port `ifindex` (not one of the
    /// bridge's own, permanent addresses).
    pub fn learnt(&self) -> Option<(Mac, u32, u32)> {
        if self.family != AF_BRIDGE || self.state & NUD_PERMANENT != 0 {
            return None;
        }
        Some((self.mac?, self.ifindex, self.master?))
    }
}

/// The `RTM_GETNEIGH` dump request for `family`, sequence number `seq`.
pub fn dump_request(family: u8, seq: u32) -> Vec<u8> {
    let len = NLMSG_HDR + NDMSG;
    let mut b = vec![0u8; len];
    b[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
    b[4..6].copy_from_slice(&RTM_GETNEIGH.to_ne_bytes());
    // NLM_F_REQUEST | NLM_F_DUMP (ROOT | MATCH).
    b[6..8].copy_from_slice(&(0x1u16 | 0x300).to_ne_bytes());
    b[8..12].copy_from_slice(&seq.to_ne_bytes());
    b[NLMSG_HDR] = family;
    b
}

/// What one buffer of a dump held: the entries, and whether the dump's
/// `NLMSG_DONE` (or an `NLMSG_ERROR` ending it) was in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// Every `RTM_NEWNEIGH` in the buffer.
    pub entries: Vec<Neighbour>,
    /// The dump is over.
    pub done: bool,
}

/// Parses one `recv()` of a neighbour dump.
pub fn parse(buf: &[u8]) -> Result<Batch, ParseError> {
    let mut out = Batch::default();
    for (kind, msg, off) in messages(buf)? {
        match kind {
            RTM_NEWNEIGH => out.entries.push(parse_one(msg, off)?),
            // NLMSG_DONE, NLMSG_ERROR: the dump ends either way.
            2 | 3 => out.done = true,
            _ => {}
        }
    }
    Ok(out)
}

fn parse_one(msg: &[u8], base: usize) -> Result<Neighbour, ParseError> {
    if msg.len() < NLMSG_HDR + NDMSG {
        return Err(ParseError::Truncated(base + msg.len()));
    }
    let mut n = Neighbour {
        family: msg[NLMSG_HDR],
        ifindex: u32_at(msg, NLMSG_HDR + 4)?,
        state: u16_at(msg, NLMSG_HDR + 8)?,
        ip: None,
        mac: None,
        master: None,
    };
    for (ty, payload) in attributes(msg, NLMSG_HDR + NDMSG, base)? {
        match ty {
            NDA_DST => {
                n.ip = match payload.len() {
                    4 => Some(Ipv4Addr::from(<[u8; 4]>::try_from(payload).expect("4")).into()),
                    16 => Some(Ipv6Addr::from(<[u8; 16]>::try_from(payload).expect("16")).into()),
                    _ => None,
                }
            }
            NDA_LLADDR => n.mac = <Mac>::try_from(payload).ok(),
            NDA_MASTER => n.master = Some(u32_at(payload, 0)?),
            _ => {}
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::fixtures;

    fn dump(name: &str) -> Batch {
        let b = fixtures::read(&format!("linux/rtnetlink/{name}.bin"));
        parse(&b).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn numbers_match_libc() {
        assert_eq!(RTM_NEWNEIGH, libc::RTM_NEWNEIGH);
        assert_eq!(RTM_GETNEIGH, libc::RTM_GETNEIGH);
        assert_eq!(NDA_DST, libc::NDA_DST);
        assert_eq!(NDA_LLADDR, libc::NDA_LLADDR);
        assert_eq!(NDA_MASTER, libc::NDA_MASTER);
        assert_eq!(AF_BRIDGE as i32, libc::AF_BRIDGE);
        assert_eq!(AF_INET6 as i32, libc::AF_INET6);
        assert_eq!(NUD_PERMANENT, libc::NUD_PERMANENT);
        assert_eq!(NUD_FAILED, libc::NUD_FAILED);
    }

    const B: Mac = [2, 0, 0, 0, 0, 0x0b];
    const C: Mac = [2, 0, 0, 0, 0, 0x0c];

    #[test]
    fn neighbour_dump_maps_peer_ips_to_macs() {
        let b = dump("neigh_dump_inet");
        assert!(b.done, "the capture holds the whole dump");
        let got: Vec<(IpAddr, Mac)> = b.entries.iter().filter_map(Neighbour::resolved).collect();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // The multicast entry (NUD_NOARP) is no neighbour.
        assert_eq!(got, vec![(ip("10.77.200.3"), C), (ip("10.77.200.2"), B)]);
        assert_eq!(b.entries.len(), 3);
    }

    #[test]
    fn bridge_dump_maps_learnt_macs_to_member_ports() {
        let b = dump("neigh_dump_bridge");
        assert!(b.done);
        let got: Vec<(Mac, u32, u32)> = b.entries.iter().filter_map(Neighbour::learnt).collect();
        // br0 is index 2, m1 3, m2 4; the ports' own addresses and the
        // multicast entries are permanent and left out.
        assert_eq!(got, vec![(B, 3, 2), (C, 4, 2)]);
        assert_eq!(b.entries.len(), 15);
    }

    #[test]
    fn damaged_dumps_are_errors_not_panics() {
        let buf = fixtures::read("linux/rtnetlink/neigh_dump_bridge.bin");
        for cut in [20, 30, 47, 100, buf.len() - 1] {
            let _ = parse(&buf[..cut]);
        }
        let first = u32_at(&buf, 0).unwrap() as usize;
        assert!(matches!(
            parse(&buf[..first - 2]),
            Err(ParseError::Truncated(_))
        ));
        let mut bad = buf.clone();
        bad[..4].copy_from_slice(&4u32.to_ne_bytes());
        assert_eq!(parse(&bad), Err(ParseError::BadLength { at: 0, len: 4 }));
        let mut bad = buf;
        bad[28..30].copy_from_slice(&1u16.to_ne_bytes());
        assert!(matches!(parse(&bad), Err(ParseError::BadLength { .. })));
    }

    #[test]
    fn the_request_is_a_dump_of_one_family() {
        let r = dump_request(AF_BRIDGE, 7);
        assert_eq!(r.len(), 28);
        assert_eq!(u16_at(&r, 4).unwrap(), RTM_GETNEIGH);
        assert_eq!(u16_at(&r, 6).unwrap(), 0x301);
        assert_eq!(u32_at(&r, 8).unwrap(), 7);
        assert_eq!(r[16], AF_BRIDGE);
    }
}
