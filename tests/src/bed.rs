//! The network-namespace test bed: N nodes, a veth pair between every two
//! of them standing in for a Thunderbolt cable, and a management veth from
//! each node to the host where a collector listens. Faults (loss, rate,
//! flaps) are injected with the same kernel tools an operator would use.
//!
//! Naming, so parallel tests and parallel test binaries never collide:
//! node namespaces are `bw-<pid>-<n>` with `n` unique in the process; the
//! host end of node n's management veth is `bwh<pid>-<n>`. Inside a node,
//! the link to node j is `tb<j>` and the management interface `mgmt0`.
//!
//! Addresses (IPv4 only; IPv6 is disabled in the nodes): link l (pairs in order (0,1), (0,2), .., (1,2), ..) is
//! 10.77.l.0/24, the lower node .1 and the higher .2. Node n's management
//! subnet is 10.78.x.0/24 with the host at .1 and the node at .2, x chosen
//! free on the host at build time.
//!
//! Everything is removed in `Drop`, which also runs when a test panics:
//! processes left in the namespaces are killed, namespaces deleted (which
//! takes their veths, qdiscs and nft tables with them) and host veths
//! deleted. Namespaces of dead test processes are swept when a bed is made.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::cmd::{run, run_text, BedError, Tools};
use crate::nft;

/// MTU of the node-to-node links (jumbo, as on Thunderbolt).
pub const LINK_MTU: u32 = 9000;
/// Name of every node's management interface.
pub const MGMT_IF: &str = "mgmt0";

static NEXT_NODE: AtomicU32 = AtomicU32::new(0);
/// Serialises the choice of management subnets within the process.
static MGMT_ALLOC: Mutex<()> = Mutex::new(());

/// First interface index of link veths with [`BedOptions::urgent_link_events`].
const LINK_IFINDEX_BASE: usize = 1000;

/// How a bed is built.
#[derive(Debug, Clone, Copy, Default)]
pub struct BedOptions {
    /// Give the two ends of every link distinct interface indexes.
    ///
    /// The kernel's linkwatch handles a carrier change at once ("urgent")
    /// only for devices whose ifindex differs from their iflink. The two
    /// ends of a veth pair in fresh namespaces get the same index, so by
    /// default their carrier changes are batched like those of
    /// thunderbolt-net (which has no iflink): notifications lag up to 1 s,
    /// and the qdisc of the side that lost carrier stays deactivated until
    /// linkwatch runs, so that side cannot send for as long. With this
    /// option set, the path returns with the carrier, and an injected drop
    /// lasts exactly as long as the `ip link set` commands say.
    pub urgent_link_events: bool,
}

/// One node: a network namespace.
#[derive(Debug, Clone)]
pub struct Node {
    /// Index within the bed.
    pub index: usize,
    /// Namespace name (`bw-<pid>-<n>`), as `ip netns` knows it.
    pub netns: String,
    /// Host end of the management veth.
    pub host_if: String,
    /// Host address on the management veth (where a collector listens).
    pub host_addr: Ipv4Addr,
    /// The node's address on `mgmt0`.
    pub mgmt_addr: Ipv4Addr,
}

/// One node-to-node link (a veth pair).
#[derive(Debug, Clone)]
pub struct Link {
    /// Index of the link, the third octet of its subnet.
    pub index: usize,
    /// Lower node index.
    pub a: usize,
    /// Higher node index.
    pub b: usize,
    /// Interface in node `a` (`tb<b>`).
    pub a_if: String,
    /// Interface in node `b` (`tb<a>`).
    pub b_if: String,
    /// Address of node `a` on the link.
    pub a_addr: Ipv4Addr,
    /// Address of node `b` on the link.
    pub b_addr: Ipv4Addr,
}

/// A built test bed; torn down on drop.
#[derive(Debug)]
pub struct TestBed {
    tools: Tools,
    nodes: Vec<Node>,
    links: Vec<Link>,
    options: BedOptions,
}

impl TestBed {
    /// Builds `nodes` namespaces, fully meshed. Fails (never skips) without
    /// root or without `ip`, `tc`, `nft`.
    pub fn new(nodes: usize) -> Result<TestBed, BedError> {
        TestBed::with_options(nodes, BedOptions::default())
    }

    /// As [`TestBed::new`], with options.
    pub fn with_options(nodes: usize, options: BedOptions) -> Result<TestBed, BedError> {
        let tools = Tools::find()?;
        sweep_stale(&tools);
        let mut bed = TestBed {
            tools,
            nodes: Vec::new(),
            links: Vec::new(),
            options,
        };
        // On any error `bed` drops here and removes what was built so far.
        for index in 0..nodes {
            bed.add_node(index)?;
        }
        for a in 0..nodes {
            for b in a + 1..nodes {
                bed.add_link(a, b)?;
            }
        }
        Ok(bed)
    }

