//! The outage ledger: decides when a peer is out and why, from probe results,
//! carrier changes and service checks. Pure: no sockets, no clock; every
//! input carries its own time (unix nanoseconds), so tests replay exact
//! sequences.
//!
//! One [`PeerLedger`] per probed peer. It owns the rules; the prober, the
//! link watcher ([`crate::link`]) and the service checker only report what
//! they saw, and the caller emits the returned [`Outage`] records through the
//! sink (`Payload::Outage`). Every outage yields exactly two records: one
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
//!   carrier was up, went unanswered; its start is the send time of the
//!   first of them. It ends at the first good reply to a probe sent after the
//!   outage started.
//! - Probes sent while the carrier was down neither count towards nor break
//!   a run of missing probes: their loss is already explained.
//! - A reply to a probe sent before the carrier went down is stale and ends
//!   nothing, whenever it arrives.
//! - Service outages (`SERVICE`) are separate, one per service name: they
//!   start at the first failed check and end at the first successful one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use boltwatch_proto::v1::{Outage, OutageCause};

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

/// A run of consecutive missing probes sent while the carrier was up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MissingRun {
    count: u32,
    first_sent: u64,
    last_sent: u64,
}

/// Outage bookkeeping for one peer reached over one interface.
#[derive(Debug)]
pub struct PeerLedger {
    peer: String,
    interface: String,
    k: u32,
    ids: OutageIds,
    open: Option<Open>,
    run: Option<MissingRun>,
    /// Start of the current carrier-down period, if the carrier is down.
    carrier_down_at: Option<u64>,
    /// The most recent carrier-down period that has ended, `[down, up)`.
    last_down: Option<(u64, u64)>,
    services: HashMap<String, (u64, u64)>,
}

impl PeerLedger {
    /// A ledger for `peer`, whose probes leave through `interface`; an
    /// outage needs `k` consecutive missing probes (at least 1).
    pub fn new(peer: &str, interface: &str, k: u32, ids: OutageIds) -> PeerLedger {
        PeerLedger {
            peer: peer.to_owned(),
            interface: interface.to_owned(),
            k: k.max(1),
            ids,
            open: None,
            run: None,
            carrier_down_at: None,
            last_down: None,
            services: HashMap::new(),
        }
    }

    /// The peer this ledger is for.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// The interface whose carrier this ledger follows.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// True while a link outage (carrier or probe loss) is open.
    pub fn in_outage(&self) -> bool {
        self.open.is_some()
    }

    /// Probe `seq`, sent at `sent_unix_ns`, was answered at `now`.
    pub fn on_probe_reply(&mut self, _seq: u64, sent_unix_ns: u64, now: u64) -> Vec<Outage> {
        if let Some(down) = self.carrier_down_at {
            if sent_unix_ns <= down {
                // Stale: sent before the drop, it proves nothing about now.
                return Vec::new();
            }
            // Sent after the drop and answered: the path works again even
            // though the carrier-up notification has not arrived (Linux
            // linkwatch may hold it back up to a second). Treat the reply
            // as the carrier's return; the late up event then finds the
            // carrier already up and changes nothing.
            self.carrier_down_at = None;
            self.last_down = Some((down, sent_unix_ns));
        }
        if self.run.is_some_and(|r| sent_unix_ns > r.last_sent) {
            self.run = None;
        }
        match self.open {
            Some(open) if sent_unix_ns >= open.start => {
                self.open = None;
                self.run = None;
                vec![self.record(&open, Some(now))]
            }
            _ => Vec::new(),
        }
    }

