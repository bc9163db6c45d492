//! Fabric facts on an OS without readers: none, so only the portable
//! checks (default route, bridges) run.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::rdma::Rdma;
use super::Pmset;

pub fn pmset() -> Option<Pmset> {
    None
}

pub fn dhcp(_links: &[String]) -> Option<BTreeMap<String, bool>> {
    None
}

pub fn uptime() -> Option<Duration> {
    None
}

pub fn bridge_members(_link: &str, _sysfs_root: &Path) -> Vec<String> {
    Vec::new()
}

pub fn rdma(_sysfs_root: &Path) -> Option<Rdma> {
    None
}
