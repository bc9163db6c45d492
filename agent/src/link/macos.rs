//! macOS link watcher: a `PF_SYSTEM` kernel event socket filtered to
//! `KEV_NETWORK_CLASS`/`KEV_DL_SUBCLASS` (the `KEV_DL_LINK_ON`/`OFF` events
//! configd itself consumes), and a 1 Hz reconciliation that reads
//! `SIOCGIFMEDIA` (carrier) and `getifaddrs` flags (admin). Parsing is in
//! [`super::kev`], the rules in [`super::debounce`]; this file only moves
//! bytes.
//!
//! Bridge member ports are watched, not only `bridge0`: xnu recomputes the
//! bridge's own link from its members, so one port dropping while another
//! stays up never takes `bridge0` down. Members come from `ifconfig
//! bridgeN` (the list is only exposed through private SPI otherwise),
//! refreshed at start, every 30 polls and when interfaces attach or detach.
//!
//! macOS has no carrier transition counters, so a flap shorter than a poll
//! that the event socket also missed is invisible here (Linux counts it).
#![allow(unsafe_code)]

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use boltwatch_proto::v1::LinkEventSource;
use nix::errno::Errno;
use nix::net::if_::InterfaceFlags;
use nix::sys::socket::{recv, setsockopt, sockopt, MsgFlags};
use nix::sys::time::TimeVal;

use super::debounce::Tracker;
use super::kev::{self, KevKind};
use super::{LinkState, Watch, POLL_INTERVAL};
use crate::sink::now_unix_ns;

const RECV_TIMEOUT: Duration = Duration::from_millis(200);
/// Polls between re-reading bridge membership.
const BRIDGE_REFRESH_POLLS: u32 = 30;

/// `struct kev_request` (xnu `bsd/sys/kern_event.h`).
#[repr(C)]
struct KevRequest {
    vendor_code: u32,
    kev_class: u32,
    kev_subclass: u32,
}

/// `struct ifmediareq` (xnu `bsd/net/if.h`).
#[repr(C)]
struct IfMediaReq {
    ifm_name: [libc::c_char; libc::IFNAMSIZ],
    ifm_current: libc::c_int,
    ifm_mask: libc::c_int,
    ifm_status: libc::c_int,
    ifm_active: libc::c_int,
    ifm_count: libc::c_int,
    ifm_ulist: *mut libc::c_int,
}

// The request numbers are computed in `kev` (tested on every OS) from the
// struct sizes; these make sure the structs here have exactly those sizes.
const _: () = assert!(std::mem::size_of::<KevRequest>() as u64 == kev::KEV_REQUEST_SIZE);
const _: () = assert!(std::mem::size_of::<IfMediaReq>() as u64 == kev::IFMEDIAREQ_SIZE);
const SIOCSKEVFILT: libc::c_ulong = kev::SIOCSKEVFILT as libc::c_ulong;
const SIOCGIFMEDIA: libc::c_ulong = kev::SIOCGIFMEDIA as libc::c_ulong;

pub(super) fn spawn(watch: Watch) -> io::Result<JoinHandle<()>> {
    let events = open_event_socket()?;
    let media = open_media_socket()?;
    std::thread::Builder::new()
        .name("link-watch".into())
        .spawn(move || run(watch, events, media))
}

fn open_event_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call with constant arguments; the result is
    // checked before it is wrapped, and OwnedFd then owns the descriptor.
    let raw = unsafe { libc::socket(libc::PF_SYSTEM, libc::SOCK_RAW, libc::SYSPROTO_EVENT) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let req = KevRequest {
        vendor_code: kev::KEV_VENDOR_APPLE,
        kev_class: kev::KEV_NETWORK_CLASS,
        kev_subclass: kev::KEV_DL_SUBCLASS,
    };
    // SAFETY: SIOCSKEVFILT reads a `struct kev_request`, which `req` is
    // (repr(C), three u32) and outlives the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), SIOCSKEVFILT, &req as *const KevRequest) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let tv = TimeVal::new(0, RECV_TIMEOUT.as_micros() as _);
    setsockopt(&fd, sockopt::ReceiveTimeout, &tv)?;
    Ok(fd)
}

fn open_media_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; checked, then owned by OwnedFd.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `SIOCGIFMEDIA` status word of `name`; `None` if the driver has no media
/// support (the flags fallback applies).
fn media_status(sock: &OwnedFd, name: &str) -> Option<i32> {
    if name.len() >= libc::IFNAMSIZ {
        return None;
    }
    let mut req = IfMediaReq {
        ifm_name: [0; libc::IFNAMSIZ],
        ifm_current: 0,
        ifm_mask: 0,
        ifm_status: 0,
        ifm_active: 0,
        ifm_count: 0,
        ifm_ulist: std::ptr::null_mut(),
    };
    for (d, s) in req.ifm_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFMEDIA reads and writes a `struct ifmediareq`, which
    // `req` is; `ifm_count` 0 and a null `ifm_ulist` ask for no media list.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCGIFMEDIA, &mut req as *mut IfMediaReq) };
    (rc == 0).then_some(req.ifm_status)
}

struct Mac {
    watch: Watch,
    media: OwnedFd,
    tracker: Tracker,
    /// Member port -> bridge.
    bridges: HashMap<String, String>,
    /// Watched names with bridge members added.
    names: BTreeSet<String>,
    polls: u32,
    last_id: Option<u32>,
}

