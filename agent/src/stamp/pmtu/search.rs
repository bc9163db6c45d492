//! The path MTU search, pure: which packet size to try next, given which
//! sizes came back. No I/O and no clock; [`super`] sends the packets.
//!
//! The ceiling (the local interface's MTU) is tried first: on a healthy
//! link it comes back and the search is over after one step. Then the
//! floor (the size every host of the family must take), so a path that
//! carries nothing padded ends in two steps with no answer instead of a
//! dozen. Between them a binary search, which finds the largest size that
//! returns in at most `ceil(log2(ceiling - floor))` more steps (14 from
//! 576 to 9000), provided the path is monotone (everything up to the path
//! MTU passes, nothing above it), as a link of one MTU per hop is.

/// The smallest IPv4 packet every host must accept (RFC 791, RFC 1122
/// 3.3.3: 576 octets).
pub const FLOOR_V4: u32 = 576;
/// The IPv6 minimum link MTU (RFC 8200 section 5: 1280 octets).
pub const FLOOR_V6: u32 = 1280;

/// Where a search stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// Largest size known to come back.
    good: Option<u32>,
    /// Smallest size known not to come back.
    bad: Option<u32>,
    floor: u32,
    ceiling: u32,
}

impl Search {
    /// A search between `floor` and `ceiling` (inclusive). A ceiling below
    /// the floor (an interface MTU smaller than the family's minimum, or
    /// unknown and 0) is searched as the floor alone.
    pub fn new(floor: u32, ceiling: u32) -> Search {
        Search {
            good: None,
            bad: None,
            floor,
            ceiling: ceiling.max(floor),
        }
    }

    /// The size to try next; `None` when the search is over.
    pub fn next(&self) -> Option<u32> {
        match (self.good, self.bad) {
            (None, None) => Some(self.ceiling),
            (None, Some(bad)) if bad > self.floor => Some(self.floor),
            (None, Some(_)) => None,
            (Some(_), None) => None,
            (Some(good), Some(bad)) if bad - good > 1 => Some(good + (bad - good) / 2),
            (Some(_), Some(_)) => None,
        }
    }

    /// Records whether a packet of `size` octets came back.
    pub fn answer(&mut self, size: u32, returned: bool) {
        if returned {
            self.good = Some(self.good.map_or(size, |g| g.max(size)));
        } else {
            self.bad = Some(self.bad.map_or(size, |b| b.min(size)));
        }
    }

    /// The largest size that came back: the path MTU once [`Search::next`]
    /// is `None`; `None` when not even the floor did.
    pub fn result(&self) -> Option<u32> {
        self.good
    }

    /// Steps a search can take at most: ceiling, floor, then the halvings.
    pub fn max_steps(floor: u32, ceiling: u32) -> u32 {
        let span = ceiling.saturating_sub(floor).max(1);
        2 + (u32::BITS - (span - 1).leading_zeros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;

    /// Runs a search against a path that carries up to `mtu` octets.
    fn run(floor: u32, ceiling: u32, mtu: u32) -> (Option<u32>, u32) {
        let mut s = Search::new(floor, ceiling);
        let mut steps = 0;
        while let Some(size) = s.next() {
            steps += 1;
            s.answer(size, size <= mtu);
        }
        (s.result(), steps)
    }

    #[test]
    fn a_path_as_wide_as_the_interface_takes_one_step() {
        assert_eq!(run(576, 9000, 9000), (Some(9000), 1));
        assert_eq!(run(576, 1500, 65_535), (Some(1500), 1));
    }

    #[test]
    fn a_narrower_path_is_found_exactly() {
        assert_eq!(run(576, 9000, 1500).0, Some(1500));
        assert_eq!(run(1280, 9000, 1280).0, Some(1280));
        assert_eq!(run(576, 9000, 8999).0, Some(8999));
        assert_eq!(run(576, 9000, 577).0, Some(577));
    }

    #[test]
    fn a_path_that_carries_nothing_ends_after_two_steps() {
        assert_eq!(run(576, 9000, 0), (None, 2));
        // A ceiling at the floor is one size: one step.
        assert_eq!(run(1280, 1280, 0), (None, 1));
        assert_eq!(run(1280, 0, 2000), (Some(1280), 1));
    }

    proptest! {
        // A fixed seed: CI runs the same cases every time.
        #![proptest_config(ProptestConfig {
            rng_seed: RngSeed::Fixed(0x9a7_1500),
            cases: 512,
            ..ProptestConfig::default()
        })]

        #[test]
        fn finds_the_largest_size_that_returns_within_the_step_bound(
            floor in 68u32..2000,
            span in 0u32..70_000,
            mtu in 0u32..80_000,
        ) {
            let ceiling = floor + span;
            let (found, steps) = run(floor, ceiling, mtu);
            let want = (mtu >= floor).then(|| mtu.min(ceiling));
            prop_assert_eq!(found, want);
            prop_assert!(steps <= Search::max_steps(floor, ceiling));
        }
    }
}
