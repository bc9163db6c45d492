//! Outage tracking: decides when a peer is out and why, from probe results,
//! carrier changes and service checks. Pure: no sockets, no clock; every
//! input carries its own time, so tests replay exact sequences. Every time
//! here is on the agent's timeline ([`crate::clock`]: unix-like
//! nanoseconds that count sleep and never step), so a carrier event and a
//! probe compare on one clock, and [`on_wall_clock`] turns an outage into
//! its record with one correction for start and end: its length is exact.
//!
//! One [`OutageTracker`] per probed peer. It owns the rules; the prober, the
//! link watcher ([`crate::link`]) and the service checker only report what
//! they saw, as [`OutageInput`]s on one channel, and [`OutageTrackers::apply`]
//! routes each to the peer it concerns. The caller emits the returned
//! [`Outage`] records through the sink (`Payload::Outage`). Every outage yields exactly two records: one
//! when it starts (no `end_unix_ns`) and one when it ends. The end record is
//! authoritative: its `cause` and `start_unix_ns` include everything learnt
//! while the outage went on (a probe-loss outage that also saw the carrier
//! drop ends as `BOTH`).
//!
//! Rules:
//! - A carrier outage starts at the carrier-down time and ends at the first
//!   good reply to a probe sent after the carrier went down. That reply
//!   proves the path works, so it also counts as the carrier's return when
//!   the kernel's carrier-up notification lags behind the traffic.
//! - A probe-loss outage starts when `k` consecutive probes, sent while the
//!   carrier was up, went missing: unanswered at the late bound (several
//!   times the link's recent p99 round trip, [`crate::stamp::late`]), or
//!   at the probe timeout if no bound is known yet; its start is the send
//!   time of the first of them. It ends when the first probe after them is
//!   answered. Probe fates are taken in sequence order (`order`), so an
//!   outage is known a late bound after its k-th probe was sent, and its
//!   times are still those of the probes.
//! - A reply that comes after its probe was called late is an answer, not
//!   a loss: it proves the path carried that probe. It ends an open outage
//!   it was sent in (a latency spike then shows as an outage up to the
//!   reply, never longer), and breaks the run of missing probes it belongs
//!   to, from its start: probes after it that stay unanswered start a new
//!   run. A late reply to a probe sent before the outage, or before a
//!   carrier drop that has not ended, ends nothing.
//! - Probes sent while the carrier was down, or at most the notification's
//!   lag (`notification_lag`) before the carrier-down notification's
//!   stamp, neither count towards nor break a run of missing probes: their
//!   loss is already explained. So a carrier-down notification that
//!   arrives late, stamped at most the lag after the first missing probe
//!   of an open probe-loss outage, turns it into a carrier outage (its end
//!   record says so), and the late fates of the probes the drop took, told
//!   after the notification, leave it so.
//! - A carrier outage starts at the drop's earliest sign: the notification's
//!   stamp, or the first of the probes lost to the drop before it (sent
//!   within the lag before it, none answered after them) when there are
//!   any, as the stamp may be up to the lag late (linkwatch batching). Its
//!   end record carries that start.
//! - A reply to a probe sent before the carrier went down is stale and ends
//!   nothing, whenever it arrives.
//! - Service outages (`SERVICE`) are separate, one per service name: they
//!   start at the first failed check and end at the first successful one.
//! - A link outage whose span overlaps a sleep of this node (`sleeps`) has
//!   cause `SLEEP`: its start record too, when the node is asleep by then.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use boltwatch_proto::v1::{Outage, OutageCause};

use crate::link::{LinkChange, PeerPort};
use crate::power::PowerEvent;
use crate::service::ServiceChange;
use crate::stamp::ProbeEvent;

mod order;
mod sleeps;
use order::{Fate, InOrder};

/// Default number of consecutive missing probes that make an outage.
pub const DEFAULT_MISSING_PROBES: u32 = 3;

