//! The watcher loop every OS shares: kernel events as they arrive, a 1 Hz
//! reconciliation poll of every watched interface, bridge members added to
//! the watched set, and the [`Tracker`] deciding what becomes a record.
//! The OS file behind [`LinkOs`] only reads sockets and files.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::time::{Duration, Instant};

use boltwatch_proto::v1::LinkEventSource;

use super::bridge_loop::{Flood, LoopDetector, Poll};
use super::debounce::Tracker;
use super::neigh::Mac;
use super::ports::{PeerPorts, Tables};
use super::state::{LinkState, PeerPort};
use super::watch::Watch;
use crate::sink::Observer;

/// How often the watcher reconciles against a poll.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long one blocking wait for kernel events lasts, so a stop request
/// is seen promptly.
pub(super) const RECV_TIMEOUT: Duration = Duration::from_millis(200);
/// Most event batches read in one drain before a poll; the rest wait for
/// the next round, so a storm cannot starve the poll.
const DRAIN_LIMIT: usize = 1024;

/// What the kernel said about one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(any(target_os = "linux", target_os = "macos")), allow(dead_code))]
pub(super) enum OsEvent {
    /// The whole state, as the message carried it (Linux `RTM_NEWLINK`).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    State {
        /// Interface name.
        name: String,
        /// Its state.
        state: LinkState,
    },
    /// The carrier changed (`Some`) or only the flags did (`None`); the
    /// rest of the state must be read (macOS `KEV_DL_LINK_ON/OFF`,
    /// `KEV_DL_SIFFLAGS`). The event's carrier is the truth at its instant:
    /// a read may lag it.
    #[cfg_attr(not(target_os = "macos"), allow(dead_code))]
    Changed {
        /// Interface name.
        name: String,
        /// Carrier the event announced.
        carrier: Option<bool>,
    },
    /// The interface went away.
    Gone(String),
    /// The kernel dropped messages (Linux `ENOBUFS`): reconcile now.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Overflow,
}

/// The interfaces an OS has now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Inventory {
    /// Every interface name.
    pub names: Vec<String>,
    /// Member port -> bridge.
    pub bridges: HashMap<String, String>,
}

/// OS calls of one link watcher.
pub(super) trait LinkOs: Send + 'static {
    /// Kernel events from one read of the event socket. Blocks up to
    /// [`RECV_TIMEOUT`] unless `nonblocking`; nothing queued is
    /// `ErrorKind::WouldBlock`.
    fn events(&mut self, nonblocking: bool) -> io::Result<Vec<OsEvent>>;
    /// The interfaces there are now and their bridges.
    fn inventory(&mut self) -> Inventory;
    /// The current state of one interface.
    fn read(&mut self, name: &str) -> io::Result<LinkState>;
    /// Tells the link's other end that `name` is back (see
    /// [`super::announce`]); called when its carrier returns.
    fn announce(&mut self, name: &str) -> io::Result<()>;
    /// The neighbour table and the forwarding tables of `bridges` (member
    /// -> bridge), for [`PeerPorts`].
    fn tables(&mut self, bridges: &HashMap<String, String>) -> io::Result<Tables>;
    /// The flood counters of `bridge`, whose member ports are `members`,
    /// for the [`LoopDetector`].
    fn flood(&mut self, bridge: &str, members: &[String]) -> io::Result<Flood>;
}

/// The peers whose member ports the watcher follows, and who hears of
/// them.
pub(super) struct PortWatch {
    pub(super) map: PeerPorts,
    pub(super) observer: Observer<PeerPort>,
}

/// The interfaces to watch: everything listed when `requested` is empty,
/// else `requested` plus the member ports of requested bridges.
pub(super) fn expand(
    requested: &[String],
    listed: &[String],
    bridges: &HashMap<String, String>,
) -> BTreeSet<String> {
    if requested.is_empty() {
        return listed.iter().cloned().collect();
    }
    let mut names: BTreeSet<String> = requested.iter().cloned().collect();
    for (member, bridge) in bridges {
        if names.contains(bridge) {
            names.insert(member.clone());
        }
    }
    names
}

