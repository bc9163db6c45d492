//! The acceptance parts of the report that read records the rest does
//! not: counter growth, the inventory, the probe overhead, and the events
//! the changepoints are set beside (agent restarts, from the stored
//! `Hello`s' start times, and link events). One
//! accumulator fed by [`super::Builder::add`], and the parts computed from
//! it and the finished links by [`Facts::finish`]; each part's logic is in
//! its own module.

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{BandwidthResult, Hello, LinkEvent};

use super::bandwidth::Test;
use super::counters::{CountersAcc, Growth};
use super::inventory::{Inventory, InventoryAcc};
use super::overhead::{Overhead, OverheadAcc};
use super::shifts::{self, Event, Shift};
use super::{Link, OutageItem, Thermal, Win};
use crate::soak::Mark;

/// Link events kept at most (a flapping cable sends thousands).
const MAX_LINK_EVENTS: usize = 10_000;

/// What the acceptance parts read as records arrive.
#[derive(Debug, Default)]
pub(super) struct Facts {
    counters: CountersAcc,
    inventory: InventoryAcc,
    overhead: OverheadAcc,
    /// (node, agent start) of every stored `Hello`.
    starts: Vec<(String, u64)>,
    /// Carrier changes reported: (t, node, words).
    link_events: Vec<(u64, String, String)>,
}

/// The acceptance parts of a report.
pub(super) struct Parts {
    pub changepoints: Vec<Shift>,
    pub counters: Vec<Growth>,
    pub inventory: Inventory,
    pub overhead: Overhead,
}

/// One link's series: (node, peer, its windows sorted, its successful
/// tests as `(start, Gbps)`).
pub(super) type LinkSeries<'a> = (&'a str, &'a str, &'a [Win], Vec<(u64, f64)>);

/// What [`Facts::finish`] reads of the rest of the report.
pub(super) struct Context<'a> {
    pub nodes: &'a [String],
    pub links: &'a [Link],
    /// (node, peer) -> the link's windows (sorted) and successful tests.
    pub series: Vec<LinkSeries<'a>>,
    pub outages: &'a [OutageItem],
    pub thermal: &'a [Thermal],
    pub marks: &'a [Mark],
    pub from: u64,
    pub to: u64,
}

impl Facts {
    /// A stored `Hello` (read beside the records).
    pub fn hello(&mut self, node: &str, started: u64, h: &Hello, to: u64) {
        self.inventory.hello(node, started, h, to);
        self.starts.push((node.to_string(), started));
    }

    /// A record in range.
    pub fn add(&mut self, node: &str, boot: &str, t: u64, p: Option<&Payload>, marks: &[Mark]) {
        match p {
            Some(Payload::Counters(c)) => {
                self.counters.add(node, c, t);
                self.inventory.counters(node, c, t);
            }
            Some(Payload::LinkEvent(e)) => self.link_event(node, e, t),
            Some(Payload::AgentStats(s)) => self.overhead.stats(node, boot, s, t),
            Some(Payload::Bandwidth(bw)) => self.test(node, bw, t, marks),
            _ => {}
        }
    }

    fn link_event(&mut self, node: &str, e: &LinkEvent, t: u64) {
        self.inventory.link_event(node, e, t);
        if self.link_events.len() < MAX_LINK_EVENTS {
            let state = if e.carrier {
                "carrier up"
            } else {
                "carrier down"
            };
            let words = format!("link event on {node} {}: {state}", e.interface);
            self.link_events.push((t, node.to_string(), words));
        }
    }

    fn test(&mut self, node: &str, bw: &BandwidthResult, t: u64, marks: &[Mark]) {
        let Some(test) = Test::of(node, bw, t) else {
            return;
        };
        let end = test.t + bw.duration_ns;
        let in_mark = marks.iter().any(|m| {
            let until = m.until_unix_ns.unwrap_or(u64::MAX);
            test.t < until && end > m.at_unix_ns
        });
        self.overhead
            .test(&test.from, &test.to, bw.bytes, bw.duration_ns, in_mark);
    }

