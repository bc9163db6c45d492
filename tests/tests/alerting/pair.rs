//! A scenario's two nodes: a two-node namespace bed whose veth stands in
//! for the Thunderbolt cable, a real agent in each namespace, and a sysfs
//! fixture per node for its thermals (a thermal zone and the kernel's
//! `thermal_throttle` event counter, which the test advances to throttle
//! the node).
//!
//! The tester probes the peer and runs scheduled bandwidth tests against
//! it; the peer reflects STAMP, serves the tests and reports its
//! thermals, with no peers of its own (so only the tester's view of the
//! link is under test). The fixture's `class/net` is a link to the
//! namespace's own `/sys/class/net` (`ip netns exec` mounts the
//! namespace's sysfs there), so carrier, counters and link speed are the
//! veth's real ones: 10 Gbit/s, as the veth driver reports.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use boltwatch_tests::cluster::agent_from_config;
use boltwatch_tests::procs::{wait_for, Proc};
use boltwatch_tests::{SysfsFixture, TestBed};

use boltwatch_tests::procs::Collector;

/// STAMP reflector port of every agent inside its namespace.
const STAMP_PORT: u16 = 8620;
/// Bandwidth server port of every agent inside its namespace.
pub const BANDWIDTH_PORT: u16 = 5202;
/// The throttle counter, relative to a fixture root.
const THROTTLE_COUNT: &str = "devices/system/cpu/cpu0/thermal_throttle/core_throttle_count";
/// Egress rate of both ends of a shaped link: far under any expectation
/// here (6 Gbit/s), and cheap on a shared 2-core machine.
const SHAPED: &str = "200mbit";

/// What the tester expects of the link.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// `bandwidth.expected`, Gbit/s.
    Gbps(u32),
    /// `bandwidth.expected_share` of the link speed.
    Share(f64),
}

/// How a pair is built.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub tester: &'static str,
    pub peer: &'static str,
    /// Scheduled bandwidth tests with this expectation; `None`: no
    /// bandwidth tests at all.
    pub bandwidth: Option<Expect>,
}

/// Which node of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Tester = 0,
    Peer = 1,
}

/// Two nodes, their agents and fixtures. Field order is drop order:
/// throttling stops, agents die, then the bed goes.
pub struct Pair {
    throttles: Vec<Throttling>,
    agents: [Option<Proc>; 2],
    fixtures: [SysfsFixture; 2],
    pub bed: TestBed,
}

impl Pair {
    /// Builds the bed, shapes the link when there are bandwidth tests,
    /// and starts both agents.
    pub fn start(dir: &Path, collector: &Collector, spec: Spec) -> Pair {
        let bed = TestBed::new(2).unwrap_or_else(|e| panic!("cannot build the test bed: {e}"));
        let fixtures = [fixture(), fixture()];
        if spec.bandwidth.is_some() {
            for (node, peer) in [(0, 1), (1, 0)] {
                let iface = bed.link_if(node, peer).unwrap().to_string();
                bed.rate(node, &iface, SHAPED).unwrap();
            }
        }
        let peer = start_agent(&bed, dir, collector, &spec, End::Peer, &fixtures[1]);
        // The tester probes from its start: on a busy machine a peer whose
        // reflector came up seconds later was a real outage of those
        // seconds, and its alerts (OutageOpen, ProbeLossHigh over 5m) then
        // fired for a cause no scenario made.
        wait_for(
            "the peer's STAMP reflector",
            Duration::from_secs(60),
            || reflector_bound(&bed),
        );
        let tester = start_agent(&bed, dir, collector, &spec, End::Tester, &fixtures[0]);
        Pair {
            throttles: Vec::new(),
            agents: [Some(tester), Some(peer)],
            fixtures,
            bed,
        }
    }

    /// Throttles `end` from now on, `on` out of every `on + off`.
    pub fn throttle(&mut self, end: End, on: Duration, off: Duration) {
        let path = self.fixtures[end as usize].path(THROTTLE_COUNT);
        self.throttles.push(Throttling::start(path, on, off));
    }

    /// Kills `end`'s agent with SIGKILL.
    pub fn kill(&mut self, end: End) {
        if let Some(mut p) = self.agents[end as usize].take() {
            p.kill9();
        }
    }

