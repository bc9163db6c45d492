//! Whether frames circulate through a bridge: the pure detector behind
//! `boltwatch_bridge_loop_suspected`. The watcher loop feeds it one
//! [`Poll`] per bridge and per reconciliation poll (1 Hz): the bridge's
//! flood counters ([`Flood`], read by the OS file) and the MACs its
//! forwarding table learnt on each member (the same table [`super::ports`]
//! reads). No clock is read here; times come with the poll.
//!
//! Why: Thunderbolt Bridge on a ring of Macs forwards frames like a hub
//! with no spanning tree, so one broadcast circulates forever (Apple's
//! TN3205 says to disable the bridge). A loop shows two ways, and either
//! one makes a poll suspicious:
//! - **flood**: flooded frames reach the node at [`FLOOD_MIN_PPS`] or more
//!   and at least [`FLOOD_RATIO`] times what the node itself sends: a
//!   broadcast the node sent once comes back again and again;
//! - **MAC moves**: [`MOVES_MIN`] or more moves of learnt MACs from one
//!   member to another within [`MOVE_WINDOW_NS`]: a frame that goes round
//!   both ways is learnt on each member in turn. One move is a recabling.
//!
//! The verdict has hysteresis so it does not flap with the storm's
//! jitter: it rises after [`RAISE_AFTER`] suspicious polls in a row and
//! falls after [`CLEAR_AFTER`] clean polls in a row (a move stays in the
//! window for [`MOVE_WINDOW_NS`], so a loop that stops clears that much
//! later). `docs/fabric.md` ("Bridge loops") states the same rule.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::neigh::Mac;
use crate::counters::{counter_delta, CounterWidth};

/// Flooded packets per second below which no flood is a storm, however
/// quiet the node: an idle cluster floods a few ARP and neighbour
/// discovery frames a second, a looping one thousands.
pub const FLOOD_MIN_PPS: f64 = 1000.0;
/// How many times the node's own sent packets the flood must be.
pub const FLOOD_RATIO: f64 = 50.0;
/// How long a MAC move counts.
pub const MOVE_WINDOW_NS: u64 = 10_000_000_000;
/// Moves within the window that make a poll suspicious.
pub const MOVES_MIN: usize = 3;
/// Suspicious polls in a row that raise the verdict.
pub const RAISE_AFTER: u32 = 2;
/// Clean polls in a row that clear it.
pub const CLEAR_AFTER: u32 = 5;

/// A bridge's cumulative packet counters, as the OS file reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flood {
    /// Flooded (multicast and broadcast) frames that reached the node.
    pub flood_in: u64,
    /// Frames the node itself sent through the bridge.
    pub own_out: u64,
}

/// What one poll read of one bridge.
#[derive(Debug, Clone, Copy)]
pub struct Poll<'a> {
    /// When (timeline nanoseconds).
    pub at_ns: u64,
    /// The flood counters; `None` when they could not be read.
    pub flood: Option<Flood>,
    /// Learnt MAC -> member port, this bridge's members only; `None`
    /// when the forwarding table could not be read.
    pub ports: Option<&'a HashMap<Mac, String>>,
}

/// The detector's word on one bridge.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// A loop is suspected.
    pub suspected: bool,
    /// Flooded packets per second at this poll (0 when unknown).
    pub flood_pps: f64,
    /// The node's own packets per second at this poll (0 when unknown).
    pub own_pps: f64,
    /// MAC moves within the window.
    pub mac_moves: u32,
}

/// One bridge's history.
#[derive(Debug, Default, Clone)]
struct Bridge {
    last_flood: Option<(u64, Flood)>,
    /// MAC -> (member it was last learnt on, when last seen).
    last_port: HashMap<Mac, (String, u64)>,
    /// Times of the moves within the window, oldest first.
    moves: VecDeque<u64>,
    /// Suspicious polls in a row (while clear) or clean ones (while
    /// suspected).
    streak: u32,
    /// The verdict given; `None` before the first poll.
    suspected: Option<bool>,
}

impl Bridge {
    /// Flood and own rates since the last poll, packets per second.
    fn rates(&mut self, at_ns: u64, flood: Option<Flood>) -> Option<(f64, f64)> {
        let flood = flood?;
        let prev = self.last_flood.replace((at_ns, flood));
        let (t0, f0) = prev?;
        let secs = at_ns.checked_sub(t0).filter(|d| *d > 0)? as f64 / 1e9;
        // 64-bit counters: a decrease is a reset (interface re-created).
        let (fin, _, _) = counter_delta(f0.flood_in, flood.flood_in, CounterWidth::Bits64);
        let (own, _, _) = counter_delta(f0.own_out, flood.own_out, CounterWidth::Bits64);
        Some((fin as f64 / secs, own as f64 / secs))
    }

