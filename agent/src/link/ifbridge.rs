//! The xnu bridge's forwarding table as `BRDGRTS` returns it: an array of
//! `struct ifbareq`, MAC -> member port. Pure, compiled on every OS and
//! tested on bytes built from the documented layout (no Mac here); the
//! ioctl (`SIOCGDRVSPEC` on `bridgeN`) lives in `macos.rs`, whose
//! `repr(C)` structs assert these sizes and offsets at compile time.
//!
//! Layout (`bsd/net/if_bridgevar.h`, all inside `#pragma pack(4)`):
//! `struct ifbareq { char ifba_ifsname[IFNAMSIZ]; unsigned long
//! ifba_expire; uint8_t ifba_flags; uint8_t ifba_dst[ETHER_ADDR_LEN];
//! uint16_t ifba_vlan; }`: name at 0, expire (8 bytes on LP64) at 16,
//! flags at 24, MAC at 25, vlan at 32, 36 bytes in all. `struct ifbaconf {
//! uint32_t ifbac_len; union { caddr_t; struct ifbareq *; } }`: the
//! pointer at 4, 12 bytes. `BRDGRTS` is 7. `bsd/net/if.h`: `struct ifdrv
//! { char ifd_name[IFNAMSIZ]; unsigned long ifd_cmd; size_t ifd_len; void
//! *ifd_data; }`: 40 bytes, so `SIOCGDRVSPEC` = `_IOWR('i', 123, 40)` =
//! `0xC028697B` (golang/sys `zerrors_darwin_arm64.go` agrees).

use super::neigh::Mac;

/// `IFNAMSIZ`.
pub const IFNAMSIZ: usize = 16;
/// `BRDGRTS`: get the address list (`ifbaconf`).
pub const BRDGRTS: u64 = 7;
/// `sizeof(struct ifbareq)` on LP64.
pub const IFBAREQ_SIZE: usize = 36;
/// Offset of `ifba_expire`.
pub const IFBAREQ_EXPIRE: usize = 16;
/// Offset of `ifba_flags`.
pub const IFBAREQ_FLAGS: usize = 24;
/// Offset of `ifba_dst`.
pub const IFBAREQ_DST: usize = 25;
/// Offset of `ifba_vlan`.
pub const IFBAREQ_VLAN: usize = 32;
/// `sizeof(struct ifbaconf)` on LP64.
pub const IFBACONF_SIZE: usize = 12;
/// Offset of `ifbac_buf`.
pub const IFBACONF_BUF: usize = 4;
/// `sizeof(struct ifdrv)` on LP64.
pub const IFDRV_SIZE: usize = 40;
/// `SIOCGDRVSPEC`: `_IOWR('i', 123, struct ifdrv)`.
pub const SIOCGDRVSPEC: u64 = 0xC000_0000 | ((IFDRV_SIZE as u64) << 16) | (b'i' as u64) << 8 | 123;

/// One learnt (or static) address of the bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeAddr {
    /// The MAC.
    pub mac: Mac,
    /// The member port it is behind.
    pub port: String,
}

/// Parses the `ifbac_len` bytes `BRDGRTS` filled: whole `ifbareq`s only
/// (a trailing partial one is left out), entries without a port name
/// skipped.
pub fn parse_ifbareqs(buf: &[u8]) -> Vec<BridgeAddr> {
    buf.chunks_exact(IFBAREQ_SIZE)
        .filter_map(|r| {
            let name = &r[..IFNAMSIZ];
            let end = name.iter().position(|&c| c == 0).unwrap_or(IFNAMSIZ);
            if end == 0 {
                return None;
            }
            let mac: Mac = r[IFBAREQ_DST..IFBAREQ_DST + 6].try_into().ok()?;
            Some(BridgeAddr {
                mac,
                port: String::from_utf8_lossy(&name[..end]).into_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One `ifbareq` laid out as xnu fills it.
    fn ifbareq(port: &str, mac: Mac, expire: u64, flags: u8, vlan: u16) -> Vec<u8> {
        let mut r = vec![0u8; IFBAREQ_SIZE];
        r[..port.len()].copy_from_slice(port.as_bytes());
        r[IFBAREQ_EXPIRE..IFBAREQ_EXPIRE + 8].copy_from_slice(&expire.to_le_bytes());
        r[IFBAREQ_FLAGS] = flags;
        r[IFBAREQ_DST..IFBAREQ_DST + 6].copy_from_slice(&mac);
        r[IFBAREQ_VLAN..IFBAREQ_VLAN + 2].copy_from_slice(&vlan.to_le_bytes());
        r
    }

    #[test]
    fn layout_adds_up() {
        assert_eq!(IFBAREQ_EXPIRE, IFNAMSIZ);
        assert_eq!(IFBAREQ_FLAGS, IFBAREQ_EXPIRE + 8);
        assert_eq!(IFBAREQ_DST, IFBAREQ_FLAGS + 1);
        // The MAC ends at 31; the u16 aligns to 32; pack(4) rounds 34 up.
        assert_eq!(IFBAREQ_VLAN, IFBAREQ_DST + 6 + 1);
        assert_eq!(IFBAREQ_SIZE, (IFBAREQ_VLAN + 2).div_ceil(4) * 4);
        assert_eq!(IFBACONF_SIZE, IFBACONF_BUF + 8);
        assert_eq!(SIOCGDRVSPEC, 0xC028_697B);
    }

    #[test]
    fn entries_become_mac_to_port() {
        let b = [2, 0, 0, 0, 0, 0x0b];
        let c = [2, 0, 0, 0, 0, 0x0c];
        let mut buf = ifbareq("en2", b, 1200, 0, 0);
        buf.extend(ifbareq("en3", c, 1180, 0, 0));
        // A static entry counts as well; a nameless one does not.
        buf.extend(ifbareq("en4", [2, 0, 0, 0, 0, 0x0d], 0, 1, 0));
        buf.extend(ifbareq("", [2, 0, 0, 0, 0, 0x0e], 0, 0, 0));
        // The kernel stops at whole entries; a torn tail is ignored.
        buf.extend(&ifbareq("en5", c, 0, 0, 0)[..20]);
        let got = parse_ifbareqs(&buf);
        let want =
            [("en2", b), ("en3", c), ("en4", [2, 0, 0, 0, 0, 0x0d])].map(|(p, mac)| BridgeAddr {
                mac,
                port: p.into(),
            });
        assert_eq!(got, want);
        assert!(parse_ifbareqs(&[]).is_empty());
        let full = ifbareq("averylongname16b", b, 0, 0, 0);
        assert_eq!(parse_ifbareqs(&full)[0].port, "averylongname16b");
    }
}
