//! Temperatures and CPU throttling of the node.
//!
//! This module owns the [`ThermalSource`] trait, its error type and the pure
//! logic every OS reader shares: stable sensor naming with de-duplication
//! ([`SensorSet`]), the sanity filter ([`MIN_CELSIUS`], [`MAX_CELSIUS`],
//! [`PLACEHOLDER_SENSORS`]), the `sysinfo` component walk both OSes use
//! ([`SysinfoSensors`]), the throttle-count tracker ([`ThrottleTracker`])
//! and the frequency ratio ([`cpu_frequency_ratio`]). The OS readers are
//! chosen as [`crate::platform`] describes: `linux.rs` reads thermal zones,
//! hwmon, `thermal_throttle` and cpufreq under a configurable sysfs root
//! (fixture-tested) and falls back to `sysinfo` on the real `/sys` when
//! sysfs yields no sensor; `macos.rs` reads the SMC temperature keys
//! (pure decoding and key choice in [`smc`], the IOKit calls in
//! `smc/iokit.rs`), falls back to `sysinfo` components (IOHID), and
//! reads the notify(3) thermal pressure level; `unsupported.rs` fails every
//! read with [`ThermalError::Unsupported`]. No sensors at all on a
//! supported OS is a normal outcome (VMs): the reading is empty, not an
//! error.

use std::collections::HashMap;
use std::path::Path;

pub use boltwatch_proto::v1::{TemperatureSensor, ThermalReading, Throttle};

pub mod level;
pub mod smc;
pub use level::ThrottleLevel;

use crate::platform::{Support, Unsupported};

crate::platform::os_module!(mod imp);

#[cfg(target_os = "macos")]
pub use imp::MacThermal;
#[cfg(target_os = "linux")]
pub use imp::SysfsThermal;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub use imp::UnsupportedThermal;

/// Whether this OS has a thermal reader.
pub const SUPPORT: Support = imp::SUPPORT;
/// Whether this OS's thermal reader measures `cpu_frequency_ratio` (when
/// it does not, the field is absent from every reading).
pub const FREQUENCY_SUPPORT: Support = imp::FREQUENCY_SUPPORT;

/// Readings below this are dropped: power-gated Apple cores report fixed
/// sub-ambient sentinels (6.7, 4.6, ~2 °C), absent sensors read 0.
pub const MIN_CELSIUS: f64 = 15.0;
/// Readings above this are dropped: no silicon runs there, and 127/255 °C
/// are common "no sensor" values.
pub const MAX_CELSIUS: f64 = 125.0;
/// Sensors that are not temperatures, dropped by name (the raw label before
/// any prefix): `PMU tcal` is an Apple calibration reference (~51.9 °C,
/// constant) and `noname` an unnamed Apple HID service that reads 0.
pub const PLACEHOLDER_SENSORS: &[&str] = &["PMU tcal", "noname"];

/// Why a thermal read failed. Missing sensors are not an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ThermalError {
    /// A sysfs directory exists but could not be listed.
    #[error("listing {path}")]
    ReadSys {
        /// The directory.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// This OS has no thermal reader.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
}

/// Reads the node's temperatures and throttle state.
pub trait ThermalSource: Send {
    /// One reading of every sensor that passed the sanity filter.
    fn read(&mut self) -> Result<ThermalReading, ThermalError>;

    /// What the sanity filter dropped so far (cumulative).
    fn filtered(&self) -> FilterStats {
        FilterStats::default()
    }
}

/// The thermal source for this OS. `sysfs_root` (normally `/sys`) is only
/// used on Linux.
pub fn default_source(sysfs_root: &Path) -> Box<dyn ThermalSource> {
    imp::default_source(sysfs_root)
}

/// Cumulative counts of readings the sanity filter dropped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FilterStats {
    /// Outside [`MIN_CELSIUS`], [`MAX_CELSIUS`] (or not finite).
    pub out_of_range: u64,
    /// Named in [`PLACEHOLDER_SENSORS`].
    pub placeholder: u64,
    /// The sensor file existed but could not be read or parsed (e.g. hwmon
    /// answering ENODATA while its device sleeps).
    pub unreadable: u64,
}

impl FilterStats {
    /// Everything dropped.
    pub fn total(&self) -> u64 {
        self.out_of_range + self.placeholder + self.unreadable
    }
}

/// Parses a sysfs temperature in millidegrees Celsius ("45000\n" → 45.0).
pub fn parse_millidegrees(text: &str) -> Option<f64> {
    text.trim().parse::<i64>().ok().map(|m| m as f64 / 1000.0)
}

