//! macOS thermals: `sysinfo` components (IOHID temperature services on
//! Apple Silicon, no root needed) and the notify(3) thermal pressure level.
//!
//! There is no documented "throttled" counter on macOS; the pressure level
//! `com.apple.system.thermalpressurelevel` is the platform's own verdict and
//! Moderate (1) or above is reported as throttled. CPU frequency (IOReport)
//! is not read here, so `cpu_frequency_ratio` stays 0. sysinfo collapses
//! duplicate-named HID services into one, so per-die duplicates are lost;
//! names that still repeat get a `#N` suffix from [`SensorSet`].
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::path::Path;

use super::{
    pressure_throttled, FilterStats, SensorSet, SysinfoSensors, ThermalError, ThermalReading,
    ThermalSource, Throttle, ThrottleLevel,
};
use crate::platform::Support;

/// macOS reads IOHID temperatures and the pressure level.
pub(super) const SUPPORT: Support = Support::Supported;

/// The source of this OS; `_sysfs_root` is a Linux notion.
pub(super) fn default_source(_sysfs_root: &Path) -> Box<dyn ThermalSource> {
    Box::new(MacThermal::new())
}

const PRESSURE_NAME: &CStr = c"com.apple.system.thermalpressurelevel";
const NOTIFY_STATUS_OK: u32 = 0;

extern "C" {
    // <notify.h>, in libSystem (always linked).
    fn notify_register_check(name: *const libc::c_char, out_token: *mut libc::c_int) -> u32;
    fn notify_get_state(token: libc::c_int, state: *mut u64) -> u32;
}

/// Reads IOHID temperatures through sysinfo and the thermal pressure level.
pub struct MacThermal {
    sysinfo: SysinfoSensors,
    token: Option<libc::c_int>,
    stats: FilterStats,
    level: ThrottleLevel,
}

impl std::fmt::Debug for MacThermal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MacThermal")
            .field("token", &self.token)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Default for MacThermal {
    fn default() -> Self {
        Self::new()
    }
}

impl MacThermal {
    /// Registers for the pressure level (cheap; no notifications are
    /// delivered, the state is polled on each read).
    pub fn new() -> Self {
        let mut token: libc::c_int = 0;
        // SAFETY: PRESSURE_NAME is a NUL-terminated static string and
        // `token` is a valid out-pointer for the duration of the call.
        let status = unsafe { notify_register_check(PRESSURE_NAME.as_ptr(), &mut token) };
        if status != NOTIFY_STATUS_OK {
            tracing::warn!(status, "notify_register_check(thermalpressurelevel) failed");
        }
        MacThermal {
            sysinfo: SysinfoSensors::new(),
            token: (status == NOTIFY_STATUS_OK).then_some(token),
            stats: FilterStats::default(),
            level: ThrottleLevel::new(),
        }
    }

    fn pressure_level(&self) -> Option<u64> {
        let token = self.token?;
        let mut state: u64 = 0;
        // SAFETY: `token` came from notify_register_check; `state` is a
        // valid out-pointer for the call.
        let status = unsafe { notify_get_state(token, &mut state) };
        (status == NOTIFY_STATUS_OK).then_some(state)
    }
}

impl ThermalSource for MacThermal {
    fn read(&mut self) -> Result<ThermalReading, ThermalError> {
        let mut set = SensorSet::new();
        self.sysinfo.add_to(&mut set, "iohid", &mut self.stats);
        let now = std::time::Instant::now();
        let throttle = self.pressure_level().map(|level| {
            let mut t = Throttle {
                throttled: pressure_throttled(level),
                pressure_level: u32::try_from(level).unwrap_or(u32::MAX),
                cpu_frequency_ratio: None,
                throttle_events: 0,
                source: "notify".to_string(),
                ..Throttle::default()
            };
            // The pressure level is a level already.
            let throttled = t.throttled;
            self.level.stamp(&mut t, now, throttled);
            t
        });
        Ok(ThermalReading {
            sensors: set.into_sensors(),
            throttle,
        })
    }

    fn filtered(&self) -> FilterStats {
        self.stats
    }
}
