//! The scenarios, one pair of nodes each, all against the shared stack.
//! Each waits (bounded) for what must reach the webhook and returns its
//! pair still running; what must never reach it is checked once all have
//! run ([`misplaced`]), before any pair stops (a stopped agent would page
//! agent-down).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use boltwatch_tests::procs::sample;

use super::pair::{End, Expect, Pair, Spec};
use super::stack::{Delivered, Stack, CHAT, PAGER, WAIT};

/// Throttled for the rest of the test.
const ALWAYS: (Duration, Duration) = (Duration::from_secs(3600), Duration::ZERO);

const LOW_THROTTLED: &str = "BoltwatchBandwidthLowThrottled";
const LOW: &str = "BoltwatchBandwidthLow";
const THERMAL: &str = "BoltwatchThermalThrottled";

/// Starts the pair `tester` -> `peer` (with bandwidth tests against
/// `bandwidth`), reporting to the stack's collector.
fn start(
    stack: &Stack,
    dir: &Path,
    tester: &'static str,
    peer: &'static str,
    bandwidth: Option<Expect>,
) -> Pair {
    let spec = Spec {
        tester,
        peer,
        bandwidth,
    };
    Pair::start(dir, &stack.collector, spec)
}

/// Waits for `BoltwatchBandwidthLowThrottled` firing for `node`'s link to
/// `peer`, blaming `end`, whose node is `throttled`.
fn wait_blamed(stack: &Stack, node: &str, peer: &str, end: &str, throttled: &str) {
    let what = format!("the throttled alert for {node} -> {peer} naming {throttled} ({end})");
    stack.wait(&what, |x| {
        x.is("firing", LOW_THROTTLED, node)
            && x.label("peer") == peer
            && x.label("end") == end
            && x.label("throttled_node") == throttled
    });
}

/// A tbf-shaped link under the floor while the tester's throttle fixture
/// is on: the throttled alert names the tester and its peer. Then the
/// tester's agent is killed: agent-down pages, and its thermal and
/// bandwidth alerts resolve in Prometheus once the collector drops its
/// gauges (Alertmanager holds them inhibited by agent-down meanwhile, so
/// their resolution is not sent while it fires).
pub fn throttled_tester_then_killed(stack: &Stack, dir: &Path) -> Pair {
    let mut pair = start(stack, dir, "hot", "hot-peer", Some(Expect::Gbps(6)));
    pair.throttle(End::Tester, ALWAYS.0, ALWAYS.1);
    wait_blamed(stack, "hot", "hot-peer", "local", "hot");
    stack.wait_alert("firing", THERMAL, "hot");
    pair.kill(End::Tester);
    stack.wait("BoltwatchAgentDown paged for hot", |x| {
        x.is("firing", "BoltwatchAgentDown", "hot") && x.receiver == PAGER
    });
    stack.wait_inactive(LOW_THROTTLED, "hot");
    stack.wait_inactive(THERMAL, "hot");
    pair
}

/// The same shaping with no throttling, the expectation a share of the
/// veth's 10 Gbit/s: the plain alert fires (and, checked at the end, not
/// the thermal one).
pub fn cool_link_below_its_share(stack: &Stack, dir: &Path) -> Pair {
    let pair = start(stack, dir, "cool", "cool-peer", Some(Expect::Share(0.6)));
    // 0.6 of 10 Gbit/s, in bytes per second.
    stack.wait_metrics("cool's expectation from its link speed", |m| {
        sample(
            m,
            "boltwatch_bandwidth_expected_bytes_per_second",
            &[("node", "cool"), ("peer", "cool-peer")],
        ) == Some(750_000_000.0)
    });
    stack.wait("BoltwatchBandwidthLow firing for cool -> cool-peer", |x| {
        x.is("firing", LOW, "cool") && x.label("peer") == "cool-peer"
    });
    pair
}

