//! The shipped alert rules, proven end to end in Debian's real
//! `prometheus` and `prometheus-alertmanager`: real agents in the
//! network-namespace bed (real STAMP, real scheduled bandwidth tests over
//! the veth "cables", thermals from a sysfs fixture whose throttle
//! counter the test advances) stream to a real collector on the host;
//! Prometheus scrapes it every second and evaluates `alerts.yml` and
//! `recording.yml` every second; Alertmanager delivers to a webhook this
//! test serves, and the assertions are on what reaches the webhook.
//!
//! The one change to the rules: every `for:` is divided by 60 (`for: Nm`
//! becomes `for: Ns`, [`stack::shorten_for`]), mechanically, line by line;
//! the expressions are the shipped ones, byte for byte.
//!
//! Prometheus sets `cluster` as a target label of the collector's job, as
//! one collector per cluster is meant to be scraped, and every alert must
//! reach the webhook with it.
//!
//! The scenarios share one collector, Prometheus and Alertmanager and run
//! in parallel, each on its own two-node bed ([`pair`]); a shaped link is
//! a 200 Mbit/s token bucket on both ends, under the 6 Gbit/s expected:
//! - a shaped link while the tester is throttled: the throttled alert
//!   names the tester and its peer, and pages; the tester's agent killed:
//!   agent-down pages and its thermal and bandwidth alerts resolve in
//!   Prometheus (inhibited by agent-down in Alertmanager meanwhile);
//! - the same shaping, no throttling, the expectation a share of the
//!   veth's negotiated 10 Gbit/s: the plain alert, not the thermal one;
//! - throttling that began after the last test: no thermal blame;
//! - the peer throttled: the alert names the peer's end and pages; the
//!   peer's agent killed, it ends although the tester's gauge lives on;
//! - the tester throttled 75 % of the time: the alerts fire;
//! - a link flap: link-down fires and resolves;
//! - a cable pull (one `ip link set down`): link-down pages, the outage
//!   fires but Alertmanager holds it inhibited; one page, nothing to chat;
//! - the peer's agent killed: agent-down pages for it, the tester's
//!   outage towards it is held inhibited; one page, nothing to chat for
//!   its nodes; a soak of the pair whose verdict is FAIL (a required line
//!   it has no data for): `BoltwatchSoakFailing` reaches chat, never the
//!   pager.
//! - beside them, no pair but a stand-in for a node's RDMA probe
//!   ([`rdma`]; no RDMA device runs here): a port wedged before the first
//!   window and again later pages `BoltwatchRdmaPortWedged`, once; its
//!   probed link's loss and CRC mismatches reach chat;
//! - apart, on a stack of its own ([`missing`]): the collector restarted
//!   on a store without a node that reported in the last hour, its agent
//!   away: `BoltwatchAgentMissing` pages, and resolves when the agent
//!   connects.
//!
//! Alertmanager runs the shipped `dashboards/alertmanager/alertmanager.yml`
//! with only the receiver URLs replaced and its group and repeat intervals
//! divided by 60, kept at 5 s or more ([`stack::alertmanager_for_test`]);
//! the webhook tells the pager from chat by the path each receiver posts
//! to, and a page is one notification to the pager.
//!
//! Needs root, `ip`, `tc`, `nft`, `prometheus` and
//! `prometheus-alertmanager`; without them it fails, it never skips.
//! Every wait is bounded and fails with the last state seen; nothing
//! asserts how long anything took.

use std::path::Path;

mod missing;
mod pair;
mod rdma;
mod scenarios;
mod stack;

use stack::{alertmanager_for_test, shorten_for};

#[test]
fn shorten_for_touches_only_for_lines() {
    let rules =
        "      - alert: X\n        expr: up == 0 # for: 3m\n        for: 30m\n        for: 30s\n";
    assert_eq!(
        shorten_for(rules),
        "      - alert: X\n        expr: up == 0 # for: 3m\n        for: 30s\n        for: 1s\n"
    );
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/prometheus/alerts.yml"),
    )
    .unwrap();
    let short = shorten_for(&shipped);
    let differ: Vec<(&str, &str)> = shipped
        .lines()
        .zip(short.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert!(!differ.is_empty());
    assert!(differ
        .iter()
        .all(|(a, _)| a.trim_start().starts_with("for: ")));
}

