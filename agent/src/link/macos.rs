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

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::net::if_::InterfaceFlags;
use nix::sys::socket::{recv, setsockopt, sockopt, MsgFlags};
use nix::sys::time::TimeVal;

use super::bridge_loop::Flood;
use super::ifbridge::{self, BridgeAddr};
use super::kev::{self, KevKind};
use super::ports::Tables;
use super::reconcile::{Inventory, LinkOs, OsEvent, RECV_TIMEOUT};
use super::rtdump;
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

    fn flood(&mut self, bridge: &str, members: &[String]) -> io::Result<Flood> {
        // xnu counts broadcast with multicast (`ifi_imcasts`/`ifi_omcasts`,
        // `ether_input`/`ether_output`): the members' received ones are
        // what the loop floods, the bridge's sent ones what the node said.
        let mut flood_in = 0u64;
        for m in members {
            let (rx, _) = crate::counters::multicast_packets(m).map_err(io::Error::other)?;
            flood_in = flood_in.wrapping_add(rx);
        }
        let (_, own_out) = crate::counters::multicast_packets(bridge).map_err(io::Error::other)?;
        Ok(Flood { flood_in, own_out })
    }

    fn tables(&mut self, bridges: &HashMap<String, String>) -> io::Result<Tables> {
        let mut t = Tables::default();
        for family in [libc::AF_INET, libc::AF_INET6] {
            t.neighbours
                .extend(rtdump::parse_llinfo(&llinfo_dump(family)?));
        }
        let names: BTreeSet<&String> = bridges.values().collect();
        for bridge in names {
            for a in bridge_addrs(self.media.as_fd(), bridge)? {
                t.ports.insert(a.mac, a.port);
            }
        }
        Ok(t)
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

/// `struct ifbareq` (`bsd/net/if_bridgevar.h`, inside `#pragma pack(4)`);
/// the kernel fills an array of them, read as bytes by
/// [`ifbridge::parse_ifbareqs`], which this layout must match.
#[repr(C, packed(4))]
#[allow(dead_code)]
struct IfbAreq {
    ifba_ifsname: [libc::c_char; ifbridge::IFNAMSIZ],
    ifba_expire: libc::c_ulong,
    ifba_flags: u8,
    ifba_dst: [u8; 6],
    ifba_vlan: u16,
}
const _: () = assert!(size_of::<IfbAreq>() == ifbridge::IFBAREQ_SIZE);
const _: () = assert!(offset_of!(IfbAreq, ifba_expire) == ifbridge::IFBAREQ_EXPIRE);
const _: () = assert!(offset_of!(IfbAreq, ifba_flags) == ifbridge::IFBAREQ_FLAGS);
const _: () = assert!(offset_of!(IfbAreq, ifba_dst) == ifbridge::IFBAREQ_DST);
const _: () = assert!(offset_of!(IfbAreq, ifba_vlan) == ifbridge::IFBAREQ_VLAN);

/// `struct ifbaconf` (`bsd/net/if_bridgevar.h`, inside `#pragma pack(4)`).
#[repr(C, packed(4))]
struct IfbAconf {
    ifbac_len: u32,
    ifbac_buf: *mut u8,
}
const _: () = assert!(size_of::<IfbAconf>() == ifbridge::IFBACONF_SIZE);
const _: () = assert!(offset_of!(IfbAconf, ifbac_buf) == ifbridge::IFBACONF_BUF);

/// `struct ifdrv` (`bsd/net/if.h`).
#[repr(C)]
struct IfDrv {
    ifd_name: [libc::c_char; ifbridge::IFNAMSIZ],
    ifd_cmd: libc::c_ulong,
    ifd_len: libc::size_t,
    ifd_data: *mut libc::c_void,
}
const _: () = assert!(size_of::<IfDrv>() == ifbridge::IFDRV_SIZE);

/// Most times the address buffer doubles: 64 entries, then up to 16384.
const RTS_GROWTHS: usize = 8;

/// The forwarding table of `bridge` (`SIOCGDRVSPEC`/`BRDGRTS`, what
/// `ifconfig bridgeN addr` prints).
fn bridge_addrs(sock: BorrowedFd<'_>, bridge: &str) -> io::Result<Vec<BridgeAddr>> {
    let mut name = [0 as libc::c_char; ifbridge::IFNAMSIZ];
    if bridge.len() >= name.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "bridge name too long"));
    }
    for (d, s) in name.iter_mut().zip(bridge.bytes()) {
        *d = s as libc::c_char;
    }
    let mut cap = 64 * ifbridge::IFBAREQ_SIZE;
    for _ in 0..RTS_GROWTHS {
        let mut buf = vec![0u8; cap];
        let mut conf = IfbAconf {
            ifbac_len: cap as u32,
            ifbac_buf: buf.as_mut_ptr(),
        };
        let mut drv = IfDrv {
            ifd_name: name,
            ifd_cmd: ifbridge::BRDGRTS as libc::c_ulong,
            ifd_len: size_of::<IfbAconf>(),
            ifd_data: (&mut conf as *mut IfbAconf).cast(),
        };
        // SAFETY: SIOCGDRVSPEC reads and writes a `struct ifdrv` (layout
        // asserted above) whose `ifd_data` points at a `struct ifbaconf`
        // whose buffer is `cap` writable bytes; all outlive the call.
        let rc = unsafe {
            libc::ioctl(
                sock.as_raw_fd(),
                ifbridge::SIOCGDRVSPEC as libc::c_ulong,
                &mut drv as *mut IfDrv,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let filled = conf.ifbac_len as usize;
        // A full buffer may have had more to say: ask again, larger.
        if filled < cap {
            buf.truncate(filled);
            return Ok(ifbridge::parse_ifbareqs(&buf));
        }
        cap *= 2;
    }
    Err(io::Error::other(format!("{bridge}: address table too large")))
}

/// `NET_RT_FLAGS` (`bsd/sys/socket.h`).
const NET_RT_FLAGS: libc::c_int = 2;
/// `RTF_LLINFO` (`bsd/net/route.h`): entries with link-level information.
const RTF_LLINFO: libc::c_int = 0x400;
const _: () = assert!(size_of::<libc::rt_msghdr>() == rtdump::RT_MSGHDR_SIZE);
const _: () = assert!(offset_of!(libc::rt_msghdr, rtm_addrs) == rtdump::RTM_ADDRS);

/// The ARP (`AF_INET`) or NDP (`AF_INET6`) table as routing messages.
fn llinfo_dump(family: libc::c_int) -> io::Result<Vec<u8>> {
    let mut mib = [libc::CTL_NET, libc::PF_ROUTE, 0, family, NET_RT_FLAGS, RTF_LLINFO];
    // The table may grow between the size query and the read: retry.
    for _ in 0..4 {
        let mut len: libc::size_t = 0;
        // SAFETY: a size query: null buffer, `len` a valid out pointer.
        let rc = unsafe {
            libc::sysctl(mib.as_mut_ptr(), 6, std::ptr::null_mut(), &mut len, std::ptr::null_mut(), 0)
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = vec![0u8; len + len / 4 + 1024];
        let mut got = buf.len();
        // SAFETY: `buf` is `got` writable bytes and outlives the call.
        let rc = unsafe {
            libc::sysctl(
                mib.as_mut_ptr(),
                6,
                buf.as_mut_ptr().cast(),
                &mut got,
                std::ptr::null_mut(),
                0,
            )
        };
        if rc == 0 {
            buf.truncate(got);
            return Ok(buf);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOMEM) {
            return Err(e);
        }
    }
    Err(io::Error::other("neighbour table kept growing"))
}
