//! Linux thermals from sysfs under a configurable root.
//!
//! Sensors: `class/thermal/thermal_zone*/{type,temp,trip_point_*}` named
//! `thermal/<type>`, and `class/hwmon/hwmon*/{name,temp*_input,temp*_label,
//! temp*_crit}` named `hwmon/<name>/<label or tempN>`. Throttling:
//! `devices/system/cpu/cpu*/thermal_throttle/{core,package}_throttle_count`
//! (Intel `therm_throt` only) and `devices/system/cpu/cpufreq/policy*/
//! {scaling_cur_freq,cpuinfo_max_freq}`. When the root is the real `/sys`
//! and sysfs yields no sensor, `sysinfo` components are tried (on real
//! hardware it knows a few more drivers' quirks); in VMs both are empty.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::{
    cpu_frequency_ratio, index_after, parse_millidegrees, FilterStats, SensorSet, SysinfoSensors,
    ThermalError, ThermalReading, ThermalSource, Throttle, ThrottleLevel, ThrottleTracker,
};
use crate::platform::Support;

/// Linux reads thermals from sysfs.
pub(super) const SUPPORT: Support = Support::Supported;
/// cpufreq gives the frequency ratio (where the kernel has cpufreq).
pub(super) const FREQUENCY_SUPPORT: Support = Support::Supported;

/// The source of this OS: sysfs under `sysfs_root`.
pub(super) fn default_source(sysfs_root: &Path) -> Box<dyn ThermalSource> {
    Box::new(SysfsThermal::new(sysfs_root))
}

/// Reads thermal zones, hwmon, throttle counts and cpufreq under a root.
#[derive(Debug)]
pub struct SysfsThermal {
    root: PathBuf,
    live: bool,
    tracker: ThrottleTracker,
    /// Growth of the kernel's total throttled time (ms), where it has one.
    time_tracker: ThrottleTracker,
    level: ThrottleLevel,
    stats: FilterStats,
    sysinfo: SysinfoSensors,
}

impl SysfsThermal {
    /// A reader rooted at `sysfs_root`. The `sysinfo` fallback is only
    /// armed when the root is the real `/sys`, so fixture trees are read
    /// alone.
    pub fn new(sysfs_root: &Path) -> Self {
        let live = fs::canonicalize(sysfs_root)
            .map(|p| p == Path::new("/sys"))
            .unwrap_or(false);
        SysfsThermal {
            root: sysfs_root.to_path_buf(),
            live,
            tracker: ThrottleTracker::new(),
            time_tracker: ThrottleTracker::new(),
            level: ThrottleLevel::new(),
            stats: FilterStats::default(),
            sysinfo: SysinfoSensors::new(),
        }
    }
}

/// Entries of `dir` whose name is `prefix` plus a number, sorted by that
/// number. A missing directory is empty, not an error.
fn indexed_entries(dir: &Path, prefix: &str) -> Result<Vec<(u32, PathBuf)>, ThermalError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ThermalError::ReadSys {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let rest = name.strip_prefix(prefix)?;
            if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some((index_after(&name, prefix)?, e.path()))
        })
        .collect();
    out.sort();
    Ok(out)
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// A temperature file in millidegrees Celsius, in degrees.
fn read_millidegrees(path: &Path) -> Option<f64> {
    parse_millidegrees(&read_trimmed(path)?)
}

fn read_u64(path: &Path) -> Option<u64> {
    read_trimmed(path)?.parse().ok()
}

/// Critical trip point of a thermal zone, 0 if none.
fn zone_critical(zone: &Path) -> f64 {
    for i in 0..32 {
        let Some(kind) = read_trimmed(&zone.join(format!("trip_point_{i}_type"))) else {
            break;
        };
        if kind == "critical" {
            return read_millidegrees(&zone.join(format!("trip_point_{i}_temp"))).unwrap_or(0.0);
        }
    }
    0.0
}

fn read_zones(root: &Path, set: &mut SensorSet<'_>) -> Result<(), ThermalError> {
    for (index, zone) in indexed_entries(&root.join("class/thermal"), "thermal_zone")? {
        let kind = read_trimmed(&zone.join("type")).unwrap_or_else(|| format!("zone{index}"));
        let name = format!("thermal/{kind}");
        match read_millidegrees(&zone.join("temp")) {
            Some(c) => set.add(&kind, &name, c, "thermal", zone_critical(&zone)),
            None => set.unreadable(&name),
        }
    }
    Ok(())
}

/// The `N` of every `tempN_input` in a hwmon directory, sorted.
fn hwmon_inputs(dir: &Path) -> Vec<u32> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<u32> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = index_after(&name, "temp")?;
            (name == format!("temp{n}_input")).then_some(n)
        })
        .collect();
    out.sort_unstable();
    out
}

