//! Discovery on an OS without an implementation: interfaces are described
//! from `getifaddrs` alone (kind loopback or other, addresses), and the
//! Thunderbolt look-up fails with [`Unsupported`].

use std::path::Path;

use super::{Interface, ThunderboltLink};
use crate::platform::{Source, Support, Unsupported};

/// No interface classification here.
pub(super) const SUPPORT: Support = Support::Unsupported;

pub(super) fn describe(name: &str, _sysfs_root: &Path) -> Interface {
    super::describe_basic(name)
}

pub(super) fn thunderbolt_interfaces(
    _sysfs_root: &Path,
) -> Result<Vec<ThunderboltLink>, Unsupported> {
    Err(Unsupported::new(Source::Discovery))
}
