//! Thunderbolt downshifts on the bed: a two-node namespace bed whose veth
//! stands in for the Thunderbolt netdev, and a real agent in node 0 whose
//! `sysfs_root` is a fixture tree. The fixture's `class/net` links every
//! interface to the namespace's own sysfs (`ip netns exec` mounts it at
//! `/sys`), except that the veth's directory also has a `device` link to a
//! fixture Thunderbolt service bound to `thunderbolt-net`, as the kernel
//! lays it out: so carrier, counters and link events are the veth's real
//! ones, and its lanes and lane speeds are the fixture XDomain's files,
//! which the test rewrites while the agent runs.
//!
//! What it shows, on the agent's own `/metrics` (`metrics_listen`) and on
//! a real collector fed by it (the agent probes node 1 through the port,
//! so the port is one of its interfaces, as in a cluster):
//! - a healthy TB4 link (2 + 2 lanes of 20 Gb/s) is not downshifted;
//! - one lane per direction is (below capability), with the lanes and
//!   the link speed following; restoring two lanes clears it;
//! - a port that ran 40 Gb/s lanes reports generation 5 in
//!   `boltwatch_link_info`, and dropping back to 20 Gb/s lanes is a
//!   downshift for it (it showed it is TB5), where it was not at first;
//! - carrier stays up throughout (the fabric events do not touch it);
//! - the collector stores the fabric link events and serves the same
//!   `boltwatch_link_downshifted`.
//!
//! Every wait is bounded and fails with the last scrape; nothing asserts
//! how long anything took. The bed (namespaces, veths, the agent in them)
//! and the fixture are removed on drop, also when the test fails.

use std::path::Path;
use std::time::Duration;

use boltwatch_tests::cluster::agent_from_config;
use boltwatch_tests::procs::{http_get, sample, wait_for, Collector, Proc};
use boltwatch_tests::{SysfsFixture, TestBed};

/// Upper bound on any one wait; reaching it is a failure, not a figure.
const WAIT: Duration = Duration::from_secs(90);
/// The agent's `/metrics` port inside its namespace.
const METRICS_PORT: u16 = 9472;
/// The fixture XDomain (remote host) directory, relative to the root.
const XDOMAIN: &str = "bus/thunderbolt/devices/0-1";

fn link(target: &str, at: &Path) {
    std::os::unix::fs::symlink(target, at)
        .unwrap_or_else(|e| panic!("linking {} -> {target}: {e}", at.display()));
}

/// The fixture root for `node`, whose interface `tb` becomes a
/// Thunderbolt port of a TB4 (`generation` 4) host router.
fn fixture(bed: &TestBed, node: usize, tb: &str) -> SysfsFixture {
    let f = SysfsFixture::new().unwrap();
    let ls = |dir: &str| -> Vec<String> {
        let out = bed.run(node, "ls", &[dir]).unwrap();
        out.split_whitespace().map(str::to_string).collect()
    };
    for name in ls("/sys/class/net") {
        if name != tb {
            link(
                &format!("/sys/class/net/{name}"),
                &f.path(&format!("class/net/{name}")),
            );
        }
    }
    let dir = f.path(&format!("class/net/{tb}"));
    std::fs::create_dir_all(&dir).unwrap();
    // `speed` stays out: thunderbolt-net has none (the veth says 10 Gb/s),
    // so the link speed is the fabric's.
    for entry in ls(&format!("/sys/class/net/{tb}")) {
        if entry != "device" && entry != "speed" {
            link(&format!("/sys/class/net/{tb}/{entry}"), &dir.join(&entry));
        }
    }
    link(
        "../../../bus/thunderbolt/devices/0-1.0",
        &dir.join("device"),
    );
    std::fs::create_dir_all(f.path("bus/thunderbolt/drivers/thunderbolt-net")).unwrap();
    std::fs::create_dir_all(f.path("bus/thunderbolt/devices/0-1.0")).unwrap();
    link(
        "../../drivers/thunderbolt-net",
        &f.path("bus/thunderbolt/devices/0-1.0/driver"),
    );
    f.write("bus/thunderbolt/devices/0-0/generation", "4")
        .unwrap();
    f.write(&format!("{XDOMAIN}/device_name"), "peer-b")
        .unwrap();
    f.write(
        &format!("{XDOMAIN}/unique_id"),
        "d1a2b3c4-0000-0000-ffff-ffffffffffff",
    )
    .unwrap();
    set_lanes(&f, 2, "20.0 Gb/s");
    f
}

/// Writes the XDomain's lanes and per-lane speed, both directions.
fn set_lanes(f: &SysfsFixture, lanes: u32, speed: &str) {
    for dir in ["rx", "tx"] {
        f.write(&format!("{XDOMAIN}/{dir}_lanes"), &lanes.to_string())
            .unwrap();
        f.write(&format!("{XDOMAIN}/{dir}_speed"), speed).unwrap();
    }
}

