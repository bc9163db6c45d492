//! Probe loss: 5% nftables loss is reported as 5% and matches the rule's
//! drop counter; a dead reflector behind a live carrier is a probe-loss
//! outage from the first lost probe.

use std::time::Duration;

use boltwatch_tests::cluster::{now_unix_ns, AgentOptions, Cluster, REFLECTOR_PORT};
use boltwatch_tests::procs::wait_for;

use crate::support::{down_events, serial, u, MS};

/// Probes of a set of RTT windows.
#[derive(Debug, Default, Clone, Copy)]
struct Probes {
    sent: u64,
    lost: u64,
}

/// The probes of `node`'s RTT windows lying wholly in [from, to).
fn window_loss(c: &Cluster, node: usize, from: u64, to: u64) -> Probes {
    c.records(node, "rtt")
        .iter()
        .map(|r| &r["payload"])
        .filter(|p| {
            let s = u(&p["window_start_unix_ns"]);
            s >= from && s + u(&p["window_ns"]) <= to
        })
        .fold(Probes::default(), |t, p| Probes {
            sent: t.sent + u(&p["sent"]),
            lost: t.lost + u(&p["lost"]),
        })
}

fn lost_total(c: &Cluster) -> f64 {
    (0..2)
        .map(|n| {
            c.pair_metric("boltwatch_probe_lost_total", n, 1 - n)
                .unwrap_or(0.0)
        })
        .sum()
}

#[test]
fn five_percent_loss_is_reported_as_five_percent() {
    let _g = serial();
    const PROBES: u64 = 2_000;
    // No scheduled bandwidth test: the rule drops 5% of every packet on the
    // link, and a test's drops would be counted against the probes' losses.
    let opts = AgentOptions {
        probe_interval: "10ms".into(),
        extra: vec![vec!["--no-bandwidth".into()]; 2],
        ..Default::default()
    };
    let c = Cluster::start(2, &opts);
    let iface = c.bed.link_if(1, 0).unwrap().to_owned();
    let lost_before = lost_total(&c);
    // One rule on node 1's end of the cable: 5% of the IP packets coming in
    // from node 0 are dropped. That is node 0's probes on their way out and
    // the answers to node 1's probes on their way back, so each agent's
    // round trips see 5% loss, and each drop is one lost probe.
    c.bed.loss(1, &iface, 50).unwrap();
    let on = now_unix_ns();
    wait_for(
        "2,000 probes of each agent under loss",
        Duration::from_secs(120),
        || {
            let to = now_unix_ns();
            (0..2).all(|n| window_loss(&c, n, on, to).sent >= PROBES + 100)
        },
    );
    let off = now_unix_ns();
    let drops = c.bed.loss_drops(1, &iface).unwrap();
    c.bed.loss(1, &iface, 0).unwrap();
    for n in 0..2 {
        let Probes { sent, lost } = window_loss(&c, n, on, off);
        let pct = 100.0 * lost as f64 / sent as f64;
        eprintln!("node {n}: {lost} of {sent} probes lost = {pct:.2}% (5% injected)");
        assert!(
            sent >= PROBES,
            "node {n}: only {sent} probes in full windows"
        );
        assert!(
            (pct - 5.0).abs() <= 1.5,
            "node {n}: {pct:.2}% reported for 5%"
        );
    }
    // Cross-check with the rule's own counter: once the last windows are
    // settled (1 s window, 1 s timeout), the lost probes of both agents are
    // the packets the rule dropped. A drop between reading the counter and
    // replacing the rule is possible, hence the small allowance above.
    std::thread::sleep(Duration::from_secs(3));
    let mut lost = lost_total(&c) - lost_before;
    wait_for(
        "lost probe counts to settle",
        Duration::from_secs(10),
        || {
            std::thread::sleep(Duration::from_millis(1500));
            let now = lost_total(&c) - lost_before;
            let settled = now == lost;
            lost = now;
            settled
        },
    );
    eprintln!("nft dropped {drops}; agents lost {lost} probes in total");
    assert!(
        lost >= drops as f64 && lost <= drops as f64 + 3.0,
        "nft dropped {drops} packets but the agents lost {lost} probes"
    );
}

#[test]
fn dead_reflector_behind_live_carrier_is_a_probe_loss_outage() {
    let _g = serial();
    const INTERVAL_MS: u64 = 20;
    let c = Cluster::start(2, &AgentOptions::default());
    let iface = c.bed.link_if(1, 0).unwrap().to_owned();
    let begin = now_unix_ns();
    // Node 0's probes to node 1's reflector vanish; node 1's probes and
    // their answers (from the reflector port, not to it) still flow.
    let rule_before = now_unix_ns();
    c.bed.block_udp(1, &iface, REFLECTOR_PORT).unwrap();
    let rule_after = now_unix_ns();
    wait_for(
        "a probe-loss outage on node 0",
        Duration::from_secs(20),
        || !c.outages(0, begin).is_empty(),
    );
    std::thread::sleep(Duration::from_millis(1000));
    c.bed.unblock_udp(1, &iface).unwrap();
    wait_for("the outage to end", Duration::from_secs(20), || {
        c.outages(0, begin)
            .iter()
            .all(|o| !o["end_unix_ns"].is_null())
    });
    let outages = c.outages(0, begin);
    assert_eq!(outages.len(), 1, "{outages:#?}");
    let o = &outages[0];
    assert_eq!(o["cause"], "probe_loss");
    assert_eq!(o["peer"], "n1");
    let start = u(&o["start_unix_ns"]);
    let bound = 3 * INTERVAL_MS * MS + 50 * MS;
    // Its start is the send time of the first probe that went missing: no
    // earlier than one interval before the rule, no later than the bound.
    assert!(
        start + INTERVAL_MS * MS >= rule_before && start <= rule_after + bound,
        "start {start} vs rule in at {rule_before}..{rule_after}"
    );
    // When the agent recorded the start (the start record's own timestamp).
    let id = u(&o["outage_id"]);
    let start_record = c
        .records(0, "outage")
        .into_iter()
        .find(|r| u(&r["payload"]["outage_id"]) == id && r["payload"]["end_unix_ns"].is_null())
        .expect("the start record");
    let detected = u(&start_record["unix_ns"]);
    eprintln!(
        "rule in at +0 ms; outage start +{:.1} ms, detected +{:.1} ms (bound {} ms)",
        (start as f64 - rule_after as f64) / 1e6,
        (detected as f64 - rule_after as f64) / 1e6,
        bound / MS
    );
    // How soon it is known (a probe timeout after the k-th lost probe) is
    // a benchmark (bench/link-detect.sh), not a wall-clock assertion here.
    assert!(detected >= start, "recorded before it started");
    // The carrier never moved, and the other direction never broke.
    for n in 0..2 {
        let own = c.bed.link_if(n, 1 - n).unwrap().to_owned();
        assert!(down_events(&c, n, &own, begin).is_empty());
    }
    assert!(c.outages(1, begin).is_empty(), "{:#?}", c.outages(1, begin));
    assert_eq!(c.pair_metric("boltwatch_outages_total", 0, 1), Some(1.0));
    assert_eq!(c.pair_metric("boltwatch_outages_total", 1, 0), Some(0.0));
}
