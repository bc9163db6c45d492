//! Sleeps of the node (`power` records): how often and how long the
//! system slept. A node that sleeps is dark to its peers (Thunderbolt has
//! no wake-on-LAN), so these explain outages that would otherwise have no
//! cause; the outages themselves stay in [`crate::outage`].
//!
//! Counted from WAKE records, which carry the sleep's length: a SLEEP
//! record may come without its WAKE (the agent was stopped asleep, or the
//! machine lost power), and then nothing is known of the length. The
//! series exist from the node's first wake.

use std::collections::BTreeMap;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{PowerEventKind, Record};

use crate::domain::{Domain, Subjects};
use crate::family::{families, labels, Exposition};

/// The payload kinds [`PowerMetrics`]'s `apply` reads.
pub const KINDS: &[&str] = &["power"];

families! {
    SLEEPS = Counter("boltwatch_sleeps_total", "", labels::NODE, "System sleeps of the node, counted when it wakes.");
    ASLEEP_SECONDS = Counter("boltwatch_asleep_seconds_total", "seconds", labels::NODE, "Time the node spent asleep, added when it wakes (measured by a clock that counts suspend).");
}

#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    sleeps: u64,
    seconds: f64,
}

/// State behind the power families, per node.
#[derive(Debug, Default, Clone)]
pub struct PowerMetrics {
    nodes: BTreeMap<String, Totals>,
}

impl Domain for PowerMetrics {
    fn apply(&mut self, r: &Record, _: &mut Subjects) {
        let Some(Payload::Power(p)) = &r.payload else {
            return;
        };
        if p.kind != PowerEventKind::Wake as i32 {
            return;
        }
        let t = self.nodes.entry(r.node.clone()).or_default();
        t.sleeps += 1;
        t.seconds += p.slept_ns as f64 / 1e9;
    }

    fn render(&self, e: &mut Exposition, _: &Subjects) {
        e.family(
            &SLEEPS,
            self.nodes.iter().map(|(n, t)| ([n.as_str()], t.sleeps)),
        );
        e.family(
            &ASLEEP_SECONDS,
            self.nodes.iter().map(|(n, t)| ([n.as_str()], t.seconds)),
        );
    }
}