    fn add_node(&mut self, index: usize) -> Result<(), BedError> {
        let pid = std::process::id();
        let n = NEXT_NODE.fetch_add(1, Ordering::Relaxed);
        let netns = format!("bw-{pid}-{n}");
        let host_if = format!("bwh{pid}-{n}");
        run(self.ip().args(["netns", "add", &netns]))?;
        let _guard = MGMT_ALLOC.lock().unwrap_or_else(|e| e.into_inner());
        let octet = free_mgmt_octet(&self.tools, pid.wrapping_add(n))?;
        let host_addr = Ipv4Addr::new(10, 78, octet, 1);
        let mgmt_addr = Ipv4Addr::new(10, 78, octet, 2);
        // Record the node before anything else can fail so Drop cleans it.
        self.nodes.push(Node {
            index,
            netns: netns.clone(),
            host_if: host_if.clone(),
            host_addr,
            mgmt_addr,
        });
        run(self.ip().args([
            "link", "add", &host_if, "type", "veth", "peer", "name", MGMT_IF, "netns", &netns,
        ]))?;
        run(self
            .ip()
            .args(["addr", "add", &format!("{host_addr}/24"), "dev", &host_if]))?;
        run(self.ip().args(["link", "set", &host_if, "up"]))?;
        let ns = |args: &[&str]| {
            let mut c = self.ip();
            c.args(["-n", &netns]).args(args);
            run(&mut c)
        };
        // IPv4 only: IPv6 autoconfiguration chatter (router solicitations,
        // MLD) would land in loss counters and interface statistics that
        // tests compare exactly. Set before any link exists so `default`
        // covers every veth made later.
        run(self
            .ip()
            .args(["netns", "exec", &netns])
            .arg(&self.tools.sysctl)
            .args([
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]))?;
        ns(&["link", "set", "lo", "up"])?;
        ns(&["addr", "add", &format!("{mgmt_addr}/24"), "dev", MGMT_IF])?;
        ns(&["link", "set", MGMT_IF, "up"])?;
        Ok(())
    }

    fn add_link(&mut self, a: usize, b: usize) -> Result<(), BedError> {
        let index = self.links.len();
        let octet =
            u8::try_from(index).map_err(|_| BedError::NoSuch("room for >255 links".into()))?;
        let link = Link {
            index,
            a,
            b,
            a_if: format!("tb{b}"),
            b_if: format!("tb{a}"),
            a_addr: Ipv4Addr::new(10, 77, octet, 1),
            b_addr: Ipv4Addr::new(10, 77, octet, 2),
        };
        let (na, nb) = (self.nodes[a].netns.clone(), self.nodes[b].netns.clone());
        let mtu = LINK_MTU.to_string();
        let (ia, ib) = (
            (LINK_IFINDEX_BASE + 2 * index).to_string(),
            (LINK_IFINDEX_BASE + 2 * index + 1).to_string(),
        );
        let mut add = self.ip();
        add.args(["-n", &na, "link", "add", &link.a_if, "mtu", &mtu]);
        if self.options.urgent_link_events {
            add.args(["index", &ia]);
        }
        add.args(["type", "veth", "peer", "name", &link.b_if, "mtu", &mtu]);
        if self.options.urgent_link_events {
            add.args(["index", &ib]);
        }
        add.args(["netns", &nb]);
        run(&mut add)?;
        for (ns, ifname, addr) in [
            (&na, &link.a_if, link.a_addr),
            (&nb, &link.b_if, link.b_addr),
        ] {
            run(self.ip().args([
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                ifname,
            ]))?;
            run(self.ip().args(["-n", ns, "link", "set", ifname, "up"]))?;
        }
        self.links.push(link);
        Ok(())
    }

    fn ip(&self) -> Command {
        Command::new(&self.tools.ip)
    }

    /// The nodes, by index.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Node `i`; panics if the bed has no such node (a test bug).
    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// The links.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The link between nodes `x` and `y`, in either order.
    pub fn link(&self, x: usize, y: usize) -> Result<&Link, BedError> {
        let (a, b) = (x.min(y), x.max(y));
        self.links
            .iter()
            .find(|l| l.a == a && l.b == b)
            .ok_or_else(|| BedError::NoSuch(format!("link {x}-{y}")))
    }

