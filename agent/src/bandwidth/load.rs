//! Who is testing now: the node-wide one-test gate and, per peer, the time
//! spans during which a bandwidth test loaded the link to it.
//!
//! The gate ([`TestGate`]) is shared by the agent's bandwidth server and its
//! scheduler: a node runs at most one test at a time, as client or as
//! server, so two agents never test the same link at once (the second one
//! gets "busy" and retries) and a test never competes with another for CPU.
//!
//! The spans ([`LoadTag`], one per peer) let the STAMP sender tag every RTT
//! window that overlapped a test as `under_load`. The client side marks the
//! peer it tests; the server side maps the client's IP to peer names
//! ([`LoadBoard::begin_ip`]); an IP shared by several peers (a loopback
//! lab) marks all of them, an unknown IP marks none. [`LoadLog`] is the
//! pure bookkeeping; the wrappers read the agent's timeline (the clock RTT
//! windows are aligned to, [`crate::clock`]) under the lock, so a span that begins
//! after a window was judged can never be seen as overlapping it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::clock::now_ns;

/// Finished spans kept per peer; windows are judged seconds after they
/// end, so a few dozen is plenty.
const KEPT_SPANS: usize = 64;

/// A test's time on a link, unix ns; `end` is inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u64,
    end: u64,
}

/// A span still running, by the id [`LoadLog::begin`] gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Running {
    id: u64,
    start: u64,
}

/// Load spans of one link; pure (times are passed in, unix ns).
#[derive(Debug, Default)]
pub struct LoadLog {
    running: Vec<Running>,
    done: VecDeque<Span>,
    next_id: u64,
}

impl LoadLog {
    /// A span starts at `now`; returns its id for [`LoadLog::end`].
    pub fn begin(&mut self, now: u64) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.running.push(Running { id, start: now });
        id
    }

    /// Span `id` ends at `now`. Unknown ids are ignored.
    pub fn end(&mut self, id: u64, now: u64) {
        if let Some(i) = self.running.iter().position(|r| r.id == id) {
            let Running { start, .. } = self.running.swap_remove(i);
            if self.done.len() == KEPT_SPANS {
                self.done.pop_front();
            }
            self.done.push_back(Span {
                start,
                end: now.max(start),
            });
        }
    }

    /// True when any span, running or finished, overlaps `[start, end)`.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        self.running.iter().any(|r| r.start < end)
            || self.done.iter().any(|s| s.start < end && s.end >= start)
    }

    /// True while a span runs.
    pub fn active(&self) -> bool {
        !self.running.is_empty()
    }
}

/// The load spans of the link to one peer, shared between the threads
/// that test it and its STAMP sender.
#[derive(Debug, Clone, Default)]
pub struct LoadTag(Arc<Mutex<LoadLog>>);

impl LoadTag {
    fn log(&self) -> std::sync::MutexGuard<'_, LoadLog> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the link loaded from now until the returned span drops.
    pub fn begin(&self) -> LoadSpan {
        let mut log = self.log();
        let id = log.begin(now_ns());
        drop(log);
        LoadSpan {
            marks: vec![(self.clone(), id)],
        }
    }

    /// True when a test overlapped `[start_unix_ns, end_unix_ns)`.
    pub fn overlaps(&self, start_unix_ns: u64, end_unix_ns: u64) -> bool {
        self.log().overlaps(start_unix_ns, end_unix_ns)
    }

    /// True while a test runs on the link.
    pub fn active(&self) -> bool {
        self.log().active()
    }
}

/// A running test's mark on one or more links; ends when dropped, however
/// the test ends.
#[derive(Debug, Default)]
pub struct LoadSpan {
    marks: Vec<(LoadTag, u64)>,
}

impl LoadSpan {
    /// Peers marked (for logs and tests).
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    /// True when the span marks no link (unknown client).
    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }
}

impl Drop for LoadSpan {
    fn drop(&mut self) {
        for (tag, id) in self.marks.drain(..) {
            let mut log = tag.log();
            log.end(id, now_ns());
        }
    }
}

/// Every peer's [`LoadTag`], by name and by IP address.
#[derive(Debug, Clone, Default)]
pub struct LoadBoard {
    by_name: Arc<BTreeMap<String, LoadTag>>,
    by_ip: Arc<HashMap<IpAddr, Vec<LoadTag>>>,
}