#[test]
fn alertmanager_for_test_touches_only_urls_and_intervals() {
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/alertmanager/alertmanager.yml"),
    )
    .unwrap();
    let test = alertmanager_for_test(&shipped, 4242);
    let differ: Vec<(&str, &str)> = shipped
        .lines()
        .zip(test.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(shipped.lines().count(), test.lines().count());
    // 5m / 60; 30s / 60 kept at 5s; 1h / 60.
    assert!(differ.iter().any(|(_, b)| b.trim() == "group_interval: 5s"));
    assert!(differ.iter().any(|(_, b)| b.trim() == "group_wait: 5s"));
    assert!(differ
        .iter()
        .any(|(_, b)| b.trim() == "repeat_interval: 60s"));
    for (a, b) in &differ {
        let key = |l: &str| {
            l.trim()
                .trim_start_matches("- ")
                .split(':')
                .next()
                .unwrap()
                .to_string()
        };
        assert_eq!(key(a), key(b));
        assert!(
            ["url", "group_wait", "group_interval", "repeat_interval"].contains(&key(a).as_str()),
            "{a} -> {b}"
        );
    }
    for receiver in [stack::PAGER, stack::CHAT] {
        let url = format!("url: http://127.0.0.1:4242/{receiver}");
        assert!(test.contains(&url), "{test}");
    }
}

#[test]
fn agent_missing_pages_on_a_store_without_the_node() {
    let dir = tempfile::tempdir().unwrap();
    missing::agent_missing_pages_on_a_store_without_the_node(dir.path());
}

#[test]
fn alert_scenarios_reach_the_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let stack = stack::Stack::start(d);
    type Scenario = fn(&stack::Stack, &Path) -> pair::Pair;
    let all: [(&str, Scenario); 8] = [
        (
            "throttled tester, killed",
            scenarios::throttled_tester_then_killed,
        ),
        (
            "cool link under its share",
            scenarios::cool_link_below_its_share,
        ),
        (
            "throttling after the last test",
            scenarios::throttling_after_the_last_test,
        ),
        ("throttled peer", scenarios::throttled_peer),
        (
            "throttled 75 %",
            scenarios::throttled_three_quarters_of_the_time,
        ),
        ("link flap", scenarios::link_flap),
        ("cable pull", scenarios::cable_pull),
        ("dead agent", scenarios::dead_agent),
    ];
    let mut failed = Vec::new();
    // Every pair, and the RDMA stand-in, keeps running until the end of
    // the test.
    let mut _pairs = Vec::new();
    let mut _rdma = None;
    std::thread::scope(|s| {
        let rdma = s.spawn(|| rdma::wedged_port_pages_and_corruption_goes_to_chat(&stack, d));
        let running: Vec<_> = all
            .iter()
            .map(|(name, f)| (*name, s.spawn(|| f(&stack, d))))
            .collect();
        for (name, h) in running {
            match h.join() {
                Ok(pair) => _pairs.push(pair),
                Err(_) => failed.push(name),
            }
        }
        match rdma.join() {
            Ok(feed) => _rdma = Some(feed),
            Err(_) => failed.push("rdma stand-in"),
        }
    });
    assert!(
        failed.is_empty(),
        "scenarios failed (see their panics above): {failed:?}"
    );
    let delivered = stack.hook.all();
    let wrong = scenarios::misplaced(&delivered);
    assert!(wrong.is_empty(), "misplaced alerts: {wrong:#?}");
    let mut pages = scenarios::one_page_per_cause(&delivered);
    pages.extend(rdma::one_page_for_the_wedge(&delivered));
    assert!(pages.is_empty(), "{pages:#?}\ndelivered: {delivered:#?}");
}