fn run(watch: Watch, events: OwnedFd, media: OwnedFd) {
    let mut m = Mac {
        watch,
        media,
        tracker: Tracker::new(),
        bridges: HashMap::new(),
        names: BTreeSet::new(),
        polls: 0,
        last_id: None,
    };
    m.refresh_bridges();
    m.poll(LinkEventSource::Startup);
    let mut last_poll = Instant::now();
    let mut buf = vec![0u8; 8 * 1024];
    while !m.watch.stopped() {
        match recv(events.as_raw_fd(), &mut buf, MsgFlags::empty()) {
            Ok(n) => m.on_bytes(&buf[..n]),
            Err(Errno::EAGAIN) | Err(Errno::EINTR) => {}
            Err(e) => {
                tracing::error!(error = %e, "kernel event recv failed; polling only");
                std::thread::sleep(RECV_TIMEOUT);
            }
        }
        if last_poll.elapsed() >= POLL_INTERVAL {
            while let Ok(n) = recv(events.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
                m.on_bytes(&buf[..n]);
            }
            m.polls += 1;
            if m.polls >= BRIDGE_REFRESH_POLLS {
                m.polls = 0;
                m.refresh_bridges();
            }
            m.poll(LinkEventSource::Poll);
            last_poll = Instant::now();
        }
    }
}

impl Mac {
    fn wanted(&self, name: &str) -> bool {
        self.watch.wants(name) || self.names.contains(name)
    }

    fn on_bytes(&mut self, bytes: &[u8]) {
        let at = now_unix_ns();
        let events = match kev::parse(bytes) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "malformed kernel event");
                return;
            }
        };
        for ev in events {
            if let Some(last) = self.last_id {
                if ev.id != last.wrapping_add(1) {
                    tracing::debug!(last, id = ev.id, "kernel event ids skipped");
                }
            }
            self.last_id = Some(ev.id);
            if matches!(ev.kind, KevKind::Attached | KevKind::Detached) {
                self.refresh_bridges();
                if ev.kind == KevKind::Detached {
                    self.tracker.forget(&ev.interface);
                }
                continue;
            }
            if !self.wanted(&ev.interface) {
                continue;
            }
            let carrier = match ev.kind {
                KevKind::LinkOn => Some(true),
                KevKind::LinkOff => Some(false),
                KevKind::FlagsChanged => None,
                _ => continue,
            };
            let admin = admin_flags();
            let mut state = self.read_state(&ev.interface, &admin);
            if let Some(c) = carrier {
                // The event is the truth at this instant; media may lag.
                state.carrier = c && state.admin_up;
                state.oper_state = oper(state.carrier).into();
            }
            self.observe(&ev.interface, state, LinkEventSource::KernelEvent, at);
        }
    }

    fn observe(&mut self, name: &str, state: LinkState, source: LinkEventSource, at: u64) {
        let bridge = self.bridges.get(name).cloned().unwrap_or_default();
        if let Some(a) = self.tracker.observe(name, &bridge, state, source, at) {
            self.watch.report(at, a);
        }
    }

    fn poll(&mut self, source: LinkEventSource) {
        let admin = admin_flags();
        self.names = if self.watch.interfaces.is_empty() {
            admin.keys().cloned().collect()
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
            if !admin.contains_key(&name) {
                continue;
            }
            let state = self.read_state(&name, &admin);
            self.observe(&name, state, source, at);
        }
    }

    fn read_state(&self, name: &str, flags: &HashMap<String, InterfaceFlags>) -> LinkState {
        let f = flags.get(name).copied().unwrap_or(InterfaceFlags::empty());
        let admin_up = f.contains(InterfaceFlags::IFF_UP);
        let carrier = admin_up
            && media_status(&self.media, name)
                .and_then(kev::carrier_from_media_status)
                .unwrap_or(f.contains(InterfaceFlags::IFF_RUNNING));
        LinkState {
            carrier,
            admin_up,
            oper_state: oper(carrier).into(),
            carrier_up_count: 0,
            carrier_down_count: 0,
        }
    }

    /// Re-reads bridge membership for every watched (or, watching all,
    /// every existing) `bridgeN`.
    fn refresh_bridges(&mut self) {
        let candidates: Vec<String> = if self.watch.interfaces.is_empty() {
            admin_flags().into_keys().collect()
        } else {
            self.watch.interfaces.clone()
        };
        let mut map = HashMap::new();
        for b in candidates.iter().filter(|n| n.starts_with("bridge")) {
            match std::process::Command::new("/sbin/ifconfig").arg(b).output() {
                Ok(out) if out.status.success() => {
                    for member in kev::parse_bridge_members(&String::from_utf8_lossy(&out.stdout)) {
                        map.insert(member, b.clone());
                    }
                }
                Ok(out) => tracing::debug!(bridge = %b, status = %out.status, "ifconfig failed"),
                Err(e) => tracing::warn!(bridge = %b, error = %e, "cannot run ifconfig"),
            }
        }
        self.bridges = map;
    }
}

fn oper(carrier: bool) -> &'static str {
    if carrier {
        "up"
    } else {
        "down"
    }
}

/// Flags of every interface (one `getifaddrs` walk).
fn admin_flags() -> HashMap<String, InterfaceFlags> {
    let mut m = HashMap::new();
    match nix::ifaddrs::getifaddrs() {
        Ok(addrs) => {
            for a in addrs {
                m.entry(a.interface_name).or_insert(a.flags);
            }
        }
        Err(e) => tracing::warn!(error = %e, "getifaddrs failed"),
    }
    m
}
