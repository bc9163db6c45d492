//! The RDMA probe's error classes as the `class` label of
//! `boltwatch_rdma_errors_total`: one mapping, used by the agent (which
//! classifies) and the exporters (which label).

use crate::v1::RdmaErrorClass;

/// Every class the probe counts, in label order of the docs.
pub const CLASSES: [RdmaErrorClass; 9] = [
    RdmaErrorClass::PortDown,
    RdmaErrorClass::PdAlloc,
    RdmaErrorClass::RtrBridgeOn,
    RdmaErrorClass::RtrGidUnreachable,
    RdmaErrorClass::RtrStale,
    RdmaErrorClass::CompletionStatus,
    RdmaErrorClass::CrcMismatch,
    RdmaErrorClass::SequenceGap,
    RdmaErrorClass::WatchdogTimeout,
];

/// The `class` label value; `None` for a class this build does not know
/// (a newer agent's), which the exporters drop rather than guess.
pub fn class_label(c: RdmaErrorClass) -> Option<&'static str> {
    Some(match c {
        RdmaErrorClass::Unspecified => return None,
        RdmaErrorClass::PortDown => "port_down",
        RdmaErrorClass::PdAlloc => "pd_alloc",
        RdmaErrorClass::RtrBridgeOn => "rtr_bridge_on",
        RdmaErrorClass::RtrGidUnreachable => "rtr_gid_unreachable",
        RdmaErrorClass::RtrStale => "rtr_stale",
        RdmaErrorClass::CompletionStatus => "completion_status",
        RdmaErrorClass::CrcMismatch => "crc_mismatch",
        RdmaErrorClass::SequenceGap => "sequence_gap",
        RdmaErrorClass::WatchdogTimeout => "watchdog_timeout",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_class_has_a_distinct_label_and_unknown_none() {
        let labels: std::collections::BTreeSet<_> =
            CLASSES.iter().filter_map(|c| class_label(*c)).collect();
        assert_eq!(labels.len(), CLASSES.len());
        assert_eq!(class_label(RdmaErrorClass::Unspecified), None);
        assert_eq!(RdmaErrorClass::try_from(10).ok(), None);
        assert_eq!(
            class_label(RdmaErrorClass::RtrBridgeOn),
            Some("rtr_bridge_on")
        );
    }
}
