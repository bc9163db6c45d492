//! `doctor`'s fabric rows: every fabric check the agent runs
//! ([`crate::fabric`]), on the interfaces named with `--interface`, else on
//! those discovery calls Thunderbolt or a bridge (the cluster links of a
//! host doctor knows nothing else about). A failing check is a
//! disagreement with what a cluster node needs, with the fix beside it.

use std::path::Path;

use super::{Row, Verdict};
use crate::config::Config;
use crate::fabric::{self, Outcome, Settings};

/// Kinds of link a cluster runs over.
const CLUSTER_KINDS: [&str; 2] = ["thunderbolt", "bridge"];

pub(super) fn rows(only: &[String]) -> Vec<Row> {
    let sysfs = Path::new("/sys");
    let links = if only.is_empty() {
        cluster_links(sysfs)
    } else {
        only.to_vec()
    };
    // The agent's defaults: doctor has no config file.
    let d = Config::default();
    let settings = Settings {
        tcp_clock_margin: d.fabric_tcp_clock_margin,
        expect_rdma: d.fabric_expect_rdma,
    };
    let generations = fabric::generations(&links, sysfs);
    let outcomes = fabric::evaluate(&fabric::gather(&links, sysfs, &generations), settings);
    outcomes.iter().map(row).collect()
}

fn row(o: &Outcome) -> Row {
    let subject = match (o.interface.as_str(), o.device.as_str()) {
        ("", _) => o.check.name().to_string(),
        (i, "") => format!("{} {i}", o.check.name()),
        (i, d) => format!("{} {i} ({d})", o.check.name()),
    };
    Row {
        source: "fabric",
        subject,
        agent: if o.ok { "ok" } else { "failing" }.into(),
        os_tool: o.detail.clone(),
        verdict: if o.ok {
            Verdict::Agree
        } else {
            Verdict::Disagree(o.advice().into())
        },
    }
}

/// Every interface discovery calls Thunderbolt or a bridge.
pub(super) fn cluster_links(sysfs: &Path) -> Vec<String> {
    let Ok(all) = nix::net::if_::if_nameindex() else {
        return Vec::new();
    };
    all.iter()
        .filter_map(|i| i.name().to_str().ok().map(str::to_string))
        .filter(|n| CLUSTER_KINDS.contains(&crate::discovery::describe(n, sysfs).kind.as_str()))
        .collect()
}
