//! The headline: the seed's hand-made table (RTT, bandwidth, interruptions,
//! availability, temperature), computed from the rest of the report.

use std::collections::BTreeMap;

use super::{mean, Headline, Link, Service, Thermal};

/// The seed's rows.
pub(super) fn headline(overall: &Link, services: &[Service], thermal: &[Thermal]) -> Headline {
    let ssh = services.iter().any(|s| s.service == "ssh");
    let avail: Vec<f64> = services
        .iter()
        .filter(|s| !ssh || s.service == "ssh")
        .filter_map(|s| s.availability_percent)
        .collect();
    let mut per_link: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for o in &overall.interruptions.outages {
        *per_link.entry((&o.node, &o.peer)).or_default() += 1;
    }
    // The mean temperature weighs every reading of each node's hottest
    // sensor alike.
    let (mut n, mut sum) = (0u64, 0.0);
    for t in thermal {
        if let Some(s) = t
            .sensors
            .iter()
            .find(|s| Some(&s.sensor) == t.sensor.as_ref())
        {
            n += s.readings;
            sum += s.mean_celsius * s.readings as f64;
        }
    }
    Headline {
        rtt_mean_ms: overall.rtt.mean_ms,
        rtt_worst_ms: overall.rtt.worst_ms,
        bandwidth_mean_gbps: overall.bandwidth.mean_gbps,
        bandwidth_worst_gbps: overall.bandwidth.worst_gbps,
        interruptions: overall.interruptions.count,
        interruptions_worst_link: per_link.values().copied().max().unwrap_or(0),
        service: if ssh || services.is_empty() {
            "ssh".into()
        } else {
            "service".into()
        },
        availability_mean_percent: mean(&avail),
        availability_worst_percent: avail.iter().copied().reduce(f64::min),
        temperature_mean_celsius: (n > 0).then(|| sum / n as f64),
        temperature_worst_celsius: thermal
            .iter()
            .filter_map(|t| t.worst_celsius)
            .reduce(f64::max),
    }
}