    /// The interface in `node` that leads to `peer`.
    pub fn link_if(&self, node: usize, peer: usize) -> Result<&str, BedError> {
        let l = self.link(node, peer)?;
        Ok(if l.a == node { &l.a_if } else { &l.b_if })
    }

    /// The address of `node` on its link to `peer`.
    pub fn link_addr(&self, node: usize, peer: usize) -> Result<Ipv4Addr, BedError> {
        let l = self.link(node, peer)?;
        Ok(if l.a == node { l.a_addr } else { l.b_addr })
    }

    fn netns(&self, node: usize) -> Result<&str, BedError> {
        self.nodes
            .get(node)
            .map(|n| n.netns.as_str())
            .ok_or_else(|| BedError::NoSuch(format!("node {node}")))
    }

    /// A command that runs `program args..` inside `node` (`ip netns exec`,
    /// which also gives it the node's own `/sys`). Spawn or run it as you
    /// like; `tokio::process::Command::from` turns it async.
    pub fn exec<I, S>(&self, node: usize, program: &str, args: I) -> Result<Command, BedError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut c = self.ip();
        c.args(["netns", "exec", self.netns(node)?, program])
            .args(args);
        Ok(c)
    }

    /// Runs `program args..` in `node` to completion and returns stdout; a
    /// non-zero exit is an error.
    pub fn run(&self, node: usize, program: &str, args: &[&str]) -> Result<String, BedError> {
        run_text(self.exec(node, program, args)?.stdin(Stdio::null()))
    }

    /// Reads `/sys/<rel>` as `node` sees it, trimmed (e.g.
    /// `class/net/tb0/carrier`).
    pub fn read_sysfs(&self, node: usize, rel: &str) -> Result<String, BedError> {
        Ok(self
            .run(node, "cat", &[&format!("/sys/{rel}")])?
            .trim()
            .to_owned())
    }

    /// Drops `per_mille`/1000 of the IP packets arriving on `iface` in
    /// `node` (nftables ingress rule). Replaces any earlier loss rule on the
    /// interface and so restarts its counter; 0 keeps a counting rule that
    /// drops nothing.
    pub fn loss(&self, node: usize, iface: &str, per_mille: u16) -> Result<(), BedError> {
        let ns = self.netns(node)?;
        let table = nft::table_name(iface);
        let mut del = self.ip();
        del.args(["netns", "exec", ns])
            .arg(&self.tools.nft)
            .args(["delete", "table", "netdev", &table]);
        // Absent on first use; any real problem shows in the load below.
        let _ = del.output();
        let script = nft::loss_script(iface, per_mille.min(1000));
        self.nft_load(node, &script)
    }

    /// Drops every UDP datagram to `port` arriving on `iface` in `node`
    /// (nftables ingress rule with a counter); the carrier stays up.
    pub fn block_udp(&self, node: usize, iface: &str, port: u16) -> Result<(), BedError> {
        self.nft_load(node, &nft::block_udp_script(iface, port))
    }

    /// Removes the rule of [`TestBed::block_udp`].
    pub fn unblock_udp(&self, node: usize, iface: &str) -> Result<(), BedError> {
        let table = nft::block_table_name(iface);
        run(self
            .ip()
            .args(["netns", "exec", self.netns(node)?])
            .arg(&self.tools.nft)
            .args(["delete", "table", "netdev", &table]))?;
        Ok(())
    }

    /// Resets every TCP connection `node` has to `port` (anywhere) and
    /// refuses new ones for `for_`, then lets them through again: a client
    /// in the node reconnects (an agent, with a new `Hello`).
    pub fn reset_tcp(&self, node: usize, port: u16, for_: Duration) -> Result<(), BedError> {
        self.nft_load(node, &nft::reset_tcp_script(port))?;
        std::thread::sleep(for_);
        run(self
            .ip()
            .args(["netns", "exec", self.netns(node)?])
            .arg(&self.tools.nft)
            .args(["delete", "table", "inet", &nft::reset_table_name(port)]))?;
        Ok(())
    }

    fn nft_load(&self, node: usize, script: &str) -> Result<(), BedError> {
        let mut load = self.ip();
        load.args(["netns", "exec", self.netns(node)?])
            .arg(&self.tools.nft)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let command = crate::cmd::describe(&load);
        let spawn_err = |source| BedError::Spawn {
            command: command.clone(),
            source,
        };
        let mut child = load.spawn().map_err(spawn_err)?;
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("piped stdin");
            stdin.write_all(script.as_bytes()).map_err(spawn_err)?;
        }
        let out = child.wait_with_output().map_err(spawn_err)?;
        if !out.status.success() {
            return Err(BedError::Command {
                command,
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(())
    }

    /// Packets the loss rule on `iface` in `node` has dropped so far (the
    /// nftables counter, exact).
    pub fn loss_drops(&self, node: usize, iface: &str) -> Result<u64, BedError> {
        let table = nft::table_name(iface);
        let mut c = self.ip();
        c.args(["netns", "exec", self.netns(node)?])
            .arg(&self.tools.nft)
            .args(["-j", "list", "table", "netdev", &table]);
        let command = crate::cmd::describe(&c);
        let json = run_text(&mut c)?;
        nft::parse_drop_counter(&json).map_err(|detail| BedError::Parse { command, detail })
    }

    /// Limits egress of `iface` in `node` to `rate` (tc syntax, e.g.
    /// "1gbit", "100mbit") with a token bucket filter.
    pub fn rate(&self, node: usize, iface: &str, rate: &str) -> Result<(), BedError> {
        let ns = self.netns(node)?;
        run(Command::new(&self.tools.tc).args([
            "-n", ns, "qdisc", "replace", "dev", iface, "root", "tbf", "rate", rate, "burst",
            "256kb", "latency", "20ms",
        ]))?;
        Ok(())
    }

    /// `tc qdisc show dev <iface>` in `node`.
    pub fn qdisc_show(&self, node: usize, iface: &str) -> Result<String, BedError> {
        let ns = self.netns(node)?;
        run_text(Command::new(&self.tools.tc).args(["-n", ns, "qdisc", "show", "dev", iface]))
    }

    /// Sets `iface` in `node` administratively up or down.
    pub fn set_link(&self, node: usize, iface: &str, up: bool) -> Result<(), BedError> {
        let ns = self.netns(node)?;
        let state = if up { "up" } else { "down" };
        run(self
            .ip()
            .args(["-n", ns, "link", "set", "dev", iface, state]))?;
        Ok(())
    }

    /// Takes `iface` in `node` down for `down_for`, then up again: the peer
    /// loses carrier for that long.
    pub fn flap(&self, node: usize, iface: &str, down_for: Duration) -> Result<(), BedError> {
        self.set_link(node, iface, false)?;
        std::thread::sleep(down_for);
        self.set_link(node, iface, true)
    }

    /// Namespace names of the bed (to check teardown from outside).
    pub fn netns_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.netns.clone()).collect()
    }
}

