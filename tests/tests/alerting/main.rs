//! The shipped alert rules, proven end to end in Debian's real
//! `prometheus` and `prometheus-alertmanager`: real agents in the
//! network-namespace bed (real STAMP, real scheduled bandwidth tests over
//! the veth "cables", thermals from a sysfs fixture whose throttle
//! counter the test advances) stream to a real collector on the host;
//! Prometheus scrapes it every second and evaluates `alerts.yml` and
//! `recording.yml` every second; Alertmanager delivers to a webhook this
//! test serves, and the assertions are on what reaches the webhook.
//!
//! The one change to the rules: every `for: Nm` becomes `for: Ns` (minutes
//! read as seconds, [`stack::shorten_for`]), mechanically, line by line;
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
//!   names the tester and its peer; the tester's agent killed: agent-down
//!   fires and its thermal and bandwidth alerts resolve;
//! - the same shaping, no throttling, the expectation a share of the
//!   veth's negotiated 10 Gbit/s: the plain alert, not the thermal one;
//! - throttling that began after the last test: no thermal blame;
//! - the peer throttled: the alert names the peer's end;
//! - the tester throttled 75 % of the time: the alerts fire;
//! - a link flap: link-down fires and resolves.
//!
//! Needs root, `ip`, `tc`, `nft`, `prometheus` and
//! `prometheus-alertmanager`; without them it fails, it never skips.
//! Every wait is bounded and fails with the last state seen; nothing
//! asserts how long anything took.

use std::path::Path;

mod pair;
mod scenarios;
mod stack;

use stack::shorten_for;

#[test]
fn shorten_for_touches_only_whole_minute_for_lines() {
    let rules = "      - alert: X\n        expr: up == 0 # for: 3m\n        for: 30m\n";
    assert_eq!(
        shorten_for(rules),
        "      - alert: X\n        expr: up == 0 # for: 3m\n        for: 30s\n"
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
fn alert_scenarios_reach_the_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let stack = stack::Stack::start(d);
    type Scenario = fn(&stack::Stack, &Path) -> pair::Pair;
    let all: [(&str, Scenario); 6] = [
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
    ];
    let mut failed = Vec::new();
    // Every pair keeps running until the end of the test.
    let mut _pairs = Vec::new();
    std::thread::scope(|s| {
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
    });
    assert!(
        failed.is_empty(),
        "scenarios failed (see their panics above): {failed:?}"
    );
    let delivered = stack.hook.all();
    let wrong = scenarios::misplaced(&delivered);
    assert!(wrong.is_empty(), "misplaced alerts: {wrong:#?}");
}
