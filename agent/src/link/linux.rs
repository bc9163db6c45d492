//! Linux link watcher OS calls: an rtnetlink socket subscribed to
//! `RTMGRP_LINK` for events, and `<sysfs_root>/class/net/<if>/` for the
//! startup state and the reconciliation poll. Parsing is in
//! [`super::netlink`], the loop in `super::reconcile`, the rules in
//! [`super::debounce`]; this file only moves bytes.
//!
//! The netlink socket belongs to the network namespace of the thread that
//! opens it, and sysfs shows the namespace it was mounted in: run the agent
//! with both in the same namespace (`ip netns exec` does that).

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::socket::{
    bind, recv, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};
use nix::sys::time::TimeVal;

use super::announce::{gratuitous_arp, ETH_P_ARP};
use super::bridge_loop::Flood;
use super::neigh::{self, AF_BRIDGE, AF_INET, AF_INET6};
use super::netlink::{self, RTM_DELLINK};
use super::ports::Tables;
use super::reconcile::{Inventory, LinkOs, OsEvent, RECV_TIMEOUT};
use super::state::LinkState;
use crate::platform::Support;

/// Linux has a link watcher.
pub(super) const SUPPORT: Support = Support::Supported;

/// `RTMGRP_LINK`: the multicast group of link messages.
const RTMGRP_LINK: u32 = 1;

/// The netlink socket, the sysfs root and the announcement socket.
pub(super) struct Linux {
    fd: OwnedFd,
    class_net: PathBuf,
    buf: Vec<u8>,
    /// Send-only `AF_PACKET` socket for gratuitous ARP (`None` without
    /// CAP_NET_RAW: announcements are skipped, said once in the log).
    packet: Option<OwnedFd>,
}

/// Opens the netlink socket (in the calling thread's namespace).
pub(super) fn open(sysfs_root: &Path) -> io::Result<Linux> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    // A burst of flaps must not overflow the queue; if it does, ENOBUFS
    // triggers an immediate poll.
    setsockopt(&fd, sockopt::RcvBuf, &(1 << 20))?;
    let tv = TimeVal::new(0, RECV_TIMEOUT.as_micros() as _);
    setsockopt(&fd, sockopt::ReceiveTimeout, &tv)?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, RTMGRP_LINK))?;
    // Protocol 0: the socket receives nothing, it only sends.
    let packet = match socket(
        AddressFamily::Packet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    ) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(error = %e, "no packet socket: no gratuitous ARP when a carrier returns");
            None
        }
    };
    Ok(Linux {
        fd,
        class_net: sysfs_root.join("class/net"),
        buf: vec![0u8; 64 * 1024],
        packet,
    })
}

impl LinkOs for Linux {
    fn events(&mut self, nonblocking: bool) -> io::Result<Vec<OsEvent>> {
        let flags = if nonblocking {
            MsgFlags::MSG_DONTWAIT
        } else {
            MsgFlags::empty()
        };
        let n = match recv(self.fd.as_raw_fd(), &mut self.buf, flags) {
            Ok(n) => n,
            Err(Errno::ENOBUFS) => return Ok(vec![OsEvent::Overflow]),
            Err(e) => return Err(e.into()),
        };
        let msgs = match netlink::parse(&self.buf[..n]) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "malformed netlink message");
                return Ok(Vec::new());
            }
        };
        Ok(msgs
            .into_iter()
            .map(|m| {
                if m.kind == RTM_DELLINK {
                    OsEvent::Gone(m.name)
                } else {
                    OsEvent::State {
                        name: m.name,
                        state: m.state,
                    }
                }
            })
            .collect())
    }

    fn inventory(&mut self) -> Inventory {
        let names = list_interfaces(&self.class_net);
        let bridges = bridge_members(&self.class_net, &names);
        Inventory { names, bridges }
    }

    fn read(&mut self, name: &str) -> io::Result<LinkState> {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not an interface name"),
            ));
        }
        read_state(&self.class_net.join(name))
    }

    fn tables(&mut self, bridges: &HashMap<String, String>) -> io::Result<Tables> {
        let mut t = Tables::default();
        for family in [AF_INET, AF_INET6] {
            t.neighbours
                .extend(dump_neighbours(family)?.iter().filter_map(|n| n.resolved()));
        }
        for n in dump_neighbours(AF_BRIDGE)? {
            let Some((mac, port, _)) = n.learnt() else {
                continue;
            };
            let Ok(name) = nix::net::if_::if_indextoname(port) else {
                continue;
            };
            let name = name.to_string_lossy().into_owned();
            if bridges.contains_key(&name) {
                t.ports.insert(mac, name);
            }
        }
        Ok(t)
    }

    fn flood(&mut self, bridge: &str, _members: &[String]) -> io::Result<Flood> {
        // veth and thunderbolt-net count no multicast (`statistics/multicast`
        // stays 0), so the bridge's own receive count stands in: every
        // flooded frame is also passed up to the bridge device, once per
        // round it makes in a loop, while the host sent it once.
        let stats = self.class_net.join(bridge).join("statistics");
        let count = |name: &str| -> io::Result<u64> {
            read_trimmed(&stats.join(name))?
                .parse()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
        };
        Ok(Flood {
            flood_in: count("rx_packets")?,
            own_out: count("tx_packets")?,
        })
    }

    fn announce(&mut self, name: &str) -> io::Result<()> {
        let Some(packet) = &self.packet else {
            return Ok(());
        };
        let (mut index, mut mac, mut ips) = (None, None, Vec::new());
        for a in nix::ifaddrs::getifaddrs()?.filter(|a| a.interface_name == name) {
            let Some(addr) = a.address else { continue };
            if let Some(link) = addr.as_link_addr() {
                index = Some(link.ifindex());
                mac = link.addr();
            } else if let Some(v4) = addr.as_sockaddr_in() {
                ips.push(v4.ip());
            }
        }
        let (Some(index), Some(mac)) = (index, mac) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{name} has no link-layer address"),
            ));
        };
        for ip in ips {
            send_arp(packet, index, &gratuitous_arp(mac, ip))?;
            tracing::debug!(interface = %name, %ip, "gratuitous ARP after carrier return");
        }
        Ok(())
    }
}

