//! Late detection at the fast profile (issue 27 §1), for real on the
//! namespace bed, whose veth carrier changes are batched by linkwatch as
//! thunderbolt-net's are (the default bed): two agents probe each other at
//! 100 Hz with late probes on (`probe_late_floor = "5ms"`).
//!
//! 1. No false outage: a stock iperf3 test in both directions at line rate,
//!    the line being a tbf shaper on each end (a FIFO; iperf3's window fits
//!    it, see [`WINDOW`]), opens no outage
//!    on either agent, while the shapers are seen overlimit (the shaper, not
//!    the CPU, was the limit) and the probes keep being answered.
//! 2. Then, in the same run, a real nftables drop of node 1's reflector
//!    input with the carrier up IS a probe-loss outage of node 0: the first
//!    half cannot pass by detecting nothing.
//!
//! Needs root, `ip`, `tc`, `nft` and `iperf3`; without them it fails, it
//! never skips. About 60-90 s.

use std::process::Stdio;
use std::time::Duration;

use boltwatch_tests::cluster::{node_name, now_unix_ns, AgentOptions, Cluster, REFLECTOR_PORT};
use boltwatch_tests::cmd::find_tool;
use boltwatch_tests::procs::wait_for;
use boltwatch_tests::BedOptions;
use serde_json::Value;

/// How long the bandwidth test runs.
const LOAD_SECONDS: u64 = 45;

/// The line: each end's egress shaper.
const LINE_RATE: &str = "1gbit";

/// iperf3's window per stream (the kernel doubles it): two streams' worth
/// (256 kB) fits the
/// shaper's FIFO, so TCP does not fill it until it tail-drops. This bed's
/// kernel has no fq_codel, which on a real host keeps the probes, a sparse
/// flow, ahead of the bulk; under a FIFO that TCP overflows, runs of probes
/// are really lost, and a detector this fast says so.
const WINDOW: &str = "64K";

fn agents() -> Cluster {
    Cluster::start(
        2,
        &AgentOptions {
            probe_interval: "fast".into(),
            config: "probe_late_floor = \"5ms\"\n".into(),
            // The agents' own bandwidth tests stay out: the load is iperf3's.
            extra: vec![vec!["--no-bandwidth".into()]; 2],
            bed: BedOptions::default(),
        },
    )
}

/// A tbf shaper at [`LINE_RATE`] on `node`'s end of the link, its FIFO
/// bounded at 5 ms (about 880 kB).
fn shape(c: &Cluster, node: usize, iface: &str) {
    let tc = find_tool("tc", "iproute2").unwrap_or_else(|e| panic!("{e}"));
    let tbf = [
        "qdisc", "replace", "dev", iface, "root", "tbf", "rate", LINE_RATE, "burst", "256kb",
        "latency", "5ms",
    ];
    c.bed.run(node, tc.to_str().unwrap(), &tbf).unwrap();
}

/// The tbf's overlimits counter: how often a packet had to wait for
/// tokens (the shaper was the bottleneck).
fn overlimits(c: &Cluster, node: usize, iface: &str) -> u64 {
    let tc = find_tool("tc", "iproute2").unwrap_or_else(|e| panic!("{e}"));
    let out = c
        .bed
        .run(
            node,
            tc.to_str().unwrap(),
            &["-s", "qdisc", "show", "dev", iface],
        )
        .unwrap();
    out.split_whitespace()
        .skip_while(|w| *w != "overlimits")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no overlimits in {out}"))
}

/// `iperf3 --bidir` from node 0 to a server in node 1 for
/// [`LOAD_SECONDS`]; returns the bits per second received each way.
fn line_rate_load(c: &Cluster) -> (f64, f64) {
    let iperf3 = find_tool("iperf3", "iperf3").unwrap_or_else(|e| panic!("{e}"));
    let iperf3 = iperf3.to_str().unwrap();
    let server_addr = c.bed.link_addr(1, 0).unwrap().to_string();
    let mut server = c
        .bed
        .exec(1, iperf3, ["-s", "-1", "-p", "5299", "-B", &server_addr])
        .unwrap();
    let mut server = server
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 server");
    std::thread::sleep(Duration::from_millis(500));
    let t = LOAD_SECONDS.to_string();
    let out = c.bed.run(
        0,
        iperf3,
        &[
            "-c",
            &server_addr,
            "-p",
            "5299",
            "-t",
            &t,
            "-P",
            "2",
            "-w",
            WINDOW,
            "--bidir",
            "-J",
        ],
    );
    let _ = server.kill();
    let _ = server.wait();
    let json: Value = serde_json::from_str(&out.unwrap()).expect("iperf3 -J output");
    let end = &json["end"];
    let bps = |k: &str| end[k]["bits_per_second"].as_f64().unwrap_or(0.0);
    (bps("sum_received"), bps("sum_received_bidir_reverse"))
}