    /// Refuses every new bandwidth test against the peer (its server port
    /// answers with a reset), so the tester's last successful test stays
    /// the one before.
    pub fn block_peer_server(&self) {
        let rules = format!(
            "add table inet bwblock; \
             add chain inet bwblock in {{ type filter hook input priority 0 ; }} ; \
             add rule inet bwblock in tcp dport {BANDWIDTH_PORT} reject with tcp reset"
        );
        self.bed
            .run(End::Peer as usize, "nft", &[&rules])
            .unwrap_or_else(|e| panic!("blocking the bandwidth server: {e}"));
    }

    /// Takes the peer's end of the link down or up: the tester loses or
    /// regains carrier.
    pub fn set_peer_link(&self, up: bool) {
        let iface = self.bed.link_if(1, 0).unwrap().to_string();
        self.bed.set_link(1, &iface, up).unwrap();
    }

    /// The tester's interface towards the peer.
    pub fn tester_if(&self) -> String {
        self.bed.link_if(0, 1).unwrap().to_string()
    }
}

/// A fixture root: one cool thermal zone, a throttle counter at 0, and
/// the namespace's real network interfaces.
fn fixture() -> SysfsFixture {
    let f = SysfsFixture::new().unwrap();
    f.set_thermal_zone(0, "x86_pkg_temp", 50_000).unwrap();
    f.write(THROTTLE_COUNT, "0").unwrap();
    let net = f.path("class/net");
    std::fs::remove_dir(&net).unwrap();
    std::os::unix::fs::symlink("/sys/class/net", &net).unwrap();
    f
}

fn start_agent(
    bed: &TestBed,
    dir: &Path,
    collector: &Collector,
    spec: &Spec,
    end: End,
    sysfs: &SysfsFixture,
) -> Proc {
    let (index, name) = match end {
        End::Tester => (0, spec.tester),
        End::Peer => (1, spec.peer),
    };
    let host = bed.node(index).host_addr;
    let mut cfg = format!(
        "collector = \"http://{host}:{grpc}\"\nlisten = \"0.0.0.0:{STAMP_PORT}\"\n\
         sysfs_root = \"{sysfs}\"\nprobe_interval = \"200ms\"\n\
         thermal_interval = \"1s\"\ncounters_interval = \"1s\"\n\
         [services]\ntcp = []\n\
         [bandwidth]\nenabled = {enabled}\nlisten = \"0.0.0.0:{BANDWIDTH_PORT}\"\n\
         interval = \"6s\"\nduration = \"3s\"\nstreams = 1\nduty_cycle = 0.9\n\
         allow = [\"10.77.0.0/16\"]\n",
        grpc = collector.grpc.port(),
        sysfs = sysfs.root().display(),
        enabled = spec.bandwidth.is_some(),
    );
    if end == End::Tester {
        match spec.bandwidth {
            Some(Expect::Gbps(g)) => cfg.push_str(&format!("expected = {g}\n")),
            Some(Expect::Share(s)) => cfg.push_str(&format!("expected_share = {s}\n")),
            None => {}
        }
        let peer_addr = bed.link_addr(1, 0).unwrap();
        cfg.push_str(&format!(
            "[peers]\n{} = \"{peer_addr}:{STAMP_PORT}\"\n",
            spec.peer
        ));
    }
    agent_from_config(bed, index, name, dir, &cfg)
}

/// The peer's STAMP port is bound in its namespace (`ss`, iproute2).
fn reflector_bound(bed: &TestBed) -> bool {
    let filter = format!("sport = :{STAMP_PORT}");
    bed.run(End::Peer as usize, "ss", &["-Hlun", &filter])
        .is_ok_and(|out| !out.trim().is_empty())
}

/// Advances a fixture's throttle counter every 200 ms of each `on` phase
/// of an `on + off` cycle (the kernel counter of a CPU throttled then),
/// until dropped. The file is replaced whole so no read sees it half
/// written.
struct Throttling {
    stop: Arc<AtomicBool>,
}

impl Throttling {
    fn start(path: std::path::PathBuf, on: Duration, off: Duration) -> Throttling {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let cycle = (on + off).as_millis();
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                if t0.elapsed().as_millis() % cycle < on.as_millis() {
                    n += 1;
                    let tmp = path.with_extension("tmp");
                    if std::fs::write(&tmp, format!("{n}\n")).is_ok() {
                        let _ = std::fs::rename(&tmp, &path);
                    }
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Throttling { stop }
    }
}

impl Drop for Throttling {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
