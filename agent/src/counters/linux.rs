//! Linux interface counters from sysfs (`<root>/class/net/<if>/...`).
//!
//! The root is a parameter so tests read fixture trees; in production it is
//! `/sys`. Each read opens a handful of small files; nothing is cached,
//! because an interface can be re-created between two reads.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::{
    parse_carrier, parse_counter, parse_speed_mbps, CounterSource, CountersError, InterfaceCounters,
};
use crate::platform::Support;

/// Linux reads counters from sysfs.
pub(super) const SUPPORT: Support = Support::Supported;

/// The source of this OS: sysfs under `sysfs_root`.
pub(super) fn default_source(sysfs_root: &Path) -> Box<dyn CounterSource> {
    Box::new(SysfsCounters::new(sysfs_root))
}

/// Reads `<root>/class/net/<if>/statistics/*`, `carrier`,
/// `carrier_{up,down}_count`, `speed` and `mtu`.
#[derive(Debug, Clone)]
pub struct SysfsCounters {
    root: PathBuf,
}

impl SysfsCounters {
    /// A reader rooted at `sysfs_root` (normally `/sys`).
    pub fn new(sysfs_root: &Path) -> Self {
        SysfsCounters {
            root: sysfs_root.to_path_buf(),
        }
    }
}

/// Reads a file that must hold a counter.
fn required(path: PathBuf) -> Result<u64, CountersError> {
    let text = fs::read_to_string(&path).map_err(|source| CountersError::ReadSys {
        path: path.clone(),
        source,
    })?;
    parse_counter(&text).ok_or_else(|| CountersError::Parse {
        value: text.trim().to_string(),
        path,
    })
}

/// Reads a file that may be missing or unreadable (older kernels lack
/// `carrier_up_count`; virtual devices answer EINVAL for `speed`).
fn optional(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok()
}

impl CounterSource for SysfsCounters {
    fn read(&mut self, interface: &str) -> Result<InterfaceCounters, CountersError> {
        if interface.is_empty() || interface.contains('/') || interface.starts_with('.') {
            return Err(CountersError::NoSuchInterface(interface.to_string()));
        }
        let dir = self.root.join("class/net").join(interface);
        match fs::metadata(&dir) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(CountersError::NoSuchInterface(interface.to_string()))
            }
            Err(source) => return Err(CountersError::ReadSys { path: dir, source }),
        }
        let stat = |name: &str| required(dir.join("statistics").join(name));
        // Admin-down interfaces answer EINVAL on `carrier`; that is "unknown",
        // not "down" and not an error.
        let carrier = optional(&dir.join("carrier")).and_then(|t| parse_carrier(&t));
        let count = |name: &str| {
            optional(&dir.join(name))
                .and_then(|t| parse_counter(&t))
                .unwrap_or(0)
        };
        Ok(InterfaceCounters {
            interface: interface.to_string(),
            receive_bytes: stat("rx_bytes")?,
            transmit_bytes: stat("tx_bytes")?,
            receive_packets: stat("rx_packets")?,
            transmit_packets: stat("tx_packets")?,
            receive_errors: stat("rx_errors")?,
            transmit_errors: stat("tx_errors")?,
            receive_drops: stat("rx_dropped")?,
            transmit_drops: stat("tx_dropped")?,
            carrier: carrier.unwrap_or(false),
            carrier_known: carrier.is_some(),
            carrier_up_count: count("carrier_up_count"),
            carrier_down_count: count("carrier_down_count"),
            speed_bits_per_second: optional(&dir.join("speed"))
                .map(|t| parse_speed_mbps(&t))
                .unwrap_or(0),
            mtu: optional(&dir.join("mtu"))
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0),
        })
    }
}