struct Reconciler<O> {
    watch: Watch,
    os: O,
    tracker: Tracker,
    bridges: HashMap<String, String>,
    names: BTreeSet<String>,
    ports: Option<PortWatch>,
    loops: LoopDetector,
}

/// Runs the watcher until `watch` is stopped.
pub(super) fn run<O: LinkOs>(watch: Watch, os: O, ports: Option<PortWatch>) {
    let mut r = Reconciler {
        watch,
        os,
        tracker: Tracker::new(),
        bridges: HashMap::new(),
        names: BTreeSet::new(),
        ports,
        loops: LoopDetector::new(),
    };
    r.poll(LinkEventSource::Startup);
    let mut last_poll = Instant::now();
    while !r.watch.stopped() {
        match r.os.events(false) {
            Ok(events) => {
                if r.on_events(events) {
                    last_poll = Instant::now() - POLL_INTERVAL;
                }
            }
            Err(e) if quiet(&e) => {}
            Err(e) => {
                tracing::error!(error = %e, "link event read failed; polling only");
                std::thread::sleep(RECV_TIMEOUT);
            }
        }
        if last_poll.elapsed() >= POLL_INTERVAL {
            // Events already queued go first, so the poll only reports what
            // no event will.
            for _ in 0..DRAIN_LIMIT {
                match r.os.events(true) {
                    Ok(events) => {
                        r.on_events(events);
                    }
                    Err(_) => break,
                }
            }
            r.poll(LinkEventSource::Poll);
            last_poll = Instant::now();
        }
    }
}

impl<O: LinkOs> Reconciler<O> {
    /// Reads the tables once for both of their readers: the peers whose
    /// member port is new or moved, and the loop detector. Only where
    /// there are bridges: a peer on its own cable follows that cable's
    /// carrier already, and a loop needs a bridge.
    fn read_bridges(&mut self) {
        if self.bridges.is_empty() {
            self.loops.retain(&[]);
            return;
        }
        let tables = match self.os.tables(&self.bridges) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::debug!(error = %e, "neighbour or bridge table read failed");
                None
            }
        };
        if let (Some(ports), Some(t)) = (&mut self.ports, &tables) {
            for change in ports.map.update(t) {
                tracing::info!(peer = change.peer, port = %change.port, "peer behind bridge member");
                ports.observer.observe(change);
            }
        }
        self.watch_loops(tables.as_ref());
    }

    /// Feeds every watched bridge's counters and learnt MACs to the loop
    /// detector and reports its verdicts.
    fn watch_loops(&mut self, tables: Option<&Tables>) {
        let mut members: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (member, bridge) in &self.bridges {
            if self.watch.wants(bridge) {
                members.entry(bridge).or_default().push(member.clone());
            }
        }
        let at = crate::clock::now_ns();
        let present: Vec<&str> = members.keys().copied().collect();
        self.loops.retain(&present);
        for (bridge, members) in &members {
            let flood = self
                .os
                .flood(bridge, members)
                .map_err(|e| tracing::debug!(%bridge, error = %e, "bridge flood counters unread"))
                .ok();
            let ports: Option<HashMap<Mac, String>> = tables.map(|t| {
                t.ports
                    .iter()
                    .filter(|(_, p)| members.contains(p))
                    .map(|(m, p)| (*m, p.clone()))
                    .collect()
            });
            let poll = Poll {
                at_ns: at,
                flood,
                ports: ports.as_ref(),
            };
            if let Some(v) = self.loops.observe(bridge, poll) {
                self.watch.report_loop(at, bridge, v);
            }
        }
    }
}

