//! The RTT histogram layout: Prometheus native-histogram buckets of schema 3.
//!
//! Bucket `i` holds values `v` (in seconds) with `2^((i-1)/8) < v <= 2^(i/8)`,
//! so neighbouring bounds are `2^(1/8) = 1.0905` apart (9.05%, inside the 10%
//! the product promises). Agents count samples into these buckets; the
//! collector adds the counts into classic Prometheus buckets whose `le`
//! bounds are the same powers of two, so no re-bucketing error is added on
//! the way to `/metrics`.

/// Buckets per power of two.
pub const BUCKETS_PER_OCTAVE: i32 = 8;

/// Index of the bucket holding `nanos` nanoseconds. Zero is put in the lowest
/// bucket the layout can express for 1 ns.
pub fn bucket_index(nanos: u64) -> i32 {
    let secs = nanos.max(1) as f64 / 1e9;
    let exact = secs.log2() * BUCKETS_PER_OCTAVE as f64;
    let mut idx = exact.ceil() as i32;
    // Guard the boundaries against floating-point error: the invariant is
    // lower < v <= upper.
    if secs > upper_bound_seconds(idx) {
        idx += 1;
    } else if secs <= upper_bound_seconds(idx - 1) {
        idx -= 1;
    }
    idx
}

/// Upper (inclusive) bound of bucket `index`, in seconds.
pub fn upper_bound_seconds(index: i32) -> f64 {
    (index as f64 / BUCKETS_PER_OCTAVE as f64).exp2()
}

/// The bucket indexes whose upper bounds span `[from_s, to_s]` seconds: the
/// first bound at or below `from_s` through the first bound at or above
/// `to_s`.
pub fn indexes_spanning(from_s: f64, to_s: f64) -> std::ops::RangeInclusive<i32> {
    let lo = (from_s.log2() * BUCKETS_PER_OCTAVE as f64).floor() as i32;
    let hi = (to_s.log2() * BUCKETS_PER_OCTAVE as f64).ceil() as i32;
    lo..=hi
}

/// Counts RTTs of `nanos` nanoseconds into sparse buckets, ascending by
/// index, as an `RttSummary` carries them.
pub fn sparse_buckets(nanos: impl IntoIterator<Item = u64>) -> Vec<crate::v1::HistogramBucket> {
    let mut counts = std::collections::BTreeMap::<i32, u64>::new();
    for n in nanos {
        *counts.entry(bucket_index(n)).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(index, count)| crate::v1::HistogramBucket { index, count })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_inside_their_bucket() {
        for nanos in [
            1u64,
            999,
            1_000,
            10_000,
            80_000,
            90_510,
            1_000_000,
            5_000_000,
            2_000_000_000,
        ] {
            let i = bucket_index(nanos);
            let v = nanos as f64 / 1e9;
            assert!(v <= upper_bound_seconds(i), "{nanos} above bucket {i}");
            assert!(v > upper_bound_seconds(i - 1), "{nanos} below bucket {i}");
        }
    }

    #[test]
    fn sparse_buckets_count_per_index_in_order() {
        let b = sparse_buckets([80_000, 1_000, 80_000]);
        let got: Vec<_> = b.iter().map(|b| (b.index, b.count)).collect();
        assert_eq!(got, [(bucket_index(1_000), 1), (bucket_index(80_000), 2)]);
    }

    #[test]
    fn exact_powers_of_two_are_upper_bounds() {
        // 2^-10 s is the inclusive upper bound of bucket -80.
        let nanos = (1e9 / 1024.0) as u64; // 976562 ns, just under 2^-10 s
        assert_eq!(bucket_index(nanos), -80);
        assert_eq!(upper_bound_seconds(-80), 1.0 / 1024.0);
    }

    #[test]
    fn neighbours_within_ten_percent_from_10us_to_5ms() {
        let r = indexes_spanning(10e-6, 5e-3);
        assert!(upper_bound_seconds(*r.start()) <= 10e-6);
        assert!(upper_bound_seconds(*r.end()) >= 5e-3);
        for i in r {
            let ratio = upper_bound_seconds(i + 1) / upper_bound_seconds(i);
            assert!(ratio < 1.10, "bucket {i}: {ratio}");
        }
    }
}
