//! The report's UTC hours: the per-hour table and the RTT accumulator that
//! feeds it bin by the same rule.

/// An hour, ns.
pub(super) const HOUR_NS: u64 = 3_600_000_000_000;

/// The hour holding `t`.
pub(super) fn hour_of(t: u64) -> u64 {
    t - t % HOUR_NS
}
