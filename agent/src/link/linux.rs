//! Linux link watcher: an rtnetlink socket subscribed to `RTMGRP_LINK` for
//! events, and `<sysfs_root>/class/net/<if>/` for the startup state and the
//! 1 Hz reconciliation. Parsing is in [`super::netlink`], the rules in
//! [`super::debounce`]; this file only moves bytes.
//!
//! The netlink socket belongs to the network namespace of the thread that
//! opens it, and sysfs shows the namespace it was mounted in: run the agent
//! with both in the same namespace (`ip netns exec` does that).

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use boltwatch_proto::v1::LinkEventSource;
use nix::errno::Errno;
use nix::sys::socket::{
    bind, recv, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};
use nix::sys::time::TimeVal;

use super::debounce::Tracker;
use super::netlink::{self, RTM_DELLINK};
use super::{LinkState, Watch, POLL_INTERVAL};
use crate::sink::now_unix_ns;

/// `RTMGRP_LINK`: the multicast group of link messages.
const RTMGRP_LINK: u32 = 1;
/// How long one `recv` waits, so a stop request is seen promptly.
const RECV_TIMEOUT: Duration = Duration::from_millis(200);

pub(super) fn spawn(watch: Watch) -> io::Result<JoinHandle<()>> {
    let fd = open_socket()?;
    std::thread::Builder::new()
        .name("link-watch".into())
        .spawn(move || run(watch, fd))
}

fn open_socket() -> io::Result<OwnedFd> {
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
    Ok(fd)
}

struct Linux {
    watch: Watch,
    tracker: Tracker,
    /// Member port -> bridge, refreshed at every poll.
    bridges: HashMap<String, String>,
    /// Interfaces watched, bridges expanded; empty means all.
    names: BTreeSet<String>,
}

fn run(watch: Watch, fd: OwnedFd) {
    let mut w = Linux {
        watch,
        tracker: Tracker::new(),
        bridges: HashMap::new(),
        names: BTreeSet::new(),
    };
    w.poll(LinkEventSource::Startup);
    let mut last_poll = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    while !w.watch.stopped() {
        match recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()) {
            Ok(n) => w.on_bytes(&buf[..n]),
            Err(Errno::EAGAIN) | Err(Errno::EINTR) => {}
            Err(Errno::ENOBUFS) => {
                tracing::warn!("netlink queue overflowed; reconciling from sysfs");
                last_poll = Instant::now() - POLL_INTERVAL;
            }
            Err(e) => {
                tracing::error!(error = %e, "netlink recv failed; polling only");
                std::thread::sleep(RECV_TIMEOUT);
            }
        }
        if last_poll.elapsed() >= POLL_INTERVAL {
            // Events already queued go first, so the poll only reports what
            // no event will.
            while let Ok(n) = recv(fd.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
                w.on_bytes(&buf[..n]);
            }
            w.poll(LinkEventSource::Poll);
            last_poll = Instant::now();
        }
    }
}

impl Linux {
    fn on_bytes(&mut self, bytes: &[u8]) {
        let at = now_unix_ns();
        let msgs = match netlink::parse(bytes) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "malformed netlink message");
                return;
            }
        };
        for m in msgs {
            if !self.wanted(&m.name) {
                continue;
            }
            if m.kind == RTM_DELLINK {
                self.tracker.forget(&m.name);
                continue;
            }
            let bridge = self.bridges.get(&m.name).cloned().unwrap_or_default();
            if let Some(a) =
                self.tracker
                    .observe(&m.name, &bridge, m.state, LinkEventSource::Netlink, at)
            {
                self.watch.report(at, a);
            }
        }
    }

    fn wanted(&self, name: &str) -> bool {
        self.watch.wants(name) || self.names.contains(name)
    }

    /// Reads every watched interface from sysfs and reports what differs.
    fn poll(&mut self, source: LinkEventSource) {
        let root = self.watch.sysfs_root.join("class/net");
        let listed = list_interfaces(&root);
        self.bridges = bridge_members(&root, &listed);
        self.names = if self.watch.interfaces.is_empty() {
            listed.iter().cloned().collect()
        } else {
            let mut n: BTreeSet<String> = self.watch.interfaces.iter().cloned().collect();
            for (member, bridge) in &self.bridges {
                if n.contains(bridge) {
                    n.insert(member.clone());
                }
            }
            n
        };
        let at = now_unix_ns();
        for name in self.names.clone() {
            match read_state(&root.join(&name)) {
                Ok(state) => {
                    let bridge = self.bridges.get(&name).cloned().unwrap_or_default();
                    if let Some(a) = self.tracker.observe(&name, &bridge, state, source, at) {
                        self.watch.report(at, a);
                    }
                }
                // A vanished interface is forgotten on RTM_DELLINK; a sysfs
                // root that lacks it (another mount namespace) must not
                // reset what the events established.
                Err(e) => tracing::debug!(interface = %name, error = %e, "sysfs read failed"),
            }
        }
    }
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
    let carrier = admin_up && read_trimmed(&dir.join("carrier")).is_ok_and(|c| c == "1");
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
                carrier: true,
                admin_up: true,
                oper_state: "up".into(),
                carrier_up_count: 4,
                carrier_down_count: 3
            }
        );
        write(&tb0, "flags", "0x1002\n");
        let s = read_state(&tb0).unwrap();
        assert!(!s.admin_up && !s.carrier, "admin down means no carrier");
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