/// Allocates outage ids, unique per agent boot across all peers. Clones
/// share one counter.
#[derive(Debug, Clone, Default)]
pub struct OutageIds(Arc<AtomicU64>);

impl OutageIds {
    /// A fresh allocator; the first id is 1.
    pub fn new() -> OutageIds {
        OutageIds::default()
    }

    fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// An outage that has started and not yet ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Open {
    id: u64,
    start: u64,
    carrier: bool,
    probe_loss: bool,
}

impl Open {
    fn cause(&self) -> OutageCause {
        match (self.carrier, self.probe_loss) {
            (true, true) => OutageCause::Both,
            (true, false) => OutageCause::Carrier,
            _ => OutageCause::ProbeLoss,
        }
    }
}

/// A carrier-down period that has ended: `[down, up)`, unix ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DownPeriod {
    down: u64,
    up: u64,
}

/// A service outage that has started and not yet ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OpenService {
    id: u64,
    start: u64,
}

/// A run of consecutive missing probes sent while the carrier was up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MissingRun {
    count: u32,
    first_sent: u64,
    last_sent: u64,
}

/// Outage bookkeeping for one peer reached over one interface.
#[derive(Debug)]
pub struct OutageTracker {
    peer: String,
    interface: String,
    /// The bridge member port the peer sits behind, once known: its
    /// carrier is the peer's too, and the records name it.
    port: Option<String>,
    k: u32,
    ids: OutageIds,
    open: Option<Open>,
    run: Option<MissingRun>,
    /// Start of the current carrier-down period, if the carrier is down.
    carrier_down_at: Option<u64>,
    /// The most recent carrier-down period that has ended.
    last_down: Option<DownPeriod>,
    /// Open service outages by service name.
    services: HashMap<String, OpenService>,
    /// Probe fates, released in sequence order to the run logic.
    fates: InOrder,
    /// This node's sleeps.
    sleeps: sleeps::Sleeps,
    /// How long before a carrier-down notification a loss may have begun
    /// and still be the drop's own (see [`Self::notification_lag`]).
    lag_ns: u64,
    /// The first of the probes lost, none answered after it, that were
    /// sent within the lag before a carrier-down notification: the drop's
    /// earliest sign, where its outage starts (the notification's own
    /// stamp may be up to the lag late).
    drop_sign: Option<u64>,
}

impl OutageTracker {
    /// A tracker for `peer`, whose probes leave through `interface`; an
    /// outage needs `k` consecutive missing probes (at least 1).
    pub fn new(peer: &str, interface: &str, k: u32, ids: OutageIds) -> OutageTracker {
        OutageTracker {
            peer: peer.to_owned(),
            interface: interface.to_owned(),
            port: None,
            k: k.max(1),
            ids,
            open: None,
            run: None,
            carrier_down_at: None,
            last_down: None,
            services: HashMap::new(),
            fates: InOrder::default(),
            sleeps: sleeps::Sleeps::default(),
            lag_ns: 0,
            drop_sign: None,
        }
    }

    /// A carrier-down notification may come up to `lag` after the drop
    /// (Linux linkwatch holds carrier changes up to a second; a busy agent
    /// reads it later still), while late probes now open a probe-loss
    /// outage within milliseconds of it. A probe-loss outage that began at
    /// most `lag` before the notification is then the drop's own: the
    /// carrier explains it, as if the notification had come first. The
    /// agent passes `probe_timeout`, the window in which a loss was
    /// already the drop's before probes could be late.
    pub fn notification_lag(mut self, lag: std::time::Duration) -> OutageTracker {
        self.lag_ns = u64::try_from(lag.as_nanos()).unwrap_or(u64::MAX);
        self
    }

    /// The peer this tracker is for.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// The interface whose carrier this tracker follows.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// True while a link outage (carrier or probe loss) is open.
    pub fn in_outage(&self) -> bool {
        self.open.is_some()
    }

