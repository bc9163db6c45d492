//! Collector configuration: a TOML file, overridden by command-line flags,
//! checked once into a [`Config`].
//!
//! Every error names the file, the line and the key, so a collector that
//! refuses to start says exactly what to fix. Parsing is pure
//! ([`RawConfig::from_toml`], [`Config::build`]); only [`load_file`] touches
//! the disk, and the binary merges flags.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// A configuration error, with where it was found.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML did not parse, or a key had the wrong type or is unknown.
    #[error("{file}:{line}: {message}")]
    Syntax {
        /// File name.
        file: String,
        /// 1-based line (0 when the parser gave no position).
        line: usize,
        /// The parser's message, which names the key.
        message: String,
    },
    /// A key parsed but its value is not acceptable.
    #[error("{file}:{line}: key `{key}`: {message}")]
    Invalid {
        /// File name (or `<flags>`).
        file: String,
        /// 1-based line (0 for flags).
        line: usize,
        /// The offending key (or flag).
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// Output format of logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The checked collector configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// gRPC ingest listen address (the binary binds it; `run` gets the
    /// listener).
    pub grpc_listen: SocketAddr,
    /// HTTP (`/metrics`, `/healthz`, `/api/v1`) listen address.
    pub http_listen: SocketAddr,
    /// Directory holding `boltwatch.db`; created if missing.
    pub data_dir: PathBuf,
    /// Log format.
    pub log_format: LogFormat,
    /// How long a new gRPC connection may take to send the HTTP/2 client
    /// preface before it is counted as malformed and closed.
    pub preface_timeout: Duration,
    /// Largest accepted gRPC message (agents keep batches under 4 MiB).
    pub max_message_bytes: usize,
    /// How long shutdown waits for open streams and requests to finish.
    pub shutdown_grace: Duration,
    /// `NODE TOKEN` file; without it every agent is accepted for any node.
    pub auth_tokens: Option<PathBuf>,
    /// The parsed token table (`main` loads `auth_tokens` into it; the lab
    /// sets it directly).
    pub auth: Option<crate::ingest::auth::AuthTokens>,
    /// Most records accepted in one batch.
    pub max_batch_records: usize,
    /// Records per second accepted per node (sustained; bursts up to 5 s
    /// worth).
    pub max_records_per_second: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            grpc_listen: "127.0.0.1:50071".parse().expect("valid literal"),
            http_listen: "127.0.0.1:9471".parse().expect("valid literal"),
            data_dir: PathBuf::from("./boltwatch-data"),
            log_format: LogFormat::Text,
            preface_timeout: Duration::from_secs(5),
            max_message_bytes: 8 * 1024 * 1024,
            shutdown_grace: Duration::from_secs(5),
            auth_tokens: None,
            auth: None,
            max_batch_records: 4096,
            max_records_per_second: 20_000,
        }
    }
}

/// The file as written: every key optional, spans kept for error messages.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    grpc_listen: Option<Spanned<String>>,
    http_listen: Option<Spanned<String>>,
    data_dir: Option<Spanned<String>>,
    log_format: Option<Spanned<String>>,
    preface_timeout: Option<Spanned<String>>,
    max_message_bytes: Option<Spanned<i64>>,
    shutdown_grace: Option<Spanned<String>>,
    auth_tokens: Option<Spanned<String>>,
    max_batch_records: Option<Spanned<i64>>,
    max_records_per_second: Option<Spanned<i64>>,
}

/// Command-line values that override the file (all optional).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--grpc-listen`.
    pub grpc_listen: Option<String>,
    /// `--http-listen`.
    pub http_listen: Option<String>,
    /// `--data-dir`.
    pub data_dir: Option<PathBuf>,
    /// `--log-format`.
    pub log_format: Option<String>,
    /// `--auth-tokens`.
    pub auth_tokens: Option<PathBuf>,
}

const FLAGS: &str = "<flags>";

// One rule for "which line is this byte on" in every config error.
pub use boltwatch_agent::config::line_of;

impl RawConfig {
    /// Parses TOML text; `file` is only used in error messages.
    pub fn from_toml(file: &str, text: &str) -> Result<RawConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Syntax {
            file: file.to_string(),
            line: e.span().map(|s| line_of(text, s.start)).unwrap_or(0),
            message: e.message().trim().to_string(),
        })
    }
}

/// A parsed file: its name (for messages), its text (for line numbers) and
/// its keys.
#[derive(Debug)]
pub struct ParsedFile {
    /// File name as given.
    pub name: String,
    /// Its text.
    pub text: String,
    /// Its keys.
    pub raw: RawConfig,
}

