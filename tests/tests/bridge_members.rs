//! Peers behind one bridge, on the namespace test bed: node 0 has a bridge
//! `br0` whose two member veths (`tb1`, `tb2`) are the cables to nodes 1
//! and 2, all three on one subnet, as three Mac minis on `bridge0` are.
//! Taking one member down must be a carrier outage of the peer behind it
//! only, stamped with the link event and naming the member (in the record
//! and on `/metrics`), while the other peer's probes go on being answered.
//!
//! Needs root and iproute2; without them it fails, it never skips.

use std::time::Duration;

use boltwatch_tests::bridged::{addr, bridge_bed};
use boltwatch_tests::cluster::{node_name, now_unix_ns, REFLECTOR_PORT};
use boltwatch_tests::procs::{bin, sample, wait_for, Collector, Proc};
use boltwatch_tests::TestBed;
use serde_json::Value;

fn start_agent(bed: &TestBed, dir: &std::path::Path, collector: &Collector, i: usize) -> Proc {
    let node = bed.node(i);
    let mut args: Vec<String> = vec![
        "run".into(),
        "--node".into(),
        node_name(i),
        "--collector".into(),
        format!("http://{}:{}", node.host_addr, collector.grpc.port()),
        "--listen".into(),
        format!("0.0.0.0:{REFLECTOR_PORT}"),
        "--probe-interval".into(),
        "20ms".into(),
        "--no-services".into(),
        "--no-bandwidth".into(),
        "--spool-dir".into(),
        dir.join(format!("spool-{}", node_name(i)))
            .display()
            .to_string(),
    ];
    let peers: Vec<usize> = if i == 0 { vec![1, 2] } else { vec![0] };
    for j in peers {
        args.push("--peer".into());
        args.push(format!("{}={}:{REFLECTOR_PORT}", node_name(j), addr(j)));
    }
    let exe = bin("boltwatch-agent");
    let cmd = bed.exec(i, &exe.to_string_lossy(), &args).unwrap();
    Proc::spawn(
        &format!("agent {}", node_name(i)),
        cmd,
        dir.join(format!("agent-{}.log", node_name(i))),
    )
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

fn outages(c: &Collector, since: u64) -> Vec<Value> {
    let path = format!("/api/v1/outages?node=n0&since={since}");
    c.json(&path)["outages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn received(c: &Collector, peer: usize) -> f64 {
    sample(
        &c.metrics(),
        "boltwatch_probe_received_total",
        &[("node", "n0"), ("peer", &node_name(peer))],
    )
    .unwrap_or(0.0)
}

#[test]
fn a_member_losing_carrier_is_an_outage_of_the_peer_behind_it_only() {
    let dir = tempfile::tempdir().unwrap();
    let bed = bridge_bed();
    let collector = Collector::for_bed(dir.path());
    let agents: Vec<Proc> = (0..3)
        .map(|i| start_agent(&bed, dir.path(), &collector, i))
        .collect();
    let logs = || {
        agents
            .iter()
            .map(|a| format!("--- {}\n{}", a.name, a.log_text()))
            .collect::<String>()
    };
    wait_for("n0 probing both peers", Duration::from_secs(60), || {
        received(&collector, 1) >= 10.0 && received(&collector, 2) >= 10.0
    });
    // The watcher has mapped both peers to their members.
    wait_for(
        "both peers mapped to a port",
        Duration::from_secs(20),
        || {
            let log = agents[0].log_text();
            ["port=tb1", "port=tb2"].iter().all(|p| log.contains(p))
        },
    );
    let begin = now_unix_ns();
    let down_before = now_unix_ns();
    bed.set_link(0, "tb1", false).unwrap();
    let down_after = now_unix_ns();
    // n2's probes never stop: its answered count rises through the drop.
    let mut last = received(&collector, 2);
    for k in 0..4 {
        let before = last;
        wait_for(
            &format!("n2's answered probes rising ({k})"),
            Duration::from_secs(10),
            || {
                last = received(&collector, 2);
                last >= before + 20.0
            },
        );
    }
    wait_for("n1's carrier outage open", Duration::from_secs(20), || {
        outages(&collector, begin).iter().any(|o| o["peer"] == "n1")
    });
    let up_before = now_unix_ns();
    bed.set_link(0, "tb1", true).unwrap();
    wait_for("n1's outage ended", Duration::from_secs(30), || {
        outages(&collector, begin)
            .iter()
            .any(|o| o["peer"] == "n1" && !o["end_unix_ns"].is_null())
    });
    check_records(
        &collector,
        begin,
        (down_before, down_after, up_before),
        &logs(),
    );
}

/// After the drop of tb1 and its return: one carrier outage of n1 naming
/// tb1, stamped with tb1's link event between the down and up commands;
/// none of n2; and `/metrics` counting it under tb1.
fn check_records(collector: &Collector, begin: u64, times: (u64, u64, u64), logs: &str) {
    let (down_before, down_after, up_before) = times;
    let all = outages(collector, begin);
    let n2: Vec<&Value> = all.iter().filter(|o| o["peer"] == "n2").collect();
    assert!(n2.is_empty(), "n2 had outages: {n2:#?}\n{logs}");
    let n1: Vec<&Value> = all.iter().filter(|o| o["peer"] == "n1").collect();
    assert_eq!(n1.len(), 1, "one outage of n1: {all:#?}\n{logs}");
    let o = n1[0];
    assert_eq!(o["cause"], "carrier", "{o}");
    assert_eq!(o["interface"], "tb1", "the record names the member: {o}");
    // Stamped with the link event: after the down command, before the up.
    let start = u(&o["start_unix_ns"]);
    assert!(
        start >= down_before && start <= up_before,
        "start {start} outside [{down_before}, {up_before}] (down took until {down_after})"
    );
    // The member's own link event carries that same time.
    let events = collector.json("/api/v1/records?node=n0&kind=link_event&limit=100000");
    let tb1_down = events["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            let p = &r["payload"];
            p["interface"] == "tb1" && p["carrier"] == false && u(&r["unix_ns"]) >= begin
        })
        .map(|r| u(&r["unix_ns"]))
        .collect::<Vec<_>>();
    assert_eq!(tb1_down, vec![start], "{events}");
    // /metrics names the member too, and only for n1.
    let m = collector.metrics();
    let carrier = |peer: &str, interface: &str| {
        sample(
            &m,
            "boltwatch_carrier_outages_total",
            &[("node", "n0"), ("peer", peer), ("interface", interface)],
        )
    };
    assert_eq!(carrier("n1", "tb1"), Some(1.0), "{m}");
    assert_eq!(carrier("n1", "br0"), None, "{m}");
    assert_eq!(carrier("n2", "tb2"), None, "{m}");
}