    /// Records the moves this table shows and forgets what left the window.
    fn moves(&mut self, at_ns: u64, ports: Option<&HashMap<Mac, String>>) -> usize {
        let horizon = at_ns.saturating_sub(MOVE_WINDOW_NS);
        for (mac, port) in ports.into_iter().flatten() {
            // A MAC missing from one poll keeps its last member (the entry
            // is rewritten as the storm passes), so its return on the other
            // member still counts.
            match self.last_port.insert(*mac, (port.clone(), at_ns)) {
                Some((was, _)) if was != *port => self.moves.push_back(at_ns),
                _ => {}
            }
        }
        self.last_port.retain(|_, (_, seen)| *seen >= horizon);
        while self.moves.front().is_some_and(|t| *t < horizon) {
            self.moves.pop_front();
        }
        self.moves.len()
    }

    fn observe(&mut self, poll: Poll<'_>) -> Option<Verdict> {
        let rates = self.rates(poll.at_ns, poll.flood);
        let moves = self.moves(poll.at_ns, poll.ports);
        let storm = rates
            .is_some_and(|(fin, own)| fin >= FLOOD_MIN_PPS && fin >= FLOOD_RATIO * own.max(1.0));
        let suspicious = storm || moves >= MOVES_MIN;
        let was = self.suspected.unwrap_or(false);
        let now = if suspicious != was {
            self.streak += 1;
            let needed = if was { CLEAR_AFTER } else { RAISE_AFTER };
            if self.streak >= needed {
                self.streak = 0;
                suspicious
            } else {
                was
            }
        } else {
            self.streak = 0;
            was
        };
        let first = self.suspected.is_none();
        self.suspected = Some(now);
        (first || now != was).then(|| {
            let (flood_pps, own_pps) = rates.unwrap_or((0.0, 0.0));
            Verdict {
                suspected: now,
                flood_pps,
                own_pps,
                mac_moves: moves as u32,
            }
        })
    }
}

/// The detector of every bridge a watcher sees.
#[derive(Debug, Default, Clone)]
pub struct LoopDetector {
    bridges: BTreeMap<String, Bridge>,
}

impl LoopDetector {
    /// An empty detector.
    pub fn new() -> LoopDetector {
        LoopDetector::default()
    }

    /// Feeds one poll of `bridge`; returns its verdict on its first poll
    /// and whenever the verdict changes.
    pub fn observe(&mut self, bridge: &str, poll: Poll<'_>) -> Option<Verdict> {
        if !self.bridges.contains_key(bridge) {
            self.bridges.insert(bridge.to_owned(), Bridge::default());
        }
        self.bridges.get_mut(bridge)?.observe(poll)
    }

