//! Parser for rtnetlink link messages (`RTM_NEWLINK`/`RTM_DELLINK`): the
//! bytes one `recv()` on a `NETLINK_ROUTE` socket returns, in, link states
//! out. Pure; the socket lives in `linux.rs`. Tested on messages captured
//! from this kernel (`agent/tests/fixtures/linux/rtnetlink/`).
//!
//! Layout (linux `netlink.h`, `rtnetlink.h`, `if_link.h`, host byte order):
//! `nlmsghdr { u32 len; u16 type; u16 flags; u32 seq; u32 pid }`, then
//! `ifinfomsg { u8 family; u8 pad; u16 type; i32 index; u32 flags; u32 change }`,
//! then 4-byte aligned `rtattr { u16 len; u16 type; payload }`.

use super::state::LinkState;

const NLMSG_HDR: usize = 16;
const IFINFOMSG: usize = 16;
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// A link appeared or changed.
pub const RTM_NEWLINK: u16 = 16;
/// A link disappeared.
pub const RTM_DELLINK: u16 = 17;

const IFLA_IFNAME: u16 = 3;
const IFLA_MASTER: u16 = 10;
const IFLA_OPERSTATE: u16 = 16;
const IFLA_CARRIER: u16 = 33;
const IFLA_CARRIER_UP_COUNT: u16 = 47;
const IFLA_CARRIER_DOWN_COUNT: u16 = 48;

const IFF_UP: u32 = 0x1;
const IFF_LOWER_UP: u32 = 0x1_0000;

/// Why a buffer could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The buffer ends inside a header or attribute.
    #[error("netlink message truncated at byte {0}")]
    Truncated(usize),
    /// A length field is smaller than its own header.
    #[error("netlink length {len} invalid at byte {at}")]
    BadLength {
        /// Offset of the bad header.
        at: usize,
        /// The length it claims.
        len: usize,
    },
}

/// One link message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkMessage {
    /// `RTM_NEWLINK` or `RTM_DELLINK`.
    pub kind: u16,
    /// Interface index.
    pub index: u32,
    /// `IFLA_IFNAME`, empty if absent.
    pub name: String,
    /// `IFLA_MASTER`: index of the bridge or bond this port belongs to.
    pub master: Option<u32>,
    /// The state the message reports.
    pub state: LinkState,
}

/// Names the kernel's `IF_OPER_*` values the way sysfs `operstate` does.
pub fn oper_state_name(v: u8) -> &'static str {
    match v {
        1 => "notpresent",
        2 => "down",
        3 => "lowerlayerdown",
        4 => "testing",
        5 => "dormant",
        6 => "up",
        _ => "unknown",
    }
}

/// The `u16` at `at` (host byte order).
pub(super) fn u16_at(b: &[u8], at: usize) -> Result<u16, ParseError> {
    b.get(at..at + 2)
        .map(|s| u16::from_ne_bytes([s[0], s[1]]))
        .ok_or(ParseError::Truncated(at))
}

/// The `u32` at `at` (host byte order).
pub(super) fn u32_at(b: &[u8], at: usize) -> Result<u32, ParseError> {
    b.get(at..at + 4)
        .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or(ParseError::Truncated(at))
}

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One netlink message: `(nlmsg_type, the whole message, its offset in
/// the buffer)`.
pub(super) type Message<'a> = (u16, &'a [u8], usize);

/// Every netlink message in one `recv()`; the one framing rule of every
/// rtnetlink parser (links here, neighbours in `neigh`).
pub(super) fn messages(buf: &[u8]) -> Result<Vec<Message<'_>>, ParseError> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + NLMSG_HDR <= buf.len() {
        let len = u32_at(buf, off)? as usize;
        let kind = u16_at(buf, off + 4)?;
        if len < NLMSG_HDR {
            return Err(ParseError::BadLength { at: off, len });
        }
        let msg = buf
            .get(off..off + len)
            .ok_or(ParseError::Truncated(buf.len()))?;
        out.push((kind, msg, off));
        off += align4(len);
    }
    Ok(out)
}

/// The `rtattr`s of `msg` from offset `from` on, as `(type, payload)`,
/// the nested/byte-order flag bits dropped; `base` is `msg`'s offset in
/// the buffer, for errors.
pub(super) fn attributes(
    msg: &[u8],
    from: usize,
    base: usize,
) -> Result<Vec<(u16, &[u8])>, ParseError> {
    let mut out = Vec::new();
    let mut at = from;
    while at + 4 <= msg.len() {
        let len = u16_at(msg, at)? as usize;
        let ty = u16_at(msg, at + 2)? & 0x3fff; // drop NLA_F_NESTED/NET_BYTEORDER
        if len < 4 {
            return Err(ParseError::BadLength { at: base + at, len });
        }
        let payload = msg
            .get(at + 4..at + len)
            .ok_or(ParseError::Truncated(base + msg.len()))?;
        out.push((ty, payload));
        at += align4(len);
    }
    Ok(out)
}

/// Parses every link message in `buf`; other message types (errors, done,
/// address messages) are skipped.
pub fn parse(buf: &[u8]) -> Result<Vec<LinkMessage>, ParseError> {
    let mut out = Vec::new();
    for (kind, msg, off) in messages(buf)? {
        match kind {
            RTM_NEWLINK | RTM_DELLINK => out.push(parse_link(kind, msg, off)?),
            NLMSG_NOOP | NLMSG_ERROR | NLMSG_DONE => {}
            _ => {}
        }
    }
    Ok(out)
}

