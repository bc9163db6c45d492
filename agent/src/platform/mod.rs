//! The platform seam, the bottom layer: how per-OS code is chosen, the
//! names of the sources that have per-OS code, the error an unsupported
//! one returns, the macOS calls several concerns share, and the kernel ABI
//! facts the macOS code relies on. It imports none of the concerns above
//! it; which sources this OS supports is gathered from them by
//! [`crate::support`].
//!
//! # One idiom
//! Every concern with per-OS code (`link`, `thermal`, `counters`,
//! `discovery`, the STAMP receive path in `stamp`, `bandwidth::sys`) picks
//! its OS file the same way, in its portable module:
//!
//! ```text
//! crate::platform::os_module!(mod imp);
//! ```
//!
//! which [`os_module!`] expands to `#[cfg(target_os = ...)] #[path = ...]
//! mod imp;` for `linux.rs`, `macos.rs` and, on every other target,
//! `unsupported.rs` (other file names can be given, as `stamp` does).
//!
//! The three files offer the same items, among them `SUPPORT: Support`.
//! Per-OS files hold only OS calls and parsing of what the OS returns;
//! the rules (link reconciliation, bridge expansion, sensor filtering,
//! naming) live once, in the portable module. `unsupported.rs` answers
//! every call with [`Unsupported`] rather than empty data, and
//! [`crate::support::unsupported_sources`] lists those sources so the agent
//! logs them at start and reports them in `AgentStats.unsupported_sources`.
//!
//! # Kernel ABI
//! [`xnu`] holds the sizes, offsets and ioctl numbers of the xnu structs
//! (pure, tested on every OS); `macos.rs` defines the structs themselves
//! and asserts at compile time that they match.

use std::fmt;

pub mod xnu;

/// Declares the per-OS module of a concern: `os_module!(mod imp)` picks
/// `linux.rs`, `macos.rs` or `unsupported.rs` beside the invoking module
/// by `target_os`; `os_module!(pub(crate) mod imp { linux: "a.rs", macos:
/// "b.rs", other: "c.rs" })` names the files. One macro, so the three
/// `cfg`s cannot drift apart between concerns.
macro_rules! os_module {
    ($vis:vis mod $name:ident) => {
        $crate::platform::os_module!($vis mod $name {
            linux: "linux.rs",
            macos: "macos.rs",
            other: "unsupported.rs"
        });
    };
    ($vis:vis mod $name:ident { linux: $linux:literal, macos: $macos:literal, other: $other:literal }) => {
        #[cfg(target_os = "linux")]
        #[path = $linux]
        $vis mod $name;
        #[cfg(target_os = "macos")]
        #[path = $macos]
        $vis mod $name;
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        #[path = $other]
        $vis mod $name;
    };
}
pub(crate) use os_module;

#[cfg(target_os = "macos")]
pub(crate) mod macos;

/// Sets the `int` socket option `option` at `level` (what every socket
/// option the agent sets is: flags, don't-fragment modes).
#[cfg(unix)]
#[allow(unsafe_code)]
pub(crate) fn set_int_sockopt(
    sock: std::os::fd::BorrowedFd<'_>,
    level: libc::c_int,
    option: libc::c_int,
    value: libc::c_int,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `value` is a live c_int and its size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a source works on the OS the agent was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Implemented for this OS.
    Supported,
    /// Not implemented for this OS: every read fails with [`Unsupported`],
    /// or, for a field of another source's records
    /// ([`Source::CpuFrequency`]), the field is absent.
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
    /// `Throttle.cpu_frequency_ratio` of thermal readings (absent where
    /// unsupported).
    CpuFrequency,
}

impl Source {
    /// All sources, in a stable order.
    pub const ALL: [Source; 7] = [
        Source::Link,
        Source::Counters,
        Source::Thermal,
        Source::Discovery,
        Source::KernelTimestamps,
        Source::SocketStats,
        Source::CpuFrequency,
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
            Source::CpuFrequency => "cpu_frequency",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
}