    /// Probe `seq`, sent at `sent_unix_ns`, was still unanswered at `now`
    /// (one probe interval after sending).
    pub fn on_probe_missing(&mut self, _seq: u64, sent_unix_ns: u64, _now: u64) -> Vec<Outage> {
        if self.sent_while_carrier_down(sent_unix_ns) {
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

    /// The carrier of `interface` went up or down at `at_unix_ns`. Changes of
    /// other interfaces are ignored.
    pub fn on_carrier(&mut self, interface: &str, up: bool, at_unix_ns: u64) -> Vec<Outage> {
        if interface != self.interface {
            return Vec::new();
        }
        if up {
            if let Some(down) = self.carrier_down_at.take() {
                self.last_down = Some((down, at_unix_ns));
            }
            return Vec::new();
        }
        if self.carrier_down_at.is_some() {
            return Vec::new();
        }
        self.carrier_down_at = Some(at_unix_ns);
        match &mut self.open {
            Some(open) => {
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

    /// Feeds a link watcher notification ([`crate::link::LinkChange`]).
    /// Every notification is passed on, first sightings included, so an
    /// agent starting while the carrier is down opens an outage at once;
    /// repeats are harmless.
    pub fn on_link_change(&mut self, change: &crate::link::LinkChange) -> Vec<Outage> {
        self.on_carrier(&change.interface, change.carrier, change.at_unix_ns)
    }

    /// A TCP check of `service` on this peer found it up or down at
    /// `at_unix_ns`.
    pub fn on_service(&mut self, service: &str, up: bool, at_unix_ns: u64) -> Vec<Outage> {
        match (up, self.services.get(service).copied()) {
            (false, None) => {
                let id = self.ids.next();
                self.services.insert(service.to_owned(), (id, at_unix_ns));
                vec![self.service_record(service, id, at_unix_ns, None)]
            }
            (true, Some((id, start))) => {
                self.services.remove(service);
                vec![self.service_record(service, id, start, Some(at_unix_ns))]
            }
            _ => Vec::new(),
        }
    }

    fn sent_while_carrier_down(&self, sent: u64) -> bool {
        self.carrier_down_at.is_some_and(|down| sent >= down)
            || self
                .last_down
                .is_some_and(|(down, up)| sent >= down && sent < up)
    }

    fn record(&self, open: &Open, end: Option<u64>) -> Outage {
        Outage {
            peer: self.peer.clone(),
            interface: self.interface.clone(),
            cause: open.cause() as i32,
            start_unix_ns: open.start,
            end_unix_ns: end,
            service: String::new(),
            outage_id: open.id,
        }
    }

    fn service_record(&self, service: &str, id: u64, start: u64, end: Option<u64>) -> Outage {
        Outage {
            peer: self.peer.clone(),
            interface: self.interface.clone(),
            cause: OutageCause::Service as i32,
            start_unix_ns: start,
            end_unix_ns: end,
            service: service.to_owned(),
            outage_id: id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const T0: u64 = 1_700_000_000_000_000_000;

    fn ledger() -> PeerLedger {
        PeerLedger::new("b", "tb0", DEFAULT_MISSING_PROBES, OutageIds::new())
    }

    fn cause(o: &Outage) -> OutageCause {
        OutageCause::try_from(o.cause).unwrap()
    }

    /// Probe `seq` sent at T0 + seq*10ms.
    fn sent(seq: u64) -> u64 {
        T0 + seq * 10 * MS
    }

    #[test]
    fn flap_gives_one_outage_from_down_to_first_reply_after_up() {
        let mut l = ledger();
        assert!(l.on_probe_reply(1, sent(1), sent(1) + 80_000).is_empty());
        let down_at = sent(1) + 5 * MS;
        let start = l.on_carrier("tb0", false, down_at);
        assert_eq!(start.len(), 1);
        assert_eq!(start[0].start_unix_ns, down_at);
        assert_eq!(start[0].end_unix_ns, None);
        assert_eq!(cause(&start[0]), OutageCause::Carrier);
        // Probes during the down period go missing: no second outage.
        for seq in 2..8 {
            assert!(l.on_probe_missing(seq, sent(seq), sent(seq + 1)).is_empty());
        }
        let up_at = sent(8) + 2 * MS;
        assert!(l.on_carrier("tb0", true, up_at).is_empty());
        assert!(l.in_outage(), "carrier up alone does not end it");
        let reply_at = sent(9) + 90_000;
        let end = l.on_probe_reply(9, sent(9), reply_at);
        assert_eq!(end.len(), 1);
        assert_eq!(end[0].outage_id, start[0].outage_id);
        assert_eq!(end[0].start_unix_ns, down_at);
        assert_eq!(end[0].end_unix_ns, Some(reply_at));
        assert_eq!(cause(&end[0]), OutageCause::Carrier);
        assert!(!l.in_outage());
        assert!(l.on_probe_reply(10, sent(10), sent(10) + 1).is_empty());
    }

    #[test]
    fn three_missing_start_at_first_missing_send_time() {
        let mut l = ledger();
        assert!(l.on_probe_missing(5, sent(5), sent(6)).is_empty());
        assert!(l.on_probe_missing(6, sent(6), sent(7)).is_empty());
        let start = l.on_probe_missing(7, sent(7), sent(8));
        assert_eq!(start.len(), 1);
        assert_eq!(cause(&start[0]), OutageCause::ProbeLoss);
        assert_eq!(start[0].start_unix_ns, sent(5));
        assert_eq!(start[0].end_unix_ns, None);
        // More missing probes do not start another outage.
        assert!(l.on_probe_missing(8, sent(8), sent(9)).is_empty());
        let end = l.on_probe_reply(9, sent(9), sent(9) + 70_000);
        assert_eq!(end.len(), 1);
        assert_eq!(end[0].outage_id, start[0].outage_id);
        assert_eq!(end[0].end_unix_ns, Some(sent(9) + 70_000));
    }

    #[test]
    fn two_missing_then_reply_is_no_outage() {
        let mut l = ledger();
        assert!(l.on_probe_missing(1, sent(1), sent(2)).is_empty());
        assert!(l.on_probe_missing(2, sent(2), sent(3)).is_empty());
        assert!(l.on_probe_reply(3, sent(3), sent(3) + 1).is_empty());
        // The run was broken: two more missing are again not enough.
        assert!(l.on_probe_missing(4, sent(4), sent(5)).is_empty());
        assert!(l.on_probe_missing(5, sent(5), sent(6)).is_empty());
        assert!(!l.in_outage());
        assert_eq!(l.on_probe_missing(6, sent(6), sent(7)).len(), 1);
    }

    #[test]
    fn stale_reply_while_carrier_down_does_not_end_it() {
        let mut l = ledger();
        let down_at = sent(2);
        assert_eq!(l.on_carrier("tb0", false, down_at).len(), 1);
        // Replies to probes sent before (or at) the drop arrive while the
        // carrier is down, and after it is back: they end nothing.
        assert!(l.on_probe_reply(1, sent(1), sent(2) + MS).is_empty());
        assert!(l.on_probe_reply(2, sent(2), sent(3)).is_empty());
        assert!(l.in_outage());
        assert!(l.on_carrier("tb0", true, sent(5)).is_empty());
        assert!(l.on_probe_reply(1, sent(1), sent(5) + MS).is_empty());
        assert!(l.in_outage());
        let end = l.on_probe_reply(6, sent(6), sent(6) + MS);
        assert_eq!(end.len(), 1);
        assert_eq!(end[0].end_unix_ns, Some(sent(6) + MS));
    }

    #[test]
    fn reply_to_probe_sent_after_drop_ends_it_before_the_late_up_event() {
        let mut l = ledger();
        let down_at = sent(2) + MS;
        let start = l.on_carrier("tb0", false, down_at);
        assert_eq!(start.len(), 1);
        // Probes 3..5 go out during the down period and are lost.
        for seq in 3..6 {
            assert!(l.on_probe_missing(seq, sent(seq), sent(seq + 1)).is_empty());
        }
        // The link is back; probe 6 is answered before the kernel's
        // carrier-up notification arrives.
        let reply_at = sent(6) + 50_000;
        let end = l.on_probe_reply(6, sent(6), reply_at);
        assert_eq!(end.len(), 1);
        assert_eq!(end[0].outage_id, start[0].outage_id);
        assert_eq!(end[0].start_unix_ns, down_at);
        assert_eq!(end[0].end_unix_ns, Some(reply_at));
        assert_eq!(cause(&end[0]), OutageCause::Carrier);
        assert!(!l.in_outage());
        // Late overdue reports of probes sent while down start nothing.
        for seq in 3..6 {
            assert!(l.on_probe_missing(seq, sent(seq), sent(9)).is_empty());
        }
        // The late up event changes nothing, and no outage reopens.
        assert!(l.on_carrier("tb0", true, sent(8)).is_empty());
        assert!(!l.in_outage());
        assert!(l.on_probe_reply(9, sent(9), sent(9) + 1).is_empty());
        // The next drop is a new outage.
        assert_eq!(l.on_carrier("tb0", false, sent(10)).len(), 1);
    }

    #[test]
    fn probe_loss_then_carrier_down_is_both() {
        let mut l = ledger();
        for seq in 1..=3 {
            l.on_probe_missing(seq, sent(seq), sent(seq + 1));
        }
        assert!(l.in_outage());
        assert!(l.on_carrier("tb0", false, sent(4)).is_empty());
        assert!(l.on_carrier("tb0", true, sent(6)).is_empty());
        let end = l.on_probe_reply(7, sent(7), sent(7) + MS);
        assert_eq!(end.len(), 1);
        assert_eq!(cause(&end[0]), OutageCause::Both);
        assert_eq!(end[0].start_unix_ns, sent(1));
    }

    #[test]
    fn carrier_back_but_probes_still_lost_is_both() {
        let mut l = ledger();
        l.on_carrier("tb0", false, sent(1));
        l.on_carrier("tb0", true, sent(2) + MS);
        for seq in 3..=5 {
            assert!(l.on_probe_missing(seq, sent(seq), sent(seq + 1)).is_empty());
        }
        let end = l.on_probe_reply(6, sent(6), sent(6) + MS);
        assert_eq!(cause(&end[0]), OutageCause::Both);
        assert_eq!(end[0].start_unix_ns, sent(1));
    }

    #[test]
    fn probes_sent_during_down_do_not_count_after_up() {
        let mut l = ledger();
        l.on_carrier("tb0", false, sent(1));
        l.on_carrier("tb0", true, sent(4));
        // Missing reports for probes 1..3 arrive after the carrier returned.
        for seq in 1..4 {
            assert!(l.on_probe_missing(seq, sent(seq), sent(4) + MS).is_empty());
        }
        let end = l.on_probe_reply(5, sent(5), sent(5) + MS);
        assert_eq!(cause(&end[0]), OutageCause::Carrier);
    }

    #[test]
    fn reply_to_probe_sent_before_outage_start_does_not_end_it() {
        let mut l = ledger();
        for seq in 2..=4 {
            l.on_probe_missing(seq, sent(seq), sent(seq + 1));
        }
        // A late answer to probe 1 (sent before the run) arrives.
        assert!(l.on_probe_reply(1, sent(1), sent(5)).is_empty());
        assert!(l.in_outage());
    }

    #[test]
    fn other_interface_and_repeated_down_are_ignored() {
        let mut l = ledger();
        assert!(l.on_carrier("en9", false, sent(1)).is_empty());
        assert!(!l.in_outage());
        assert_eq!(l.on_carrier("tb0", false, sent(1)).len(), 1);
        assert!(l.on_carrier("tb0", false, sent(2)).is_empty());
        l.on_carrier("tb0", true, sent(3));
        let end = l.on_probe_reply(4, sent(4), sent(4) + 1);
        assert_eq!(end[0].start_unix_ns, sent(1));
    }

    #[test]
    fn ids_are_unique_across_peers_and_outages() {
        let ids = OutageIds::new();
        let mut a = PeerLedger::new("a", "tb0", 3, ids.clone());
        let mut b = PeerLedger::new("b", "tb1", 3, ids);
        let a1 = a.on_carrier("tb0", false, sent(1))[0].outage_id;
        let b1 = b.on_carrier("tb1", false, sent(1))[0].outage_id;
        a.on_carrier("tb0", true, sent(2));
        a.on_probe_reply(3, sent(3), sent(3) + 1);
        let a2 = a.on_carrier("tb0", false, sent(4))[0].outage_id;
        assert_eq!((a1, b1, a2), (1, 2, 3));
    }

    #[test]
    fn service_outage_starts_and_ends() {
        let mut l = ledger();
        assert!(l.on_service("ssh", true, sent(1)).is_empty());
        let start = l.on_service("ssh", false, sent(2));
        assert_eq!(start.len(), 1);
        assert_eq!(cause(&start[0]), OutageCause::Service);
        assert_eq!(start[0].service, "ssh");
        assert!(l.on_service("ssh", false, sent(3)).is_empty());
        // A second service is independent.
        assert_eq!(l.on_service("http", false, sent(3)).len(), 1);
        let end = l.on_service("ssh", true, sent(4));
        assert_eq!(end[0].outage_id, start[0].outage_id);
        assert_eq!(end[0].start_unix_ns, sent(2));
        assert_eq!(end[0].end_unix_ns, Some(sent(4)));
        assert!(!l.in_outage(), "service outages are not link outages");
    }

    #[test]
    fn link_changes_drive_the_carrier_rules() {
        use boltwatch_proto::v1::LinkEventSource;
        let change = |carrier, at, changed| crate::link::LinkChange {
            interface: "tb0".into(),
            at_unix_ns: at,
            carrier,
            carrier_changed: changed,
            missed_flaps: 0,
            source: LinkEventSource::Netlink,
        };
        let mut l = ledger();
        // Startup sighting with the carrier down: an outage from then.
        let start = l.on_link_change(&change(false, sent(1), false));
        assert_eq!(start.len(), 1);
        assert!(l.on_link_change(&change(true, sent(2), true)).is_empty());
        assert_eq!(
            l.on_probe_reply(3, sent(3), sent(3) + 1)[0].start_unix_ns,
            sent(1)
        );
        // A counters-only report with the carrier up changes nothing.
        assert!(l.on_link_change(&change(true, sent(4), false)).is_empty());
        assert!(!l.in_outage());
    }

    #[test]
    fn k_of_one_starts_at_first_missing() {
        let mut l = PeerLedger::new("b", "tb0", 1, OutageIds::new());
        assert_eq!(l.on_probe_missing(1, sent(1), sent(2)).len(), 1);
    }
}
