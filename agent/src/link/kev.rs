//! Parsers for what the macOS watcher reads: `kern_event_msg` records from
//! a `PF_SYSTEM`/`SYSPROTO_EVENT` socket and `ifconfig bridgeN` member
//! lines (the `SIOCGIFMEDIA` status word is read by
//! [`xnu::carrier_from_media`]). Pure, compiled on every OS so the
//! Linux CI tests them on fixture bytes (`agent/tests/fixtures/macos/kev/`,
//! built from xnu's struct layout, not recorded on a Mac).
//!
//! Layout (xnu `bsd/sys/kern_event.h`, `bsd/net/net_kev.h`, host order):
//! `kern_event_msg { u32 total_size, vendor_code, kev_class, kev_subclass,
//! id, event_code; event_data[] }`, and for data-link events
//! `net_event_data { u32 if_family; u32 if_unit; char if_name[16] }`: the
//! interface is `if_name` followed by `if_unit` ("en" + 2 = "en2"). The
//! offsets come from [`xnu`], which `platform/macos.rs` pins to `repr(C)`
//! definitions at compile time.

use crate::platform::xnu;

/// `KEV_VENDOR_APPLE`.
pub const KEV_VENDOR_APPLE: u32 = 1;
/// `KEV_NETWORK_CLASS`.
pub const KEV_NETWORK_CLASS: u32 = 1;
/// `KEV_DL_SUBCLASS`: data-link (interface) events.
pub const KEV_DL_SUBCLASS: u32 = 2;

const KEV_DL_SIFFLAGS: u32 = 1;
const KEV_DL_IF_ATTACHED: u32 = 9;
const KEV_DL_IF_DETACHING: u32 = 10;
const KEV_DL_IF_DETACHED: u32 = 11;
const KEV_DL_LINK_OFF: u32 = 12;
const KEV_DL_LINK_ON: u32 = 13;

const HEADER: usize = xnu::KERN_EVENT_MSG_HEADER;
const NET_EVENT_DATA: usize = xnu::NET_EVENT_DATA_SIZE;
const IFNAMSIZ: usize = xnu::IFNAMSIZ;

/// What a data-link event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KevKind {
    /// `KEV_DL_LINK_ON`: carrier came up.
    LinkOn,
    /// `KEV_DL_LINK_OFF`: carrier went down.
    LinkOff,
    /// `KEV_DL_SIFFLAGS`: interface flags (admin state) changed.
    FlagsChanged,
    /// `KEV_DL_IF_ATTACHED`: an interface appeared.
    Attached,
    /// `KEV_DL_IF_DETACHING`/`KEV_DL_IF_DETACHED`: an interface is going.
    Detached,
    /// Any other data-link code (MTU, multicast, link quality, ...).
    Other(u32),
}

/// One data-link kernel event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KevEvent {
    /// The kernel's event id. One counter serves every class of event,
    /// so ids seen through a class filter have gaps.
    pub id: u32,
    /// What happened.
    pub kind: KevKind,
    /// BSD interface name, e.g. "en2".
    pub interface: String,
}

/// Why a buffer could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KevError {
    /// The buffer ends inside a message.
    #[error("kernel event truncated: {have} of {need} bytes")]
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// `total_size` is smaller than the header.
    #[error("kernel event size {0} is invalid")]
    BadSize(usize),
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses the kernel events in `buf` (one `recv`); events of other
/// vendors, classes or subclasses are skipped, as are data-link events too
/// short to name an interface.
pub fn parse(buf: &[u8]) -> Result<Vec<KevEvent>, KevError> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < buf.len() {
        let rest = &buf[off..];
        if rest.len() < HEADER {
            return Err(KevError::Truncated {
                need: HEADER,
                have: rest.len(),
            });
        }
        let size = u32_at(rest, 0) as usize;
        if size < HEADER {
            return Err(KevError::BadSize(size));
        }
        if rest.len() < size {
            return Err(KevError::Truncated {
                need: size,
                have: rest.len(),
            });
        }
        let msg = &rest[..size];
        let (vendor, class, subclass) = (u32_at(msg, 4), u32_at(msg, 8), u32_at(msg, 12));
        if (vendor, class, subclass) == (KEV_VENDOR_APPLE, KEV_NETWORK_CLASS, KEV_DL_SUBCLASS)
            && size >= HEADER + NET_EVENT_DATA
        {
            let data = &msg[HEADER..];
            let unit = u32_at(data, xnu::NET_EVENT_DATA_UNIT);
            let raw = &data[xnu::NET_EVENT_DATA_NAME..xnu::NET_EVENT_DATA_NAME + IFNAMSIZ];
            let end = raw.iter().position(|&c| c == 0).unwrap_or(IFNAMSIZ);
            let code = u32_at(msg, xnu::KERN_EVENT_MSG_CODE);
            out.push(KevEvent {
                id: u32_at(msg, xnu::KERN_EVENT_MSG_ID),
                kind: match code {
                    KEV_DL_LINK_ON => KevKind::LinkOn,
                    KEV_DL_LINK_OFF => KevKind::LinkOff,
                    KEV_DL_SIFFLAGS => KevKind::FlagsChanged,
                    KEV_DL_IF_ATTACHED => KevKind::Attached,
                    KEV_DL_IF_DETACHING | KEV_DL_IF_DETACHED => KevKind::Detached,
                    other => KevKind::Other(other),
                },
                interface: format!("{}{unit}", String::from_utf8_lossy(&raw[..end])),
            });
        }
        // Sizes are multiples of 4 in xnu; stepping by the size as given
        // keeps us in step with whatever the kernel wrote.
        off += size;
    }
    Ok(out)
}