fn metric(c: &Cluster, name: &str, node: usize, peer: usize) -> f64 {
    c.pair_metric(name, node, peer).unwrap_or(0.0)
}

fn link_outages(c: &Cluster, node: usize, since: u64) -> Vec<Value> {
    c.outages(node, since)
        .into_iter()
        .filter(|o| o["cause"] != "service")
        .collect()
}

#[test]
fn no_false_outage_at_line_rate_and_a_real_drop_is_seen() {
    let c = agents();
    let if0 = c.bed.link_if(0, 1).unwrap().to_owned();
    let if1 = c.bed.link_if(1, 0).unwrap().to_owned();
    shape(&c, 0, &if0);
    shape(&c, 1, &if1);
    // The late bound leaves the timeout after 32 replies; let it learn the
    // idle link over a full history (512 replies at 100 Hz).
    std::thread::sleep(Duration::from_secs(6));
    let begin = now_unix_ns();
    let received = |n: usize, p: usize| metric(&c, "boltwatch_probe_received_total", n, p);
    let before = (received(0, 1), received(1, 0));
    let over = (overlimits(&c, 0, &if0), overlimits(&c, 1, &if1));

    let (forward, reverse) = line_rate_load(&c);
    eprintln!(
        "iperf3 --bidir over {LINE_RATE} shapers: {:.2} / {:.2} Gbit/s",
        forward / 1e9,
        reverse / 1e9
    );
    assert!(
        overlimits(&c, 0, &if0) > over.0 && overlimits(&c, 1, &if1) > over.1,
        "the shapers never held a packet back: not at line rate"
    );
    assert!(forward > 0.0 && reverse > 0.0, "iperf3 moved nothing");
    // The collector has every record up to now once the agents ship them.
    wait_for(
        "records of the load shipped",
        Duration::from_secs(20),
        || {
            received(0, 1) >= before.0 + (LOAD_SECONDS * 100 / 2) as f64
                && received(1, 0) >= before.1 + (LOAD_SECONDS * 100 / 2) as f64
        },
    );
    let tc = find_tool("tc", "iproute2").unwrap_or_else(|e| panic!("{e}"));
    let qdiscs = [(0, &if0), (1, &if1)].map(|(n, i)| {
        c.bed
            .run(n, tc.to_str().unwrap(), &["-s", "qdisc", "show", "dev", i])
            .unwrap()
    });
    eprintln!("shapers after the load:\n{}\n{}", qdiscs[0], qdiscs[1]);
    for n in 0..2 {
        let o = link_outages(&c, n, begin);
        assert!(
            o.is_empty(),
            "{} opened outages under the load: {o:#?}\nshapers:\n{}\n{}\n{}",
            node_name(n),
            qdiscs[0],
            qdiscs[1],
            c.logs()
        );
    }

    // The same agents, a path that dies with the carrier up.
    let drop_at = now_unix_ns();
    c.bed.block_udp(1, &if1, REFLECTOR_PORT).unwrap();
    wait_for("n0's probe-loss outage", Duration::from_secs(20), || {
        !link_outages(&c, 0, drop_at).is_empty()
    });
    c.bed.unblock_udp(1, &if1).unwrap();
    wait_for("n0's outage ended", Duration::from_secs(20), || {
        link_outages(&c, 0, drop_at)
            .iter()
            .all(|o| !o["end_unix_ns"].is_null())
    });
    let o = link_outages(&c, 0, drop_at);
    assert_eq!(o.len(), 1, "one outage for one drop: {o:#?}");
    assert_eq!(o[0]["cause"], "probe_loss", "{o:#?}");
    assert_eq!(o[0]["peer"], "n1", "{o:#?}");
    assert!(
        link_outages(&c, 1, drop_at).is_empty(),
        "n1's probes of n0 are not dropped (the rule takes n1's reflector input only)"
    );
}
