//! One proptest configuration for the workspace's property tests: a fixed
//! seed, so CI runs the same cases every time, and regression files beside
//! the test sources (`tests/props.proptest-regressions`), committed, so a
//! case that once failed is replayed first forever.
//!
//! Exploring with fresh cases is a separate, deliberate act:
//! `PROPTEST_RNG_SEED=$RANDOM cargo test -p boltwatch-agent --test props`
//! (any u64); a failure is written to the regression file, to be committed
//! with its fix.

use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};

/// The seed CI uses.
pub const SEED: u64 = 0x626f_6c74_7761_7463; // "boltwatc"

/// `cases` cases from the fixed seed, unless `PROPTEST_RNG_SEED` names
/// another.
pub fn config(cases: u32) -> Config {
    let default = Config::default();
    let rng_seed = match default.rng_seed {
        RngSeed::Random => RngSeed::Fixed(SEED),
        chosen => chosen,
    };
    Config {
        cases,
        rng_seed,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..default
    }
}
