//! The link that sets a link-scoped SLO line's figure: `/metrics` names it
//! beside the line (`boltwatch_soak_slo_worst_link_info`), so the alert on
//! a failing soak says which link fails, not only which line. Pure.

use super::Link;

/// The SLO lines whose figure one link sets: the worst over links.
pub const LINK_SCOPED: [&str; 5] = [
    "rtt_worst",
    "rtt_p99",
    "interruptions",
    "bandwidth_mean",
    "error_budget",
];

/// (node, peer) of the link setting line `key`'s figure; `None` for a line
/// no link sets (availability is per service, completeness and temperature
/// per node) or when no link has a figure. Ties go to the first link.
pub fn worst_link<'a>(key: &str, links: &'a [Link]) -> Option<(&'a str, &'a str)> {
    let l = match key {
        "rtt_worst" => highest(links, |l| l.rtt.worst_ms),
        "rtt_p99" => highest(links, |l| l.rtt.p99_ms),
        "interruptions" => highest(links, |l| Some(l.interruptions.count as f64)),
        "bandwidth_mean" => highest(links, |l| l.bandwidth.mean_gbps.map(|g| -g)),
        // A spent zero budget has no figure and is blown: it is the worst.
        "error_budget" => highest(links, |l| {
            Some(
                l.availability
                    .budget_consumed_percent
                    .unwrap_or(f64::INFINITY),
            )
        }),
        _ => None,
    }?;
    Some((l.node.as_str(), l.peer.as_str()))
}

/// The first link with the highest figure.
fn highest(links: &[Link], figure: impl Fn(&Link) -> Option<f64>) -> Option<&Link> {
    links
        .iter()
        .filter_map(|l| Some((figure(l)?, l)))
        .fold(None, |best: Option<(f64, &Link)>, (f, l)| match best {
            Some((b, _)) if b >= f => best,
            _ => Some((f, l)),
        })
        .map(|(_, l)| l)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(node: &str, peer: &str, worst_ms: Option<f64>, gbps: Option<f64>) -> Link {
        let mut l = Link {
            node: node.into(),
            peer: peer.into(),
            ..Default::default()
        };
        l.rtt.worst_ms = worst_ms;
        l.rtt.p99_ms = worst_ms.map(|w| w / 2.0);
        l.bandwidth.mean_gbps = gbps;
        l
    }

    #[test]
    fn each_line_names_its_worst_link() {
        let links = [
            link("a", "b", Some(1.0), Some(30.0)),
            link("b", "a", Some(68.0), Some(12.0)),
            link("a", "c", None, Some(40.0)),
        ];
        assert_eq!(worst_link("rtt_worst", &links), Some(("b", "a")));
        assert_eq!(worst_link("rtt_p99", &links), Some(("b", "a")));
        assert_eq!(worst_link("bandwidth_mean", &links), Some(("b", "a")));
        // Every link at 0 interruptions: the first.
        assert_eq!(worst_link("interruptions", &links), Some(("a", "b")));
        assert_eq!(worst_link("completeness", &links), None);
        assert_eq!(worst_link("rtt_worst", &[]), None);
    }

    #[test]
    fn a_blown_zero_budget_is_the_worst() {
        let mut links = [link("a", "b", None, None), link("c", "d", None, None)];
        links[0].availability.budget_consumed_percent = Some(250.0);
        links[1].availability.budget_consumed_percent = None;
        assert_eq!(worst_link("error_budget", &links), Some(("c", "d")));
        links[1].availability.budget_consumed_percent = Some(3.0);
        assert_eq!(worst_link("error_budget", &links), Some(("a", "b")));
    }
}