    /// Probe `seq`, sent at `sent_unix_ns`, was answered at `now`.
    pub fn on_probe_reply(&mut self, seq: u64, sent_unix_ns: u64, now: u64) -> Vec<Outage> {
        self.carrier_reply(sent_unix_ns);
        let fate = Fate::Answered {
            sent: sent_unix_ns,
            at: now,
        };
        self.settle(seq, fate)
    }

    /// Probe `seq`, sent at `sent_unix_ns`, was still unanswered at its
    /// late bound or its timeout: missing. Only the first of the two counts.
    pub fn on_probe_missing(&mut self, seq: u64, sent_unix_ns: u64, _now: u64) -> Vec<Outage> {
        self.settle(seq, Fate::Lost { sent: sent_unix_ns })
    }

    /// Probe `seq`, sent at `sent_unix_ns` and already called missing
    /// (late), was answered at `now` after all.
    pub fn on_probe_late_reply(&mut self, seq: u64, sent_unix_ns: u64, now: u64) -> Vec<Outage> {
        if !self.fates.released(seq as u32) {
            // Its lateness is still held behind an earlier probe: the
            // answer takes its place in sequence order.
            return self.on_probe_reply(seq, sent_unix_ns, now);
        }
        self.carrier_reply(sent_unix_ns);
        self.answered_late(sent_unix_ns, now)
    }

    /// A late answer to a probe whose missing fate was already counted.
    fn answered_late(&mut self, sent_unix_ns: u64, at: u64) -> Vec<Outage> {
        if self.open.is_none() && !self.stale(sent_unix_ns) {
            // The path carried this probe: the run it was counted in is
            // no run of missing probes.
            if self.run.is_some_and(|r| sent_unix_ns >= r.first_sent) {
                self.run = None;
            }
        }
        self.end_open(sent_unix_ns, at)
    }

    /// Sent before a carrier drop that has not ended: the answer proves
    /// nothing about now.
    fn stale(&self, sent_unix_ns: u64) -> bool {
        self.carrier_down_at
            .is_some_and(|down| sent_unix_ns <= down)
    }

    /// An answer to a probe sent at or after the open outage began ends
    /// it (at `at`); a stale one, or one sent before it, ends nothing.
    fn end_open(&mut self, sent_unix_ns: u64, at: u64) -> Vec<Outage> {
        // The path carried this probe: losses before it were no sign of a
        // drop after it.
        let sign = self.drop_sign.take_if(|s| sent_unix_ns > *s);
        if self.stale(sent_unix_ns) {
            return Vec::new();
        }
        match self.open {
            Some(mut open) if sent_unix_ns >= open.start => {
                if let Some(sign) = sign.filter(|_| open.carrier) {
                    open.start = open.start.min(sign);
                }
                self.open = None;
                self.run = None;
                vec![self.record(&open, Some(at))]
            }
            _ => Vec::new(),
        }
    }

    /// A reply at once, out of order: it proves the path works, so it
    /// counts as the carrier's return without waiting for the fates of
    /// earlier probes. The outage itself ends in sequence order
    /// ([`Self::answered_in_order`]): probes lost before a late carrier-down
    /// notification (linkwatch holds it up to a second) must still widen
    /// the outage they belong to, not open one of their own after it.
    fn carrier_reply(&mut self, sent_unix_ns: u64) {
        if let Some(down) = self.carrier_down_at {
            if sent_unix_ns <= down {
                // Stale: sent before the drop, it proves nothing about now.
                return;
            }
            // Sent after the drop and answered: the path works again even
            // though the carrier-up notification has not arrived (Linux
            // linkwatch may hold it back up to a second). Treat the reply
            // as the carrier's return; the late up event then finds the
            // carrier already up and changes nothing.
            self.carrier_down_at = None;
            self.last_down = Some(DownPeriod {
                down,
                up: sent_unix_ns,
            });
        }
    }

