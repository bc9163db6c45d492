//! Scoped peer addresses (`ADDR%IF`), on the namespace test bed: a node
//! with two cables whose peers share one address, as two Thunderbolt ports
//! with 169.254/16 addresses do on macOS, and a route that points at the
//! wrong cable. Only the bind to the scope (`SO_BINDTODEVICE`) makes the
//! probes reach the peer that answers; nothing else could.
//!
//! Needs root and iproute2; without them the tests fail, they never skip.

use std::process::{Command, Stdio};
use std::time::Duration;

use boltwatch_tests::cluster::REFLECTOR_PORT;
use boltwatch_tests::procs::{bin, http_get, sample, wait_for, Proc};
use boltwatch_tests::TestBed;

/// The address both peers hold, each on its own cable.
const PEER_ADDR: &str = "10.77.50.2";
/// What node 0 holds on both its cables.
const OWN_ADDR: &str = "10.77.50.1";
/// Where node 0's agent serves `/metrics`, on its management address.
const METRICS_PORT: u16 = 9464;

/// Node 0 with cables `tb1` (to node 1) and `tb2` (to node 2); nodes 1
/// and 2 both answer to [`PEER_ADDR`], and node 0 routes that address out
/// of `tb1`. Only node 2 runs a reflector.
fn same_address_bed() -> (TestBed, String, String) {
    let bed = TestBed::new(3).unwrap_or_else(|e| panic!("cannot build the test bed: {e}"));
    let tb1 = bed.link_if(0, 1).unwrap().to_owned();
    let tb2 = bed.link_if(0, 2).unwrap().to_owned();
    let ip = |node: usize, args: &[&str]| {
        bed.run(node, "ip", args)
            .unwrap_or_else(|e| panic!("node {node}: ip {args:?}: {e}"))
    };
    for (node, dev, addr) in [
        (0, tb1.as_str(), OWN_ADDR),
        (0, tb2.as_str(), OWN_ADDR),
        (1, bed.link_if(1, 0).unwrap(), PEER_ADDR),
        (2, bed.link_if(2, 0).unwrap(), PEER_ADDR),
    ] {
        ip(node, &["addr", "flush", "dev", dev]);
        ip(node, &["addr", "add", &format!("{addr}/24"), "dev", dev]);
    }
    // The route names the wrong cable for node 2, more specifically than
    // either connected route.
    ip(
        0,
        &["route", "add", &format!("{PEER_ADDR}/32"), "dev", &tb1],
    );
    // Node 2's replies arrive on tb2 from an address routed via tb1: a
    // strict reverse-path filter would drop them (macOS has none).
    bed.run(
        0,
        "sysctl",
        &[
            "-qw",
            "net.ipv4.conf.all.rp_filter=0",
            &format!("net.ipv4.conf.{tb2}.rp_filter=0"),
        ],
    )
    .unwrap();
    (bed, tb1, tb2)
}

fn reflector(bed: &TestBed, node: usize, dir: &std::path::Path) -> Proc {
    let exe = bin("boltwatch-agent");
    let listen = format!("0.0.0.0:{REFLECTOR_PORT}");
    let cmd = bed
        .exec(
            node,
            &exe.to_string_lossy(),
            ["reflect", "--listen", &listen],
        )
        .unwrap();
    let p = Proc::spawn(
        &format!("reflector n{node}"),
        cmd,
        dir.join(format!("reflector-{node}.log")),
    );
    // The reflector says so once its socket is bound.
    wait_for("the reflector listening", Duration::from_secs(20), || {
        p.log_text().contains("listening")
    });
    p
}

