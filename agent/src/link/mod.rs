//! Event-driven link state: kernel link events become `LinkEvent` records
//! the moment they arrive, and a 1 Hz reconciliation poll makes sure a
//! missed event never hides a drop.
//!
//! This module owns the shared types and [`spawn_watcher`]; the
//! reconciliation loop and bridge expansion are in `reconcile` and the
//! dedupe rules in [`debounce`] (both pure of OS calls), the message
//! parsers in [`netlink`] (Linux rtnetlink) and [`kev`] (macOS
//! `kern_event_msg`), both pure and tested on fixture bytes on any OS. The
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
use std::time::Duration;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::LinkEventSource;

use crate::sink::{Observer, Sink};

use crate::platform::Support;

pub mod announce;
pub mod debounce;
pub mod kev;
pub mod netlink;
mod reconcile;

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

/// How often the watcher reconciles against a poll.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The state of one interface as one source saw it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkState {
    /// Carrier (physical link) present; `Some(false)` while admin down,
    /// `None` when the OS could not tell (macOS `SIOCGIFMEDIA` failed). An
    /// unknown carrier is never taken as up: the [`debounce::Tracker`]
    /// keeps the last known one.
    pub carrier: Option<bool>,
    /// Administratively up (`IFF_UP`).
    pub admin_up: bool,
    /// Operational state as the OS names it ("up", "down", ...).
    pub oper_state: String,
    /// Kernel carrier-up transitions since the interface appeared (Linux;
    /// 0 where the OS has no such counter).
    pub carrier_up_count: u64,
    /// Kernel carrier-down transitions since the interface appeared.
    pub carrier_down_count: u64,
}

impl LinkState {
    /// Both counters together: monotonic, so it orders observations.
    pub fn counter_sum(&self) -> u64 {
        self.carrier_up_count + self.carrier_down_count
    }
}

/// A reported link change, for the outage tracker
/// ([`crate::outage::OutageTracker::on_carrier`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkChange {
    /// Interface name.
    pub interface: String,
    /// When it was observed, unix nanoseconds.
    pub at_unix_ns: u64,
    /// Carrier now.
    pub carrier: bool,
    /// True when the carrier itself changed (false for a first sighting, an
    /// admin-only change or a counters-only report).
    pub carrier_changed: bool,
    /// Down transitions the counters show but no event or poll saw: flaps
    /// too short to time. The outage tracker cannot place them; they are counted.
    pub missed_flaps: u64,
    /// Where it was observed.
    pub source: LinkEventSource,
}

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

/// What a watcher needs; built by [`spawn_watcher`].
#[derive(Debug)]
struct Watch {
    interfaces: Vec<String>,
    sink: Sink,
    observer: Option<Observer<LinkChange>>,
    stop: Arc<AtomicBool>,
}

impl Watch {
    /// True if `name` is watched (an empty list watches everything).
    fn wants(&self, name: &str) -> bool {
        self.interfaces.is_empty() || self.interfaces.iter().any(|i| i == name)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Emits what the tracker accepted and tells the observer.
    fn report(&self, at_unix_ns: u64, accepted: debounce::Accepted) {
        tracing::debug!(
            interface = %accepted.event.interface,
            carrier = accepted.event.carrier,
            admin_up = accepted.event.admin_up,
            down_count = accepted.event.carrier_down_count,
            source = ?accepted.change.source,
            "link event"
        );
        if let Some(obs) = &self.observer {
            obs.observe(accepted.change);
        }
        self.sink
            .emit_at(at_unix_ns, Payload::LinkEvent(accepted.event));
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
            reconcile::run(watch, os)
        })?;
    Ok(WatcherHandle {
        stop,
        thread: Some(thread),
    })
}