    /// Takes one probe's fate; runs the loss rules over every fate now
    /// known in sequence order.
    fn settle(&mut self, seq: u64, fate: Fate) -> Vec<Outage> {
        // Sequence numbers are the sender's u32s, widened for the API.
        let released = self.fates.push(seq as u32, fate);
        released
            .into_iter()
            .flat_map(|f| match f {
                Fate::Answered { sent, at } => self.answered_in_order(sent, at),
                Fate::Lost { sent } => self.lost_in_order(sent),
            })
            .collect()
    }

    /// An answered probe, after every earlier probe's fate: it breaks a run
    /// of lost probes and ends the outage it was sent after.
    fn answered_in_order(&mut self, sent_unix_ns: u64, at: u64) -> Vec<Outage> {
        if self.run.is_some_and(|r| sent_unix_ns > r.last_sent) {
            self.run = None;
        }
        self.end_open(sent_unix_ns, at)
    }

    /// A lost probe, after every earlier probe's fate.
    fn lost_in_order(&mut self, sent_unix_ns: u64) -> Vec<Outage> {
        if let Some(down) = self.drop_met(sent_unix_ns) {
            if sent_unix_ns < down {
                self.note_drop_sign(sent_unix_ns);
            }
            return Vec::new();
        }
        let run = match self.run {
            Some(r) => MissingRun {
                count: r.count + 1,
                first_sent: r.first_sent.min(sent_unix_ns),
                last_sent: r.last_sent.max(sent_unix_ns),
            },
            None => MissingRun {
                count: 1,
                first_sent: sent_unix_ns,
                last_sent: sent_unix_ns,
            },
        };
        self.run = Some(run);
        if run.count < self.k {
            return Vec::new();
        }
        match &mut self.open {
            Some(open) => {
                // Only the end record carries the widened cause and start.
                open.probe_loss = true;
                open.start = open.start.min(run.first_sent);
                Vec::new()
            }
            None => {
                let open = Open {
                    id: self.ids.next(),
                    start: run.first_sent,
                    carrier: false,
                    probe_loss: true,
                };
                self.open = Some(open);
                vec![self.record(&open, None)]
            }
        }
    }

    /// The peer sits behind bridge member `port` ([`PeerPort`]): from now
    /// on that port's carrier is the peer's as well as the bridge's, and
    /// the records name the port.
    pub fn set_port(&mut self, port: &str) {
        self.port = Some(port.to_owned());
    }

    /// The carrier of `interface` (the peer's own, or the member port it
    /// sits behind) went up or down at `at_unix_ns`. Changes of other
    /// interfaces are ignored.
    pub fn on_carrier(&mut self, interface: &str, up: bool, at_unix_ns: u64) -> Vec<Outage> {
        if interface != self.interface && Some(interface) != self.port.as_deref() {
            return Vec::new();
        }
        if up {
            if let Some(down) = self.carrier_down_at.take() {
                self.last_down = Some(DownPeriod {
                    down,
                    up: at_unix_ns,
                });
            }
            return Vec::new();
        }
        if self.carrier_down_at.is_some() {
            return Vec::new();
        }
        self.carrier_down_at = Some(at_unix_ns);
        // Probes already missing, too few for an outage, that went out
        // within the lag before this notification: the drop took them.
        if let Some(run) = self
            .run
            .filter(|r| within_lag(r.first_sent, at_unix_ns, self.lag_ns))
        {
            self.note_drop_sign(run.first_sent);
        }
        match &mut self.open {
            Some(open) => {
                // A notification that comes late may find the probe-loss
                // outage its own drop caused: when the loss began at most
                // the notification's lag before it, the carrier explains
                // the loss, as it would have had it come first, and the
                // outage keeps its start, the drop's earliest sign.
                let drops_own = within_lag(open.start, at_unix_ns, self.lag_ns);
                if open.probe_loss && !open.carrier && drops_own {
                    open.probe_loss = false;
                    open.start = open.start.min(at_unix_ns);
                }
                open.carrier = true;
                Vec::new()
            }
            None => {
                let open = Open {
                    id: self.ids.next(),
                    start: at_unix_ns,
                    carrier: true,
                    probe_loss: false,
                };
                self.open = Some(open);
                vec![self.record(&open, None)]
            }
        }
    }

