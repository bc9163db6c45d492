//! [`Builder::finish`]: the report computed from the accumulated records,
//! one step per part (links, overall, correlation, completeness, verdict),
//! each from its concern's module.

use std::collections::BTreeSet;

use super::bandwidth::{bandwidth, Test};
use super::build::Builder;
use super::chart::{chart, Series};
use super::correlation::correlation;
use super::coverage::{self, completeness, mode};
use super::facts::{Context, LinkSeries};
use super::headline::headline;
use super::outages::{self, interruptions};
use super::rtt::{rtt, LinkAcc};
use super::thermal::{self, Throttling};
use super::{secs, verdict, Chart, Link, OutageItem, Report};
use crate::report::summary::LinkStats;

impl Builder {
    /// Computes the report.
    pub fn finish(mut self) -> Report {
        let (from, to) = (self.scope.from_unix_ns, self.scope.to_unix_ns);
        let nodes = self.nodes();
        self.expect_every_pair();
        let thermal = thermal::per_node(&mut self.thermal, to);
        let throttling = Throttling::of(&thermal);
        let outages = outages::clip(std::mem::take(&mut self.outages), from, to);
        // Before the windows are deduplicated: the length most windows had.
        let window = mode(
            self.links
                .values()
                .flat_map(|l| l.windows.iter().map(|w| w.window_ns)),
        );
        self.links.values_mut().for_each(LinkAcc::sort);

        let links: Vec<Link> = self
            .links
            .iter()
            .map(|((node, peer), acc)| self.link(node, peer, acc, &outages, window))
            .collect();
        let charts = self.charts(&outages, &throttling);
        let mut overall = self.overall(&links, &outages, window);
        let mut links = links;
        let fleet = self.acceptance(&mut links, &mut overall, &outages, &thermal, window);
        let correlation = correlation(
            self.links
                .iter()
                .map(|((node, peer), acc)| (node.as_str(), peer.as_str(), acc.windows.as_slice())),
            &self.tests,
            &self.thermal,
            &throttling,
        );
        let services = outages::services(&self.services, &outages);
        let completeness =
            completeness(&overall.coverage, &links, self.records, self.boots.values());
        let headline = headline(&overall, &services, &thermal);
        let verdict = verdict::judge(&self.scope.slo, &overall, &headline, &completeness);
        let verdict = verdict::with_budget(&self.scope.slo, verdict, &links);
        let facts = std::mem::take(&mut self.facts).finish(Context {
            nodes: &nodes.iter().cloned().collect::<Vec<_>>(),
            links: &links,
            series: self.series(),
            outages: &outages,
            thermal: &thermal,
            marks: &self.scope.marks,
            from,
            to,
        });
        let errors = verdict::interface_errors(&self.scope.slo, &facts.counters);
        let verdict = verdict::with_line(verdict, errors);
        Report {
            soak: self.scope.name.clone(),
            from_unix_ns: from,
            to_unix_ns: to,
            duration_seconds: secs(to.saturating_sub(from)),
            nodes: nodes.into_iter().collect(),
            headline,
            overall,
            links,
            services,
            thermal,
            correlation,
            completeness,
            marks: self.scope.marks.clone(),
            verdict,
            fleet,
            charts,
            changepoints: facts.changepoints,
            counter_growth: facts.counters,
            inventory: facts.inventory,
            overhead: facts.overhead,
            rdma: std::mem::take(&mut self.rdma).finish(),
        }
    }

    /// Each link's windows and successful bandwidth tests, for its
    /// changepoints.
    fn series(&self) -> Vec<LinkSeries<'_>> {
        self.links
            .iter()
            .map(|((node, peer), acc)| {
                let tests = self
                    .tests_of(node, peer)
                    .filter_map(|t| Some((t.t, t.gbps?)))
                    .collect();
                (node.as_str(), peer.as_str(), acc.windows.as_slice(), tests)
            })
            .collect()
    }

    /// The soak's nodes, or (none named) every node seen in range.
    fn nodes(&self) -> BTreeSet<String> {
        if self.only.is_empty() {
            self.seen.clone()
        } else {
            self.only.clone()
        }
    }

    /// Every pair of the soak's nodes is a link the schedule expects, with
    /// windows or without.
    fn expect_every_pair(&mut self) {
        for a in &self.only {
            for b in &self.only {
                if a != b {
                    self.links.entry((a.clone(), b.clone())).or_default();
                }
            }
        }
    }

    /// The bandwidth tests moving data `node` -> `peer`.
    fn tests_of<'a>(&'a self, node: &'a str, peer: &'a str) -> impl Iterator<Item = &'a Test> {
        self.tests
            .iter()
            .filter(move |t| t.from == node && t.to == peer)
    }

    /// The line of `node` -> `peer`; `window` is the length to assume when
    /// the link stored none.
    fn link(
        &self,
        node: &str,
        peer: &str,
        acc: &LinkAcc,
        outages: &[OutageItem],
        window: Option<u64>,
    ) -> Link {
        let (from, to) = (self.scope.from_unix_ns, self.scope.to_unix_ns);
        let own = mode(acc.windows.iter().map(|w| w.window_ns));
        Link {
            node: node.to_string(),
            peer: peer.to_string(),
            rtt_rest: rtt(&acc.rest),
            rtt_load: rtt(&acc.load),
            rtt: rtt(&acc.both()),
            bandwidth: bandwidth(self.tests_of(node, peer)),
            interruptions: interruptions(outages::of_link(outages, Some((node, peer)))),
            coverage: coverage::of_link(&acc.windows, own.or(window), from, to),
            // Filled in by `acceptance`.
            ..Link::default()
        }
    }

    /// All links together.
    fn overall(&self, links: &[Link], outages: &[OutageItem], window: Option<u64>) -> Link {
        let (mut rest, mut load) = (LinkStats::default(), LinkStats::default());
        for acc in self.links.values() {
            rest.merge(&acc.rest);
            load.merge(&acc.load);
        }
        let mut all = rest.clone();
        all.merge(&load);
        Link {
            node: "*".into(),
            peer: "*".into(),
            rtt_rest: rtt(&rest),
            rtt_load: rtt(&load),
            rtt: rtt(&all),
            bandwidth: bandwidth(self.tests.iter()),
            interruptions: interruptions(outages::of_link(outages, None)),
            coverage: coverage::overall(links, window),
            ..Link::default()
        }
    }

    /// Each link's chart series.
    fn charts(&self, outages: &[OutageItem], throttling: &Throttling<'_>) -> Vec<Chart> {
        let (from, to) = (self.scope.from_unix_ns, self.scope.to_unix_ns);
        self.links
            .iter()
            .map(|((node, peer), acc)| {
                let outages = outages::of_link(outages, Some((node, peer)));
                let series = Series {
                    windows: &acc.windows,
                    bandwidth: self
                        .tests_of(node, peer)
                        .filter_map(|t| Some((t.t, t.gbps?)))
                        .collect(),
                    temperature: self
                        .thermal
                        .get(node.as_str())
                        .map(|n| n.hottest())
                        .unwrap_or_default(),
                    throttled: throttling.spans(node, peer),
                    outages: &outages,
                    stats: acc.both(),
                };
                chart(node, peer, series, from, to)
            })
            .collect()
    }
}
