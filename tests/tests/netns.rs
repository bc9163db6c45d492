//! The network-namespace test bed, exercised for real: ping across a link,
//! nftables loss with its exact counter, a flap seen in the peer's sysfs, a
//! tbf rate limit, teardown (also after a panic), and the agent's Linux link
//! watcher running inside a node and counting every flap.
//!
//! Needs root, `ip`, `tc`, `nft` and `ping`; without them these tests fail
//! with a message, they never skip.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use boltwatch_tests::cmd::find_tool;
use boltwatch_tests::TestBed;
use serde_json::Value;

fn bed(nodes: usize) -> TestBed {
    TestBed::new(nodes).unwrap_or_else(|e| panic!("cannot build the test bed: {e}"))
}

fn ping_path() -> String {
    find_tool("ping", "iputils-ping")
        .unwrap_or_else(|e| panic!("{e}"))
        .to_string_lossy()
        .into_owned()
}

/// `(transmitted, received)` from ping's summary line.
fn ping_counts(out: &str) -> (u64, u64) {
    let line = out
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("no ping summary in {out:?}"));
    let nums: Vec<u64> = line
        .split(',')
        .filter_map(|part| part.split_whitespace().next()?.parse().ok())
        .collect();
    (nums[0], nums[1])
}

/// Polls `f` every 50 ms until it returns true, at most `limit`.
fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

fn netns_list() -> String {
    let out = Command::new(find_tool("ip", "iproute2").unwrap())
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Pings `target` `count` times from `node` (10 ms apart) and requires
/// every echo answered.
fn assert_all_answered(bed: &TestBed, node: usize, target: &str, count: u64) {
    let count_arg = count.to_string();
    let out = bed
        .run(
            node,
            &ping_path(),
            &[
                "-c", &count_arg, "-i", "0.01", "-W", "1", "-w", "10", target,
            ],
        )
        .unwrap();
    assert_eq!(ping_counts(&out), (count, count), "{out}");
}

fn host_link_exists(name: &str) -> bool {
    Command::new(find_tool("ip", "iproute2").unwrap())
        .args(["link", "show", "dev", name])
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("ip link show")
        .success()
}

#[test]
fn ping_crosses_the_link_and_the_management_network() {
    let bed = bed(2);
    let peer = bed.link_addr(1, 0).unwrap().to_string();
    assert_all_answered(&bed, 0, &peer, 20);
    // Each node reaches the host on its management veth.
    let host = bed.node(1).host_addr.to_string();
    assert_all_answered(&bed, 1, &host, 3);
    assert_eq!(bed.read_sysfs(0, "class/net/tb1/mtu").unwrap(), "9000");
}

#[test]
fn loss_drops_are_counted_exactly() {
    let bed = bed(2);
    let ping = ping_path();
    let peer = bed.link_addr(1, 0).unwrap().to_string();
    let iface = bed.link_if(1, 0).unwrap().to_owned();
    // Resolve ARP first, so every later drop is an echo request.
    bed.run(0, &ping, &["-c", "1", "-W", "1", &peer]).unwrap();
    bed.loss(1, &iface, 100).unwrap();
    assert_eq!(bed.loss_drops(1, &iface).unwrap(), 0);
    // ping exits 1 when some replies are missing; read its summary anyway.
    // No -w: with a deadline ping keeps sending until `-c` replies arrive.
    let out = bed
        .exec(0, &ping, ["-c", "300", "-i", "0.002", "-W", "1", &peer])
        .unwrap()
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let (sent, received) = ping_counts(&out);
    let drops = bed.loss_drops(1, &iface).unwrap();
    assert_eq!(sent, 300, "{out}");
    assert_eq!(
        sent - received,
        drops,
        "every lost ping is one counted drop"
    );
    eprintln!("10% loss: {sent} sent, {received} received, nft counted {drops} drops");
    // 10% of 300: a count outside 5..60 means the rule is not doing 10%.
    assert!((5..=60).contains(&drops), "dropped {drops} of 300");
    // Setting loss to zero replaces the rule: counter restarts, nothing lost.
    bed.loss(1, &iface, 0).unwrap();
    let out = bed
        .run(
            0,
            &ping,
            &["-c", "50", "-i", "0.002", "-W", "1", "-w", "10", &peer],
        )
        .unwrap();
    assert_eq!(ping_counts(&out), (50, 50));
    assert_eq!(bed.loss_drops(1, &iface).unwrap(), 0);
}

#[test]
fn flap_takes_the_peer_carrier_down_and_up() {
    let bed = bed(2);
    let (here, there) = (bed.link_if(0, 1).unwrap(), bed.link_if(1, 0).unwrap());
    let carrier = format!("class/net/{there}/carrier");
    let downs = format!("class/net/{there}/carrier_down_count");
    let count = |p: &str| -> u64 { bed.read_sysfs(1, p).unwrap().parse().unwrap() };
    assert_eq!(bed.read_sysfs(1, &carrier).unwrap(), "1");
    let before = count(&downs);
    bed.set_link(0, here, false).unwrap();
    assert_eq!(bed.read_sysfs(1, &carrier).unwrap(), "0");
    bed.set_link(0, here, true).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || bed
            .read_sysfs(1, &carrier)
            .unwrap()
            == "1"),
        "carrier did not come back"
    );
    bed.flap(0, here, Duration::from_millis(50)).unwrap();
    assert_eq!(count(&downs), before + 2, "two downs: set_link and flap");
    assert!(wait_until(Duration::from_secs(5), || bed
        .read_sysfs(1, &carrier)
        .unwrap()
        == "1"));
}

