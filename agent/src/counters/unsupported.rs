//! Interface counters on an OS without a reader: every read fails with
//! [`CountersError::Unsupported`].

use std::path::Path;

use super::{CounterSource, CountersError, InterfaceCounters};
use crate::platform::{Source, Support, Unsupported};

/// No counter reader here.
pub(super) const SUPPORT: Support = Support::Unsupported;

/// The source of this OS: fails every read.
pub(super) fn default_source(_sysfs_root: &Path) -> Box<dyn CounterSource> {
    Box::new(UnsupportedCounters)
}

/// Every read fails with [`CountersError::Unsupported`].
#[derive(Debug, Default, Clone, Copy)]
pub struct UnsupportedCounters;

impl CounterSource for UnsupportedCounters {
    fn read(&mut self, _interface: &str) -> Result<InterfaceCounters, CountersError> {
        Err(Unsupported::new(Source::Counters).into())
    }
}