fn parse_link(kind: u16, msg: &[u8], base: usize) -> Result<LinkMessage, ParseError> {
    if msg.len() < NLMSG_HDR + IFINFOMSG {
        return Err(ParseError::Truncated(base + msg.len()));
    }
    let index = u32_at(msg, NLMSG_HDR + 4)?;
    let flags = u32_at(msg, NLMSG_HDR + 8)?;
    let mut name = String::new();
    let mut master = None;
    let mut oper = None;
    let mut carrier = None;
    let mut up_count = 0;
    let mut down_count = 0;
    for (ty, payload) in attributes(msg, NLMSG_HDR + IFINFOMSG, base)? {
        match ty {
            IFLA_IFNAME => {
                let end = payload
                    .iter()
                    .position(|&c| c == 0)
                    .unwrap_or(payload.len());
                name = String::from_utf8_lossy(&payload[..end]).into_owned();
            }
            IFLA_MASTER => master = Some(u32_at(payload, 0)?),
            IFLA_OPERSTATE => oper = payload.first().copied(),
            IFLA_CARRIER => carrier = payload.first().map(|&c| c != 0),
            IFLA_CARRIER_UP_COUNT => up_count = u32_at(payload, 0)? as u64,
            IFLA_CARRIER_DOWN_COUNT => down_count = u32_at(payload, 0)? as u64,
            _ => {}
        }
    }
    let admin_up = flags & IFF_UP != 0;
    Ok(LinkMessage {
        kind,
        index,
        name,
        master,
        state: LinkState {
            // IFLA_CARRIER is reported even when admin down; the flag is the
            // fallback for kernels older than 3.x that lack it.
            carrier: Some(admin_up && carrier.unwrap_or(flags & IFF_LOWER_UP != 0)),
            admin_up,
            oper_state: oper_state_name(oper.unwrap_or(0)).to_owned(),
            carrier_up_count: up_count,
            carrier_down_count: down_count,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::link::fixtures;

    fn path(name: &str) -> String {
        format!("linux/rtnetlink/{name}.bin")
    }

    fn fixture(name: &str) -> Vec<u8> {
        fixtures::read(&path(name))
    }

    fn one(name: &str) -> LinkMessage {
        fixtures::parse_one(&path(name), parse)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn attribute_numbers_match_libc() {
        assert_eq!(IFLA_CARRIER, libc::IFLA_CARRIER);
        assert_eq!(IFLA_CARRIER_UP_COUNT, libc::IFLA_CARRIER_UP_COUNT);
        assert_eq!(IFLA_CARRIER_DOWN_COUNT, libc::IFLA_CARRIER_DOWN_COUNT);
        assert_eq!(IFLA_OPERSTATE, libc::IFLA_OPERSTATE);
        assert_eq!(IFLA_MASTER, libc::IFLA_MASTER);
        assert_eq!(RTM_NEWLINK, libc::RTM_NEWLINK);
    }

    #[test]
    fn carrier_down_and_up() {
        let down = one("newlink_carrier_down");
        assert_eq!(down.kind, RTM_NEWLINK);
        assert_eq!(down.name, "tb0");
        assert_eq!(down.index, 2);
        assert_eq!(down.master, None);
        assert_eq!(
            down.state,
            LinkState {
                carrier: Some(false),
                admin_up: true,
                oper_state: "down".into(),
                carrier_up_count: 1,
                carrier_down_count: 2,
            }
        );
        let up = one("newlink_carrier_up");
        assert!(up.state.carrier == Some(true) && up.state.admin_up);
        assert_eq!(up.state.oper_state, "up");
        assert_eq!(
            (up.state.carrier_up_count, up.state.carrier_down_count),
            (2, 2)
        );
    }

    #[test]
    fn admin_transitions() {
        let up = one("newlink_admin_up");
        assert!(up.state.admin_up && up.state.carrier == Some(true));
        assert_eq!(up.state.oper_state, "down", "operstate lags the flags");
        let down = one("newlink_admin_down");
        assert!(!down.state.admin_up && down.state.carrier == Some(false));
        assert_eq!(down.state.carrier_down_count, 4);
    }

    #[test]
    fn coalesced_flap_shows_only_in_counters() {
        let m = one("newlink_coalesced_flap");
        assert_eq!(m.state.carrier, Some(true));
        assert_eq!(
            (m.state.carrier_up_count, m.state.carrier_down_count),
            (3, 3)
        );
        let mtu = one("newlink_mtu_change");
        assert_eq!(mtu.state, m.state);
    }

    #[test]
    fn several_messages_in_one_buffer() {
        let mut buf = fixture("newlink_carrier_down");
        buf.extend(fixture("newlink_carrier_up"));
        let msgs = parse(&buf).unwrap();
        assert_eq!(msgs.len(), 2);
        assert_eq!(
            (msgs[0].state.carrier, msgs[1].state.carrier),
            (Some(false), Some(true))
        );
    }

    #[test]
    fn truncated_and_bad_lengths_are_errors() {
        let buf = fixture("newlink_carrier_down");
        assert!(matches!(parse(&buf[..100]), Err(ParseError::Truncated(_))));
        let mut bad = buf.clone();
        bad[..4].copy_from_slice(&8u32.to_ne_bytes());
        assert_eq!(parse(&bad), Err(ParseError::BadLength { at: 0, len: 8 }));
        // A corrupt attribute length inside the message.
        let mut bad = buf;
        bad[32..34].copy_from_slice(&2u16.to_ne_bytes());
        assert!(matches!(parse(&bad), Err(ParseError::BadLength { .. })));
        assert_eq!(parse(&[]), Ok(vec![]));
    }

    #[test]
    fn other_message_types_are_skipped() {
        let mut done = vec![0u8; 20];
        done[..4].copy_from_slice(&20u32.to_ne_bytes());
        done[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        let mut buf = done.clone();
        buf.extend(fixture("newlink_carrier_up"));
        assert_eq!(parse(&buf).unwrap().len(), 1);
    }
}
