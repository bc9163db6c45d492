//! The platform seam: how per-OS code is chosen, which sources this OS
//! supports, and the kernel ABI facts the macOS code relies on.
//!
//! # One idiom
//! Every concern with per-OS code (`link`, `thermal`, `counters`,
//! `discovery`, the STAMP receive path in `stamp`, `bandwidth::sys`) picks
//! its OS file the same way, in its portable module:
//!
//! ```text
//! #[cfg(target_os = "linux")]
//! #[path = "linux.rs"]
//! mod imp;
//! #[cfg(target_os = "macos")]
//! #[path = "macos.rs"]
//! mod imp;
//! #[cfg(not(any(target_os = "linux", target_os = "macos")))]
//! #[path = "unsupported.rs"]
//! mod imp;
//! ```
//!
//! The three files offer the same items, among them `SUPPORT: Support`.
//! Per-OS files hold only OS calls and parsing of what the OS returns;
//! the rules (link reconciliation, bridge expansion, sensor filtering,
//! naming) live once, in the portable module. `unsupported.rs` answers
//! every call with [`Unsupported`] rather than empty data, and
//! [`unsupported_sources`] lists those sources so the agent logs them at
//! start and reports them in `AgentStats.unsupported_sources`.
//!
//! # Kernel ABI
//! [`xnu`] holds the sizes, offsets and ioctl numbers of the xnu structs
//! (pure, tested on every OS); `macos.rs` defines the structs themselves
//! and asserts at compile time that they match.

use std::fmt;

pub mod xnu;

#[cfg(target_os = "macos")]
pub(crate) mod macos;

/// Whether a source works on the OS the agent was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Implemented for this OS.
    Supported,
    /// Not implemented for this OS: every read fails with [`Unsupported`].
    Unsupported,
}

/// A source asked for on an OS that has no implementation of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{source_name} is not supported on {os}")]
pub struct Unsupported {
    /// Which source ([`Source::name`]).
    pub source_name: &'static str,
    /// The OS the agent was built for (`std::env::consts::OS`).
    pub os: &'static str,
}

impl Unsupported {
    /// The error for `source` on this OS.
    pub const fn new(source: Source) -> Unsupported {
        Unsupported {
            source_name: source.name(),
            os: std::env::consts::OS,
        }
    }
}

impl From<Unsupported> for std::io::Error {
    fn from(e: Unsupported) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::Unsupported, e)
    }
}

/// Every source with per-OS code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Carrier and admin events and the reconciliation poll ([`crate::link`]).
    Link,
    /// Interface byte, packet, error and drop counters ([`crate::counters`]).
    Counters,
    /// Temperatures and throttling ([`crate::thermal`]).
    Thermal,
    /// Interface kinds, speeds and Thunderbolt links ([`crate::discovery`]).
    Discovery,
    /// Kernel receive timestamps and device binding of STAMP probes.
    KernelTimestamps,
    /// TCP retransmits and process CPU time of bandwidth tests.
    SocketStats,
}

impl Source {
    /// All sources, in a stable order.
    pub const ALL: [Source; 6] = [
        Source::Link,
        Source::Counters,
        Source::Thermal,
        Source::Discovery,
        Source::KernelTimestamps,
        Source::SocketStats,
    ];

    /// The name used in logs and in `AgentStats.unsupported_sources`.
    pub const fn name(self) -> &'static str {
        match self {
            Source::Link => "link",
            Source::Counters => "counters",
            Source::Thermal => "thermal",
            Source::Discovery => "discovery",
            Source::KernelTimestamps => "kernel_timestamps",
            Source::SocketStats => "socket_stats",
        }
    }

    /// Whether this OS supports the source, as its OS file declares.
    pub const fn support(self) -> Support {
        match self {
            Source::Link => crate::link::SUPPORT,
            Source::Counters => crate::counters::SUPPORT,
            Source::Thermal => crate::thermal::SUPPORT,
            Source::Discovery => crate::discovery::SUPPORT,
            Source::KernelTimestamps => crate::stamp::imp::SUPPORT,
            Source::SocketStats => crate::bandwidth::sys::SUPPORT,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Names of the sources this OS does not support, for the start-up log
/// line and `AgentStats.unsupported_sources`. Empty on Linux and macOS.
pub fn unsupported_sources() -> Vec<String> {
    Source::ALL
        .iter()
        .filter(|s| s.support() == Support::Unsupported)
        .map(|s| s.name().to_owned())
        .collect()
}

/// Logs, once at start, which sources this OS does not support (a
/// warning naming them), or that all are supported (debug).
pub fn log_unsupported() {
    let unsupported = unsupported_sources();
    if unsupported.is_empty() {
        tracing::debug!(
            os = std::env::consts::OS,
            "every platform source is supported"
        );
    } else {
        tracing::warn!(
            os = std::env::consts::OS,
            sources = ?unsupported,
            "sources not supported on this OS: they report errors, not data"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_errors_name_source_and_os() {
        let mut names: Vec<_> = Source::ALL.iter().map(|s| s.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Source::ALL.len());
        let e = Unsupported::new(Source::Thermal);
        assert_eq!(
            e.to_string(),
            format!("thermal is not supported on {}", std::env::consts::OS)
        );
        let io: std::io::Error = e.into();
        assert_eq!(io.kind(), std::io::ErrorKind::Unsupported);
    }

    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn linux_and_macos_support_every_source() {
        assert_eq!(unsupported_sources(), Vec::<String>::new());
        for s in Source::ALL {
            assert_eq!(s.support(), Support::Supported, "{s}");
        }
    }
}