fn quiet(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

impl<O: LinkOs> Reconciler<O> {
    fn wanted(&self, name: &str) -> bool {
        self.watch.wants(name) || self.names.contains(name)
    }

    /// Feeds events; returns true when one asks for an immediate poll.
    fn on_events(&mut self, events: Vec<OsEvent>) -> bool {
        let at = crate::clock::now_ns();
        let mut poll_now = false;
        for ev in events {
            match ev {
                OsEvent::Overflow => {
                    tracing::warn!("kernel link event queue overflowed; reconciling");
                    poll_now = true;
                }
                OsEvent::Gone(name) => self.tracker.forget(&name),
                OsEvent::State { name, state } if self.wanted(&name) => {
                    self.observe(&name, state, LinkEventSource::Netlink, at)
                }
                OsEvent::Changed { name, carrier } if self.wanted(&name) => {
                    let mut state = match (self.os.read(&name), carrier) {
                        (Ok(s), _) => s,
                        // The event alone still says what the carrier did,
                        // and a carrier that changed belongs to an
                        // interface that is up.
                        (Err(e), Some(_)) => {
                            tracing::debug!(interface = %name, error = %e, "read after event failed");
                            LinkState {
                                admin_up: true,
                                ..LinkState::default()
                            }
                        }
                        (Err(e), None) => {
                            tracing::debug!(interface = %name, error = %e, "read after event failed");
                            continue;
                        }
                    };
                    if let Some(c) = carrier {
                        state.carrier = Some(c && state.admin_up);
                        state.oper_state = if c { "up" } else { "down" }.into();
                    }
                    self.observe(&name, state, LinkEventSource::KernelEvent, at);
                }
                OsEvent::State { .. } | OsEvent::Changed { .. } => {}
            }
        }
        poll_now
    }

    fn observe(&mut self, name: &str, state: LinkState, source: LinkEventSource, at: u64) {
        let bridge = self.bridges.get(name).cloned().unwrap_or_default();
        if let Some(a) = self.tracker.observe(name, &bridge, state, source, at) {
            let returned = a.change.carrier_changed && a.change.carrier;
            self.watch.report(at, a);
            // After the report: the record's timestamp is the kernel's news,
            // the announcement only follows it.
            if returned {
                if let Err(e) = self.os.announce(name) {
                    tracing::debug!(interface = %name, error = %e, "announcement failed");
                }
            }
        }
    }

    /// Reads every watched interface and reports what differs.
    fn poll(&mut self, source: LinkEventSource) {
        let inventory = self.os.inventory();
        self.bridges = inventory.bridges;
        self.names = expand(&self.watch.interfaces, &inventory.names, &self.bridges);
        // Before the states: a port found now routes a drop this poll sees.
        self.read_bridges();
        let at = crate::clock::now_ns();
        for name in self.names.clone() {
            match self.os.read(&name) {
                Ok(state) => self.observe(&name, state, source, at),
                // A vanished interface is forgotten on its removal event; a
                // read that fails (another mount namespace's sysfs, no such
                // interface yet) must not reset what events established.
                Err(e) => tracing::debug!(interface = %name, error = %e, "link read failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::{Emitted, Sink};
    use boltwatch_proto::v1::record::Payload;
    use boltwatch_proto::v1::LinkEvent;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// Stands in for the macOS calls (which cannot run here): events are
    /// scripted, reads answer what `media` says, `None` being a failed
    /// `SIOCGIFMEDIA`.
    struct Scripted {
        media: Option<bool>,
        announced: u32,
    }

    impl LinkOs for Scripted {
        fn events(&mut self, _nonblocking: bool) -> io::Result<Vec<OsEvent>> {
            Err(io::ErrorKind::WouldBlock.into())
        }
        fn inventory(&mut self) -> Inventory {
            Inventory {
                names: vec!["en2".into()],
                bridges: HashMap::new(),
            }
        }
        fn read(&mut self, _name: &str) -> io::Result<LinkState> {
            Ok(LinkState {
                carrier: self.media,
                admin_up: true,
                oper_state: "unknown".into(),
                ..LinkState::default()
            })
        }
        fn announce(&mut self, _name: &str) -> io::Result<()> {
            self.announced += 1;
            Ok(())
        }
        fn tables(&mut self, _bridges: &HashMap<String, String>) -> io::Result<Tables> {
            Ok(Tables::default())
        }
        fn flood(&mut self, _bridge: &str, _members: &[String]) -> io::Result<Flood> {
            Err(io::ErrorKind::Unsupported.into())
        }
    }

    fn link_events(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Emitted>) -> Vec<LinkEvent> {
        let mut v = Vec::new();
        while let Ok(e) = rx.try_recv() {
            if let Payload::LinkEvent(l) = e.payload {
                v.push(l);
            }
        }
        v
    }

    #[test]
    fn link_off_then_polls_without_media_status_stay_down() {
        let (sink, mut rx) = Sink::new();
        let mut r = Reconciler {
            watch: Watch {
                interfaces: vec!["en2".into()],
                sink,
                observer: None,
                stop: Arc::new(AtomicBool::new(false)),
            },
            os: Scripted {
                media: Some(true),
                announced: 0,
            },
            tracker: Tracker::new(),
            bridges: HashMap::new(),
            names: BTreeSet::new(),
            ports: None,
            loops: LoopDetector::new(),
        };
        r.poll(LinkEventSource::Startup);
        let start = link_events(&mut rx);
        assert_eq!(start.len(), 1);
        assert!(start[0].carrier);
        // KEV_DL_LINK_OFF; from now on SIOCGIFMEDIA fails.
        r.os.media = None;
        let bytes = crate::link::fixtures::read("macos/kev/link_off_en2.bin");
        let ev = super::super::kev::parse(&bytes).unwrap().remove(0);
        let carrier = super::super::kev::announced_carrier(ev.kind).unwrap();
        r.on_events(vec![OsEvent::Changed {
            name: ev.interface,
            carrier,
        }]);
        let down = link_events(&mut rx);
        assert_eq!(down.len(), 1);
        assert!(!down[0].carrier);
        assert_eq!(down[0].source, LinkEventSource::KernelEvent as i32);
        for _ in 0..5 {
            r.poll(LinkEventSource::Poll);
        }
        assert!(
            link_events(&mut rx).is_empty(),
            "a poll without media status reported a change"
        );
        assert_eq!(r.tracker.get("en2").unwrap().carrier, Some(false));
        // Media readable again and active: the poll reports the return.
        r.os.media = Some(true);
        r.poll(LinkEventSource::Poll);
        let up = link_events(&mut rx);
        assert_eq!(up.len(), 1);
        assert!(up[0].carrier);
        assert_eq!(up[0].source, LinkEventSource::Poll as i32);
        assert_eq!(r.os.announced, 1, "a returned carrier is announced once");
    }

    /// A bridge with members en2 and en3 whose tables put the peer at
    /// 10.0.0.2 behind `port` (none: the tables say nothing).
    struct Bridged {
        port: Option<&'static str>,
        reads: u32,
        /// The bridge's flood counter, and how much it grows per read.
        flood_in: u64,
        flood_step: u64,
    }

    impl LinkOs for Bridged {
        fn events(&mut self, _nonblocking: bool) -> io::Result<Vec<OsEvent>> {
            Err(io::ErrorKind::WouldBlock.into())
        }
        fn inventory(&mut self) -> Inventory {
            Inventory {
                names: v(&["bridge0", "en2", "en3"]),
                bridges: [("en2", "bridge0"), ("en3", "bridge0")]
                    .map(|(m, b)| (m.to_string(), b.to_string()))
                    .into(),
            }
        }
        fn read(&mut self, _name: &str) -> io::Result<LinkState> {
            Ok(LinkState {
                carrier: Some(true),
                admin_up: true,
                ..LinkState::default()
            })
        }
        fn announce(&mut self, _name: &str) -> io::Result<()> {
            Ok(())
        }
        fn tables(&mut self, _bridges: &HashMap<String, String>) -> io::Result<Tables> {
            self.reads += 1;
            let mac = [2, 0, 0, 0, 0, 0x0b];
            let mut t = Tables::default();
            t.neighbours.insert("10.0.0.2".parse().unwrap(), mac);
            if let Some(p) = self.port {
                t.ports.insert(mac, p.to_string());
            }
            Ok(t)
        }
        fn flood(&mut self, bridge: &str, members: &[String]) -> io::Result<Flood> {
            assert_eq!(bridge, "bridge0");
            let mut m = members.to_vec();
            m.sort();
            assert_eq!(m, v(&["en2", "en3"]));
            self.flood_in += self.flood_step;
            Ok(Flood {
                flood_in: self.flood_in,
                own_out: 0,
            })
        }
    }

    fn bridged(sink: Sink, ports: Option<PortWatch>) -> Reconciler<Bridged> {
        Reconciler {
            watch: Watch {
                interfaces: vec!["bridge0".into()],
                sink,
                observer: None,
                stop: Arc::new(AtomicBool::new(false)),
            },
            os: Bridged {
                port: None,
                reads: 0,
                flood_in: 0,
                flood_step: 0,
            },
            tracker: Tracker::new(),
            bridges: HashMap::new(),
            names: BTreeSet::new(),
            ports,
            loops: LoopDetector::new(),
        }
    }

    #[test]
    fn a_flooding_bridge_is_reported_as_a_loop_event_and_its_end_too() {
        let (sink, mut rx) = Sink::new();
        let mut r = bridged(sink, None);
        let loop_events = |rx: &mut _| -> Vec<(String, bool)> {
            link_events(rx)
                .into_iter()
                .filter(|e| e.source == LinkEventSource::BridgeLoop as i32)
                .map(|e| (e.interface, e.bridge_loop.unwrap().suspected))
                .collect()
        };
        r.poll(LinkEventSource::Startup);
        assert_eq!(loop_events(&mut rx), vec![("bridge0".into(), false)]);
        // Millions of flooded frames between two polls, none sent: two
        // such polls raise the verdict, once.
        r.os.flood_step = 10_000_000;
        for _ in 0..4 {
            std::thread::sleep(Duration::from_millis(2));
            r.poll(LinkEventSource::Poll);
        }
        assert_eq!(loop_events(&mut rx), vec![("bridge0".into(), true)]);
        r.os.flood_step = 0;
        for _ in 0..crate::link::bridge_loop::CLEAR_AFTER {
            std::thread::sleep(Duration::from_millis(2));
            r.poll(LinkEventSource::Poll);
        }
        assert_eq!(loop_events(&mut rx), vec![("bridge0".into(), false)]);
    }

    #[test]
    fn polls_report_a_peers_port_when_found_and_when_it_moves() {
        let (sink, _rx) = Sink::new();
        let (tx, ports) = std::sync::mpsc::channel();
        let watch = PortWatch {
            map: PeerPorts::new(vec![
                "10.0.0.2".parse().unwrap(),
                "10.0.0.3".parse().unwrap(),
            ]),
            observer: tx.into(),
        };
        let mut r = bridged(sink, Some(watch));
        r.poll(LinkEventSource::Startup);
        assert!(ports.try_recv().is_err(), "no port known yet");
        r.os.port = Some("en2");
        r.poll(LinkEventSource::Poll);
        r.poll(LinkEventSource::Poll);
        let port = |p: &str| PeerPort {
            peer: 0,
            port: p.into(),
        };
        assert_eq!(ports.try_iter().collect::<Vec<_>>(), vec![port("en2")]);
        r.os.port = Some("en3");
        r.poll(LinkEventSource::Poll);
        assert_eq!(ports.try_iter().collect::<Vec<_>>(), vec![port("en3")]);
        assert_eq!(r.os.reads, 4, "the tables are read on every poll");
        // Without peers to follow the loop detector still reads them.
        r.ports = None;
        r.poll(LinkEventSource::Poll);
        assert_eq!(r.os.reads, 5);
    }

    fn v(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn everything_when_nothing_requested() {
        let listed = v(&["bridge0", "en2", "lo0"]);
        let got = expand(&[], &listed, &HashMap::new());
        assert_eq!(got.into_iter().collect::<Vec<_>>(), listed);
    }

    #[test]
    fn requested_bridges_bring_their_members() {
        let bridges: HashMap<String, String> = [
            ("en2".to_string(), "bridge0".to_string()),
            ("en3".to_string(), "bridge0".to_string()),
            ("en9".to_string(), "bridge1".to_string()),
        ]
        .into();
        let got = expand(&v(&["bridge0", "en5"]), &v(&["en2"]), &bridges);
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            v(&["bridge0", "en2", "en3", "en5"])
        );
    }
}
