//! The node's fabric checks (`fabric_check` records): each setting or
//! state known to take a Thunderbolt cluster down, ok or failing, and the
//! state of each RDMA port.
//!
//! Only check names this build knows are exported (a stranger's invented
//! names would otherwise grow the exposition without bound); the record is
//! still stored and on the API. A check holds its newest result in the
//! agent's order; a node whose agent is gone for good loses them all, as a
//! check that is no longer run says nothing about now.

use std::collections::BTreeMap;

use boltwatch_proto::fabric::Check;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::Record;

use crate::domain::{Domain, Subjects};
use crate::family::{families, triple, At, Exposition, Newest};

/// The payload kinds [`FabricMetrics`]'s `apply` reads.
pub const KINDS: &[&str] = &["fabric_check"];

families! {
    CHECK_OK = Gauge("boltwatch_fabric_check_ok", "", &["node", "check", "interface"], "1 when the fabric check passes, 0 when it fails (docs/fabric.md lists the checks); interface empty for a check of the whole node.");
    RDMA_PORT_UP = Gauge("boltwatch_rdma_port_up", "", &["node", "device", "interface"], "1 when the RDMA device's port is active, 0 when it is down or never becomes active (a Thunderbolt 4 port).");
}

/// (node, check or device, interface).
type Key = (String, String, String);

/// State behind the fabric families.
#[derive(Debug, Default, Clone)]
pub struct FabricMetrics {
    checks: BTreeMap<Key, Newest<u64>>,
    rdma: BTreeMap<Key, Newest<u64>>,
}

impl Domain for FabricMetrics {
    fn apply(&mut self, r: &Record, _: &mut Subjects) {
        let Some(Payload::FabricCheck(c)) = &r.payload else {
            return;
        };
        let Some(check) = Check::named(&c.check) else {
            return;
        };
        let ok = u64::from(c.ok);
        let node = r.node.clone();
        self.checks
            .entry((node.clone(), c.check.clone(), c.interface.clone()))
            .or_default()
            .update(At::of(r), ok);
        if check == Check::RdmaPortActive && !c.device.is_empty() {
            self.rdma
                .entry((node, c.device.clone(), c.interface.clone()))
                .or_default()
                .update(At::of(r), ok);
        }
    }

    fn render(&self, e: &mut Exposition, _: &Subjects) {
        e.family(
            &CHECK_OK,
            self.checks
                .iter()
                .filter_map(|(k, v)| Some((triple(k), *v.get()?))),
        );
        e.family(
            &RDMA_PORT_UP,
            self.rdma
                .iter()
                .filter_map(|(k, v)| Some((triple(k), *v.get()?))),
        );
    }

    fn forget(&mut self, node: &str) {
        self.checks.retain(|(n, _, _), _| n != node);
        self.rdma.retain(|(n, _, _), _| n != node);
    }
}