/// `boltwatch-agent ping` in node 0: (probes received, stdout).
fn ping(bed: &TestBed, target: &str) -> (u64, String) {
    let exe = bin("boltwatch-agent");
    let out = bed
        .exec(
            0,
            &exe.to_string_lossy(),
            ["ping", target, "-c", "5", "-i", "0.05", "-W", "1"],
        )
        .unwrap()
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let received = stdout
        .lines()
        .find_map(|l| {
            let (_, rest) = l.split_once(" sent, ")?;
            rest.split_once(" received")?.0.parse().ok()
        })
        .unwrap_or_else(|| {
            panic!(
                "no summary from ping {target}: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    (received, stdout)
}

#[test]
fn ping_to_a_scoped_address_leaves_through_its_interface() {
    let dir = tempfile::tempdir().unwrap();
    let (bed, tb1, tb2) = same_address_bed();
    let _refl = reflector(&bed, 2, dir.path());
    // Control: the route sends the probes to node 1, which has no
    // reflector. Without the scope nothing answers.
    let (got, out) = ping(&bed, &format!("{PEER_ADDR}:{REFLECTOR_PORT}"));
    assert_eq!(
        got, 0,
        "unscoped probes must follow the route to {tb1}: {out}"
    );
    let tx_before: u64 = bed
        .read_sysfs(0, &format!("class/net/{tb2}/statistics/tx_packets"))
        .unwrap()
        .parse()
        .unwrap();
    let (got, out) = ping(&bed, &format!("{PEER_ADDR}%{tb2}:{REFLECTOR_PORT}"));
    assert_eq!(got, 5, "scoped probes must reach node 2 over {tb2}: {out}");
    let tx_after: u64 = bed
        .read_sysfs(0, &format!("class/net/{tb2}/statistics/tx_packets"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        tx_after - tx_before >= 5,
        "{tb2} sent {} packets for 5 probes",
        tx_after - tx_before
    );
}

fn agent(bed: &TestBed, dir: &std::path::Path, name: &str, peers: &[String]) -> Command {
    let exe = bin("boltwatch-agent");
    let metrics = format!("{}:{METRICS_PORT}", bed.node(0).mgmt_addr);
    let mut args: Vec<String> = [
        "run",
        "--node",
        name,
        // Nobody listens there: the agent spools, which is all this needs.
        "--collector",
        "http://127.0.0.1:9",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        &metrics,
        "--probe-interval",
        "20ms",
        "--no-services",
        "--no-bandwidth",
        "--spool-dir",
    ]
    .map(String::from)
    .into();
    args.push(dir.join(format!("spool-{name}")).display().to_string());
    for p in peers {
        args.push("--peer".into());
        args.push(p.clone());
    }
    bed.exec(0, &exe.to_string_lossy(), &args).unwrap()
}

#[test]
fn agent_probes_each_scoped_peer_over_its_own_cable() {
    let dir = tempfile::tempdir().unwrap();
    let (bed, tb1, tb2) = same_address_bed();
    let _refl = reflector(&bed, 2, dir.path());
    let peers = [
        format!("n1={PEER_ADDR}%{tb1}:{REFLECTOR_PORT}"),
        format!("n2={PEER_ADDR}%{tb2}:{REFLECTOR_PORT}"),
    ];
    let cmd = agent(&bed, dir.path(), "n0", &peers);
    let mut a = Proc::spawn("agent n0", cmd, dir.path().join("agent-n0.log"));
    let url = format!("http://{}:{METRICS_PORT}/metrics", bed.node(0).mgmt_addr);
    let metric = |m: &str, name: &str, peer: &str| {
        sample(m, name, &[("node", "n0"), ("peer", peer)]).unwrap_or(0.0)
    };
    let mut last = String::new();
    wait_for(
        "50 probes answered by n2 and 50 sent to n1",
        Duration::from_secs(60),
        || {
            assert!(a.alive(), "agent exited: {}", a.log_text());
            last = http_get(&url).map(|(_, b)| b).unwrap_or_default();
            metric(&last, "boltwatch_probe_received_total", "n2") >= 50.0
                && metric(&last, "boltwatch_probe_sent_total", "n1") >= 50.0
        },
    );
    // n1 shares n2's address but runs no reflector: had n2's probes taken
    // the route (to tb1), they would be lost; had n1's, nothing changes.
    // So n1 answering nothing and n2 answering proves the bind.
    assert_eq!(
        metric(&last, "boltwatch_probe_received_total", "n1"),
        0.0,
        "{last}"
    );
    // The path check follows the bind too: the unbound route to n2's
    // address names tb1, yet n2's path is tb2 and fine.
    let path = |peer: &str| {
        sample(
            &last,
            "boltwatch_path_ok",
            &[("node", "n0"), ("peer", peer)],
        )
    };
    assert_eq!((path("n1"), path("n2")), (Some(1.0), Some(1.0)), "{last}");
    a.terminate();
}

#[test]
fn a_scope_that_cannot_be_bound_stops_the_agent_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (bed, _, _) = same_address_bed();
    let peers = [format!("n1={PEER_ADDR}%bwnosuch0:{REFLECTOR_PORT}")];
    let out = agent(&bed, dir.path(), "n0", &peers)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bwnosuch0") && err.contains("n1"),
        "the error names the interface and the peer: {err}"
    );
}

/// `run --check-config` accepts every scoped form, including a scope
/// naming an interface this host does not have (a port not plugged in),
/// and refuses a malformed one naming the key.
#[test]
fn check_config_accepts_scoped_peers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.toml");
    std::fs::write(
        &path,
        "node = \"a\"\n[peers]\nb = \"169.254.3.2%en2:862\"\nc = \"[fe80::1%en3]:862\"\n\
         [bandwidth.peers]\nc = \"[fe80::1%en3]:5202\"\n",
    )
    .unwrap();
    let check = |extra: &[&str]| {
        Command::new(bin("boltwatch-agent"))
            .arg("run")
            .arg("--config")
            .arg(&path)
            .arg("--check-config")
            .args(extra)
            .env_remove("BOLTWATCH_CONFIG_ERROR_EXIT_STATUS")
            .output()
            .unwrap()
    };
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("2 peer(s)"),
        "{out:?}"
    );
    let out = check(&["--peer", "b=[fe80::1%en2]:862"]);
    assert_eq!(
        out.status.code(),
        Some(78),
        "c is no longer a peer: {out:?}"
    );
    std::fs::write(&path, "node = \"a\"\n").unwrap();
    let out = check(&["--peer", "b=[fe80::1%en2]:862"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = check(&["--peer", "b=[fe80::1%en2:862"]);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("command line: flag `--peer`") && err.contains("missing `]`"),
        "{err}"
    );
}
