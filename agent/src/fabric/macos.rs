//! Fabric facts on macOS, from the OS's own tools: `pmset -g`, `ipconfig
//! getpacket` per link, `rdma_ctl status` and `ibv_devinfo` (macOS 26.2+),
//! and the uptime from `CLOCK_MONOTONIC`, which on macOS counts sleep
//! (`mach_continuous_time`), as `uptime(1)` does.
//!
//! Why the tools and not `librdma.dylib` by `dlopen`: Apple documents the
//! tools (TN3205) and not the library's ABI; a `struct ibv_port_attr`
//! declared here could not be checked against Apple's build, and a wrong
//! offset would read a wrong state silently, where the tool's text either
//! parses or says nothing.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::rdma::{parse_ibv_devinfo, parse_rdma_ctl, Rdma};
use super::Pmset;
use crate::power::pmset::setting;

/// A tool's standard output when it ran and exited 0.
fn run(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn pmset() -> Option<Pmset> {
    let text = run("/usr/bin/pmset", &["-g"])?;
    Some(Pmset {
        sleep: setting(&text, "sleep"),
        autorestart: setting(&text, "autorestart"),
        womp: setting(&text, "womp"),
    })
}

/// `ipconfig getpacket IF` prints the DHCP reply the lease came from
/// (`yiaddr = ...`) and nothing when the interface holds no lease.
pub fn dhcp(links: &[String]) -> Option<BTreeMap<String, bool>> {
    let leased = |l: &String| {
        run("/usr/sbin/ipconfig", &["getpacket", l]).is_some_and(|t| t.contains("yiaddr"))
    };
    Some(links.iter().map(|l| (l.clone(), leased(l))).collect())
}

pub fn uptime() -> Option<Duration> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).ok()?;
    Some(Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
}

/// The members `ifconfig` lists for a `bridgeN`; none for any other
/// interface (discovery calls the same names bridges).
pub fn bridge_members(link: &str, _sysfs_root: &Path) -> Vec<String> {
    if link.starts_with("bridge") {
        crate::discovery::bridge_members(link).unwrap_or_default()
    } else {
        Vec::new()
    }
}

/// `None` before macOS 26.2 (no `rdma_ctl`).
pub fn rdma(_sysfs_root: &Path) -> Option<Rdma> {
    let status = run("/usr/bin/rdma_ctl", &["status"])?;
    let ports = run("/usr/bin/ibv_devinfo", &[])
        .map(|t| parse_ibv_devinfo(&t))
        .unwrap_or_default();
    Some(Rdma {
        enabled: parse_rdma_ctl(&status),
        ports,
    })
}