impl LoadBoard {
    /// A board for `peers`: each a name and the addresses it may test us
    /// from (its STAMP address, its bandwidth server address).
    pub fn new<I: IntoIterator<Item = (String, Vec<IpAddr>)>>(peers: I) -> LoadBoard {
        let mut by_name: BTreeMap<String, LoadTag> = BTreeMap::new();
        let mut by_ip: HashMap<IpAddr, Vec<LoadTag>> = HashMap::new();
        for (name, ips) in peers {
            let tag: LoadTag = by_name.entry(name).or_default().clone();
            let mut ips: Vec<IpAddr> = ips.into_iter().map(|i| i.to_canonical()).collect();
            ips.sort();
            ips.dedup();
            for ip in ips {
                by_ip.entry(ip).or_default().push(tag.clone());
            }
        }
        LoadBoard {
            by_name: Arc::new(by_name),
            by_ip: Arc::new(by_ip),
        }
    }

    /// The tag of `peer`, if known.
    pub fn tag(&self, peer: &str) -> Option<LoadTag> {
        self.by_name.get(peer).cloned()
    }

    /// Marks the link to `peer` (a test we run as client).
    pub fn begin_peer(&self, peer: &str) -> LoadSpan {
        self.tag(peer).map(|t| t.begin()).unwrap_or_default()
    }

    /// Marks every peer reachable as `ip` (a test a client at `ip` runs
    /// against our server).
    pub fn begin_ip(&self, ip: IpAddr) -> LoadSpan {
        let mut span = LoadSpan::default();
        for tag in self.by_ip.get(&ip.to_canonical()).into_iter().flatten() {
            let mut s = tag.begin();
            span.marks.append(&mut s.marks);
        }
        span
    }
}

/// The node-wide "one test at a time" flag.
#[derive(Debug, Clone, Default)]
pub struct TestGate(Arc<AtomicBool>);

/// Holds the [`TestGate`] until dropped.
#[derive(Debug)]
pub struct GateGuard(Arc<AtomicBool>);

impl TestGate {
    /// Takes the gate if free.
    pub fn try_enter(&self) -> Option<GateGuard> {
        self.0
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| GateGuard(self.0.clone()))
    }

    /// True while a test holds the gate.
    pub fn busy(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl Drop for GateGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_covers_running_and_finished_spans() {
        let mut l = LoadLog::default();
        assert!(!l.overlaps(0, 100));
        let id = l.begin(150);
        assert!(l.active());
        // A running span overlaps any window that ends after it began.
        assert!(!l.overlaps(100, 150));
        assert!(l.overlaps(100, 151));
        assert!(l.overlaps(1_000, 2_000));
        l.end(id, 300);
        assert!(!l.active());
        assert!(l.overlaps(100, 200));
        assert!(l.overlaps(200, 400));
        assert!(l.overlaps(300, 400), "ends inclusive");
        assert!(!l.overlaps(301, 400));
        assert!(!l.overlaps(0, 150));
        l.end(id, 999); // twice: ignored
        assert!(!l.overlaps(301, 400));
    }

    #[test]
    fn old_spans_are_bounded() {
        let mut l = LoadLog::default();
        for i in 0..(KEPT_SPANS as u64 + 10) {
            let id = l.begin(i * 10);
            l.end(id, i * 10 + 1);
        }
        assert_eq!(l.done.len(), KEPT_SPANS);
        assert!(!l.overlaps(0, 5), "oldest dropped");
    }

    #[test]
    fn board_maps_ips_to_peers_and_spans_end_on_drop() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let board = LoadBoard::new([
            ("b".to_string(), vec![ip("10.0.0.2")]),
            ("c".to_string(), vec![ip("10.0.1.2"), ip("127.0.0.1")]),
            ("d".to_string(), vec![ip("127.0.0.1")]),
        ]);
        let (b, c, d) = (
            board.tag("b").unwrap(),
            board.tag("c").unwrap(),
            board.tag("d").unwrap(),
        );
        let s = board.begin_ip(ip("10.0.0.2"));
        assert_eq!(s.len(), 1);
        assert!(b.active() && !c.active() && !d.active());
        drop(s);
        assert!(!b.active());
        // A v4-mapped v6 client is the same client.
        let s = board.begin_ip(ip("::ffff:127.0.0.1"));
        assert_eq!(s.len(), 2);
        assert!(c.active() && d.active() && !b.active());
        drop(s);
        assert!(board.begin_ip(ip("192.0.2.1")).is_empty());
        let s = board.begin_peer("b");
        assert!(b.active());
        drop(s);
        assert!(board.begin_peer("nobody").is_empty());
        let now = now_ns();
        assert!(b.overlaps(now - 1_000_000_000, now + 1));
    }

    #[test]
    fn gate_admits_one_at_a_time() {
        let g = TestGate::default();
        let first = g.try_enter().expect("free");
        assert!(g.busy());
        assert!(g.clone().try_enter().is_none());
        drop(first);
        assert!(!g.busy());
        assert!(g.try_enter().is_some());
    }
}