/// Whether a reading passes the sanity filter.
pub fn plausible(celsius: f64) -> bool {
    celsius.is_finite() && (MIN_CELSIUS..=MAX_CELSIUS).contains(&celsius)
}

/// Builds one reading's sensor list: gives every sensor a stable, unique
/// name and applies the sanity filter.
///
/// Names are made unique before filtering, in the order sensors are added,
/// so a sensor keeps its name (`PMU tdie1 #3`) even when a sibling with the
/// same base name is dropped in one reading but not the next. Readers add
/// sensors in a stable order (sorted directory indices).
///
/// What the filter drops is counted in the source's cumulative
/// [`FilterStats`], which the set borrows for the reading.
#[derive(Debug)]
pub struct SensorSet<'s> {
    seen: HashMap<String, u32>,
    sensors: Vec<TemperatureSensor>,
    dropped: &'s mut FilterStats,
}

impl<'s> SensorSet<'s> {
    /// An empty set counting its drops in `dropped`.
    pub fn new(dropped: &'s mut FilterStats) -> Self {
        SensorSet {
            seen: HashMap::new(),
            sensors: Vec::new(),
            dropped,
        }
    }

    /// Reserves `base` and returns the unique name: `base` the first time,
    /// then `base #2`, `base #3`, ...
    pub fn unique_name(&mut self, base: &str) -> String {
        let n = self.seen.entry(base.to_string()).or_insert(0);
        *n += 1;
        if *n == 1 {
            base.to_string()
        } else {
            format!("{base} #{n}")
        }
    }

    /// Adds a sensor. `label` is the raw sensor label (checked against
    /// [`PLACEHOLDER_SENSORS`]), `name` the full base name (e.g.
    /// `hwmon/coretemp/Core 0`). `critical` is 0 when unknown.
    pub fn add(&mut self, label: &str, name: &str, celsius: f64, source: &str, critical: f64) {
        let name = self.unique_name(name);
        if PLACEHOLDER_SENSORS.contains(&label.trim()) {
            self.dropped.placeholder += 1;
            return;
        }
        if !plausible(celsius) {
            self.dropped.out_of_range += 1;
            return;
        }
        self.sensors.push(TemperatureSensor {
            name,
            celsius,
            source: source.to_string(),
            critical_celsius: if plausible(critical) { critical } else { 0.0 },
        });
    }

    /// Reserves the name of a sensor that could not be read, so later
    /// sensors keep their names, and counts it.
    pub fn unreadable(&mut self, name: &str) {
        self.unique_name(name);
        self.dropped.unreadable += 1;
    }

    /// Whether any sensor was accepted.
    pub fn is_empty(&self) -> bool {
        self.sensors.is_empty()
    }

    /// The accepted sensors.
    pub fn into_sensors(self) -> Vec<TemperatureSensor> {
        self.sensors
    }
}

/// The temperature sensors `sysinfo` knows (hwmon on Linux, IOHID on
/// macOS), refreshed on each read and fed through a [`SensorSet`] like
/// every other sensor. Enumerated on first use only, since listing is the
/// expensive part.
#[derive(Default)]
pub struct SysinfoSensors {
    components: Option<sysinfo::Components>,
}

impl std::fmt::Debug for SysinfoSensors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SysinfoSensors")
            .field("listed", &self.components.is_some())
            .finish()
    }
}

impl SysinfoSensors {
    /// Nothing listed yet.
    pub fn new() -> Self {
        SysinfoSensors::default()
    }

    /// Refreshes the components and adds each to `set`, labelled
    /// `source`.
    pub fn add_to(&mut self, set: &mut SensorSet<'_>, source: &str) {
        match &mut self.components {
            Some(c) => c.refresh(true),
            None => match sysinfo::Components::new_with_refreshed_list() {
                Ok(c) => self.components = Some(c),
                Err(e) => {
                    tracing::debug!(error = %e, "sysinfo components unavailable");
                    return;
                }
            },
        }
        let Some(components) = &self.components else {
            return;
        };
        for c in components {
            let label = c.label();
            match c.temperature() {
                Some(t) => set.add(
                    label,
                    label,
                    f64::from(t),
                    source,
                    c.critical().map(f64::from).unwrap_or(0.0),
                ),
                None => set.unreadable(label),
            }
        }
    }
}

/// Tells whether the CPU throttled between two reads from the kernel's
/// cumulative throttle-event count.
///
/// Linux `*_throttle_count` increments when a throttling episode starts,
/// whereas `*_total_time_ms` only moves when one ends; the count therefore
/// reports an episode one read earlier and is what we use. "Throttled" means
/// at least one new episode began since the previous read. The first read
/// has no baseline and reports not throttled; a count that went backwards
/// (CPU hot-unplug, module reload) re-baselines without reporting.
#[derive(Debug, Default, Clone)]
pub struct ThrottleTracker {
    prev: Option<u64>,
}

