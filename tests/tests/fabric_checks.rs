//! The fabric checks on the bed: node 0 bridges its two cables (`br0`
//! over `tb1` and `tb2`, as a Mac mini's Thunderbolt Bridge does) and a
//! real agent there probes nodes 1 and 2 through it. The agent's
//! `sysfs_root` is a fixture whose `class/net` links to the namespace's
//! own sysfs (so bridges, members and carrier are the kernel's) and whose
//! `class/infiniband` holds a soft-RoCE device paired with `br0`, whose
//! port state the test rewrites (no RDMA device can run here).
//!
//! What it shows, on the agent's own `/metrics` and on the collector:
//! - a bridge across two cabled members fails `bridge_single_port`;
//!   taking one member's carrier away makes it pass;
//! - a default route through `br0` fails `no_default_route`, and passes
//!   again once the route is deleted;
//! - the RDMA port's state is `boltwatch_rdma_port_up`, and `rdma_ready`
//!   follows it.
//!
//! Needs root and iproute2; without them it fails, it never skips. Every
//! wait is bounded and fails with the last scrape; the bed and the fixture
//! are removed on drop, also when the test fails.

use std::path::Path;
use std::time::Duration;

use boltwatch_tests::bridged::{addr, bridge_bed};
use boltwatch_tests::cluster::{agent_from_config, REFLECTOR_PORT};
use boltwatch_tests::procs::{http_get, sample, Collector, Proc};
use boltwatch_tests::{SysfsFixture, TestBed};

/// Upper bound on any one wait; reaching it is a failure, not a figure.
const WAIT: Duration = Duration::from_secs(60);
/// The agent's `/metrics` port inside its namespace.
const METRICS_PORT: u16 = 9473;
/// The fixture's RDMA port state file.
const RXE_STATE: &str = "class/infiniband/rxe0/ports/1/state";

/// `class/net` of node 0 linked to its real sysfs, and an RDMA device
/// `rxe0` paired with `br0`.
fn fixture(bed: &TestBed) -> SysfsFixture {
    let f = SysfsFixture::new().unwrap();
    let names = bed.run(0, "ls", &["/sys/class/net"]).unwrap();
    for name in names.split_whitespace() {
        let at = f.path(&format!("class/net/{name}"));
        std::os::unix::fs::symlink(format!("/sys/class/net/{name}"), &at)
            .unwrap_or_else(|e| panic!("linking {}: {e}", at.display()));
    }
    f.write(RXE_STATE, "4: ACTIVE\n").unwrap();
    f.write("class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0", "br0\n")
        .unwrap();
    f
}

fn start_agent(bed: &TestBed, dir: &Path, collector: &Collector, sysfs: &SysfsFixture) -> Proc {
    let cfg = format!(
        "collector = \"http://{host}:{grpc}\"\nlisten = \"0.0.0.0:{REFLECTOR_PORT}\"\n\
         metrics_listen = \"0.0.0.0:{METRICS_PORT}\"\nsysfs_root = \"{sysfs}\"\n\
         [fabric]\ncheck_interval = \"1s\"\n\
         [services]\ntcp = []\n[bandwidth]\nenabled = false\n\
         [peers]\nn1 = \"{p1}:{REFLECTOR_PORT}\"\nn2 = \"{p2}:{REFLECTOR_PORT}\"\n",
        host = bed.node(0).host_addr,
        grpc = collector.grpc.port(),
        sysfs = sysfs.root().display(),
        p1 = addr(1),
        p2 = addr(2),
    );
    agent_from_config(bed, 0, "n0", dir, &cfg)
}

/// `boltwatch_fabric_check_ok` of `check` on `interface` in `metrics`.
fn check(metrics: &str, check: &str, interface: &str) -> Option<f64> {
    sample(
        metrics,
        "boltwatch_fabric_check_ok",
        &[("node", "n0"), ("check", check), ("interface", interface)],
    )
}

fn rdma_up(metrics: &str) -> Option<f64> {
    sample(
        metrics,
        "boltwatch_rdma_port_up",
        &[("node", "n0"), ("device", "rxe0"), ("interface", "br0")],
    )
}

/// The fabric lines of a scrape, for failure messages.
fn fabric_lines(metrics: &str) -> String {
    metrics
        .lines()
        .filter(|l| l.starts_with("boltwatch_fabric_") || l.starts_with("boltwatch_rdma_"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until both the agent's scrape and the collector's satisfy
/// `want`; on giving up, fails with both scrapes' fabric lines and the
/// agent's log.
fn wait_both(agent: (&str, &Proc), collector: &Collector, what: &str, want: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let a = http_get(agent.0).map(|(_, b)| b).unwrap_or_default();
        let c = collector.metrics();
        if want(&a) && want(&c) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "gave up waiting for {what} after {WAIT:?}\nagent:\n{}\ncollector:\n{}\nlog:\n{}",
            fabric_lines(&a),
            fabric_lines(&c),
            agent.1.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn bridge_default_route_and_rdma_checks_follow_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let bed = bridge_bed();
    let collector = Collector::for_bed(dir.path());
    let sysfs = fixture(&bed);
    let agent = start_agent(&bed, dir.path(), &collector, &sysfs);
    let url = format!("http://{}:{METRICS_PORT}/metrics", bed.node(0).mgmt_addr);
    let at = (url.as_str(), &agent);
    // Both members have carrier: the bridge forwards between two cables.
    wait_both(at, &collector, "the bridge across two ports failing", |m| {
        check(m, "bridge_single_port", "br0") == Some(0.0)
            && check(m, "no_default_route", "br0") == Some(1.0)
            && rdma_up(m) == Some(1.0)
            && check(m, "rdma_ready", "") == Some(1.0)
    });
    // One cable out: one member with carrier passes.
    bed.set_link(0, "tb2", false).unwrap();
    wait_both(at, &collector, "one member left", |m| {
        check(m, "bridge_single_port", "br0") == Some(1.0)
    });
    // A default route over the cable (a DHCP lease's doing, on a Mac).
    bed.run(
        0,
        "ip",
        &["route", "add", "default", "via", &addr(1), "dev", "br0"],
    )
    .unwrap_or_else(|e| panic!("adding the default route: {e}"));
    wait_both(at, &collector, "the default route over br0 failing", |m| {
        check(m, "no_default_route", "br0") == Some(0.0)
    });
    bed.run(0, "ip", &["route", "del", "default", "dev", "br0"])
        .unwrap();
    wait_both(at, &collector, "the default route gone", |m| {
        check(m, "no_default_route", "br0") == Some(1.0)
    });
    // The RDMA port goes down: the port and readiness follow.
    sysfs.write(RXE_STATE, "1: DOWN\n").unwrap();
    wait_both(at, &collector, "the RDMA port down", |m| {
        rdma_up(m) == Some(0.0) && check(m, "rdma_ready", "") == Some(0.0)
    });
}
