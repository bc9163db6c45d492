//! The fleet view: links and nodes ranked worst-first (most UAS, then most
//! SES, then the highest RTT p99), and the share of the range in which
//! every link was good at once: it had a window in that slot, the window
//! was available and answered, and its p99 was within `rtt_p99_ms`. A slot
//! without a window is not good (nothing shows the link was).

use std::collections::BTreeMap;

use super::availability::Class;
use super::{secs, Fleet, Link, Rank, Win};

/// One link's windows (sorted) and their classes.
pub(super) type Windows<'a> = (&'a [Win], &'a [Class]);

/// The fleet of `links` (`windows` in the same order) over `[from, to)`
/// with slots of `window_ns` and the p99 limit `p99_max_ns`.
pub(super) fn fleet(
    links: &[Link],
    windows: &[Windows<'_>],
    (from, to): (u64, u64),
    window_ns: Option<u64>,
    p99_max_ns: f64,
) -> Fleet {
    let good = window_ns.and_then(|w| all_good(windows, from, to, w, p99_max_ns));
    Fleet {
        links: ranked(
            links
                .iter()
                .map(|l| rank(format!("{} -> {}", l.node, l.peer), [l])),
        ),
        nodes: ranked(nodes(links).into_iter().map(|(n, ls)| rank(n, ls))),
        all_good_seconds: good.map_or(0.0, |(g, _)| g),
        all_good_percent: good.map(|(_, p)| p),
    }
}

/// Each node with the links it is an end of.
fn nodes(links: &[Link]) -> BTreeMap<String, Vec<&Link>> {
    let mut m: BTreeMap<String, Vec<&Link>> = BTreeMap::new();
    for l in links {
        m.entry(l.node.clone()).or_default().push(l);
        m.entry(l.peer.clone()).or_default().push(l);
    }
    m
}

/// `links` together: their seconds added up, their highest p99.
fn rank<'a>(name: String, links: impl IntoIterator<Item = &'a Link>) -> Rank {
    let mut r = Rank {
        name,
        ..Default::default()
    };
    for l in links {
        r.uas_seconds += l.availability.uas_seconds;
        r.ses_seconds += l.availability.ses_seconds;
        r.p99_ms = match (r.p99_ms, l.rtt.p99_ms) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    r
}

/// Worst first; equals by name.
fn ranked(it: impl Iterator<Item = Rank>) -> Vec<Rank> {
    let mut v: Vec<Rank> = it.collect();
    let key = |r: &Rank| (r.uas_seconds, r.ses_seconds, r.p99_ms.unwrap_or(-1.0));
    v.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        kb.0.total_cmp(&ka.0)
            .then(kb.1.total_cmp(&ka.1))
            .then(kb.2.total_cmp(&ka.2))
            .then_with(|| a.name.cmp(&b.name))
    });
    v
}

/// Seconds, and share of the range, in which every link was good; None
/// without links or range.
fn all_good(
    links: &[Windows<'_>],
    from: u64,
    to: u64,
    window_ns: u64,
    p99_max_ns: f64,
) -> Option<(f64, f64)> {
    let slots = usize::try_from(to.saturating_sub(from) / window_ns).ok()?;
    if links.is_empty() || slots == 0 {
        return None;
    }
    let mut count = vec![0u32; slots];
    for (ws, cs) in links {
        let mut last = None;
        for (w, c) in ws.iter().zip(*cs) {
            // Windows drift around the grid by scheduling jitter.
            let slot = ((w.t.saturating_sub(from) + window_ns / 2) / window_ns) as usize;
            let ok = *c != Class::Unavailable && w.received > 0 && w.p99_ns as f64 <= p99_max_ns;
            if ok && slot < slots && last != Some(slot) {
                count[slot] += 1;
                last = Some(slot);
            }
        }
    }
    let n = links.len() as u32;
    let good = count.iter().filter(|c| **c == n).count() as u64;
    let good_s = secs(good * window_ns);
    Some((good_s, 100.0 * good as f64 / slots as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::soak::{Availability, Rtt};

    const S: u64 = 1_000_000_000;

    fn link(node: &str, peer: &str, uas: f64, ses: f64, p99: f64) -> Link {
        Link {
            node: node.into(),
            peer: peer.into(),
            rtt: Rtt {
                p99_ms: Some(p99),
                ..Default::default()
            },
            availability: Availability {
                uas_seconds: uas,
                ses_seconds: ses,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn win(t: u64, p99_ns: u64) -> Win {
        Win {
            t: t * S,
            window_ns: S,
            sum_ns: 0,
            received: 10,
            p50_ns: 1,
            p99_ns,
            sent: 10,
            lost: 0,
        }
    }

    #[test]
    fn links_and_nodes_worst_first_and_the_time_all_were_good() {
        let links = [
            link("a", "b", 0.0, 3.0, 0.1),
            link("b", "a", 5.0, 0.0, 0.1),
            link("a", "c", 0.0, 3.0, 0.2),
            link("c", "a", 0.0, 0.0, 0.3),
        ];
        // Link 0 misses slot 3, link 1 is unavailable in slot 1, link 1's
        // p99 is over the limit in slot 2: slots 0 and 4 of 5 are good.
        let w0 = [win(0, 1), win(1, 1), win(2, 1), win(4, 1)];
        let w1 = [win(0, 1), win(1, 1), win(2, 300_000), win(3, 1), win(4, 1)];
        let c0 = [Class::Good, Class::Errored, Class::Severe, Class::Good];
        let c1 = [
            Class::Good,
            Class::Unavailable,
            Class::Good,
            Class::Good,
            Class::Good,
        ];
        let f = fleet(
            &links,
            &[(&w0, &c0), (&w1, &c1)],
            (0, 5 * S),
            Some(S),
            250_000.0,
        );
        let names: Vec<&str> = f.links.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["b -> a", "a -> c", "a -> b", "c -> a"]);
        let nodes: Vec<(&str, f64)> = f
            .nodes
            .iter()
            .map(|r| (r.name.as_str(), r.uas_seconds))
            .collect();
        assert_eq!(nodes, [("a", 5.0), ("b", 5.0), ("c", 0.0)]);
        assert_eq!(f.nodes[0].ses_seconds, 6.0);
        assert_eq!(f.all_good_seconds, 2.0);
        assert_eq!(f.all_good_percent, Some(40.0));
        assert_eq!(
            fleet(&links, &[], (0, S), Some(S), 1.0).all_good_percent,
            None
        );
    }
}