/// What an event says about the carrier: `Some(Some(up))` for
/// `KEV_DL_LINK_ON`/`OFF`, `Some(None)` for a flags change (admin state;
/// the carrier must be read), `None` for events that say nothing about
/// link state.
pub fn announced_carrier(kind: KevKind) -> Option<Option<bool>> {
    match kind {
        KevKind::LinkOn => Some(Some(true)),
        KevKind::LinkOff => Some(Some(false)),
        KevKind::FlagsChanged => Some(None),
        _ => None,
    }
}

/// Member ports from `ifconfig bridgeN` output (`member: en2 flags=...`).
pub fn parse_bridge_members(ifconfig: &str) -> Vec<String> {
    ifconfig
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("member:"))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::link::fixtures;

    const DIR: &str = "macos/kev";

    fn fixture(name: &str) -> Vec<u8> {
        fixtures::read(&format!("{DIR}/{name}"))
    }

    fn one(name: &str) -> KevEvent {
        fixtures::parse_one(&format!("{DIR}/{name}"), parse)
    }

    #[test]
    fn link_off_and_on() {
        assert_eq!(
            one("link_off_en2.bin"),
            KevEvent {
                id: 101,
                kind: KevKind::LinkOff,
                interface: "en2".into()
            }
        );
        let on = one("link_on_en2.bin");
        assert_eq!((on.kind, on.id), (KevKind::LinkOn, 102));
    }

    #[test]
    fn flags_attach_and_other_codes() {
        let f = one("sifflags_bridge0.bin");
        assert_eq!(
            (f.kind, f.interface.as_str()),
            (KevKind::FlagsChanged, "bridge0")
        );
        assert_eq!(one("if_attached_en5.bin").kind, KevKind::Attached);
        let q = one("link_quality_en3.bin");
        assert_eq!((q.kind, q.interface.as_str()), (KevKind::Other(20), "en3"));
    }

    #[test]
    fn other_subclasses_are_skipped() {
        assert_eq!(parse(&fixture("inet_new_addr.bin")), Ok(vec![]));
    }

    #[test]
    fn back_to_back_messages() {
        let v = parse(&fixture("off_then_on_en4.bin")).unwrap();
        let kinds: Vec<_> = v.iter().map(|e| (e.kind, e.interface.as_str())).collect();
        assert_eq!(
            kinds,
            vec![(KevKind::LinkOff, "en4"), (KevKind::LinkOn, "en4")]
        );
    }

    #[test]
    fn truncation_and_bad_sizes() {
        let b = fixture("link_off_en2.bin");
        assert_eq!(
            parse(&b[..30]),
            Err(KevError::Truncated { need: 48, have: 30 })
        );
        assert_eq!(
            parse(&b[..10]),
            Err(KevError::Truncated { need: 24, have: 10 })
        );
        let mut bad = b.clone();
        bad[..4].copy_from_slice(&4u32.to_ne_bytes());
        assert_eq!(parse(&bad), Err(KevError::BadSize(4)));
        // A data-link event too short for net_event_data names nothing.
        let mut short = b[..HEADER].to_vec();
        short[..4].copy_from_slice(&(HEADER as u32).to_ne_bytes());
        assert_eq!(parse(&short), Ok(vec![]));
    }

    #[test]
    fn what_events_say_about_the_carrier() {
        assert_eq!(announced_carrier(KevKind::LinkOn), Some(Some(true)));
        assert_eq!(announced_carrier(KevKind::LinkOff), Some(Some(false)));
        assert_eq!(announced_carrier(KevKind::FlagsChanged), Some(None));
        assert_eq!(announced_carrier(KevKind::Attached), None);
        assert_eq!(announced_carrier(KevKind::Other(20)), None);
    }

    #[test]
    fn bridge_members_from_ifconfig() {
        let text = String::from_utf8(fixture("ifconfig_bridge0.txt")).unwrap();
        assert_eq!(parse_bridge_members(&text), vec!["en2", "en3"]);
        assert!(parse_bridge_members("en0: flags=8863<UP> mtu 1500\n").is_empty());
    }
}
