//! MTU on the namespace test bed: three nodes, node 0 in the middle. Its
//! cable to node 1 has ends of MTU 9000 (node 0) and 1500 (node 1), as a
//! Thunderbolt link whose one end was never raised to jumbo frames; its
//! cable to node 2 is 9000 at both ends. The kernel drops on a veth what
//! the receiving end cannot take, as a real link does. An agent runs in
//! each node, all feeding one collector.
//!
//! What it shows:
//! - each agent's in-band path MTU towards a peer (on the collector's
//!   `/metrics`, and on node 0's own) is what the two ends' MTUs let
//!   through both ways, computed from the MTUs the bed really has (read
//!   back from sysfs), not a number written here: the narrower end's over
//!   the mismatched cable, 9000 over the matched one;
//! - the collector, from both agents' Hellos and the paths, sets
//!   `boltwatch_link_mtu_mismatch` to 1 for both directions of the
//!   mismatched link and 0 for the matched one.
//!
//! Needs root and iproute2; without them it fails, it never skips. Every
//! wait is bounded and fails with the last scrape; the bed (namespaces,
//! veths, the agents in them) is removed on drop, also when the test fails.

use std::path::Path;
use std::time::{Duration, Instant};

use boltwatch_tests::cluster::{agent_from_config, node_name, REFLECTOR_PORT};
use boltwatch_tests::procs::{http_get, sample, Collector, Proc};
use boltwatch_tests::TestBed;

/// Upper bound on any one wait; reaching it is a failure, not a figure.
const WAIT: Duration = Duration::from_secs(120);
/// Node 0's own `/metrics` port inside its namespace.
const METRICS_PORT: u16 = 9473;
/// The MTU node 1's end of its cable to node 0 is lowered to (Ethernet's).
const NARROW: &str = "1500";

/// A 3-node mesh (every cable's ends at the bed's jumbo
/// [`boltwatch_tests::bed::LINK_MTU`]) whose node 1 end towards node 0 is
/// lowered to [`NARROW`]. (The 1-2 cable is unused.)
fn mtu_bed() -> TestBed {
    let bed = TestBed::new(3).unwrap_or_else(|e| panic!("cannot build the test bed: {e}"));
    let dev = bed.link_if(1, 0).unwrap().to_owned();
    bed.run(1, "ip", &["link", "set", &dev, "mtu", NARROW])
        .unwrap_or_else(|e| panic!("node 1: mtu of {dev}: {e}"));
    bed
}

/// The MTU of `node`'s interface towards `peer`, as the kernel has it.
fn mtu(bed: &TestBed, node: usize, peer: usize) -> u32 {
    let dev = bed.link_if(node, peer).unwrap();
    let text = bed
        .read_sysfs(node, &format!("class/net/{dev}/mtu"))
        .unwrap();
    text.trim().parse().unwrap()
}

fn start_agent(bed: &TestBed, dir: &Path, collector: &Collector, i: usize) -> Proc {
    let peers: Vec<usize> = if i == 0 { vec![1, 2] } else { vec![0] };
    let peer_lines: String = peers
        .iter()
        .map(|&j| {
            let addr = bed.link_addr(j, i).unwrap();
            format!("{} = \"{addr}:{REFLECTOR_PORT}\"\n", node_name(j))
        })
        .collect();
    // A short interval: a discovery that ran before the peer's reflector
    // was up is repeated soon. A short probe timeout: each size that does
    // not return costs TRIES timeouts.
    let cfg = format!(
        "collector = \"http://{host}:{grpc}\"\nlisten = \"0.0.0.0:{REFLECTOR_PORT}\"\n\
         metrics_listen = \"0.0.0.0:{METRICS_PORT}\"\n\
         probe_interval = \"20ms\"\nprobe_timeout = \"200ms\"\n\
         path_mtu_interval = \"3s\"\n\
         [services]\ntcp = []\n[bandwidth]\nenabled = false\n[peers]\n{peer_lines}",
        host = bed.node(i).host_addr,
        grpc = collector.grpc.port(),
    );
    agent_from_config(bed, i, &node_name(i), dir, &cfg)
}

/// The link `node` -> `peer` as one scrape shows it.
#[derive(Debug, Clone, PartialEq)]
struct Link {
    path_mtu: Option<f64>,
    mismatch: Option<f64>,
}

fn link(metrics: &str, node: usize, peer: usize) -> Link {
    let (n, p) = (node_name(node), node_name(peer));
    let np = [("node", n.as_str()), ("peer", p.as_str())];
    Link {
        path_mtu: sample(metrics, "boltwatch_path_mtu_bytes", &np),
        mismatch: sample(metrics, "boltwatch_link_mtu_mismatch", &np),
    }
}

#[test]
fn mismatched_ends_show_the_narrow_path_mtu_and_a_mismatch_matched_ends_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let collector = Collector::for_bed(dir.path());
    let bed = mtu_bed();
    let agents: Vec<Proc> = (0..3)
        .map(|i| start_agent(&bed, dir.path(), &collector, i))
        .collect();
    let logs = || {
        agents
            .iter()
            .map(|a| format!("--- {}\n{}", a.name, a.log_text()))
            .collect::<String>()
    };
    // What the kernel lets through both ways: the narrower end.
    let through = |a: usize, b: usize| f64::from(mtu(&bed, a, b).min(mtu(&bed, b, a)));
    let (narrow, wide) = (through(0, 1), through(0, 2));
    assert!(
        narrow < wide,
        "the bed has a mismatched ({narrow}) and a matched ({wide}) cable"
    );
    let want = [
        ((0, 1), narrow, 1.0),
        ((1, 0), narrow, 1.0),
        ((0, 2), wide, 0.0),
        ((2, 0), wide, 0.0),
    ];
    let deadline = Instant::now() + WAIT;
    loop {
        let m = collector.metrics();
        let seen: Vec<Link> = want.iter().map(|&((n, p), ..)| link(&m, n, p)).collect();
        let expected: Vec<Link> = want
            .iter()
            .map(|&(_, mtu, bad)| Link {
                path_mtu: Some(mtu),
                mismatch: Some(bad),
            })
            .collect();
        if seen == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "links 0-1, 1-0, 0-2, 2-0 at the collector: {seen:?}, want {expected:?}\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Node 0's own scrape has the same path MTUs (it knows only its own
    // ends, and its paths: the narrow path is below its 9000 end).
    let url = format!("http://{}:{METRICS_PORT}/metrics", bed.node(0).mgmt_addr);
    let own = http_get(&url).map(|(_, b)| b).unwrap_or_default();
    assert_eq!(
        link(&own, 0, 1),
        Link {
            path_mtu: Some(narrow),
            mismatch: Some(1.0)
        },
        "{own}\n{}",
        logs()
    );
    assert_eq!(
        link(&own, 0, 2),
        Link {
            path_mtu: Some(wide),
            mismatch: Some(0.0)
        },
        "{own}"
    );
    // The path MTU rides the path records, as the API shows them.
    let records = collector.json("/api/v1/records?node=n0&kind=path&limit=100000");
    let carried =
        records["records"].as_array().unwrap().iter().any(|r| {
            r["payload"]["peer"] == "n1" && r["payload"]["path_mtu"].as_f64() == Some(narrow)
        });
    assert!(carried, "{records}\n{}", logs());
}