    /// Forgets the bridges not in `present` (a bridge that comes back
    /// starts afresh, with a first verdict).
    pub fn retain(&mut self, present: &[&str]) {
        self.bridges.retain(|b, _| present.contains(&b.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;
    const M: Mac = [2, 0, 0, 0, 0, 0x0a];
    const N: Mac = [2, 0, 0, 0, 0, 0x0b];

    fn table(entries: &[(Mac, &str)]) -> HashMap<Mac, String> {
        entries.iter().map(|(m, p)| (*m, p.to_string())).collect()
    }

    /// Feeds `steps` polls one second apart from `t`, the flood counters
    /// growing by `flood`/`own` packets a second, the table from `ports`;
    /// returns every verdict given, with its poll's second.
    fn run(
        d: &mut LoopDetector,
        t: &mut u64,
        counters: &mut Flood,
        steps: u64,
        (flood, own): (u64, u64),
        ports: impl Fn(u64) -> HashMap<Mac, String>,
    ) -> Vec<(u64, Verdict)> {
        let mut out = Vec::new();
        for _ in 0..steps {
            *t += 1;
            counters.flood_in += flood;
            counters.own_out += own;
            let p = ports(*t);
            let poll = Poll {
                at_ns: *t * S,
                flood: Some(*counters),
                ports: Some(&p),
            };
            if let Some(v) = d.observe("bridge0", poll) {
                out.push((*t, v));
            }
        }
        out
    }

    fn quiet(_: u64) -> HashMap<Mac, String> {
        table(&[(M, "en2"), (N, "en3")])
    }

    #[test]
    fn a_storm_raises_after_two_polls_and_clears_after_five() {
        let (mut d, mut t, mut c) = (
            LoopDetector::new(),
            0,
            Flood {
                flood_in: 0,
                own_out: 0,
            },
        );
        let first = run(&mut d, &mut t, &mut c, 10, (40, 30), quiet);
        assert_eq!(first.len(), 1, "only the first verdict: {first:?}");
        assert!(!first[0].1.suspected);
        // A storm: 5000 flooded packets a second against 10 of the node's.
        let v = run(&mut d, &mut t, &mut c, 10, (5000, 10), quiet);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].0, 12, "raised on the storm's second poll");
        assert!(v[0].1.suspected);
        assert_eq!(v[0].1.flood_pps, 5000.0);
        assert_eq!(v[0].1.own_pps, 10.0);
        let v = run(&mut d, &mut t, &mut c, 10, (20, 10), quiet);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].0, 25, "cleared on the fifth clean poll");
        assert!(!v[0].1.suspected);
    }

    #[test]
    fn one_suspicious_poll_between_clean_ones_does_not_flap() {
        let (mut d, mut t, mut c) = (
            LoopDetector::new(),
            0,
            Flood {
                flood_in: 0,
                own_out: 0,
            },
        );
        run(&mut d, &mut t, &mut c, 3, (10, 10), quiet);
        for _ in 0..5 {
            assert!(run(&mut d, &mut t, &mut c, 1, (9000, 10), quiet).is_empty());
            assert!(run(&mut d, &mut t, &mut c, 1, (10, 10), quiet).is_empty());
        }
        // Raised, a clean poll between storming ones keeps it up.
        let v = run(&mut d, &mut t, &mut c, 2, (9000, 10), quiet);
        assert!(v[0].1.suspected);
        for _ in 0..5 {
            assert!(run(&mut d, &mut t, &mut c, 1, (10, 10), quiet).is_empty());
            assert!(run(&mut d, &mut t, &mut c, 1, (9000, 10), quiet).is_empty());
        }
    }

    #[test]
    fn a_busy_node_flooding_itself_is_no_loop() {
        // 3000 flooded packets a second in, 2000 sent by the node: below
        // the ratio (a node that multicasts a lot hears a lot back).
        let (mut d, mut t, mut c) = (
            LoopDetector::new(),
            0,
            Flood {
                flood_in: 0,
                own_out: 0,
            },
        );
        let v = run(&mut d, &mut t, &mut c, 20, (3000, 2000), quiet);
        assert_eq!(v.len(), 1);
        assert!(!v[0].1.suspected);
        // And a quiet node's few hundred flooded frames are below the floor.
        let v = run(&mut d, &mut t, &mut c, 20, (900, 0), quiet);
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn a_mac_learnt_on_two_members_in_turn_raises_and_one_move_does_not() {
        let (mut d, mut t, mut c) = (
            LoopDetector::new(),
            0,
            Flood {
                flood_in: 0,
                own_out: 0,
            },
        );
        run(&mut d, &mut t, &mut c, 3, (0, 0), quiet);
        // N recabled from en3 to en4 once: one move, no loop.
        let moved = |_| table(&[(M, "en2"), (N, "en4")]);
        assert!(run(&mut d, &mut t, &mut c, 15, (0, 0), moved).is_empty());
        // M alternates, and is missing from some polls meanwhile.
        let flapping = |t: u64| match t % 3 {
            0 => table(&[(M, "en2"), (N, "en4")]),
            1 => table(&[(M, "en3"), (N, "en4")]),
            _ => table(&[(N, "en4")]),
        };
        let v = run(&mut d, &mut t, &mut c, 12, (0, 0), flapping);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].1.suspected);
        assert!(v[0].1.mac_moves >= MOVES_MIN as u32);
        // Settled: the moves leave the window, then five clean polls.
        let settled = |_| table(&[(M, "en3"), (N, "en4")]);
        let v = run(&mut d, &mut t, &mut c, 30, (0, 0), settled);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(!v[0].1.suspected);
        assert_eq!(v[0].1.mac_moves, 0);
    }

    #[test]
    fn unread_counters_and_resets_make_no_storm() {
        let mut d = LoopDetector::new();
        let empty = HashMap::new();
        let poll = |at, flood| Poll {
            at_ns: at * S,
            flood,
            ports: Some(&empty),
        };
        let big = Flood {
            flood_in: 1 << 40,
            own_out: 0,
        };
        assert!(d.observe("br0", poll(1, Some(big))).is_some());
        // The bridge was re-created: counters restart near zero, which is
        // a small delta, not 2^64 of them.
        for s in 2..10 {
            let f = Flood {
                flood_in: s,
                own_out: 0,
            };
            assert_eq!(d.observe("br0", poll(s, Some(f))), None);
        }
        for s in 10..20 {
            assert_eq!(d.observe("br0", poll(s, None)), None);
            assert_eq!(
                d.observe(
                    "br0",
                    Poll {
                        at_ns: s * S,
                        flood: None,
                        ports: None
                    }
                ),
                None
            );
        }
        // No time passed: no rate.
        assert_eq!(d.observe("br0", poll(20, Some(big))), None);
        assert_eq!(d.observe("br0", poll(20, Some(big))), None);
    }

    #[test]
    fn bridges_are_judged_apart_and_forgotten() {
        let mut d = LoopDetector::new();
        let empty = HashMap::new();
        let poll = |at, flood_in| Poll {
            at_ns: at * S,
            flood: Some(Flood {
                flood_in,
                own_out: 0,
            }),
            ports: Some(&empty),
        };
        assert!(d.observe("br0", poll(0, 0)).is_some());
        assert!(d.observe("br1", poll(0, 0)).is_some());
        let mut raised = Vec::new();
        for s in 1..5 {
            if let Some(v) = d.observe("br0", poll(s, s * 10_000)) {
                raised.push(v.suspected);
            }
            assert_eq!(d.observe("br1", poll(s, s)), None);
        }
        assert_eq!(raised, vec![true]);
        d.retain(&["br1"]);
        assert!(
            d.observe("br0", poll(9, 0)).is_some(),
            "a new first verdict"
        );
    }
}
