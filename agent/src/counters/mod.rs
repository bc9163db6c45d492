//! Interface counters: bytes, packets, errors, drops, carrier, speed, MTU.
//!
//! This module owns the [`CounterSource`] trait, its error type, the pure
//! parsers for sysfs attribute text and the pure [`rate`] helper that turns
//! two counter samples into bits per second. The OS readers live beside it,
//! chosen as [`crate::platform`] describes: `linux.rs` reads sysfs under a
//! configurable root (so tests run on fixture trees), `macos.rs` reads the
//! per-interface 64-bit MIB (`IFMIB_IFDATA`), never the 32-bit `if_data`
//! that `getifaddrs` hands out, which wraps in under a second at
//! Thunderbolt speeds; `unsupported.rs` answers every read with
//! [`CountersError::Unsupported`]. Scheduling the reads and emitting the
//! records is the caller's business.

use std::path::{Path, PathBuf};
use std::time::Instant;

pub use boltwatch_proto::v1::InterfaceCounters;

use crate::platform::{Support, Unsupported};

crate::platform::os_module!(mod imp);

#[cfg(target_os = "linux")]
pub use imp::SysfsCounters;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub use imp::UnsupportedCounters;
#[cfg(target_os = "macos")]
pub use imp::{multicast_packets, MibCounters};

/// The files under a Linux interface's sysfs `statistics/` directory the
/// reader requires (a missing one fails the read). Fixture builders write
/// exactly these, so a reader that starts requiring another one fails its
/// fixture tests.
pub const SYSFS_STATISTICS: [&str; 8] = [
    "rx_bytes",
    "tx_bytes",
    "rx_packets",
    "tx_packets",
    "rx_errors",
    "tx_errors",
    "rx_dropped",
    "tx_dropped",
];

/// Whether this OS has a counter reader.
pub const SUPPORT: Support = imp::SUPPORT;

/// Why a counter read failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CountersError {
    /// The interface does not exist (or vanished between two reads).
    #[error("no such interface {0:?}")]
    NoSuchInterface(String),
    /// A counter file could not be read.
    #[error("reading {path}")]
    ReadSys {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A counter file held something that is not a number.
    #[error("parsing {path}: {value:?} is not a counter")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What it held (trimmed).
        value: String,
    },
    /// A system call failed (macOS `sysctl`).
    #[error("{call} for {interface}")]
    Sys {
        /// Which call.
        call: &'static str,
        /// Which interface.
        interface: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// This OS has no counter reader.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
}

/// Reads the counters of one interface.
pub trait CounterSource: Send {
    /// The current counters of `interface` (cumulative since the interface
    /// was created; the caller computes rates with [`rate`]).
    fn read(&mut self, interface: &str) -> Result<InterfaceCounters, CountersError>;
}

/// The counter source for this OS. `sysfs_root` (normally `/sys`) is only
/// used on Linux.
pub fn default_source(sysfs_root: &Path) -> Box<dyn CounterSource> {
    imp::default_source(sysfs_root)
}

/// Parses a sysfs unsigned counter ("12345\n").
pub fn parse_counter(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Parses sysfs `speed` (Mb/s, `-1` or garbage when unknown) into bits per
/// second, 0 when unknown.
pub fn parse_speed_mbps(text: &str) -> u64 {
    match text.trim().parse::<i64>() {
        Ok(mbps) if mbps > 0 => (mbps as u64).saturating_mul(1_000_000),
        _ => 0,
    }
}

/// Parses sysfs `carrier` ("1"/"0"); `None` for anything else.
pub fn parse_carrier(text: &str) -> Option<bool> {
    match text.trim() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
}

/// How many bits a counter has before it wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterWidth {
    /// A 32-bit counter (e.g. macOS `getifaddrs` `if_data`): a smaller value
    /// is read as one wrap at 2^32. Only meaningful when sampled faster than
    /// the wrap period (0.4 s at 80 Gb/s for a byte counter).
    Bits32,
    /// A 64-bit counter. It cannot wrap in practice (58 years of bytes at
    /// 80 Gb/s), so a smaller value means the counter was reset (interface
    /// re-created, driver reloaded): the increase is counted from zero.
    Bits64,
}

/// One reading of a cumulative counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterSample {
    /// The counter value.
    pub value: u64,
    /// When it was read (monotonic).
    pub at: Instant,
}

/// The rate between two samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Counter increase between the samples, in the counter's unit.
    pub delta: u64,
    /// `delta` per second, times `scale` (8 for bytes → bits).
    pub per_second: f64,
    /// The counter went backwards and was treated as reset to zero.
    pub reset: bool,
    /// The counter went backwards and was treated as one wrap.
    pub wrapped: bool,
}

