//! macOS thermals: the SMC temperature keys (AppleSMC, no root needed),
//! falling back to `sysinfo` components (IOHID) when the SMC does not open
//! or offers no CPU/GPU key, and the notify(3) thermal pressure level.
//!
//! SMC keys are enumerated once, on the first read, and chosen by
//! [`super::smc::select`] (`Tp*`/`Te*`/`Ts*` CPU, `Tg*` GPU); each is then
//! read on every reading and named `smc_<key>`, source `smc`. The IOHID
//! path (source `iohid`) gives die aggregates whose duplicate names
//! sysinfo collapses, reading 8-10 °C below the SMC core keys on M4.
//!
//! There is no documented "throttled" counter on macOS; the pressure level
//! `com.apple.system.thermalpressurelevel` is the platform's own verdict.
//! Heavy (2) or above is reported as throttled
//! ([`boltwatch_proto::throttle::pressure_throttled`]): Apple maps Moderate
//! to `NSProcessInfoThermalStateFair`, which asks nothing of apps, and
//! Heavy to `Serious`, "system performance is reduced". Every level goes
//! out as `pressure_level`. CPU frequency (IOReport
//! residency) is not read, so `cpu_frequency_ratio` is absent from macOS
//! readings rather than a made-up 0.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::path::Path;

use super::smc::iokit::Smc;
use super::smc::{self as keys, TempKey};
use boltwatch_proto::throttle::{pressure_throttled, NOTIFY_SOURCE};

use super::{
    FilterStats, SensorSet, SysinfoSensors, ThermalError, ThermalReading,
    ThermalSource, Throttle, ThrottleLevel,
};
use crate::platform::Support;

/// macOS reads SMC (or IOHID) temperatures and the pressure level.
pub(super) const SUPPORT: Support = Support::Supported;
/// IOReport CPU residency is not read: `cpu_frequency_ratio` is absent.
pub(super) const FREQUENCY_SUPPORT: Support = Support::Unsupported;

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

/// Reads SMC temperatures (IOHID through sysinfo as the fallback) and the
/// thermal pressure level.
#[derive(Debug)]
pub struct MacThermal {
    smc: SmcState,
    sysinfo: SysinfoSensors,
    token: Option<libc::c_int>,
    stats: FilterStats,
    level: ThrottleLevel,
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
            smc: SmcState::Unopened,
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
        let mut set = SensorSet::new(&mut self.stats);
        if !self.smc.add_to(&mut set) {
            self.sysinfo.add_to(&mut set, "iohid");
        }
        let sensors = set.into_sensors();
        let now = std::time::Instant::now();
        let throttle = self.pressure_level().map(|level| {
            let level = u32::try_from(level).unwrap_or(u32::MAX);
            let mut t = Throttle {
                throttled: pressure_throttled(level),
                pressure_level: level,
                cpu_frequency_ratio: None,
                throttle_events: 0,
                source: NOTIFY_SOURCE.to_string(),
                ..Throttle::default()
            };
            // The pressure level is a level already.
            let throttled = t.throttled;
            self.level.stamp(&mut t, now, throttled);
            t
        });
        Ok(ThermalReading { sensors, throttle })
    }

    fn filtered(&self) -> FilterStats {
        self.stats
    }
}

/// The SMC side of [`MacThermal`]: opened and enumerated on the first
/// read; when that fails the reader stays on IOHID for the process's life
/// (the SMC of a machine does not appear later).
#[derive(Debug)]
enum SmcState {
    /// Not tried yet.
    Unopened,
    /// Open, with the keys to read (never empty).
    Open { smc: Smc, keys: Vec<TempKey> },
    /// Unavailable: IOHID is used.
    Unavailable,
}

impl SmcState {
    /// Adds the SMC temperatures to `set`; false when the SMC is
    /// unavailable, or gave no value this time, and the caller should
    /// fall back to IOHID.
    fn add_to(&mut self, set: &mut SensorSet<'_>) -> bool {
        if matches!(self, SmcState::Unopened) {
            *self = SmcState::open();
        }
        let SmcState::Open { smc, keys } = self else {
            return false;
        };
        keys::add_readings(keys, set, |k| smc.read(k.key, k.info)) > 0
    }

    fn open() -> SmcState {
        let smc = match Smc::open() {
            Ok(smc) => smc,
            Err(e) => {
                tracing::info!(error = %e, "AppleSMC unavailable: temperatures from IOHID");
                return SmcState::Unavailable;
            }
        };
        match smc.enumerate() {
            Ok((all, failed)) => {
                let keys = keys::select(all.iter().copied());
                if keys.is_empty() {
                    tracing::info!(
                        keys = all.len(),
                        "no SMC CPU/GPU temperature key: temperatures from IOHID"
                    );
                    return SmcState::Unavailable;
                }
                tracing::info!(
                    keys = all.len(),
                    failed,
                    temperatures = keys.len(),
                    "SMC temperature keys"
                );
                SmcState::Open { smc, keys }
            }
            Err(e) => {
                tracing::info!(error = %e, "SMC key enumeration failed: temperatures from IOHID");
                SmcState::Unavailable
            }
        }
    }
}