    /// Feeds a link watcher notification ([`LinkChange`]).
    /// Every notification is passed on, first sightings included, so an
    /// agent starting while the carrier is down opens an outage at once;
    /// repeats are harmless.
    pub fn on_link_change(&mut self, change: &LinkChange) -> Vec<Outage> {
        self.on_carrier(&change.interface, change.carrier, change.at_unix_ns)
    }

    /// A TCP check of `service` on this peer found it up or down at
    /// `at_unix_ns`.
    pub fn on_service(&mut self, service: &str, up: bool, at_unix_ns: u64) -> Vec<Outage> {
        match (up, self.services.get(service).copied()) {
            (false, None) => {
                let open = OpenService {
                    id: self.ids.next(),
                    start: at_unix_ns,
                };
                self.services.insert(service.to_owned(), open);
                vec![self.service_record(service, open, None)]
            }
            (true, Some(open)) => {
                self.services.remove(service);
                vec![self.service_record(service, open, Some(at_unix_ns))]
            }
            _ => Vec::new(),
        }
    }

    /// This node slept or woke: outages overlapping a sleep end as `SLEEP`.
    pub fn on_power(&mut self, event: &PowerEvent) -> Vec<Outage> {
        self.sleeps.on_event(event);
        Vec::new()
    }

    /// The notified stamp of the carrier drop the probe sent at `sent`
    /// met, if it met one: sent while the carrier was down, or at most the
    /// notification's lag before the drop was notified. The lag counts because the notification's stamp may be
    /// up to that late: a probe the drop itself took, whose lateness is
    /// told after the notification, is the drop's, as a probe-loss outage
    /// that began within the lag is (`on_carrier`); else it would add
    /// probe loss to the carrier outage it belongs to (cause `both`).
    /// Such a probe sent before the stamp is the drop's sign.
    fn drop_met(&self, sent: u64) -> Option<u64> {
        let met = |down: &u64| within_lag(sent, *down, self.lag_ns);
        self.carrier_down_at.filter(met).or(self
            .last_down
            .filter(|p| met(&p.down) && sent < p.up)
            .map(|p| p.down))
    }

    /// A probe sent at `sent`, before a drop's notification, was lost to
    /// it: the earliest such probe is where the drop's outage starts.
    fn note_drop_sign(&mut self, sent: u64) {
        self.drop_sign = Some(self.drop_sign.map_or(sent, |s| s.min(sent)));
    }

    fn record(&self, open: &Open, end: Option<u64>) -> Outage {
        // A start record asks about its start only: asleep by then?
        let cause = if self.sleeps.overlap(open.start, end.unwrap_or(open.start)) {
            OutageCause::Sleep
        } else {
            open.cause()
        };
        self.outage(open.id, cause, open.start, end, "")
    }

    fn service_record(&self, service: &str, open: OpenService, end: Option<u64>) -> Outage {
        self.outage(open.id, OutageCause::Service, open.start, end, service)
    }

    fn outage(
        &self,
        outage_id: u64,
        cause: OutageCause,
        start_unix_ns: u64,
        end_unix_ns: Option<u64>,
        service: &str,
    ) -> Outage {
        Outage {
            peer: self.peer.clone(),
            interface: self.port.clone().unwrap_or_else(|| self.interface.clone()),
            cause: cause as i32,
            start_unix_ns,
            end_unix_ns,
            service: service.to_owned(),
            outage_id,
        }
    }
}

/// The record of `outage` (timeline times) in wall-clock time: start and
/// end through the one correction `wall`, so the record's length is the
/// timeline's, exact through sleep and clock steps.
pub fn on_wall_clock(mut outage: Outage, wall: &crate::clock::Reading) -> Outage {
    outage.start_unix_ns = wall.to_unix(outage.start_unix_ns);
    outage.end_unix_ns = outage.end_unix_ns.map(|e| wall.to_unix(e));
    outage
}