impl Drop for TestBed {
    fn drop(&mut self) {
        for node in &self.nodes {
            kill_processes_in(&self.tools, &node.netns);
            if let Err(e) = run(self.ip().args(["netns", "del", &node.netns])) {
                eprintln!("test bed teardown: {e}");
            }
            // Normally gone with its peer; a process holding the namespace
            // open keeps it, so delete explicitly.
            let _ = self.ip().args(["link", "del", &node.host_if]).output();
        }
    }
}

/// Kills what tests left running in `netns` (helpers started with
/// [`TestBed::exec`]); a live process would keep the namespace and its
/// veths alive after `ip netns del`.
fn kill_processes_in(tools: &Tools, netns: &str) {
    let Ok(out) = Command::new(&tools.ip)
        .args(["netns", "pids", netns])
        .output()
    else {
        return;
    };
    for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        if let Ok(pid) = pid.parse::<i32>() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Deletes `bw-<pid>-<n>` namespaces whose test process is gone (a test
/// killed by SIGKILL never ran its `Drop`).
fn sweep_stale(tools: &Tools) {
    let Ok(list) = run_text(Command::new(&tools.ip).args(["netns", "list"])) else {
        return;
    };
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(pid) = name
            .strip_prefix("bw-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            kill_processes_in(tools, name);
            let _ = Command::new(&tools.ip)
                .args(["netns", "del", name])
                .output();
        }
    }
}

/// Picks x such that 10.78.x.0/24 is used by no host address, starting
/// from a per-process spread so parallel processes rarely race.
fn free_mgmt_octet(tools: &Tools, seed: u32) -> Result<u8, BedError> {
    let mut c = Command::new(&tools.ip);
    c.args(["-o", "-4", "addr", "show"]);
    let out = run_text(&mut c)?;
    let used: BTreeSet<u8> = out
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("10.78."))
        .filter_map(|r| r.split('.').next()?.parse().ok())
        .collect();
    (0..250u32)
        .map(|i| ((seed + i) % 250 + 1) as u8)
        .find(|o| !used.contains(o))
        .ok_or_else(|| BedError::Parse {
            command: crate::cmd::describe(&c),
            detail: "every 10.78.x.0/24 is in use".into(),
        })
}
