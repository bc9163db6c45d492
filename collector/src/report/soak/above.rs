//! Time beyond the SLO's thresholds: the seconds (and share of the range)
//! of RTT windows whose p99 exceeds `rtt_p99_ms`, and of bandwidth tests
//! below `bandwidth_mean_min_gbps` when that is set (a failed test moved
//! nothing, so it is below).

use super::bandwidth::Test;
use super::{secs, Above, Win};
use crate::soak::Slo;

/// The link's time above the thresholds of `slo` over `range_ns`.
pub(super) fn above<'a>(
    windows: &[Win],
    tests: impl Iterator<Item = &'a Test>,
    slo: &Slo,
    range_ns: u64,
) -> Above {
    let limit = slo.rtt_p99_ms * 1e6;
    let rtt_ns: u64 = windows
        .iter()
        .filter(|w| w.received > 0 && w.p99_ns as f64 > limit)
        .map(|w| w.window_ns)
        .sum();
    let below: Option<(u64, u64)> = slo.bandwidth_mean_min_gbps.map(|min| {
        tests
            .filter(|t| t.gbps.is_none_or(|g| g < min))
            .fold((0, 0), |(n, ns), t| (n + 1, ns + t.ns))
    });
    let share = |ns: u64| (range_ns > 0).then(|| 100.0 * ns as f64 / range_ns as f64);
    Above {
        rtt_p99_seconds: secs(rtt_ns),
        rtt_p99_percent: share(rtt_ns),
        bandwidth_tests: below.map(|b| b.0),
        bandwidth_seconds: below.map(|b| secs(b.1)),
        bandwidth_percent: below.and_then(|b| share(b.1)),
    }
}

/// All links together: their times added up, shares of `links` times the
/// range.
pub(super) fn overall<'a>(links: impl Iterator<Item = &'a Above>, range_ns: u64) -> Above {
    let mut a = Above::default();
    let mut n = 0u64;
    for l in links {
        n += 1;
        a.rtt_p99_seconds += l.rtt_p99_seconds;
        if let (Some(t), Some(s)) = (l.bandwidth_tests, l.bandwidth_seconds) {
            *a.bandwidth_tests.get_or_insert(0) += t;
            *a.bandwidth_seconds.get_or_insert(0.0) += s;
        }
    }
    let all = secs(range_ns) * n as f64;
    a.rtt_p99_percent = share_of(a.rtt_p99_seconds, all);
    a.bandwidth_percent = a.bandwidth_seconds.and_then(|s| share_of(s, all));
    a
}

/// `s` seconds as a percentage of `all` (None of nothing).
fn share_of(s: f64, all: f64) -> Option<f64> {
    (all > 0.0).then_some(100.0 * s / all)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn win(t: u64, p99_us: u64, received: u64) -> Win {
        Win {
            t: t * S,
            window_ns: S,
            sum_ns: 0,
            received,
            p50_ns: 1,
            p99_ns: p99_us * 1000,
            sent: 10,
            lost: 10 - received,
        }
    }

    fn test(gbps: Option<f64>) -> Test {
        Test {
            from: "a".into(),
            to: "b".into(),
            t: 0,
            gbps,
            ns: 10 * S,
        }
    }

    #[test]
    fn windows_over_p99_and_tests_under_the_minimum() {
        let slo = Slo {
            bandwidth_mean_min_gbps: Some(60.0),
            ..Slo::default()
        };
        // 0.25 ms is the default p99 limit: 250 us is not above it; a
        // window without replies has no p99.
        let w = [
            win(0, 250, 10),
            win(1, 251, 10),
            win(2, 900, 10),
            win(3, 0, 0),
        ];
        let t = [test(Some(59.0)), test(Some(61.0)), test(None)];
        let a = above(&w, t.iter(), &slo, 100 * S);
        assert_eq!(a.rtt_p99_seconds, 2.0);
        assert_eq!(a.rtt_p99_percent, Some(2.0));
        assert_eq!(a.bandwidth_tests, Some(2));
        assert_eq!(a.bandwidth_seconds, Some(20.0));
        assert_eq!(a.bandwidth_percent, Some(20.0));
        let unset = above(&w, t.iter(), &Slo::default(), 100 * S);
        assert_eq!(
            (unset.bandwidth_tests, unset.bandwidth_percent),
            (None, None)
        );
        let both = overall([&a, &unset].into_iter(), 100 * S);
        assert_eq!(both.rtt_p99_seconds, 4.0);
        assert_eq!(both.rtt_p99_percent, Some(2.0));
        assert_eq!(both.bandwidth_percent, Some(10.0));
    }
}
