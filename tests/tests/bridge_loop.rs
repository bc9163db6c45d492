//! A loop through bridges, on the namespace test bed: nodes 0 and 1 each
//! have a bridge `brl` with spanning tree off, joined by two veth pairs
//! (the bed's link and a second pair), as Thunderbolt Bridge on two Macs
//! joined by two cables. One broadcast then circulates for ever; every
//! veth's egress is shaped with `tbf` to 2 Mbit/s so the storm stays
//! bounded (a few thousand small frames a second). The agent on node 0
//! must raise `boltwatch_bridge_loop_suspected` on its own `/metrics`
//! during the storm and lower it once one pair is taken down (which ends
//! the loop), and the collector must store both verdicts as link events
//! and serve the last one.
//!
//! Namespaces, veths and their qdiscs go with the bed when it drops, also
//! when an assertion fails. Needs root, iproute2 and `ping`; without them
//! it fails, it never skips.

use std::path::Path;
use std::time::Duration;

use boltwatch_tests::cluster::agent_from_config;
use boltwatch_tests::procs::{http_get, sample, wait_for, Collector, Proc};
use boltwatch_tests::TestBed;

const METRICS_PORT: u16 = 9477;
/// Long enough for a 1 Hz detector that raises after two polls and clears
/// ten seconds after the last MAC move plus five clean polls, on a busy
/// 2-core machine.
const WAIT: Duration = Duration::from_secs(60);
/// The second pair's ends, in node 0 and node 1.
const SECOND: [&str; 2] = ["lpa2", "lpb2"];
/// Egress shaping of every member: the storm's bound.
const RATE: &str = "2mbit";

/// Makes each node's bed link and a second veth pair members of a
/// spanning-tree-less bridge `brl`, members shaped, IPv6 off (its
/// neighbour discovery would seed the storm before the test does).
fn loop_bed() -> TestBed {
    let bed = TestBed::new(2).unwrap_or_else(|e| panic!("cannot build the test bed: {e}"));
    let run = |node: usize, prog: &str, args: &[&str]| {
        bed.run(node, prog, args)
            .unwrap_or_else(|e| panic!("node {node}: {prog} {args:?}: {e}"))
    };
    for node in 0..2 {
        for key in ["all", "default"] {
            let k = format!("net.ipv6.conf.{key}.disable_ipv6=1");
            run(node, "sysctl", &["-qw", &k]);
        }
    }
    let peer_ns = bed.node(1).netns.clone();
    run(
        0,
        "ip",
        &[
            "link", "add", SECOND[0], "type", "veth", "peer", "name", SECOND[1], "netns", &peer_ns,
        ],
    );
    for (node, second) in SECOND.into_iter().enumerate() {
        run(
            node,
            "ip",
            &["link", "add", "brl", "type", "bridge", "stp_state", "0"],
        );
        let first = bed.link_if(node, 1 - node).unwrap().to_owned();
        run(node, "ip", &["addr", "flush", "dev", &first]);
        for member in [first.as_str(), second] {
            run(node, "ip", &["link", "set", member, "master", "brl"]);
            run(node, "ip", &["link", "set", member, "up"]);
            bed.rate(node, member, RATE)
                .unwrap_or_else(|e| panic!("node {node}: tbf on {member}: {e}"));
        }
        run(node, "ip", &["link", "set", "brl", "up"]);
    }
    bed
}

fn start_agent(bed: &TestBed, dir: &Path, collector: &Collector) -> Proc {
    // No peers: the link watcher then watches every interface, `brl`
    // among them, and no probe's ARP seeds the storm early.
    let cfg = format!(
        "collector = \"http://{host}:{grpc}\"\nlisten = \"0.0.0.0:8620\"\n\
         metrics_listen = \"0.0.0.0:{METRICS_PORT}\"\n\
         [services]\ntcp = []\n[bandwidth]\nenabled = false\n",
        host = bed.node(0).host_addr,
        grpc = collector.grpc.port(),
    );
    agent_from_config(bed, 0, "lp", dir, &cfg)
}

/// One ARP broadcast from `node`'s bridge (to an address nobody holds):
/// the seed. `ping` fails, as no one answers; only the frame matters.
fn seed(bed: &TestBed, node: usize) {
    let own = format!("10.77.230.{}/24", node + 1);
    bed.run(node, "ip", &["addr", "add", &own, "dev", "brl"])
        .unwrap_or_else(|e| panic!("node {node}: address on brl: {e}"));
    let status = bed
        .exec(node, "ping", ["-c", "1", "-W", "1", "10.77.230.99"])
        .unwrap()
        .status()
        .unwrap_or_else(|e| panic!("node {node}: ping: {e}"));
    // 1: no answer, as intended; anything else is a broken tool.
    assert_eq!(status.code(), Some(1), "ping from node {node}: {status}");
}

fn suspected(url: &str) -> Option<f64> {
    let body = http_get(url).map(|(_, b)| b).ok()?;
    let labels = [("node", "lp"), ("interface", "brl")];
    sample(&body, "boltwatch_bridge_loop_suspected", &labels)
}

/// The bridge loop verdicts the collector stored, in order.
fn stored_verdicts(collector: &Collector) -> Vec<bool> {
    let records = collector.json("/api/v1/records?node=lp&kind=link_event&limit=1000");
    records["records"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| &r["payload"])
                .filter(|p| p["source"] == "LINK_EVENT_SOURCE_BRIDGE_LOOP")
                .filter(|p| p["interface"] == "brl")
                .filter_map(|p| p["bridge_loop"]["suspected"].as_bool())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_storm_through_two_bridges_raises_the_flag_and_cutting_one_pair_lowers_it() {
    let dir = tempfile::tempdir().unwrap();
    let bed = loop_bed();
    let collector = Collector::for_bed(dir.path());
    let agent = start_agent(&bed, dir.path(), &collector);
    let url = format!("http://{}:{METRICS_PORT}/metrics", bed.node(0).mgmt_addr);
    let log = || agent.log_text();

    wait_for("the first verdict on brl: no loop", WAIT, || {
        suspected(&url) == Some(0.0)
    });
    // Both ends send one broadcast each: frames go round both ways.
    seed(&bed, 0);
    seed(&bed, 1);
    wait_for("the loop suspected on brl", WAIT, || {
        suspected(&url) == Some(1.0)
    });
    // The storm is real and bounded: frames keep arriving through the
    // shaped members.
    let qdisc = bed.qdisc_show(0, SECOND[0]).unwrap();
    assert!(qdisc.contains("tbf"), "{qdisc}");

    bed.set_link(0, SECOND[0], false).unwrap();
    wait_for("the loop cleared on brl", WAIT, || {
        suspected(&url) == Some(0.0)
    });
    wait_for("both verdicts stored by the collector", WAIT, || {
        let v = stored_verdicts(&collector);
        let served = sample(
            &collector.metrics(),
            "boltwatch_bridge_loop_suspected",
            &[("node", "lp"), ("interface", "brl")],
        );
        v.contains(&true) && v.last() == Some(&false) && served == Some(0.0)
    });
    let v = stored_verdicts(&collector);
    assert_eq!(v, vec![false, true, false], "{v:?}\n{}", log());
}