/// Counter increase from `prev` to `cur`, and whether that was a reset or a
/// wrap. See [`CounterWidth`] for how a decrease is read.
pub fn counter_delta(prev: u64, cur: u64, width: CounterWidth) -> (u64, bool, bool) {
    if cur >= prev {
        return (cur - prev, false, false);
    }
    match width {
        CounterWidth::Bits32 if prev <= u64::from(u32::MAX) && cur <= u64::from(u32::MAX) => {
            ((1u64 << 32) - prev + cur, false, true)
        }
        _ => (cur, true, false),
    }
}

/// Rate between two samples of a counter, multiplied by `scale` (pass 8.0
/// for byte counters to get bits per second, 1.0 for packets). `None` when
/// no time passed between the samples (or they are out of order), since no
/// rate can be computed then.
pub fn rate(
    prev: CounterSample,
    cur: CounterSample,
    width: CounterWidth,
    scale: f64,
) -> Option<Rate> {
    let elapsed = cur.at.checked_duration_since(prev.at)?.as_secs_f64();
    if elapsed <= 0.0 {
        return None;
    }
    let (delta, reset, wrapped) = counter_delta(prev.value, cur.value, width);
    Some(Rate {
        delta,
        per_second: delta as f64 * scale / elapsed,
        reset,
        wrapped,
    })
}

/// Bits per second between two byte-counter samples of a 64-bit counter;
/// `None` when no time passed. A decrease is a reset, not a wrap.
pub fn bits_per_second(prev: CounterSample, cur: CounterSample) -> Option<f64> {
    rate(prev, cur, CounterWidth::Bits64, 8.0).map(|r| r.per_second)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn s(value: u64, at: Instant) -> CounterSample {
        CounterSample { value, at }
    }

    #[test]
    fn parses_sysfs_values() {
        assert_eq!(parse_counter("123\n"), Some(123));
        assert_eq!(parse_counter("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_counter("-1"), None);
        assert_eq!(parse_counter(""), None);
        assert_eq!(parse_speed_mbps("10000\n"), 10_000_000_000);
        assert_eq!(parse_speed_mbps("-1\n"), 0);
        assert_eq!(parse_speed_mbps("x"), 0);
        assert_eq!(parse_carrier("1\n"), Some(true));
        assert_eq!(parse_carrier("0"), Some(false));
        assert_eq!(parse_carrier(""), None);
    }

    #[test]
    fn rate_of_a_growing_counter() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(500);
        let r = rate(s(1_000, t0), s(6_000, t1), CounterWidth::Bits64, 8.0).unwrap();
        assert_eq!(r.delta, 5_000);
        assert!((r.per_second - 80_000.0).abs() < 1e-6);
        assert!(!r.reset && !r.wrapped);
        assert_eq!(
            bits_per_second(s(0, t0), s(10_000_000_000, t1)),
            Some(160e9)
        );
    }

    #[test]
    fn smaller_64_bit_value_is_a_reset_not_a_wrap() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let r = rate(s(u64::MAX - 10, t0), s(100, t1), CounterWidth::Bits64, 8.0).unwrap();
        assert!(r.reset);
        assert!(!r.wrapped);
        // Counted from zero: 100 bytes, not 2^64 - ... bytes.
        assert_eq!(r.delta, 100);
        assert_eq!(r.per_second, 800.0);
    }

    #[test]
    fn smaller_32_bit_value_is_one_wrap() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(2);
        let prev = u64::from(u32::MAX) - 99;
        let r = rate(s(prev, t0), s(50, t1), CounterWidth::Bits32, 1.0).unwrap();
        assert!(r.wrapped && !r.reset);
        assert_eq!(r.delta, 150);
        assert_eq!(r.per_second, 75.0);
        // A value that cannot come from a 32-bit counter is a reset.
        let r = rate(s(1 << 40, t0), s(5, t1), CounterWidth::Bits32, 1.0).unwrap();
        assert!(r.reset);
        assert_eq!(r.delta, 5);
    }

    #[test]
    fn no_rate_without_elapsed_time() {
        let t0 = Instant::now();
        assert_eq!(rate(s(1, t0), s(2, t0), CounterWidth::Bits64, 8.0), None);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(bits_per_second(s(1, t1), s(2, t0)), None);
    }

    #[test]
    fn unchanged_counter_is_zero_rate() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(bits_per_second(s(42, t0), s(42, t1)), Some(0.0));
    }
}
