//! The fabric checks: settings and states known to take a Thunderbolt
//! cluster down, each measured on the node and judged ok or failing
//! ([`boltwatch_proto::fabric::Check`] names them; docs/fabric.md says
//! what to do about each).
//!
//! [`evaluate`] is the pure part: [`Facts`] in, one [`Outcome`] per check
//! that applies out. [`gather`] reads the facts: the default route and
//! bridge membership the same way on every OS (a connected UDP socket,
//! discovery, the counters' carrier), the rest from the OS's own file
//! ([`imp`]): `pmset`, DHCP leases, uptime and RDMA on macOS; RDMA from
//! sysfs on Linux. A fact the OS does not have is `None`, and the checks
//! that need it are not emitted (not reported as failing).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use boltwatch_proto::fabric::{Check, TCP_CLOCK_LIMIT_SECS};

mod outcome;
pub mod rdma;
#[cfg(test)]
mod tests;

crate::platform::os_module!(mod imp);

pub use outcome::{advice, Outcome};
pub use rdma::{Rdma, RdmaPort};

/// `pmset -g` settings a cluster node needs (`None`: not printed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pmset {
    /// Minutes of idle before the system sleeps; 0 never.
    pub sleep: Option<u32>,
    /// 1: power back on after a power failure.
    pub autorestart: Option<u32>,
    /// 1: wake on a magic packet (Ethernet; Thunderbolt has none).
    pub womp: Option<u32>,
}

/// A bridge among the cluster links and its members' carrier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bridge {
    /// `bridge0`, `br0`.
    pub name: String,
    /// Members with carrier now.
    pub members_up: Vec<String>,
}

/// What the node says about itself, read by [`gather`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// The interfaces towards the peers (the cluster links).
    pub links: Vec<String>,
    /// The interfaces the default routes (IPv4, IPv6) leave through.
    pub default_routes: Vec<String>,
    /// Bridges among the links.
    pub bridges: Vec<Bridge>,
    /// macOS: `pmset -g`.
    pub pmset: Option<Pmset>,
    /// macOS: whether each link holds a DHCP lease.
    pub dhcp: Option<BTreeMap<String, bool>>,
    /// macOS: time since boot, sleep included.
    pub uptime: Option<Duration>,
    /// RDMA, where the OS has it.
    pub rdma: Option<Rdma>,
}

/// How strict the checks are (from the agent's `fabric.*` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The uptime check fails this long before the TCP clock limit.
    pub tcp_clock_margin: Duration,
    /// Report `rdma_ready` even where RDMA is switched off.
    pub expect_rdma: bool,
}

/// Every check the facts allow, in [`Check::ALL`] order.
pub fn evaluate(f: &Facts, s: Settings) -> Vec<Outcome> {
    let mut out = Vec::new();
    if let Some(p) = &f.pmset {
        out.extend(pmset_checks(p));
    }
    for b in &f.bridges {
        let ok = b.members_up.len() <= 1;
        let detail = format!("members with carrier: {}", list(&b.members_up));
        out.push(Outcome::on(Check::BridgeSinglePort, &b.name, ok, detail));
    }
    for l in &f.links {
        let ok = !f.default_routes.contains(l);
        let detail = format!("default route via {}", list(&f.default_routes));
        out.push(Outcome::on(Check::NoDefaultRoute, l, ok, detail));
    }
    if let Some(leases) = &f.dhcp {
        for (l, leased) in leases {
            let detail = if *leased {
                "DHCP lease held"
            } else {
                "no DHCP lease"
            };
            out.push(Outcome::on(Check::NoDhcpLease, l, !leased, detail.into()));
        }
    }
    if let Some(up) = f.uptime {
        out.push(uptime_check(up, s.tcp_clock_margin));
    }
    if let Some(r) = &f.rdma {
        out.extend(rdma::checks(r, &f.links, s.expect_rdma));
    }
    out
}

/// `sleep 0`, `autorestart 1`, `womp 1`.
fn pmset_checks(p: &Pmset) -> [Outcome; 3] {
    let one = |check, name: &str, value: Option<u32>, wanted: u32| {
        let shown = value.map_or("unset".to_string(), |v| v.to_string());
        let detail = format!("pmset {name} {shown} (wanted {wanted})");
        Outcome::node(check, value == Some(wanted), detail)
    };
    [
        one(Check::SleepDisabled, "sleep", p.sleep, 0),
        one(Check::AutorestartEnabled, "autorestart", p.autorestart, 1),
        one(Check::WakeOnNetworkEnabled, "womp", p.womp, 1),
    ]
}

