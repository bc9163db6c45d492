//! The acceptance figures of every link and of all links together: each
//! window classified ([`availability`]), then availability, time above
//! the thresholds, the per-hour table, the worst quarter hour and the
//! fleet view, each from its concern's module. Runs after the links'
//! and overall RTT figures, before the verdict that judges the budgets.

use std::collections::BTreeMap;

use super::above::{self, above};
use super::availability::{self, availability, by_bin, class, Class, Tally};
use super::bins::HOUR_NS;
use super::build::Builder;
use super::fleet::fleet;
use super::hourly::{self, hourly};
use super::outages;
use super::quarter::{quarter, worst, Context, QUARTER_NS};
use super::{Fleet, Link, OutageItem, Thermal};

/// What one link's windows add up to, kept for all links together.
struct Part {
    total: Tally,
    spans: Vec<(u64, u64)>,
    classes: Vec<Class>,
    hours: BTreeMap<u64, Tally>,
    quarters: BTreeMap<u64, Tally>,
}

impl Builder {
    /// Fills in each link's and the overall acceptance figures; returns
    /// the fleet view. `links` are in the order of `self.links`.
    pub(super) fn acceptance(
        &self,
        links: &mut [Link],
        overall: &mut Link,
        outages: &[OutageItem],
        thermal: &[Thermal],
        window: Option<u64>,
    ) -> Fleet {
        let (from, to) = (self.scope.from_unix_ns, self.scope.to_unix_ns);
        let (range, slo) = (to.saturating_sub(from), &self.scope.slo);
        let min = slo.link_availability_min_percent;
        let mut parts = Vec::with_capacity(links.len());
        for (l, ((node, peer), acc)) in links.iter_mut().zip(&self.links) {
            let own = outages::of_link(outages, Some((node, peer)));
            let spans = availability::spans(&own);
            let classes: Vec<Class> = acc.windows.iter().map(|w| class(w, &spans)).collect();
            let mut total = Tally::default();
            acc.windows
                .iter()
                .zip(&classes)
                .for_each(|(w, c)| total.add(w, *c));
            let hours = by_bin(&acc.windows, &classes, HOUR_NS);
            let quarters = by_bin(&acc.windows, &classes, QUARTER_NS);
            let mine = |a: &str, b: &str| (a == node && b == peer) || (a == peer && b == node);
            let cx = Context {
                outages: &own,
                marks: &self.scope.marks,
                throttles: throttles(thermal, |n| n == node || n == peer),
                tests: self.tests.iter().filter(|t| mine(&t.from, &t.to)).collect(),
            };
            l.availability = availability(&total, &spans, range, min);
            l.above_threshold = above(
                &acc.windows,
                self.tests
                    .iter()
                    .filter(|t| t.from == *node && t.to == *peer),
                slo,
                range,
            );
            l.hourly = hourly(&acc.hours, &hours, from, to);
            l.worst_quarter = worst(&quarters).map(|(s, t)| quarter(s, &t, &cx));
            parts.push(Part {
                total,
                spans,
                classes,
                hours,
                quarters,
            });
        }
        overall.availability = availability::overall(
            parts.iter().map(|p| (&p.total, p.spans.as_slice())),
            range,
            min,
        );
        overall.above_threshold = above::overall(links.iter().map(|l| &l.above_threshold), range);
        let stats = hourly::merge(self.links.values().map(|a| &a.hours), |a, b| a.merge(b));
        let merge = |a: &mut Tally, b: &Tally| a.merge(b);
        let hours = hourly::merge(parts.iter().map(|p| &p.hours), merge);
        overall.hourly = hourly(&stats, &hours, from, to);
        let quarters = hourly::merge(parts.iter().map(|p| &p.quarters), merge);
        let all = outages::of_link(outages, None);
        let cx = Context {
            outages: &all,
            marks: &self.scope.marks,
            throttles: throttles(thermal, |_| true),
            tests: self.tests.iter().collect(),
        };
        overall.worst_quarter = worst(&quarters).map(|(s, t)| quarter(s, &t, &cx));
        let windows: Vec<_> = self
            .links
            .values()
            .zip(&parts)
            .map(|(a, p)| (a.windows.as_slice(), p.classes.as_slice()))
            .collect();
        fleet(links, &windows, (from, to), window, slo.rtt_p99_ms * 1e6)
    }
}

/// The throttle episodes of the nodes `which` accepts, `(node, start, end)`.
fn throttles(thermal: &[Thermal], which: impl Fn(&str) -> bool) -> Vec<(String, u64, u64)> {
    thermal
        .iter()
        .filter(|t| which(&t.node))
        .flat_map(|t| {
            t.episodes
                .iter()
                .map(|e| (t.node.clone(), e.start_unix_ns, e.end_unix_ns))
        })
        .collect()
}
