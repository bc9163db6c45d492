//! Changepoints in a level series (a link's per-minute RTT p50, its
//! bandwidth tests): where the series' mean moved and by how much. Pure.
//!
//! Seeded binary segmentation (Kovacs, Li, Buhlmann and Munk 2020) under
//! a squared-error cost: the best single split of each of a fixed set of
//! intervals at every scale, taken greedily while a split's gain exceeds a
//! penalty. The short intervals find a 30-minute bump in 72 hours, which
//! plain binary segmentation's first split over the whole series misses;
//! and unlike PELT, whose pruning never fires on a series without changes
//! (quadratic on exactly the stationary links a soak hopes for), it costs
//! O(n log n). The penalty is `PENALTY * sigma^2 * ln n`, with the noise
//! `sigma` estimated from the first differences (their median absolute
//! deviation), which level shifts barely touch. A change smaller than
//! [`Params::min_relative`] of the level before it is not reported (the
//! neighbouring segments are merged): a long, quiet series would otherwise
//! show tiny real drifts a reader cannot act on.
//!
//! No crate was taken: `pelt` on crates.io is a one-person port whose
//! releases differ in API and pull ndarray (and pyo3 for its Python
//! build), and `augurs-changepoint` / `changepoint` are Bayesian online
//! detectors over `rv` and `nalgebra`; each still leaves the penalty and
//! the noise estimate to the caller, which is most of this file.

/// Penalty per changepoint, in units of `sigma^2 * ln n` (2 is the
/// Schwarz criterion; 3 keeps a stationary series of a few thousand
/// minutes from showing a false change, as the tests check).
const PENALTY: f64 = 3.0;

/// The floor of the noise estimate, relative to the series' median: a
/// series of identical values has no noise to scale the penalty by.
const MIN_NOISE: f64 = 0.002;

/// What a series' changepoints must be.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Fewest points a segment holds.
    pub min_segment: usize,
    /// Smallest change reported, relative to the level before (0.05 is 5 %).
    pub min_relative: f64,
}

/// One changepoint: the first point of the new level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// Index of the first point after the change.
    pub index: usize,
    /// Mean of the segment before.
    pub before: f64,
    /// Mean of the segment after.
    pub after: f64,
}

/// Prefix sums of a series and its squares: any segment's cost in O(1).
struct Sums {
    s: Vec<f64>,
    q: Vec<f64>,
}

impl Sums {
    fn of(x: &[f64]) -> Sums {
        let (mut s, mut q) = (vec![0.0], vec![0.0]);
        for v in x {
            s.push(s.last().unwrap() + v);
            q.push(q.last().unwrap() + v * v);
        }
        Sums { s, q }
    }

    /// Squared deviations of `x[a..b]` from its mean.
    fn cost(&self, a: usize, b: usize) -> f64 {
        let n = (b - a) as f64;
        let sum = self.s[b] - self.s[a];
        (self.q[b] - self.q[a] - sum * sum / n).max(0.0)
    }