impl ThrottleTracker {
    /// A tracker with no baseline.
    pub fn new() -> Self {
        ThrottleTracker::default()
    }

    /// Feeds the current total count; returns whether it grew.
    pub fn update(&mut self, total: u64) -> bool {
        let throttled = matches!(self.prev, Some(prev) if total > prev);
        self.prev = Some(total);
        throttled
    }
}

/// Mean of `cur / max` over CPU frequency policies, clamped to 0..=1.
/// Pairs with `max == 0` are skipped; `None` when none is usable.
pub fn cpu_frequency_ratio(pairs: &[(u64, u64)]) -> Option<f64> {
    let ratios: Vec<f64> = pairs
        .iter()
        .filter(|(_, max)| *max > 0)
        .map(|(cur, max)| (*cur as f64 / *max as f64).clamp(0.0, 1.0))
        .collect();
    if ratios.is_empty() {
        None
    } else {
        Some(ratios.iter().sum::<f64>() / ratios.len() as f64)
    }
}

/// Numeric suffix of a sysfs entry (`thermal_zone12` → 12, `temp3_input`
/// → 3 with prefix `temp`), used to sort entries in kernel order rather
/// than string order.
pub fn index_after(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millidegrees() {
        assert_eq!(parse_millidegrees("45000\n"), Some(45.0));
        assert_eq!(parse_millidegrees("-2000"), Some(-2.0));
        assert_eq!(parse_millidegrees("n/a"), None);
    }

    #[test]
    fn names_are_unique_and_stable() {
        let mut stats = FilterStats::default();
        let mut set = SensorSet::new(&mut stats);
        set.add("tdie1", "PMU tdie1", 40.0, "sysinfo", 0.0);
        set.add("tdie1", "PMU tdie1", 2.0, "sysinfo", 0.0);
        set.add("tdie1", "PMU tdie1", 42.0, "sysinfo", 0.0);
        let names: Vec<_> = set.into_sensors().into_iter().map(|s| s.name).collect();
        // The second one was filtered but kept its slot: the third is #3.
        assert_eq!(names, vec!["PMU tdie1", "PMU tdie1 #3"]);
        assert_eq!(stats.out_of_range, 1);
    }

    #[test]
    fn filter_drops_out_of_range_and_placeholders() {
        let mut stats = FilterStats::default();
        let mut set = SensorSet::new(&mut stats);
        for c in [0.0, 14.9, 125.1, 127.0, f64::NAN, -40.0] {
            set.add("x", "x", c, "t", 0.0);
        }
        set.add("PMU tcal", "PMU tcal", 51.9, "sysinfo", 0.0);
        set.add("noname", "noname", 30.0, "sysinfo", 0.0);
        set.add("ok", "ok", 15.0, "t", 1000.0);
        set.add("ok2", "ok2", 125.0, "t", 100.0);
        set.unreadable("gone");
        let s = set.into_sensors();
        assert_eq!(
            stats,
            FilterStats {
                out_of_range: 6,
                placeholder: 2,
                unreadable: 1
            }
        );
        assert_eq!(stats.total(), 9);
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[0].critical_celsius, 0.0,
            "implausible critical is unknown"
        );
        assert_eq!(s[1].critical_celsius, 100.0);
    }

    #[test]
    fn throttle_tracker_needs_a_baseline_and_an_increase() {
        let mut t = ThrottleTracker::new();
        assert!(!t.update(5), "first read has no baseline");
        assert!(!t.update(5));
        assert!(t.update(6));
        assert!(!t.update(6));
        assert!(!t.update(2), "a decrease re-baselines");
        assert!(t.update(3));
    }

    #[test]
    fn frequency_ratio() {
        assert_eq!(cpu_frequency_ratio(&[]), None);
        assert_eq!(cpu_frequency_ratio(&[(1, 0)]), None);
        let r = cpu_frequency_ratio(&[(1_000_000, 2_000_000), (2_000_000, 2_000_000)]).unwrap();
        assert!((r - 0.75).abs() < 1e-9);
        assert_eq!(cpu_frequency_ratio(&[(3, 2)]), Some(1.0));
    }

    #[test]
    fn indices() {
        assert_eq!(index_after("thermal_zone12", "thermal_zone"), Some(12));
        assert_eq!(index_after("temp3_input", "temp"), Some(3));
        assert_eq!(index_after("hwmon", "hwmon"), None);
        assert_eq!(index_after("cooling_device0", "thermal_zone"), None);
    }
}