fn read_hwmon(root: &Path, set: &mut SensorSet<'_>) -> Result<(), ThermalError> {
    for (index, hwmon) in indexed_entries(&root.join("class/hwmon"), "hwmon")? {
        // Drivers older than the hwmon ABI cleanup keep their attributes
        // under `device/`.
        let dir = if hwmon_inputs(&hwmon).is_empty() && !hwmon.join("name").exists() {
            hwmon.join("device")
        } else {
            hwmon
        };
        let chip = read_trimmed(&dir.join("name")).unwrap_or_else(|| format!("hwmon{index}"));
        for n in hwmon_inputs(&dir) {
            let label = read_trimmed(&dir.join(format!("temp{n}_label")))
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| format!("temp{n}"));
            let name = format!("hwmon/{chip}/{label}");
            let critical = read_millidegrees(&dir.join(format!("temp{n}_crit"))).unwrap_or(0.0);
            match read_millidegrees(&dir.join(format!("temp{n}_input"))) {
                Some(c) => set.add(&label, &name, c, "hwmon", critical),
                None => set.unreadable(&name),
            }
        }
    }
    Ok(())
}

/// Total throttled time in ms (`{core,package}_throttle_total_time_ms`
/// summed over CPUs), `None` when the kernel has no such file.
fn throttle_time_ms(root: &Path) -> Option<u64> {
    let cpus = indexed_entries(&root.join("devices/system/cpu"), "cpu").ok()?;
    let mut total = None;
    for (_, cpu) in cpus {
        let dir = cpu.join("thermal_throttle");
        for f in [
            "core_throttle_total_time_ms",
            "package_throttle_total_time_ms",
        ] {
            if let Some(ms) = read_u64(&dir.join(f)) {
                total = Some(total.unwrap_or(0u64).saturating_add(ms));
            }
        }
    }
    total
}

/// Total throttle events: per-core counts summed, package counts taken once
/// per physical package (every CPU of a package shows the same count).
/// `None` when no CPU has `thermal_throttle`.
fn throttle_events(root: &Path) -> Result<Option<u64>, ThermalError> {
    let mut found = false;
    let mut core = 0u64;
    let mut packages: BTreeMap<u64, u64> = BTreeMap::new();
    for (_, cpu) in indexed_entries(&root.join("devices/system/cpu"), "cpu")? {
        let dir = cpu.join("thermal_throttle");
        if !dir.is_dir() {
            continue;
        }
        found = true;
        core = core.saturating_add(read_u64(&dir.join("core_throttle_count")).unwrap_or(0));
        if let Some(p) = read_u64(&dir.join("package_throttle_count")) {
            let id = read_u64(&cpu.join("topology/physical_package_id")).unwrap_or(0);
            let slot = packages.entry(id).or_insert(0);
            *slot = (*slot).max(p);
        }
    }
    Ok(found.then(|| core.saturating_add(packages.values().sum())))
}

fn frequency_ratio(root: &Path) -> Result<Option<f64>, ThermalError> {
    let pairs: Vec<(u64, u64)> =
        indexed_entries(&root.join("devices/system/cpu/cpufreq"), "policy")?
            .into_iter()
            .filter_map(|(_, p)| {
                Some((
                    read_u64(&p.join("scaling_cur_freq"))?,
                    read_u64(&p.join("cpuinfo_max_freq"))?,
                ))
            })
            .collect();
    Ok(cpu_frequency_ratio(&pairs))
}

impl ThermalSource for SysfsThermal {
    fn read(&mut self) -> Result<ThermalReading, ThermalError> {
        let mut set = SensorSet::new(&mut self.stats);
        read_zones(&self.root, &mut set)?;
        read_hwmon(&self.root, &mut set)?;
        if set.is_empty() && self.live {
            self.sysinfo.add_to(&mut set, "sysinfo");
        }
        let sensors = set.into_sensors();
        let events = throttle_events(&self.root)?;
        let ratio = frequency_ratio(&self.root)?;
        let now = std::time::Instant::now();
        let mut throttle = match (events, ratio) {
            (Some(events), ratio) => {
                // An episode that began before this interval and goes on
                // adds no event, but adds throttled time (kernels with
                // `*_throttle_total_time_ms`).
                let began = self.tracker.update(events);
                let time =
                    throttle_time_ms(&self.root).is_some_and(|ms| self.time_tracker.update(ms));
                let throttled = began || time;
                Some(Throttle {
                    throttled,
                    pressure_level: u32::from(throttled),
                    cpu_frequency_ratio: ratio,
                    throttle_events: events,
                    source: "thermal_throttle".to_string(),
                    ..Throttle::default()
                })
            }
            // Frequency alone says nothing about throttling (idle cores
            // clock down too), so it is reported but never sets throttled.
            (None, Some(ratio)) => Some(Throttle {
                throttled: false,
                pressure_level: 0,
                cpu_frequency_ratio: Some(ratio),
                throttle_events: 0,
                source: "cpufreq".to_string(),
                ..Throttle::default()
            }),
            (None, None) => None,
        };
        if let Some(t) = throttle.as_mut() {
            let throttled = match t.cpu_frequency_ratio {
                Some(ratio) if t.source == "cpufreq" => self.level.cpufreq_held(ratio),
                _ => t.throttled,
            };
            self.level.stamp(t, now, throttled);
        }
        Ok(ThermalReading { sensors, throttle })
    }

    fn filtered(&self) -> FilterStats {
        self.stats
    }
}