    /// Every event a changepoint may be set beside.
    fn events(&self, c: &Context<'_>) -> Vec<Event> {
        let mut ev = Vec::new();
        for o in c.outages.iter().filter(|o| o.service.is_none()) {
            let what = format!("outage {} -> {} ({})", o.node, o.peer, o.cause);
            let end = (!o.open).then_some(o.end_unix_ns);
            ev.extend(shifts::span(
                &[&o.node, &o.peer],
                o.start_unix_ns,
                end,
                &what,
            ));
        }
        for m in c.marks {
            let what = format!("workload mark `{}`", m.text);
            ev.extend(shifts::span(&[], m.at_unix_ns, m.until_unix_ns, &what));
        }
        for th in c.thermal {
            for e in &th.episodes {
                let end = (e.end_unix_ns < c.to).then_some(e.end_unix_ns);
                let what = format!("throttling of {}", th.node);
                ev.extend(shifts::span(&[&th.node], e.start_unix_ns, end, &what));
            }
        }
        // An agent that started inside the range restarted (or started).
        ev.extend(
            self.starts
                .iter()
                .filter(|(_, t)| (c.from..c.to).contains(t))
                .map(|(node, t)| Event {
                    t: *t,
                    nodes: vec![node.clone()],
                    what: format!("agent restart on {node}"),
                }),
        );
        ev.extend(self.link_events.iter().map(|(t, node, what)| Event {
            t: *t,
            nodes: vec![node.clone()],
            what: what.clone(),
        }));
        ev
    }

    /// The acceptance parts.
    pub fn finish(self, c: Context<'_>) -> Parts {
        let events = self.events(&c);
        let changepoints = changepoints(&c, &events);
        // Each pair once, whichever direction was measured.
        let pairs: Vec<(String, String)> = c
            .links
            .iter()
            .map(|l| {
                let (a, b) = (l.node.clone(), l.peer.clone());
                if a < b {
                    (a, b)
                } else {
                    (b, a)
                }
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let inventory = self.inventory.finish(c.nodes, &pairs);
        let speed = |node: &str, peer: &str| {
            let l = inventory.links.iter().find(|l| {
                (l.node == node && l.peer == peer) || (l.node == peer && l.peer == node)
            })?;
            let end = if l.node == node {
                &l.node_end
            } else {
                &l.peer_end
            };
            end.as_ref()?.speed_gbps.map(|g| (g * 1e9) as u64)
        };
        let loads: Vec<(String, String, u64, Option<u64>)> = c
            .links
            .iter()
            .map(|l| {
                (
                    l.node.clone(),
                    l.peer.clone(),
                    l.rtt.probes,
                    speed(&l.node, &l.peer),
                )
            })
            .collect();
        let overhead = self
            .overhead
            .finish(c.nodes, &loads, c.to.saturating_sub(c.from));
        let mut counters = self.counters;
        Parts {
            changepoints,
            counters: counters.growth(),
            inventory,
            overhead,
        }
    }
}

/// The changepoints of every link's RTT level and bandwidth, each beside
/// the nearest of `events`.
fn changepoints(c: &Context<'_>, events: &[Event]) -> Vec<Shift> {
    let mut out = Vec::new();
    for (node, peer, windows, mut tests) in c.series.iter().cloned() {
        let rtt = shifts::per_minute(
            windows
                .iter()
                .filter(|w| w.received > 0)
                .map(|w| (w.t, w.p50_ns as f64 / 1e6)),
        );
        let rtt_p50 = ("rtt_p50", "ms", shifts::RTT);
        out.extend(shifts::find((node, peer), rtt_p50, &rtt, events));
        tests.sort_by_key(|p| p.0);
        let bw = ("bandwidth", "Gbps", shifts::BANDWIDTH);
        out.extend(shifts::find((node, peer), bw, &tests, events));
    }
    out
}