/// The last test ran cool, then the tester's throttling began (and no
/// test ran since): no thermal blame, the plain alert stands.
pub fn throttling_after_the_last_test(stack: &Stack, dir: &Path) -> Pair {
    let mut pair = start(stack, dir, "late", "late-peer", Some(Expect::Gbps(6)));
    let link = [("node", "late"), ("peer", "late-peer")];
    let local = [("node", "late"), ("peer", "late-peer"), ("end", "local")];
    stack.wait_metrics("a cool test of late", |m| {
        sample(m, "boltwatch_bandwidth_last_test_throttled", &local) == Some(0.0)
    });
    pair.block_peer_server();
    // A test refused after the block: any test in flight then failed too.
    let m = stack.wait_metrics("a failed test of late", |m| {
        sample(m, "boltwatch_bandwidth_test_failures_total", &link).unwrap_or(0.0) >= 1.0
    });
    let last = sample(&m, "boltwatch_bandwidth_last_test_timestamp_seconds", &link);
    pair.throttle(End::Tester, ALWAYS.0, ALWAYS.1);
    stack.wait_alert("firing", THERMAL, "late");
    stack.wait_alert("firing", LOW, "late");
    let m = stack.collector.metrics();
    assert_eq!(
        sample(&m, "boltwatch_bandwidth_last_test_timestamp_seconds", &link),
        last,
        "no test may have run since the block"
    );
    assert_eq!(
        sample(&m, "boltwatch_bandwidth_last_test_throttled", &local),
        Some(0.0)
    );
    stack.assert_never("resolved", LOW, "late", "the plain alert of late resolved");
    pair
}

/// The peer is the throttled end: the alert names the peer, and pages.
/// Then the peer's agent is killed: the alert, whose evidence is now a
/// dead agent's last reading (the tester's gauge lives on), ends in
/// Prometheus.
pub fn throttled_peer(stack: &Stack, dir: &Path) -> Pair {
    let mut pair = start(stack, dir, "blamer", "hot-end", Some(Expect::Gbps(6)));
    pair.throttle(End::Peer, ALWAYS.0, ALWAYS.1);
    wait_blamed(stack, "blamer", "hot-end", "peer", "hot-end");
    stack.wait("the throttled alert of blamer paged", |x| {
        x.is("firing", LOW_THROTTLED, "blamer") && x.receiver == PAGER
    });
    pair.kill(End::Peer);
    stack.wait_alert("firing", "BoltwatchAgentDown", "hot-end");
    stack.wait_inactive(LOW_THROTTLED, "blamer");
    pair
}

