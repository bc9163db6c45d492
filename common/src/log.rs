//! Log setup shared by both binaries: one filter variable, text or JSON.

use std::io::IsTerminal;

/// The environment variable holding an `EnvFilter` for both binaries
/// (e.g. `BOLTWATCH_LOG=debug,h2=warn`). `RUST_LOG` is read when it is
/// unset, so the usual Rust habit works too.
pub const FILTER_VAR: &str = "BOLTWATCH_LOG";

/// Output format of logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("`{other}`: expected \"text\" or \"json\"")),
        }
    }
}

/// The filter directives in effect: `BOLTWATCH_LOG`, else `RUST_LOG`, else
/// `default`.
pub fn filter_directives(default: &str) -> String {
    [FILTER_VAR, "RUST_LOG"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        .unwrap_or_else(|| default.to_string())
}

/// Logs to stderr in `format`, filtered by [`filter_directives`]. Colour
/// codes only when stderr is a terminal: a journal or a log file gets plain
/// text. A bad filter falls back to `default` rather than logging nothing.
pub fn init(format: LogFormat, default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter_directives(default))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // `try_init`: a second call (tests, the lab) keeps the first subscriber.
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_filter_variable_then_rust_log_then_the_default() {
        // The only test in this crate that touches these variables.
        std::env::remove_var(FILTER_VAR);
        std::env::remove_var("RUST_LOG");
        assert_eq!(filter_directives("warn"), "warn");
        std::env::set_var("RUST_LOG", "debug");
        assert_eq!(filter_directives("warn"), "debug");
        std::env::set_var(FILTER_VAR, "trace,h2=warn");
        assert_eq!(filter_directives("warn"), "trace,h2=warn");
        std::env::remove_var(FILTER_VAR);
        std::env::remove_var("RUST_LOG");
    }

    #[test]
    fn formats_parse() {
        assert_eq!("json".parse::<LogFormat>(), Ok(LogFormat::Json));
        assert_eq!(" text".parse::<LogFormat>(), Ok(LogFormat::Text));
        assert!("xml".parse::<LogFormat>().unwrap_err().contains("`xml`"));
    }
}
