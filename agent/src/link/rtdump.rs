//! The macOS neighbour tables as `sysctl {CTL_NET, PF_ROUTE, 0, family,
//! NET_RT_FLAGS, RTF_LLINFO}` returns them (what `arp -an` and `ndp -an`
//! read): routing messages whose destination is a neighbour's IP and whose
//! gateway is a link-level address holding its MAC. Pure, compiled on every
//! OS and tested on bytes built from the documented layout (no Mac here);
//! the sysctl lives in `macos.rs`, which asserts [`RT_MSGHDR_SIZE`] against
//! `libc::rt_msghdr` at compile time.
//!
//! Layout (`bsd/net/route.h`): `struct rt_msghdr { u_short rtm_msglen;
//! u_char rtm_version, rtm_type; u_short rtm_index; int rtm_flags,
//! rtm_addrs; pid_t rtm_pid; int rtm_seq, rtm_errno, rtm_use; u_int32_t
//! rtm_inits; struct rt_metrics rtm_rmx; }` with `rt_metrics` 14
//! `u_int32_t`s: 92 bytes, `rtm_addrs` at 12. The sockaddrs follow in
//! `RTA_*` bit order, each padded to 4 bytes (`ROUNDUP32` in
//! `bsd/net/rtsock.c`). `bsd/net/if_dl.h`: `struct sockaddr_dl { u_char
//! sdl_len, sdl_family; u_short sdl_index; u_char sdl_type, sdl_nlen,
//! sdl_alen, sdl_slen; char sdl_data[12]; }`: the MAC at `8 + sdl_nlen`.
//! An IPv6 link-local destination carries its scope in bytes 2-3 of the
//! address (the KAME embedding); it is cleared.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::neigh::Mac;

/// `sizeof(struct rt_msghdr)`.
pub const RT_MSGHDR_SIZE: usize = 92;
/// Offset of `rtm_addrs`.
pub const RTM_ADDRS: usize = 12;
/// `RTA_DST`.
pub const RTA_DST: u32 = 0x1;
/// `RTA_GATEWAY`.
pub const RTA_GATEWAY: u32 = 0x2;
/// `AF_INET`.
pub const AF_INET: u8 = 2;
/// `AF_INET6` on Darwin.
pub const AF_INET6: u8 = 30;
/// `AF_LINK`.
pub const AF_LINK: u8 = 18;

fn roundup32(n: usize) -> usize {
    if n == 0 {
        4
    } else {
        (n + 3) & !3
    }
}

/// Neighbour IP -> MAC from one dump; messages that are not a neighbour
/// with a 6-byte link-level address are skipped, and a damaged message
/// ends the walk (what came before it is kept).
pub fn parse_llinfo(buf: &[u8]) -> Vec<(IpAddr, Mac)> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + RT_MSGHDR_SIZE <= buf.len() {
        let len = u16::from_ne_bytes([buf[off], buf[off + 1]]) as usize;
        let Some(msg) = buf.get(off..off + len).filter(|_| len >= RT_MSGHDR_SIZE) else {
            break;
        };
        if let Some(entry) = parse_one(msg) {
            out.push(entry);
        }
        off += len;
    }
    out
}

fn parse_one(msg: &[u8]) -> Option<(IpAddr, Mac)> {
    let addrs = u32::from_ne_bytes(msg[RTM_ADDRS..RTM_ADDRS + 4].try_into().ok()?);
    if addrs & (RTA_DST | RTA_GATEWAY) != RTA_DST | RTA_GATEWAY {
        return None;
    }
    let dst = msg.get(RT_MSGHDR_SIZE..)?;
    let dst_len = *dst.first()? as usize;
    let ip = sockaddr_ip(dst.get(..dst_len)?)?;
    let gw = dst.get(roundup32(dst_len)..)?;
    if gw.get(1) != Some(&AF_LINK) {
        return None;
    }
    let (nlen, alen) = (*gw.get(5)? as usize, *gw.get(6)? as usize);
    if alen != 6 {
        return None;
    }
    let mac: Mac = gw.get(8 + nlen..8 + nlen + 6)?.try_into().ok()?;
    Some((ip, mac))
}