/// The tester throttled 6 s out of every 8 (75 % of the time, a cool
/// spell of at least one whole reading per cycle): both the throttled
/// bandwidth alert and the thermal alert fire, although the level drops
/// to 0 in every cycle.
pub fn throttled_three_quarters_of_the_time(stack: &Stack, dir: &Path) -> Pair {
    let mut pair = start(stack, dir, "burst", "burst-peer", Some(Expect::Gbps(6)));
    pair.throttle(End::Tester, Duration::from_secs(6), Duration::from_secs(2));
    wait_blamed(stack, "burst", "burst-peer", "local", "burst");
    stack.wait_alert("firing", THERMAL, "burst");
    // Since then the level has dropped to 0 and come back, and the alert
    // held.
    let since = Instant::now();
    let deadline = since + WAIT;
    loop {
        let secs = since.elapsed().as_secs().max(1);
        let q = |f: &str| format!("{f}(boltwatch_thermal_throttled{{node=\"burst\"}}[{secs}s])");
        let (lo, hi) = (
            stack.prom.values(&q("min_over_time")),
            stack.prom.values(&q("max_over_time")),
        );
        if lo == [0.0] && hi == [1.0] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "burst's level never both dropped and rose: min {lo:?}, max {hi:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let why = "the thermal alert of burst resolved during a cool spell";
    stack.assert_never("resolved", THERMAL, "burst", why);
    pair
}

/// The peer's end of the link goes down and comes back: the tester's
/// link-down alert fires and resolves.
pub fn link_flap(stack: &Stack, dir: &Path) -> Pair {
    let pair = start(stack, dir, "flap", "flap-peer", None);
    let iface = pair.tester_if();
    stack.wait_metrics("flap's link up", |m| {
        sample(
            m,
            "boltwatch_link_up",
            &[("node", "flap"), ("interface", &iface)],
        ) == Some(1.0)
    });
    pair.set_peer_link(false);
    stack.wait("BoltwatchLinkDown firing for flap", |x| {
        x.is("firing", "BoltwatchLinkDown", "flap") && x.label("interface") == iface
    });
    pair.set_peer_link(true);
    stack.wait("BoltwatchLinkDown resolved for flap", |x| {
        x.is("resolved", "BoltwatchLinkDown", "flap") && x.label("interface") == iface
    });
    pair
}

/// One `ip link set down` on the peer's end of a cable: link-down fires on
/// both nodes and pages once (both in one notification); the tester's
/// open outage (and the probe loss, drops and route that follow) fire in
/// Prometheus but Alertmanager holds them inhibited. The link stays down;
/// [`one_page_per_cause`] counts what reached the receivers once every
/// scenario has run.
///
/// The pull waits for the flap scenario's link-down to be resolved at the
/// webhook, which ends its Alertmanager group: the pull's two ends then
/// open a fresh group, as a lone cable pull does in production (with
/// another link down in the cluster, they may land in two notifications).
pub fn cable_pull(stack: &Stack, dir: &Path) -> Pair {
    let pair = start(stack, dir, "pull", "pull-peer", None);
    stack.wait_alert("resolved", "BoltwatchLinkDown", "flap");
    let iface = pair.tester_if();
    stack.wait_metrics("pull's link up and probes answered", |m| {
        let link = [("node", "pull"), ("interface", iface.as_str())];
        let probes = [("node", "pull"), ("peer", "pull-peer")];
        sample(m, "boltwatch_link_up", &link) == Some(1.0)
            && sample(m, "boltwatch_probe_received_total", &probes).unwrap_or(0.0) > 0.0
    });
    pair.set_peer_link(false);
    for node in ["pull", "pull-peer"] {
        stack.wait(&format!("BoltwatchLinkDown paged for {node}"), |x| {
            x.is("firing", "BoltwatchLinkDown", node) && x.receiver == PAGER
        });
    }
    stack.wait_inhibited("BoltwatchOutageOpen", "pull");
    pair
}

/// The soak over the dead-agent pair, lenient on RTT and temperature,
/// requiring service availability (`require`): this pair runs no service
/// checks, so that line fails for lack of data from the first verdict, as
/// a required line a soak cannot show it meets does.
const SOAK: &str = "dead-soak";

/// The peer's agent killed: agent-down pages for the peer; the tester's
/// open outage towards it fires in Prometheus but is held inhibited. A
/// soak of the pair whose verdict is FAIL: `BoltwatchSoakFailing` reaches
/// chat (a warning) once per failing line, never the pager.
pub fn dead_agent(stack: &Stack, dir: &Path) -> Pair {
    let mut pair = start(stack, dir, "dead", "dead-peer", None);
    stack.wait_metrics("dead's probes answered", |m| {
        let probes = [("node", "dead"), ("peer", "dead-peer")];
        sample(m, "boltwatch_probe_received_total", &probes).unwrap_or(0.0) > 0.0
    });
    stack.post(
        "/api/v1/soaks",
        &format!(
            r#"{{"name":"{SOAK}","nodes":["dead","dead-peer"],"slo":{{"rtt_worst_ms":10000,
               "rtt_p99_ms":10000,"temperature_worst_max_celsius":200,
               "require":["rtt_worst","rtt_p99","completeness","availability"]}}}}"#
        ),
    );
    stack.wait_metrics("the soak's verdict FAIL on /metrics", |m| {
        sample(m, "boltwatch_soak_pass", &[("soak", SOAK)]) == Some(0.0)
    });
    pair.kill(End::Peer);
    stack.wait("BoltwatchAgentDown paged for dead-peer", |x| {
        x.is("firing", "BoltwatchAgentDown", "dead-peer") && x.receiver == PAGER
    });
    stack.wait_inhibited("BoltwatchOutageOpen", "dead");
    stack.wait(
        "BoltwatchSoakFailing to chat for its availability line",
        |x| {
            soak_failing(x)
                && x.status == "firing"
                && x.receiver == CHAT
                && x.label("slo") == "availability"
        },
    );
    pair
}

fn soak_failing(x: &Delivered) -> bool {
    x.label("alertname") == "BoltwatchSoakFailing" && x.label("soak") == SOAK
}

