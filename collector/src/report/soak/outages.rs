//! Outages: start and end records joined and clipped to the range, what
//! they add up to (a link's interruptions), and each checked service's
//! availability with its own outages.

use std::collections::BTreeMap;

use boltwatch_proto::v1::Outage;

use super::{secs, Interruptions, OutageItem, Service};

/// Joins outage start and end records and clips them to `[from, to)`.
pub(super) fn clip(records: Vec<(String, String, Outage)>, from: u64, to: u64) -> Vec<OutageItem> {
    crate::dto::join_outages(records, 0)
        .into_iter()
        .filter(|o| o.start_unix_ns < to && o.end_unix_ns.is_none_or(|e| e > from))
        .map(|o| {
            let start = o.start_unix_ns.max(from);
            let end = o.end_unix_ns.unwrap_or(to).min(to);
            OutageItem {
                node: o.node,
                peer: o.peer,
                cause: o.cause.to_string(),
                service: o.service,
                start_unix_ns: start,
                end_unix_ns: end,
                open: o.end_unix_ns.is_none_or(|e| e > to),
                seconds: secs(end.saturating_sub(start)),
            }
        })
        .collect()
}

/// The link outages (not a service's) among `outages`, of `node` -> `peer`
/// or (None) of every link.
pub(super) fn of_link(outages: &[OutageItem], link: Option<(&str, &str)>) -> Vec<OutageItem> {
    outages
        .iter()
        .filter(|o| o.service.is_none())
        .filter(|o| link.is_none_or(|(node, peer)| o.node == node && o.peer == peer))
        .cloned()
        .collect()
}

/// Count, total and longest of `outages`.
pub(super) fn interruptions(outages: Vec<OutageItem>) -> Interruptions {
    Interruptions {
        count: outages.len() as u64,
        // A fold from +0: an empty f64 sum is -0.0, which prints as "-0".
        total_down_seconds: outages.iter().map(|o| o.seconds).fold(0.0, |a, b| a + b),
        longest_seconds: outages.iter().map(|o| o.seconds).fold(0.0, f64::max),
        outages,
    }
}

/// Per service: checks, availability and its outages. `checks` maps
/// (node, peer, service) to (checks, up).
pub(super) fn services(
    checks: &BTreeMap<(String, String, String), (u64, u64)>,
    outages: &[OutageItem],
) -> Vec<Service> {
    checks
        .iter()
        .map(|((node, peer, service), (n, up))| Service {
            node: node.clone(),
            peer: peer.clone(),
            service: service.clone(),
            checks: *n,
            up: *up,
            availability_percent: (*n > 0).then(|| 100.0 * *up as f64 / *n as f64),
            outages: interruptions(
                outages
                    .iter()
                    .filter(|o| {
                        &o.node == node && &o.peer == peer && o.service.as_ref() == Some(service)
                    })
                    .cloned()
                    .collect(),
            ),
        })
        .collect()
}
