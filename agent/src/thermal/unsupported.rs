//! Thermals on an OS without a reader: every read fails with
//! [`ThermalError::Unsupported`] rather than returning an empty reading.

use std::path::Path;

use super::{ThermalError, ThermalReading, ThermalSource};
use crate::platform::{Source, Support, Unsupported};

/// No thermal reader here.
pub(super) const SUPPORT: Support = Support::Unsupported;
/// Nor a CPU frequency.
pub(super) const FREQUENCY_SUPPORT: Support = Support::Unsupported;

/// The source of this OS: fails every read.
pub(super) fn default_source(_sysfs_root: &Path) -> Box<dyn ThermalSource> {
    Box::new(UnsupportedThermal)
}

/// Every read fails with [`ThermalError::Unsupported`].
#[derive(Debug, Default, Clone, Copy)]
pub struct UnsupportedThermal;

impl ThermalSource for UnsupportedThermal {
    fn read(&mut self) -> Result<ThermalReading, ThermalError> {
        Err(Unsupported::new(Source::Thermal).into())
    }
}
