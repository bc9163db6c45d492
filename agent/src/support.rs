//! Which per-OS sources this build supports: each concern's OS file
//! declares its own `SUPPORT` (see [`crate::platform`]); this module,
//! above the concerns, gathers them into one table for the start-up log
//! line and `AgentStats.unsupported_sources`. It lives here, not in
//! `platform`, so the bottom layer imports none of the concerns that use it.

use crate::platform::{Source, Support};

/// Whether this OS supports `source`, as its OS file declares.
pub const fn support(source: Source) -> Support {
    match source {
        Source::Link => crate::link::SUPPORT,
        Source::Counters => crate::counters::SUPPORT,
        Source::Thermal => crate::thermal::SUPPORT,
        Source::Discovery => crate::discovery::SUPPORT,
        Source::KernelTimestamps => crate::stamp::imp::SUPPORT,
        Source::SocketStats => crate::bandwidth::sys::SUPPORT,
        Source::CpuFrequency => crate::thermal::FREQUENCY_SUPPORT,
    }
}

/// Names of the sources this OS does not support, for the start-up log
/// line and `AgentStats.unsupported_sources`. Empty on Linux;
/// `cpu_frequency` on macOS (IOReport residency is not read).
pub fn unsupported_sources() -> Vec<String> {
    Source::ALL
        .iter()
        .filter(|s| support(**s) == Support::Unsupported)
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
            "sources not supported on this OS: they report errors or absent fields, not data"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn linux_supports_every_source() {
        assert_eq!(unsupported_sources(), Vec::<String>::new());
        for s in Source::ALL {
            assert_eq!(support(s), Support::Supported, "{s}");
        }
    }

    #[cfg(target_os = "macos")]
    #[test]
    fn macos_supports_every_source_but_cpu_frequency() {
        assert_eq!(unsupported_sources(), vec!["cpu_frequency".to_owned()]);
    }
}