/// Fails `margin` before the TCP clock limit.
fn uptime_check(up: Duration, margin: Duration) -> Outcome {
    let limit = Duration::from_secs(TCP_CLOCK_LIMIT_SECS);
    let ok = up + margin < limit;
    let days = |d: Duration| d.as_secs_f64() / 86_400.0;
    let detail = format!(
        "uptime {:.1} days, TCP clock limit at {:.1} days",
        days(up),
        days(limit)
    );
    Outcome::node(Check::UptimeUnderTcpLimit, ok, detail)
}

/// `a, b` or `none`.
fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// Each link's Thunderbolt generation ("4", "5"; empty when not known),
/// from discovery: read once by the caller (on macOS discovery runs
/// `system_profiler`), not on every round.
pub fn generations(links: &[String], sysfs_root: &Path) -> BTreeMap<String, String> {
    links
        .iter()
        .map(|l| {
            (
                l.clone(),
                crate::discovery::describe(l, sysfs_root).generation,
            )
        })
        .collect()
}

/// Reads the facts for the cluster links `links` (Linux readers under
/// `sysfs_root`; `generations` from [`generations`]). Blocking: runs tools
/// and reads files.
pub fn gather(
    links: &[String],
    sysfs_root: &Path,
    generations: &BTreeMap<String, String>,
) -> Facts {
    Facts {
        links: links.to_vec(),
        default_routes: default_routes(),
        bridges: bridges(links, sysfs_root),
        pmset: imp::pmset(),
        dhcp: imp::dhcp(links),
        uptime: imp::uptime(),
        rdma: imp::rdma(sysfs_root).map(|r| with_generations(r, generations)),
    }
}

/// Each port's Thunderbolt generation, that of its interface, so a
/// Thunderbolt 4 port's inactive device is said to be one.
fn with_generations(mut r: Rdma, generations: &BTreeMap<String, String>) -> Rdma {
    for p in r.ports.iter_mut() {
        p.generation = generations.get(&p.interface).cloned().unwrap_or_default();
    }
    r
}

/// Where the default routes leave: the route the kernel picks for a
/// documentation address (RFC 5737, RFC 3849), which only a default route
/// covers. Connecting a UDP socket sends nothing.
fn default_routes() -> Vec<String> {
    let probes: [SocketAddr; 2] = [
        ([192, 0, 2, 1], 9).into(),
        ("[2001:db8::1]:9".parse().expect("a literal address")),
    ];
    let mut out: Vec<String> = probes
        .iter()
        .filter_map(|a| crate::discovery::route_interface(*a).ok())
        .collect();
    out.dedup();
    out
}

/// The bridges among `links` and which of their members have carrier.
fn bridges(links: &[String], sysfs_root: &Path) -> Vec<Bridge> {
    let mut counters = crate::counters::default_source(sysfs_root);
    links
        .iter()
        .map(|l| (l, imp::bridge_members(l, sysfs_root)))
        .filter(|(_, members)| !members.is_empty())
        .map(|(l, members)| Bridge {
            members_up: members
                .into_iter()
                .filter(|m| counters.read(m).is_ok_and(|c| c.carrier))
                .collect(),
            name: l.clone(),
        })
        .collect()
}

/// Which outcomes to send this round: those whose verdict changed (or is
/// new), and all of them every `repeat_every` rounds so a collector that
/// lost state learns them again. Pure; the role holds one.
#[derive(Debug, Default)]
pub struct Emitter {
    last: BTreeMap<(Check, String, String), bool>,
    rounds: u32,
}

impl Emitter {
    /// Every this many rounds, all outcomes are sent.
    pub const REPEAT_EVERY: u32 = 10;

    /// The outcomes of this round to send, and those that are failing for
    /// the first time (new, or ok last round).
    pub fn round<'o>(&mut self, outcomes: &'o [Outcome]) -> (Vec<&'o Outcome>, Vec<&'o Outcome>) {
        let all = self.rounds.is_multiple_of(Self::REPEAT_EVERY);
        self.rounds = self.rounds.wrapping_add(1);
        let mut send = Vec::new();
        let mut failed = Vec::new();
        for o in outcomes {
            let key = (o.check, o.interface.clone(), o.device.clone());
            let before = self.last.insert(key, o.ok);
            if before != Some(false) && !o.ok {
                failed.push(o);
            }
            if all || before != Some(o.ok) {
                send.push(o);
            }
        }
        (send, failed)
    }
}