/// What one cause may send: for each, exactly one page (one pager
/// notification bringing a firing alert of its nodes that no earlier
/// notification brought: re-sends and regroupings with other scenarios'
/// alerts do not count), carrying only its alert kind, and nothing for
/// its nodes to chat. Returns what is wrong.
pub fn one_page_per_cause(all: &[Delivered]) -> Vec<String> {
    let causes = [
        ("cable pull", ["pull", "pull-peer"], "BoltwatchLinkDown"),
        ("dead agent", ["dead", "dead-peer"], "BoltwatchAgentDown"),
    ];
    let mut wrong = Vec::new();
    for (cause, nodes, page) in causes {
        let pages = pages(all, &nodes);
        let kinds: BTreeSet<&str> = pages.values().flatten().map(|(n, _)| n.as_str()).collect();
        if pages.len() != 1 || kinds != BTreeSet::from([page]) {
            wrong.push(format!("{cause}: pages {pages:#?}, want one of {page}"));
        }
        let chat = fired(all, CHAT, &nodes);
        if !chat.is_empty() {
            wrong.push(format!("{cause}: to chat {chat:?}, want nothing"));
        }
    }
    // The soak turning FAIL: chat, one alert per failing SLO line, and
    // never a page.
    let soak = |receiver: &str| -> BTreeSet<String> {
        all.iter()
            .filter(|x| soak_failing(x) && x.status == "firing" && x.receiver == receiver)
            .map(|x| x.label("slo").to_string())
            .collect()
    };
    if soak(CHAT).is_empty() || !soak(PAGER).is_empty() {
        wrong.push(format!(
            "soak turning FAIL: lines to chat {:?}, to the pager {:?}; want some to chat, none paged",
            soak(CHAT),
            soak(PAGER)
        ));
    }
    wrong
}

/// The pager notifications that brought a new firing alert of `nodes`,
/// by number, with the alerts each brought first.
fn pages(all: &[Delivered], nodes: &[&str]) -> BTreeMap<usize, Vec<(String, String)>> {
    let mut seen = BTreeSet::new();
    let mut pages: BTreeMap<usize, Vec<(String, String)>> = BTreeMap::new();
    for x in all {
        if x.receiver != PAGER || x.status != "firing" || !nodes.contains(&x.label("node")) {
            continue;
        }
        let alert = (x.label("alertname").to_string(), x.labels.to_string());
        if seen.insert(alert.clone()) {
            pages.entry(x.notification).or_default().push(alert);
        }
    }
    pages
}

/// Distinct (alertname, label set) that fired at `receiver` for `nodes`.
fn fired(all: &[Delivered], receiver: &str, nodes: &[&str]) -> BTreeSet<(String, String)> {
    all.iter()
        .filter(|x| x.receiver == receiver && x.status == "firing")
        .filter(|x| nodes.contains(&x.label("node")))
        .map(|x| (x.label("alertname").to_string(), x.labels.to_string()))
        .collect()
}

/// Alerts that must never have fired: blame in the wrong place, a cool
/// node paged for heat, a throttled one for the cable, agent-down for a
/// live agent, and anything without the scrape job's cluster.
pub fn misplaced(all: &[Delivered]) -> Vec<&Delivered> {
    all.iter()
        .filter(|x| {
            let firing = |name: &str, nodes: &[&str]| nodes.iter().any(|n| x.is("firing", name, n));
            firing(LOW_THROTTLED, &["cool", "late"])
                || firing(LOW, &["hot", "blamer", "burst"])
                || (firing(LOW_THROTTLED, &["blamer"]) && x.label("end") != "peer")
                || (firing(LOW_THROTTLED, &["hot", "burst"]) && x.label("end") != "local")
                || firing(
                    THERMAL,
                    &["cool", "blamer", "hot-peer", "cool-peer", "late-peer"],
                )
                || (x.labels["alertname"] == "BoltwatchAgentDown"
                    && !["hot", "hot-end", "dead-peer"].contains(&x.label("node")))
                || (x.receiver != PAGER && x.receiver != CHAT)
                || x.label("cluster") != super::stack::CLUSTER
        })
        .collect()
}