fn sockaddr_ip(sa: &[u8]) -> Option<IpAddr> {
    match *sa.get(1)? {
        AF_INET => {
            let b: [u8; 4] = sa.get(4..8)?.try_into().ok()?;
            Some(Ipv4Addr::from(b).into())
        }
        AF_INET6 => {
            let mut b: [u8; 16] = sa.get(8..24)?.try_into().ok()?;
            if b[0] == 0xfe && b[1] & 0xc0 == 0x80 {
                b[2] = 0;
                b[3] = 0;
            }
            Some(Ipv6Addr::from(b).into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One RTM_GET reply as `sysctl_dumpentry` lays it out.
    fn message(dst: &[u8], gw: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; RT_MSGHDR_SIZE];
        m[RTM_ADDRS..RTM_ADDRS + 4].copy_from_slice(&(RTA_DST | RTA_GATEWAY).to_ne_bytes());
        m.extend(dst);
        m.resize(RT_MSGHDR_SIZE + roundup32(dst.len()), 0);
        m.extend(gw);
        m.resize(
            RT_MSGHDR_SIZE + roundup32(dst.len()) + roundup32(gw.len()),
            0,
        );
        let len = m.len() as u16;
        m[..2].copy_from_slice(&len.to_ne_bytes());
        m
    }

    fn sockaddr_in(ip: [u8; 4]) -> Vec<u8> {
        let mut s = vec![16, AF_INET, 0, 0];
        s.extend(ip);
        s.resize(16, 0);
        s
    }

    fn sockaddr_in6(ip: [u8; 16]) -> Vec<u8> {
        let mut s = vec![28, AF_INET6, 0, 0, 0, 0, 0, 0];
        s.extend(ip);
        s.resize(28, 0);
        s
    }

    fn sockaddr_dl(name: &str, mac: &[u8]) -> Vec<u8> {
        let mut s = vec![0, AF_LINK, 7, 0, 6, name.len() as u8, mac.len() as u8, 0];
        s.extend(name.as_bytes());
        s.extend(mac);
        s.resize(s.len().max(20), 0);
        s[0] = s.len() as u8;
        s
    }

    const B: Mac = [2, 0, 0, 0, 0, 0x0b];

    #[test]
    fn arp_and_ndp_entries_give_ip_and_mac() {
        let mut buf = message(&sockaddr_in([169, 254, 3, 2]), &sockaddr_dl("bridge0", &B));
        let mut ll = [0u8; 16];
        ll[..2].copy_from_slice(&[0xfe, 0x80]);
        ll[2..4].copy_from_slice(&[0, 7]); // KAME scope: interface 7
        ll[15] = 0x0b;
        buf.extend(message(&sockaddr_in6(ll), &sockaddr_dl("", &B)));
        // An incomplete entry: no link-level address yet.
        buf.extend(message(
            &sockaddr_in([169, 254, 3, 9]),
            &sockaddr_dl("bridge0", &[]),
        ));
        let got = parse_llinfo(&buf);
        let scopeless: IpAddr = "fe80::b".parse().unwrap();
        assert_eq!(
            got,
            vec![("169.254.3.2".parse().unwrap(), B), (scopeless, B)]
        );
    }

    #[test]
    fn damaged_dumps_keep_what_came_before() {
        let one = message(&sockaddr_in([10, 0, 0, 2]), &sockaddr_dl("en0", &B));
        let mut buf = one.clone();
        let mut bad = one.clone();
        bad[..2].copy_from_slice(&4u16.to_ne_bytes());
        buf.extend(&bad);
        buf.extend(&one);
        assert_eq!(parse_llinfo(&buf).len(), 1);
        for cut in 0..one.len() {
            assert!(parse_llinfo(&one[..cut]).is_empty(), "cut at {cut}");
        }
        let mut no_gw = one;
        no_gw[RTM_ADDRS..RTM_ADDRS + 4].copy_from_slice(&RTA_DST.to_ne_bytes());
        assert!(parse_llinfo(&no_gw).is_empty());
    }
}