/// Reads and parses a config file.
pub fn load_file(path: &Path) -> Result<ParsedFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let name = path.display().to_string();
    let raw = RawConfig::from_toml(&name, &text)?;
    Ok(ParsedFile { name, text, raw })
}

/// Parses a duration such as `500ms`, `5s`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("{e} (expected e.g. \"500ms\", \"5s\")"))
}

fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    s.trim()
        .parse()
        .map_err(|e| format!("`{s}`: {e} (expected IP:PORT)"))
}

fn parse_format(s: &str) -> Result<LogFormat, String> {
    match s {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        other => Err(format!("`{other}`: expected \"text\" or \"json\"")),
    }
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn invalid<T>(&self, key: &str, v: &Spanned<T>, message: String) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_string(),
            line: line_of(self.text, v.span().start),
            key: key.to_string(),
            message,
        }
    }
}

fn flag_err(flag: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        file: FLAGS.to_string(),
        line: 0,
        key: flag.to_string(),
        message,
    }
}

impl Config {
    /// Builds the checked configuration from an optional parsed file and the
    /// command-line overrides (flags win).
    pub fn build(file: Option<ParsedFile>, flags: Overrides) -> Result<Config, ConfigError> {
        let file = file.unwrap_or(ParsedFile {
            name: FLAGS.to_string(),
            text: String::new(),
            raw: RawConfig::default(),
        });
        let cx = Ctx {
            file: &file.name,
            text: &file.text,
        };
        let raw = file.raw;
        let mut c = Config::default();

        if let Some(v) = &raw.grpc_listen {
            c.grpc_listen = parse_addr(v.get_ref()).map_err(|m| cx.invalid("grpc_listen", v, m))?;
        }
        if let Some(v) = &flags.grpc_listen {
            c.grpc_listen = parse_addr(v).map_err(|m| flag_err("--grpc-listen", m))?;
        }
        if let Some(v) = &raw.http_listen {
            c.http_listen = parse_addr(v.get_ref()).map_err(|m| cx.invalid("http_listen", v, m))?;
        }
        if let Some(v) = &flags.http_listen {
            c.http_listen = parse_addr(v).map_err(|m| flag_err("--http-listen", m))?;
        }
        if let Some(v) = &raw.data_dir {
            if v.get_ref().trim().is_empty() {
                return Err(cx.invalid("data_dir", v, "must not be empty".into()));
            }
            c.data_dir = PathBuf::from(v.get_ref());
        }
        if let Some(v) = flags.data_dir {
            if v.as_os_str().is_empty() {
                return Err(flag_err("--data-dir", "must not be empty".into()));
            }
            c.data_dir = v;
        }
        if let Some(v) = &raw.log_format {
            c.log_format = parse_format(v.get_ref()).map_err(|m| cx.invalid("log_format", v, m))?;
        }
        if let Some(v) = &flags.log_format {
            c.log_format = parse_format(v).map_err(|m| flag_err("--log-format", m))?;
        }
        if let Some(v) = &raw.preface_timeout {
            let d = parse_duration(v.get_ref()).map_err(|m| cx.invalid("preface_timeout", v, m))?;
            if d < Duration::from_millis(10) || d > Duration::from_secs(300) {
                return Err(cx.invalid(
                    "preface_timeout",
                    v,
                    format!("{d:?} is outside 10ms..300s"),
                ));
            }
            c.preface_timeout = d;
        }
        if let Some(v) = &raw.shutdown_grace {
            let d = parse_duration(v.get_ref()).map_err(|m| cx.invalid("shutdown_grace", v, m))?;
            if d > Duration::from_secs(300) {
                return Err(cx.invalid("shutdown_grace", v, format!("{d:?} is over 300s")));
            }
            c.shutdown_grace = d;
        }
        if let Some(v) = &raw.max_message_bytes {
            let n = *v.get_ref();
            // Agents send up to 4 MiB; below 64 KiB even one batch of
            // bandwidth results could be refused.
            if !(65_536..=268_435_456).contains(&n) {
                return Err(cx.invalid(
                    "max_message_bytes",
                    v,
                    format!("{n} is outside 65536..268435456"),
                ));
            }
            c.max_message_bytes = n as usize;
        }
        if let Some(v) = &raw.auth_tokens {
            if v.get_ref().trim().is_empty() {
                return Err(cx.invalid("auth_tokens", v, "must not be empty".into()));
            }
            c.auth_tokens = Some(PathBuf::from(v.get_ref()));
        }
        if let Some(v) = flags.auth_tokens {
            c.auth_tokens = Some(v);
        }
        if let Some(v) = &raw.max_batch_records {
            let n = *v.get_ref();
            if !(1..=1_000_000).contains(&n) {
                return Err(cx.invalid(
                    "max_batch_records",
                    v,
                    format!("{n} is outside 1..1000000"),
                ));
            }
            c.max_batch_records = n as usize;
        }
        if let Some(v) = &raw.max_records_per_second {
            let n = *v.get_ref();
            if !(1..=10_000_000).contains(&n) {
                return Err(cx.invalid(
                    "max_records_per_second",
                    v,
                    format!("{n} is outside 1..10000000"),
                ));
            }
            c.max_records_per_second = n as u32;
        }
        Ok(c)
    }