/// What the outage trackers are told, by whom: the STAMP sender of peer
/// `peer` (its index among the configured peers), the link watcher (every
/// peer on the interface), or a service check of a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutageInput {
    /// A probe outcome of one peer's session-sender.
    Probe {
        /// Index of the peer.
        peer: usize,
        /// What happened to the probe.
        event: ProbeEvent,
    },
    /// A link watcher notification.
    Link(LinkChange),
    /// The link watcher found the bridge member port a peer sits behind.
    Port(PeerPort),
    /// A service check of one peer changed state.
    Service {
        /// Index of the peer.
        peer: usize,
        /// What changed.
        change: ServiceChange,
    },
    /// This node slept or woke (every peer's tracker).
    Power(PowerEvent),
}

/// The trackers of every probed peer, indexed as the peers are configured.
#[derive(Debug)]
pub struct OutageTrackers(Vec<OutageTracker>);

impl OutageTrackers {
    /// Trackers in peer order.
    pub fn new(trackers: Vec<OutageTracker>) -> OutageTrackers {
        OutageTrackers(trackers)
    }

    /// Routes `input` to the peer(s) it concerns; `now` is when it arrived
    /// (probe outcomes carry their send time, not their arrival). Inputs
    /// naming an unknown peer index are ignored.
    pub fn apply(&mut self, input: OutageInput, now: u64) -> Vec<Outage> {
        match input {
            OutageInput::Probe { peer, event } => {
                let Some(t) = self.0.get_mut(peer) else {
                    return Vec::new();
                };
                match event {
                    // A reply ends an outage when it arrived, not when this
                    // thread, behind others on a busy CPU, read it: on the
                    // loaded 2-core bed that wait added up to ~130 ms to a
                    // carrier outage. Bounded by `now` against a clock step.
                    ProbeEvent::Reply {
                        seq,
                        sent_unix_ns,
                        received_unix_ns,
                        late,
                        ..
                    } => {
                        let at = received_unix_ns.clamp(sent_unix_ns, now.max(sent_unix_ns));
                        if late {
                            t.on_probe_late_reply(u64::from(seq), sent_unix_ns, at)
                        } else {
                            t.on_probe_reply(u64::from(seq), sent_unix_ns, at)
                        }
                    }
                    // Late and then lost: the loss is news of a fate
                    // already counted, and `order` drops it.
                    ProbeEvent::Late { seq, sent_unix_ns }
                    | ProbeEvent::Lost { seq, sent_unix_ns } => {
                        t.on_probe_missing(u64::from(seq), sent_unix_ns, now)
                    }
                }
            }
            OutageInput::Link(change) => self
                .0
                .iter_mut()
                .flat_map(|t| t.on_link_change(&change))
                .collect(),
            OutageInput::Port(p) => {
                if let Some(t) = self.0.get_mut(p.peer) {
                    t.set_port(&p.port);
                }
                Vec::new()
            }
            OutageInput::Service { peer, change } => self
                .0
                .get_mut(peer)
                .map(|t| t.on_service(&change.service, change.up, change.at_unix_ns))
                .unwrap_or_default(),
            OutageInput::Power(event) => {
                self.0.iter_mut().flat_map(|t| t.on_power(&event)).collect()
            }
        }
    }
}

/// Whether `t` came no earlier than `lag` before a carrier drop notified at
/// `down` (or after it): what the drop may have caused, given how late its
/// notification can be stamped. One rule for a lost probe and for the start
/// of a probe-loss outage.
fn within_lag(t: u64, down: u64, lag: u64) -> bool {
    t.saturating_add(lag) >= down
}

#[cfg(test)]
mod clock_tests;
#[cfg(test)]
mod ports_tests;
#[cfg(test)]
mod power_tests;
#[cfg(test)]
mod tests;