    fn mean(&self, a: usize, b: usize) -> f64 {
        (self.s[b] - self.s[a]) / (b - a) as f64
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The noise's standard deviation: the median absolute first difference
/// over 0.6745 (a normal's MAD) and sqrt 2 (a difference of two draws).
fn noise(x: &[f64]) -> f64 {
    let d: Vec<f64> = x.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    let sigma = median(d) / 0.6745 / std::f64::consts::SQRT_2;
    let floor = MIN_NOISE * median(x.iter().map(|v| v.abs()).collect());
    sigma.max(floor).max(f64::MIN_POSITIVE)
}

/// The seeded intervals of `[0, n)`: at each scale, intervals of length
/// `n / 2^(d-1)` overlapping by half, down to `2 * min` points.
fn seeds(n: usize, min: usize) -> Vec<(usize, usize)> {
    let mut v = vec![(0, n)];
    let mut d = 2u32;
    loop {
        let len = n as f64 / 2f64.powi(d as i32 - 1);
        if len < (2 * min) as f64 {
            return v;
        }
        let step = len / 2.0;
        let count = (1usize << d) - 1;
        v.extend((0..count).map(|i| {
            let a = (i as f64 * step).round() as usize;
            (a, ((i as f64 * step + len).round() as usize).min(n))
        }));
        d += 1;
    }
}

/// The best split of `[a, b)` (segments of at least `min`) and its gain.
fn best_split(sums: &Sums, (a, b): (usize, usize), min: usize) -> Option<(usize, f64)> {
    let whole = sums.cost(a, b);
    (a + min..=b.saturating_sub(min))
        .map(|k| (k, whole - sums.cost(a, k) - sums.cost(k, b)))
        .max_by(|x, y| x.1.total_cmp(&y.1))
}

/// Seeded binary segmentation (Kovacs, Li, Buhlmann and Munk 2020) with
/// greedy selection: the best split of every seeded interval, the largest
/// gain above `beta` taken first, every interval it falls inside dropped,
/// until none is left. Deterministic, O(n log n).
fn segment(sums: &Sums, n: usize, min: usize, beta: f64) -> Vec<usize> {
    let mut cands: Vec<(usize, usize, usize, f64)> = seeds(n, min)
        .into_iter()
        .filter_map(|iv| best_split(sums, iv, min).map(|(k, g)| (iv.0, iv.1, k, g)))
        .filter(|c| c.3 > beta)
        .collect();
    let mut cps: Vec<usize> = Vec::new();
    while let Some(i) = (0..cands.len()).max_by(|&x, &y| cands[x].3.total_cmp(&cands[y].3)) {
        let k = cands[i].2;
        // A split closer than `min` to one taken would leave a short segment.
        if cps.iter().all(|c| c.abs_diff(k) >= min) {
            cps.push(k);
        }
        cands.retain(|c| !(c.0 < k && k < c.1));
        cands.retain(|c| c.2 != k);
    }
    cps.sort_unstable();
    cps
}

/// Drops the smallest change below `min_relative` until none is left.
fn merge_small(sums: &Sums, n: usize, mut cps: Vec<usize>, min_relative: f64) -> Vec<usize> {
    loop {
        let mut bounds = vec![0];
        bounds.extend(&cps);
        bounds.push(n);
        let small = (0..cps.len())
            .map(|i| {
                let before = sums.mean(bounds[i], bounds[i + 1]);
                let after = sums.mean(bounds[i + 1], bounds[i + 2]);
                (i, relative(before, after).abs())
            })
            .filter(|(_, r)| *r < min_relative)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match small {
            Some((i, _)) => {
                cps.remove(i);
            }
            None => return cps,
        }
    }
}

/// `(after - before) / |before|` (0 when both are 0).
pub fn relative(before: f64, after: f64) -> f64 {
    if before == 0.0 {
        if after == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (after - before) / before.abs()
    }
}

/// The changepoints of `x` (in time order, evenly or unevenly spaced).
pub fn detect(x: &[f64], p: Params) -> Vec<Change> {
    let min = p.min_segment.max(1);
    let n = x.len();
    if n < 2 * min {
        return Vec::new();
    }
    let sums = Sums::of(x);
    let sigma = noise(x);
    let beta = PENALTY * sigma * sigma * (n as f64).ln();
    let cps = merge_small(&sums, n, segment(&sums, n, min, beta), p.min_relative);
    let mut bounds = vec![0];
    bounds.extend(&cps);
    bounds.push(n);
    (0..cps.len())
        .map(|i| Change {
            index: bounds[i + 1],
            before: sums.mean(bounds[i], bounds[i + 1]),
            after: sums.mean(bounds[i + 1], bounds[i + 2]),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64: fixed seeds, the same series on every run.
    fn rng(seed: u64) -> impl FnMut() -> f64 {
        let mut x = seed;
        move || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Roughly normal noise (the sum of four uniforms), sd `sd`.
    fn noisy(seed: u64, n: usize, level: f64, sd: f64) -> Vec<f64> {
        let mut u = rng(seed);
        (0..n)
            .map(|_| level + sd * ((u() + u() + u() + u() - 2.0) * 3f64.sqrt()))
            .collect()
    }

    const RTT: Params = Params {
        min_segment: 10,
        min_relative: 0.05,
    };

    #[test]
    fn stationary_series_yield_at_most_one_change_per_six_hours() {
        // 72 hours of minutes, noise from 1 % to 15 % of the level.
        let mut total = 0;
        for seed in 1..=40u64 {
            let sd = 0.01 + 0.14 * (seed % 8) as f64 / 7.0;
            let x = noisy(seed, 72 * 60, 100.0, sd * 100.0);
            let found = detect(&x, RTT).len();
            assert!(found <= 12, "seed {seed}: {found} changes in 72 h");
            total += found;
        }
        assert!(
            total <= 4,
            "{total} false changes over 40 stationary series"
        );
    }

    #[test]
    fn a_step_or_a_bump_of_twenty_percent_is_found_within_five_points() {
        for seed in 1..=40u64 {
            let mut u = rng(seed * 7919);
            let n = 6 * 60 + (u() * 66.0 * 60.0) as usize;
            let sd = 2.0 + 8.0 * u(); // up to 10 % of the level
            let mut x = noisy(seed, n, 100.0, sd);
            let at = 30 + (u() * (n - 90) as f64) as usize;
            let len = 30 + (u() * (n - at - 60) as f64) as usize;
            let factor = if seed % 2 == 0 { 1.2 } else { 0.8 };
            x[at..at + len].iter_mut().for_each(|v| *v *= factor);
            let c = detect(&x, RTT);
            let near = |i: usize| c.iter().any(|c| c.index.abs_diff(i) <= 5);
            assert!(near(at), "seed {seed}: start {at} not in {c:?}");
            assert!(near(at + len), "seed {seed}: end {} not in {c:?}", at + len);
            let first = c.iter().find(|c| c.index.abs_diff(at) <= 5).unwrap();
            let r = relative(first.before, first.after);
            assert!((r - (factor - 1.0)).abs() < 0.05, "seed {seed}: {r}");
        }
    }

    #[test]
    fn levels_are_the_segment_means_and_small_changes_are_merged() {
        let mut x = vec![10.0; 20];
        x.extend(vec![13.0; 20]);
        x.extend(vec![13.2; 20]);
        let c = detect(
            &x,
            Params {
                min_segment: 5,
                min_relative: 0.05,
            },
        );
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].index, 20);
        assert_eq!(c[0].before, 10.0);
        assert!((c[0].after - 13.1).abs() < 1e-9, "{c:?}");
        assert!(detect(&[1.0, 2.0, 3.0], RTT).is_empty());
        assert!(detect(&[5.0; 100], RTT).is_empty());
    }
}