/// Most `recv()`s one dump may take: a table of thousands of entries fits
/// in a few dozen 64 KiB buffers; a kernel that never ends the dump must
/// not hold the watcher.
const DUMP_RECVS: usize = 256;

/// One `RTM_GETNEIGH` dump of `family`, on a socket of its own (the event
/// socket's multicast messages must not interleave with it).
fn dump_neighbours(family: u8) -> io::Result<Vec<neigh::Neighbour>> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    let tv = TimeVal::new(1, 0);
    setsockopt(&fd, sockopt::ReceiveTimeout, &tv)?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
    nix::sys::socket::send(
        fd.as_raw_fd(),
        &neigh::dump_request(family, 1),
        MsgFlags::empty(),
    )?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    for _ in 0..DUMP_RECVS {
        let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
        let batch = neigh::parse(&buf[..n])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        out.extend(batch.entries);
        if batch.done || n == 0 {
            return Ok(out);
        }
    }
    Err(io::Error::other("neighbour dump did not end"))
}

/// Sends one ARP packet out of interface `index` to the broadcast address.
#[allow(unsafe_code)]
fn send_arp(sock: &OwnedFd, index: usize, packet: &[u8]) -> io::Result<()> {
    let ifindex = i32::try_from(index)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface index too large"))?;
    let mut addr = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: ETH_P_ARP.to_be(),
        sll_ifindex: ifindex,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 6,
        sll_addr: [0; 8],
    };
    addr.sll_addr[..6].copy_from_slice(&[0xff; 6]);
    // SAFETY: `packet` is a valid buffer of its length and `addr` a fully
    // initialised sockaddr_ll of the size passed; both outlive the call.
    let rc = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            packet.as_ptr().cast(),
            packet.len(),
            0,
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn list_interfaces(class_net: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(class_net) else {
        return Vec::new();
    };
    let mut v: Vec<String> = dir
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    v.sort();
    v
}

/// Member -> bridge, from each bridge's `brif/` directory.
fn bridge_members(class_net: &Path, listed: &[String]) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for bridge in listed {
        for member in list_interfaces(&class_net.join(bridge).join("brif")) {
            m.insert(member, bridge.clone());
        }
    }
    m
}

fn read_trimmed(path: &Path) -> io::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_owned())
}

fn read_u64(path: &Path) -> u64 {
    read_trimmed(path)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// One interface's state from its sysfs directory (`class/net/<if>`).
pub(super) fn read_state(dir: &Path) -> io::Result<LinkState> {
    let flags = read_trimmed(&dir.join("flags"))?;
    let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let admin_up = flags & 1 != 0;
    // `carrier` of an admin-down interface fails with EINVAL: no carrier.
    // Admin up and unreadable is unknown, not down.
    let carrier = if admin_up {
        read_trimmed(&dir.join("carrier"))
            .ok()
            .and_then(|c| crate::counters::parse_carrier(&c))
    } else {
        Some(false)
    };
    Ok(LinkState {
        carrier,
        admin_up,
        oper_state: read_trimmed(&dir.join("operstate")).unwrap_or_else(|_| "unknown".into()),
        carrier_up_count: read_u64(&dir.join("carrier_up_count")),
        carrier_down_count: read_u64(&dir.join("carrier_down_count")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, v: &str) {
        std::fs::write(dir.join(name), v).unwrap();
    }

    #[test]
    fn reads_state_from_a_sysfs_tree() {
        let root = tempfile::tempdir().unwrap();
        let net = root.path().join("class/net");
        let tb0 = net.join("tb0");
        std::fs::create_dir_all(&tb0).unwrap();
        write(&tb0, "flags", "0x1003\n");
        write(&tb0, "carrier", "1\n");
        write(&tb0, "operstate", "up\n");
        write(&tb0, "carrier_up_count", "4\n");
        write(&tb0, "carrier_down_count", "3\n");
        let s = read_state(&tb0).unwrap();
        assert_eq!(
            s,
            LinkState {
                carrier: Some(true),
                admin_up: true,
                oper_state: "up".into(),
                carrier_up_count: 4,
                carrier_down_count: 3
            }
        );
        write(&tb0, "flags", "0x1002\n");
        let s = read_state(&tb0).unwrap();
        assert!(
            !s.admin_up && s.carrier == Some(false),
            "admin down means no carrier"
        );
        assert_eq!(
            read_state(&net.join("nope")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn bridge_members_come_from_brif() {
        let root = tempfile::tempdir().unwrap();
        let net = root.path().join("class/net");
        std::fs::create_dir_all(net.join("br0/brif/tb0")).unwrap();
        std::fs::create_dir_all(net.join("br0/brif/tb1")).unwrap();
        std::fs::create_dir_all(net.join("tb0")).unwrap();
        let listed = list_interfaces(&net);
        assert_eq!(listed, vec!["br0", "tb0"]);
        let m = bridge_members(&net, &listed);
        assert_eq!(m.get("tb0").map(String::as_str), Some("br0"));
        assert_eq!(m.get("tb1").map(String::as_str), Some("br0"));
        assert_eq!(m.len(), 2);
    }
}