#[test]
fn rate_limit_installs_tbf() {
    let bed = bed(2);
    let iface = bed.link_if(0, 1).unwrap();
    bed.rate(0, iface, "1gbit").unwrap();
    let q = bed.qdisc_show(0, iface).unwrap();
    assert!(q.contains("qdisc tbf") && q.contains("rate 1Gbit"), "{q}");
    bed.rate(0, iface, "100mbit").unwrap();
    let q = bed.qdisc_show(0, iface).unwrap();
    assert!(q.contains("rate 100Mbit"), "{q}");
}

#[test]
fn drop_removes_namespaces_and_host_veths() {
    let bed = bed(3);
    assert_eq!(bed.links().len(), 3);
    let names = bed.netns_names();
    let host_ifs: Vec<String> = bed.nodes().iter().map(|n| n.host_if.clone()).collect();
    // A process left running in a node must not keep it alive.
    let mut sleeper = bed.exec(2, "sleep", ["600"]).unwrap().spawn().unwrap();
    let listed = netns_list();
    assert!(
        names.iter().all(|n| listed.contains(n.as_str())),
        "{listed}"
    );
    assert!(host_ifs.iter().all(|i| host_link_exists(i)));
    drop(bed);
    let _ = sleeper.wait();
    let listed = netns_list();
    for n in &names {
        assert!(!listed.contains(n.as_str()), "{n} still there: {listed}");
    }
    for i in &host_ifs {
        assert!(!host_link_exists(i), "{i} still there");
    }
}

#[test]
fn panic_still_tears_down() {
    let (tx, rx) = mpsc::channel();
    let result = std::panic::catch_unwind(move || {
        let bed = bed(2);
        tx.send(bed.netns_names()).unwrap();
        panic!("deliberate panic with a live bed");
    });
    assert!(result.is_err());
    let names = rx.recv().unwrap();
    let listed = netns_list();
    for n in &names {
        assert!(
            !listed.contains(n.as_str()),
            "{n} survived the panic: {listed}"
        );
    }
}

/// A `bw-linkwatch` running inside a node, and its output lines.
struct Watcher {
    child: Child,
    lines: Receiver<Value>,
    seen: Vec<Value>,
}

impl Watcher {
    fn start(bed: &TestBed, node: usize, iface: &str, sysfs_root: &str) -> Watcher {
        let mut child = bed
            .exec(
                node,
                env!("CARGO_BIN_EXE_bw-linkwatch"),
                ["--interface", iface, "--sysfs-root", sysfs_root],
            )
            .unwrap()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting bw-linkwatch");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line).expect("bw-linkwatch prints JSON");
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut w = Watcher {
            child,
            lines,
            seen: Vec::new(),
        };
        assert!(w.collect_until(Duration::from_secs(10), |s| s
            .iter()
            .any(|v| v["ready"] == true)));
        w
    }

    /// Collects lines until `done(all lines so far)` or `limit`.
    fn collect_until(&mut self, limit: Duration, done: impl Fn(&[Value]) -> bool) -> bool {
        let end = Instant::now() + limit;
        while !done(&self.seen) {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => return false,
            }
        }
        true
    }

    /// Closes stdin (the watcher stops) and collects everything left.
    fn finish(mut self) -> Vec<Value> {
        drop(self.child.stdin.take());
        let status = self.child.wait().expect("bw-linkwatch exit");
        assert!(status.success(), "bw-linkwatch failed: {status}");
        self.seen.extend(self.lines.iter());
        self.seen
    }
}

fn events(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|v| v["kind"] == "event").collect()
}

fn down_events(lines: &[Value]) -> usize {
    events(lines)
        .iter()
        .filter(|v| v["carrier"] == false)
        .count()
}