fn start_agent(bed: &TestBed, dir: &Path, collector: &Collector, sysfs: &SysfsFixture) -> Proc {
    let cfg = format!(
        "collector = \"http://{host}:{grpc}\"\nlisten = \"0.0.0.0:8620\"\n\
         metrics_listen = \"0.0.0.0:{METRICS_PORT}\"\n\
         sysfs_root = \"{sysfs}\"\ncounters_interval = \"500ms\"\n\
         [services]\ntcp = []\n[bandwidth]\nenabled = false\n\
         [peers]\npeer-b = \"{peer}:8620\"\n",
        host = bed.node(0).host_addr,
        peer = bed.link_addr(1, 0).unwrap(),
        grpc = collector.grpc.port(),
        sysfs = sysfs.root().display(),
    );
    agent_from_config(bed, 0, "fab", dir, &cfg)
}

/// What one `/metrics` text says about the port.
#[derive(Debug, Clone, PartialEq)]
struct Port {
    downshifted: Option<f64>,
    rx_lanes: Option<f64>,
    tx_lanes: Option<f64>,
    speed_bytes: Option<f64>,
    up: Option<f64>,
    generation_5: Option<f64>,
}

fn port(metrics: &str, tb: &str) -> Port {
    let ni = [("node", "fab"), ("interface", tb)];
    let dir = |d| [("node", "fab"), ("interface", tb), ("direction", d)];
    Port {
        downshifted: sample(metrics, "boltwatch_link_downshifted", &ni),
        rx_lanes: sample(metrics, "boltwatch_link_lanes", &dir("receive")),
        tx_lanes: sample(metrics, "boltwatch_link_lanes", &dir("transmit")),
        speed_bytes: sample(metrics, "boltwatch_link_speed_bytes_per_second", &ni),
        up: sample(metrics, "boltwatch_link_up", &ni),
        generation_5: sample(
            metrics,
            "boltwatch_link_info",
            &[("node", "fab"), ("interface", tb), ("generation", "5")],
        ),
    }
}

/// Waits until the agent's own scrape shows `want` for the port.
fn wait_port(url: &str, tb: &str, what: &str, want: impl Fn(&Port) -> bool) -> Port {
    let mut last = None;
    wait_for(what, WAIT, || {
        let body = http_get(url).map(|(_, b)| b).unwrap_or_default();
        let p = port(&body, tb);
        let ok = want(&p);
        last = Some(p);
        ok
    });
    last.unwrap()
}

#[test]
fn a_port_whose_lanes_or_lane_speed_drop_is_downshifted_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let collector = Collector::for_bed(dir.path());
    let bed = TestBed::new(2).unwrap_or_else(|e| panic!("cannot build the test bed: {e}"));
    let tb = bed.link_if(0, 1).unwrap().to_string();
    let sysfs = fixture(&bed, 0, &tb);
    let _agent = start_agent(&bed, dir.path(), &collector, &sysfs);
    let url = format!("http://{}:{METRICS_PORT}/metrics", bed.node(0).mgmt_addr);
    const G: f64 = 1e9 / 8.0;

    let healthy = wait_port(&url, &tb, "a healthy 2x20 Gb/s port", |p| {
        p.downshifted == Some(0.0) && p.rx_lanes == Some(2.0) && p.up == Some(1.0)
    });
    assert_eq!(healthy.speed_bytes, Some(40.0 * G), "{healthy:?}");
    assert_eq!(
        healthy.generation_5, None,
        "sysfs generation 4: {healthy:?}"
    );

    set_lanes(&sysfs, 1, "20.0 Gb/s");
    let one = wait_port(&url, &tb, "one lane: downshifted", |p| {
        p.downshifted == Some(1.0) && p.tx_lanes == Some(1.0)
    });
    assert_eq!(one.speed_bytes, Some(20.0 * G), "{one:?}");
    assert_eq!(one.up, Some(1.0), "carrier untouched: {one:?}");

    set_lanes(&sysfs, 2, "20.0 Gb/s");
    wait_port(&url, &tb, "two lanes again: not downshifted", |p| {
        p.downshifted == Some(0.0) && p.rx_lanes == Some(2.0)
    });

    set_lanes(&sysfs, 2, "40.0 Gb/s");
    let tb5 = wait_port(&url, &tb, "40 Gb/s lanes: a TB5 port", |p| {
        p.generation_5 == Some(1.0) && p.speed_bytes == Some(80.0 * G)
    });
    assert_eq!(tb5.downshifted, Some(0.0), "{tb5:?}");

    // The same 2x20 Gb/s that was healthy at first is a downshift now.
    set_lanes(&sysfs, 2, "20.0 Gb/s");
    let slow = wait_port(&url, &tb, "TB5 port at 20 Gb/s lanes", |p| {
        p.downshifted == Some(1.0) && p.speed_bytes == Some(40.0 * G)
    });
    assert_eq!(slow.generation_5, Some(1.0), "{slow:?}");

    // The ledger: the collector stored the fabric events and serves the
    // same verdict.
    let mut fabric_events = 0;
    wait_for("the fabric link events at the collector", WAIT, || {
        let records = collector.json("/api/v1/records?node=fab&kind=link_event&limit=1000");
        fabric_events = records["records"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .filter(|r| r["payload"]["source"] == "LINK_EVENT_SOURCE_FABRIC")
                    .filter(|r| r["payload"]["interface"] == tb.as_str())
                    .count()
            })
            .unwrap_or(0);
        let ni = [("node", "fab"), ("interface", tb.as_str())];
        let served = sample(&collector.metrics(), "boltwatch_link_downshifted", &ni);
        fabric_events >= 5 && served == Some(1.0)
    });
}
