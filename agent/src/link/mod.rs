//! Event-driven link state: kernel link events become `LinkEvent` records
//! the moment they arrive, and a 1 Hz reconciliation poll makes sure a
//! missed event never hides a drop.
//!
//! This module is the door: it owns [`spawn_watcher`] and re-exports the
//! shared types, which live in `state` ([`LinkState`], [`LinkChange`]) and
//! `watch` (what the running loop holds). The reconciliation loop and
//! bridge expansion are in `reconcile` and the dedupe rules in
//! [`debounce`] (both pure of OS calls), the message
//! parsers in [`netlink`] (Linux rtnetlink) and [`kev`] (macOS
//! `kern_event_msg`), both pure and tested on fixture bytes on any OS.
//! Which member port of a bridge each peer sits behind is [`ports`]' pure
//! map, fed from the neighbour and forwarding tables ([`neigh`] parses
//! Linux's, [`ifbridge`] and [`rtdump`] macOS'); the same forwarding
//! tables and each bridge's flood counters feed [`bridge_loop`], the pure
//! detector of frames circulating through a bridge. The
//! per-OS files (chosen as [`crate::platform`] describes) only make OS
//! calls: `linux.rs` (`NETLINK_ROUTE`, `RTMGRP_LINK`, sysfs reads) and
//! `macos.rs` (`PF_SYSTEM` kernel events, `SIOCGIFMEDIA`, `getifaddrs`);
//! `unsupported.rs` fails with [`crate::platform::Unsupported`].
//!
//! The watcher runs on its own thread, not a tokio task: it blocks on one
//! socket with a one-second timeout that doubles as the poll tick, and never
//! competes with the probe or transport tasks.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::sink::{Observer, Sink};

use crate::platform::Support;

pub mod announce;
pub mod bridge_loop;
pub mod debounce;
pub mod ifbridge;
pub mod kev;
pub mod neigh;
pub mod netlink;
pub mod ports;
mod reconcile;
pub mod rtdump;
mod state;
mod watch;

pub use reconcile::POLL_INTERVAL;
pub use state::{LinkChange, LinkState, PeerPort};
use watch::Watch;

crate::platform::os_module!(mod imp);

/// Event bytes recorded from the kernels, for the unit tests of the parsers
/// and of the loops their events feed.
#[cfg(test)]
pub(crate) mod fixtures {
    /// The file at `path` below `agent/tests/fixtures/`.
    pub(crate) fn read(path: &str) -> Vec<u8> {
        let path = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The one item `parse` finds in the fixture at `path`.
    pub(crate) fn parse_one<T: std::fmt::Debug, E: std::fmt::Debug>(
        path: &str,
        parse: fn(&[u8]) -> Result<Vec<T>, E>,
    ) -> T {
        let items = parse(&read(path)).unwrap_or_else(|e| panic!("{path}: {e:?}"));
        assert_eq!(items.len(), 1, "{path}: {items:?}");
        items.into_iter().next().unwrap()
    }
}

/// Whether this OS has a link watcher.
pub const SUPPORT: Support = imp::SUPPORT;

/// A running watcher; stops (and joins its thread) on [`WatcherHandle::stop`]
/// or drop.
#[derive(Debug)]
pub struct WatcherHandle {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl WatcherHandle {
    /// Asks the watcher to stop and waits for it (at most about one poll
    /// interval).
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for WatcherHandle {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Starts watching `interfaces` (all interfaces if empty; a bridge's member
/// ports are added to the set). Every watched interface gets one `STARTUP`
/// event, then one event per carrier or admin change (`NETLINK` or
/// `KERNEL_EVENT`), plus a `POLL` event whenever the 1 Hz reconciliation
/// finds a change or a flap the events missed. Each event goes to `sink`
/// and, as a [`LinkChange`], to `observer`.
///
/// The kernel socket is opened before this returns, in the calling thread's
/// network namespace, so no event after the return is missed. `sysfs_root`
/// is where Linux reads `class/net` (normally `/sys`); macOS ignores it.
/// On an OS without a watcher this fails with
/// [`std::io::ErrorKind::Unsupported`].
pub fn spawn_watcher(
    interfaces: Vec<String>,
    sysfs_root: PathBuf,
    sink: Sink,
    observer: Option<Observer<LinkChange>>,
) -> std::io::Result<WatcherHandle> {
    spawn(interfaces, sysfs_root, sink, observer, None)
}

/// As [`spawn_watcher`], and on every poll also finds the bridge member
/// port each of `peers` (their IPs, in configured order) sits behind (see
/// [`ports`]), telling `ports` when one is first known or moves, before
/// any link change of the same poll.
pub fn spawn_watcher_for_peers(
    interfaces: Vec<String>,
    sysfs_root: PathBuf,
    sink: Sink,
    observer: Option<Observer<LinkChange>>,
    peers: Vec<std::net::IpAddr>,
    ports: Observer<PeerPort>,
) -> std::io::Result<WatcherHandle> {
    let ports = reconcile::PortWatch {
        map: ports::PeerPorts::new(peers),
        observer: ports,
    };
    spawn(interfaces, sysfs_root, sink, observer, Some(ports))
}

fn spawn(
    interfaces: Vec<String>,
    sysfs_root: PathBuf,
    sink: Sink,
    observer: Option<Observer<LinkChange>>,
    ports: Option<reconcile::PortWatch>,
) -> std::io::Result<WatcherHandle> {
    let os = imp::open(&sysfs_root)?;
    let stop = Arc::new(AtomicBool::new(false));
    let watch = Watch {
        interfaces,
        sink,
        observer,
        stop: stop.clone(),
    };
    let thread = std::thread::Builder::new()
        .name("link-watch".into())
        .spawn(move || {
            // A carrier change is timed when this thread reads it, and the
            // gratuitous ARP that ends an outage (`announce`) leaves from
            // it: it gets the probe threads' scheduling, so a busy CPU
            // does not shift outage starts or hold the path closed.
            if let Err(e) = crate::stamp::imp::prioritize_current_thread() {
                tracing::debug!(error = %e, "link watcher keeps its scheduling priority");
            }
            reconcile::run(watch, os, ports)
        })?;
    Ok(WatcherHandle {
        stop,
        thread: Some(thread),
    })
}