#[test]
fn watcher_in_a_node_counts_every_flap() {
    const SLOW: u64 = 3;
    const FAST: u64 = 4;
    let bed = bed(2);
    let (here, there) = (
        bed.link_if(0, 1).unwrap().to_owned(),
        bed.link_if(1, 0).unwrap().to_owned(),
    );
    let downs_file = format!("class/net/{there}/carrier_down_count");
    let kernel_downs = || -> u64 { bed.read_sysfs(1, &downs_file).unwrap().parse().unwrap() };
    let d0 = kernel_downs();

    // Full watcher: netlink events plus the sysfs reconciliation.
    let mut full = Watcher::start(&bed, 1, &there, "/sys");
    assert!(full.collect_until(Duration::from_secs(10), |s| !events(s).is_empty()));
    let startup = events(&full.seen)[0].clone();
    assert_eq!(startup["source"], "LINK_EVENT_SOURCE_STARTUP");
    assert_eq!(startup["carrier"], true);
    assert_eq!(startup["down"], d0);
    // Events only: its sysfs root is empty, so every event it reports came
    // from netlink.
    let empty = tempfile::tempdir().unwrap();
    let mut netlink_only = Watcher::start(&bed, 1, &there, empty.path().to_str().unwrap());

    // Slow flaps, each state held longer than the kernel's one-second
    // linkwatch batching: every down is its own event.
    for _ in 0..SLOW {
        bed.flap(0, &here, Duration::from_millis(1300)).unwrap();
        std::thread::sleep(Duration::from_millis(1300));
    }
    let want = SLOW as usize;
    let ok = |s: &[Value]| {
        down_events(s) >= want && events(s).iter().filter(|v| v["carrier"] == true).count() > want
    };
    assert!(
        full.collect_until(Duration::from_secs(10), ok),
        "{:#?}",
        full.seen
    );
    assert_eq!(down_events(&full.seen), want, "{:#?}", full.seen);
    assert!(netlink_only.collect_until(Duration::from_secs(10), |s| down_events(s) >= want));
    assert_eq!(
        down_events(&netlink_only.seen),
        want,
        "{:#?}",
        netlink_only.seen
    );
    assert!(events(&netlink_only.seen)
        .iter()
        .all(|v| v["source"] == "LINK_EVENT_SOURCE_NETLINK"));

    // Fast flaps: the kernel coalesces them; only the counters tell.
    for _ in 0..FAST {
        bed.flap(0, &here, Duration::from_millis(50)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let d_end = d0 + SLOW + FAST;
    assert!(wait_until(Duration::from_secs(5), || kernel_downs() == d_end));
    let settled = |s: &[Value]| {
        events(s)
            .last()
            .is_some_and(|v| v["down"] == d_end && v["carrier"] == true)
    };
    assert!(
        full.collect_until(Duration::from_secs(10), settled),
        "{:#?}",
        full.seen
    );
    assert!(netlink_only.collect_until(Duration::from_secs(10), settled));
    let full = full.finish();
    let netlink_only = netlink_only.finish();

    // Every flap is accounted for exactly once: seen as a carrier-down
    // change, or counted as missed.
    let accounted: u64 = full
        .iter()
        .filter(|v| v["kind"] == "change")
        .map(|v| {
            let seen_down = v["carrier_changed"] == true && v["carrier"] == false;
            u64::from(seen_down) + v["missed_flaps"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(accounted, SLOW + FAST, "{full:#?}");
    for lines in [&full, &netlink_only] {
        let last = events(lines).last().copied().unwrap().clone();
        assert_eq!(last["down"], d_end);
        assert!(events(lines)
            .iter()
            .all(|v| v["interface"] == there.as_str()));
    }
    let sources: Vec<&str> = events(&full)
        .iter()
        .map(|v| v["source"].as_str().unwrap())
        .collect();
    eprintln!("full watcher sources: {sources:?}");
    eprintln!("netlink-only events: {}", events(&netlink_only).len());
}

#[test]
fn watcher_follows_bridge_members() {
    let bed = bed(2);
    let (here, there) = (
        bed.link_if(0, 1).unwrap().to_owned(),
        bed.link_if(1, 0).unwrap().to_owned(),
    );
    // Node 1 bridges its link port, as a Mac's bridge0 does with en2/en3.
    let ip = find_tool("ip", "iproute2").unwrap();
    let ip = ip.to_str().unwrap();
    bed.run(1, ip, &["link", "add", "br0", "type", "bridge"])
        .unwrap();
    bed.run(1, ip, &["link", "set", &there, "master", "br0"])
        .unwrap();
    bed.run(1, ip, &["link", "set", "br0", "up"]).unwrap();
    // Asked for the bridge only, the watcher also reports its member.
    let mut w = Watcher::start(&bed, 1, "br0", "/sys");
    let member_startup = |s: &[Value]| {
        events(s)
            .iter()
            .any(|v| v["interface"] == there.as_str() && v["bridge"] == "br0")
    };
    assert!(
        w.collect_until(Duration::from_secs(10), member_startup),
        "{:#?}",
        w.seen
    );
    bed.flap(0, &here, Duration::from_millis(1300)).unwrap();
    let member_down = |s: &[Value]| {
        events(s)
            .iter()
            .any(|v| v["interface"] == there.as_str() && v["carrier"] == false)
    };
    assert!(
        w.collect_until(Duration::from_secs(10), member_down),
        "{:#?}",
        w.seen
    );
    let lines = w.finish();
    let down = events(&lines)
        .into_iter()
        .find(|v| v["interface"] == there.as_str() && v["carrier"] == false)
        .unwrap();
    assert_eq!(down["bridge"], "br0");
}
