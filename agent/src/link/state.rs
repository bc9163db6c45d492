//! What a link watcher observes and reports: [`LinkState`], one source's
//! view of an interface, and [`LinkChange`], a change as the outage tracker
//! hears of it. Their own file so the parsers, the dedupe rules and the
//! loop all take them from here rather than from the module's door.

use boltwatch_proto::v1::LinkEventSource;

/// The state of one interface as one source saw it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkState {
    /// Carrier (physical link) present; `Some(false)` while admin down,
    /// `None` when the OS could not tell (macOS `SIOCGIFMEDIA` failed). An
    /// unknown carrier is never taken as up: the [`super::debounce::Tracker`]
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
    /// When it was observed, on the agent's timeline ([`crate::clock`]).
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

/// The member port a peer's traffic leaves through, found in the bridge's
/// forwarding table; sent when it is first known and whenever it moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerPort {
    /// Index of the peer among the configured peers.
    pub peer: usize,
    /// The member port (`en2`), never the bridge.
    pub port: String,
}
