//! macOS link watcher OS calls: a `PF_SYSTEM` kernel event socket filtered
//! to `KEV_NETWORK_CLASS`/`KEV_DL_SUBCLASS` (the `KEV_DL_LINK_ON`/`OFF`
//! events configd itself consumes), `SIOCGIFMEDIA` for the carrier and
//! `getifaddrs` flags for the admin state. Parsing is in [`super::kev`],
//! the loop in `super::reconcile`, the rules in [`super::debounce`].
//!
//! Bridge member ports are watched, not only `bridge0`: xnu recomputes the
//! bridge's own link from its members, so one port dropping while another
//! stays up never takes `bridge0` down. Members come from `ifconfig
//! bridgeN` (the list is only exposed through private SPI otherwise),
//! re-read every 30 polls and after an interface attaches or detaches.
//!
//! A failed `SIOCGIFMEDIA` is carrier unknown, never up: `IFF_RUNNING` is
//! set by drivers at init and stays set on an unplugged port. macOS has no
//! carrier transition counters, so a flap shorter than a poll that the
//! event socket also missed is invisible here (Linux counts it).
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::net::if_::InterfaceFlags;
use nix::sys::socket::{recv, setsockopt, sockopt, MsgFlags};
use nix::sys::time::TimeVal;

use super::kev::{self, KevKind};
use super::reconcile::{Inventory, LinkOs, OsEvent, RECV_TIMEOUT};
use super::state::LinkState;
use crate::platform::macos::{ioctl_socket, media_status, KevRequest, SIOCSKEVFILT};
use crate::platform::{xnu, Support};

/// macOS has a link watcher.
pub(super) const SUPPORT: Support = Support::Supported;

/// Inventories between re-reading bridge membership.
const BRIDGE_REFRESH_POLLS: u32 = 30;

/// The kernel event socket, the ioctl socket and bridge membership.
pub(super) struct Mac {
    events: OwnedFd,
    media: OwnedFd,
    buf: Vec<u8>,
    bridges: HashMap<String, String>,
    /// Inventories since membership was read; `None` forces a re-read.
    bridge_age: Option<u32>,
}

/// Opens the event and ioctl sockets; `_sysfs_root` is a Linux notion.
pub(super) fn open(_sysfs_root: &Path) -> io::Result<Mac> {
    Ok(Mac {
        events: open_event_socket()?,
        media: ioctl_socket()?,
        buf: vec![0u8; 8 * 1024],
        bridges: HashMap::new(),
        bridge_age: None,
    })
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
    // (layout asserted in platform::macos) and which outlives the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), SIOCSKEVFILT, &req as *const KevRequest) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let tv = TimeVal::new(0, RECV_TIMEOUT.as_micros() as _);
    setsockopt(&fd, sockopt::ReceiveTimeout, &tv)?;
    Ok(fd)
}

impl LinkOs for Mac {
    fn events(&mut self, nonblocking: bool) -> io::Result<Vec<OsEvent>> {
        let flags = if nonblocking {
            MsgFlags::MSG_DONTWAIT
        } else {
            MsgFlags::empty()
        };
        let n = recv(self.events.as_raw_fd(), &mut self.buf, flags)?;
        let parsed = match kev::parse(&self.buf[..n]) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "malformed kernel event");
                return Ok(Vec::new());
            }
        };
        let mut out = Vec::new();
        for ev in parsed {
            match ev.kind {
                KevKind::Attached => self.bridge_age = None,
                KevKind::Detached => {
                    self.bridge_age = None;
                    out.push(OsEvent::Gone(ev.interface));
                }
                kind => {
                    if let Some(carrier) = kev::announced_carrier(kind) {
                        out.push(OsEvent::Changed {
                            name: ev.interface,
                            carrier,
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    fn inventory(&mut self) -> Inventory {
        let names: Vec<String> = admin_flags().into_keys().collect();
        let age = self.bridge_age.map_or(BRIDGE_REFRESH_POLLS, |a| a + 1);
        if age >= BRIDGE_REFRESH_POLLS {
            self.bridges = bridge_members(&names);
            self.bridge_age = Some(0);
        } else {
            self.bridge_age = Some(age);
        }
        Inventory {
            names,
            bridges: self.bridges.clone(),
        }
    }

    /// Not done on macOS: the lost-ARP-reply window it closes comes from
    /// Linux's deferred qdisc activation (linkwatch), which xnu does not
    /// have.
    fn announce(&mut self, _name: &str) -> io::Result<()> {
        Ok(())
    }

    fn read(&mut self, name: &str) -> io::Result<LinkState> {
        let flags = admin_flags();
        let Some(f) = flags.get(name) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface {name:?}"),
            ));
        };
        let admin_up = f.contains(InterfaceFlags::IFF_UP);
        let media = media_status(self.media.as_fd(), name);
        if let Err(e) = &media {
            tracing::trace!(interface = %name, error = %e, "SIOCGIFMEDIA failed: carrier unknown");
        }
        let carrier = xnu::carrier_from_media(media.ok());
        Ok(LinkState {
            carrier,
            admin_up,
            oper_state: match carrier {
                Some(true) => "up",
                Some(false) => "down",
                None => "unknown",
            }
            .into(),
            carrier_up_count: 0,
            carrier_down_count: 0,
        })
    }
}

/// Member -> bridge for every `bridgeN` among `names`.
fn bridge_members(names: &[String]) -> HashMap<String, String> {
    let mut map = HashMap::new();
    for b in names.iter().filter(|n| n.starts_with("bridge")) {
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
    map
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