    /// The ingest policy these settings describe.
    pub fn ingest_policy(&self) -> crate::ingest::Policy {
        crate::ingest::Policy {
            auth: self.auth.clone(),
            max_batch_records: self.max_batch_records,
            records_per_second: self.max_records_per_second,
            records_burst: self.max_records_per_second.saturating_mul(5),
        }
    }

    /// The SQLite file inside the data directory.
    pub fn db_path(&self) -> PathBuf {
        self.data_dir.join("boltwatch.db")
    }
}

/// Reads and parses an `--auth-tokens` file; errors name file and line.
pub fn load_auth_tokens(path: &Path) -> Result<crate::ingest::auth::AuthTokens, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file = path.display().to_string();
    crate::ingest::auth::AuthTokens::parse(&file, &text).map_err(|e| ConfigError::Invalid {
        file: e.file,
        line: e.line,
        key: "auth_tokens".into(),
        message: e.message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let raw = RawConfig::from_toml("collector.toml", text)?;
        Config::build(
            Some(ParsedFile {
                name: "collector.toml".into(),
                text: text.into(),
                raw,
            }),
            Overrides::default(),
        )
    }

    #[test]
    fn full_file_parses() {
        let c = parse(
            "grpc_listen = \"0.0.0.0:50071\"\nhttp_listen = \"0.0.0.0:9471\"\n\
             data_dir = \"/var/lib/boltwatch\"\nlog_format = \"json\"\npreface_timeout = \"2s\"\n\
             max_message_bytes = 4194304\nshutdown_grace = \"1s\"\n",
        )
        .unwrap();
        assert_eq!(c.grpc_listen, "0.0.0.0:50071".parse().unwrap());
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/boltwatch"));
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.preface_timeout, Duration::from_secs(2));
        assert_eq!(c.max_message_bytes, 4_194_304);
        assert_eq!(
            c.db_path(),
            PathBuf::from("/var/lib/boltwatch/boltwatch.db")
        );
    }

    #[test]
    fn example_file_states_the_defaults() {
        let c = parse(include_str!("../collector.example.toml")).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn empty_file_gives_defaults() {
        assert_eq!(parse("").unwrap(), Config::default());
    }

    #[test]
    fn bad_address_names_file_line_and_key() {
        let e = parse("log_format = \"text\"\n\nhttp_listen = \"localhost\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("collector.toml:3: key `http_listen`"), "{e}");
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let e = parse("grpc_listen = \"127.0.0.1:1\"\ndatadir = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("collector.toml:2:"), "{e}");
        assert!(e.contains("datadir"), "{e}");
    }

    #[test]
    fn wrong_type_names_line() {
        let e = parse("max_message_bytes = \"big\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("collector.toml:1:"), "{e}");
    }

    #[test]
    fn out_of_range_values_rejected() {
        let e = parse("preface_timeout = \"1ms\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `preface_timeout`"), "{e}");
        let e = parse("max_message_bytes = 10\n").unwrap_err().to_string();
        assert!(e.contains("key `max_message_bytes`"), "{e}");
        let e = parse("log_format = \"xml\"\n").unwrap_err().to_string();
        assert!(e.contains("key `log_format`"), "{e}");
    }

    #[test]
    fn flags_override_file_and_name_the_flag() {
        let text = "grpc_listen = \"127.0.0.1:1\"\n";
        let file = ParsedFile {
            name: "f".into(),
            text: text.into(),
            raw: RawConfig::from_toml("f", text).unwrap(),
        };
        let c = Config::build(
            Some(file),
            Overrides {
                grpc_listen: Some("127.0.0.1:2".into()),
                data_dir: Some("/tmp/d".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(c.grpc_listen.port(), 2);
        assert_eq!(c.data_dir, PathBuf::from("/tmp/d"));
        let e = Config::build(
            None,
            Overrides {
                log_format: Some("yaml".into()),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("<flags>:0: key `--log-format`"), "{e}");
    }
}
