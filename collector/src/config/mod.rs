//! Collector configuration: a TOML file, overridden by command-line flags,
//! checked once into a [`Config`].
//!
//! Every key is defined once in [`KEYS`] (TOML key, flag, default, help,
//! validation) with the agent's mechanism, [`boltwatch_common::config`].
//! Every error names the file, the line and the key, so a collector that
//! refuses to start says exactly what to fix. Parsing is pure
//! ([`Config::parse`], [`Config::build`]); only [`load_file`] and the
//! daemon edge's check of the files the config names (`read_files`, at
//! `serve` and `--check-config`) touch the disk.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use boltwatch_common::config::{self as common, Document, HasLogFormat, Key, Schema};
pub use boltwatch_common::config::{line_of, ConfigError};
pub use boltwatch_common::log::LogFormat;

/// The `serve` flags, one per key that has a flag.
pub type Flags = common::Flags<Config>;

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
    /// Bytes of encoded records accepted per second per node (sustained;
    /// bursts up to 5 s worth).
    pub max_bytes_per_second: u64,
    /// Largest accepted encoded record.
    pub max_record_bytes: usize,
    /// Distinct label sets (peer, interface, sensor and service
    /// combinations) a node may have series for on `/metrics`.
    pub max_series_per_node: usize,
    /// Open gRPC connections in total.
    pub max_connections: usize,
    /// Open gRPC connections from one IP address.
    pub max_connections_per_address: usize,
    /// How long a gRPC connection may stay open without a stream that sent a
    /// valid (and, with tokens, authenticated) Hello.
    pub hello_timeout: Duration,
    /// gRPC connections from one IP address still waiting for an accepted
    /// Hello (the pending gate's per-address share).
    pub max_pending_per_address: usize,
    /// How far ahead of the collector's clock a record may be stamped and
    /// still reach `/metrics`.
    pub max_clock_skew: Duration,
    /// Separate address for `/api/v1` (then `http_listen` serves only
    /// `/metrics` and `/healthz`); `None` serves the API on `http_listen`.
    pub api_listen: Option<SocketAddr>,
    /// File holding the API read token; `/api/v1` then requires
    /// `authorization: Bearer TOKEN`.
    pub api_token_file: Option<PathBuf>,
    /// File holding the API write token: without one, HTTP writes (soak
    /// create, stop, delete, marks) answer 403.
    pub api_write_token_file: Option<PathBuf>,
    /// Open HTTP connections per listener; more are closed at once.
    pub http_max_connections: usize,
    /// Time an HTTP connection has to send a whole request head, from
    /// its opening or from its previous answer.
    pub http_header_timeout: Duration,
    /// Time a request body or an answer may move no byte before the
    /// connection is closed.
    pub http_idle_timeout: Duration,
    /// `/api/v1` requests handled at once; more get 503.
    pub api_max_concurrent: usize,
    /// How long a disconnected agent's gauges stay on `/metrics`.
    pub stale_after: Duration,
    /// Raw dense records older than this are replaced by per-minute
    /// rollups (`retention.raw`); `None` keeps every record raw.
    pub raw_retention: Option<Duration>,
    /// Compact the single-record rows live agents leave into packs
    /// (`retention.compact`).
    pub compact: bool,
    /// Prometheus remote write (`[remote_write]`); off without URLs.
    pub remote_write: crate::remote_write::Settings,
    /// TLS on the gRPC port (`[tls]`); plaintext without a certificate.
    pub tls: crate::tls::Settings,
}

type K = Key<Config>;

pub use keys::KEYS;

impl HasLogFormat for Config {
    fn log_format_mut(&mut self) -> &mut LogFormat {
        &mut self.log_format
    }
}

impl Schema for Config {
    fn keys() -> &'static [K] {
        KEYS
    }

    fn blank() -> Self {
        let any = SocketAddr::from(([0, 0, 0, 0], 0));
        Config {
            grpc_listen: any,
            http_listen: any,
            data_dir: PathBuf::new(),
            log_format: LogFormat::Text,
            preface_timeout: Duration::ZERO,
            max_message_bytes: 0,
            shutdown_grace: Duration::ZERO,
            auth_tokens: None,
            auth: None,
            max_batch_records: 0,
            max_records_per_second: 0,
            max_bytes_per_second: 0,
            max_record_bytes: 0,
            max_series_per_node: 0,
            max_connections: 0,
            max_connections_per_address: 0,
            hello_timeout: Duration::ZERO,
            max_pending_per_address: 0,
            max_clock_skew: Duration::ZERO,
            api_listen: None,
            api_token_file: None,
            api_write_token_file: None,
            http_max_connections: 0,
            http_header_timeout: Duration::ZERO,
            http_idle_timeout: Duration::ZERO,
            api_max_concurrent: 0,
            stale_after: Duration::ZERO,
            raw_retention: None,
            compact: false,
            remote_write: Default::default(),
            tls: Default::default(),
        }
    }

    fn finish(&mut self, at: &common::Where<'_, Self>) -> Result<(), ConfigError> {
        common::check_tls_pair(self, at, "TLS needs both tls.cert and tls.key")?;
        if self.tls.client_ca.is_some() && self.tls.cert.is_none() {
            return Err(at.error(
                &["tls.client_ca"],
                "mutual TLS needs tls.cert and tls.key as well",
            ));
        }
        let rw = &self.remote_write;
        let bearer = rw.bearer_token_file.is_some();
        let user = rw.basic_auth_username.is_some();
        let pass = rw.basic_auth_password_file.is_some();
        if bearer && (user || pass) {
            return Err(at.error(
                &[
                    "remote_write.bearer_token_file",
                    "remote_write.basic_auth_username",
                ],
                "choose bearer token or basic auth, not both",
            ));
        }
        if rw.urls.iter().any(|u| u.starts_with("https://")) && rw.tls_ca_file.is_none() {
            return Err(at.error(
                &["remote_write.tls_ca_file", "remote_write.urls"],
                "https:// remote write endpoints need remote_write.tls_ca_file (the CA to trust)",
            ));
        }
        if rw.tls_cert_file.is_some() != rw.tls_key_file.is_some() {
            return Err(at.error(
                &["remote_write.tls_cert_file", "remote_write.tls_key_file"],
                "a client certificate needs both tls_cert_file and tls_key_file",
            ));
        }
        if user != pass {
            return Err(at.error(
                &[
                    "remote_write.basic_auth_username",
                    "remote_write.basic_auth_password_file",
                ],
                "basic auth needs both basic_auth_username and basic_auth_password_file",
            ));
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        common::defaults()
    }
}

/// Reads and parses a config file.
pub fn load_file(path: &Path) -> Result<Document, ConfigError> {
    Document::load::<Config>(path)
}

impl Config {
    /// Parses config text; `file` is only used in error messages.
    pub fn parse(file: &str, text: &str) -> Result<Document, ConfigError> {
        Document::parse::<Config>(file, text)
    }

    /// Builds the checked configuration from an optional parsed file and the
    /// command-line flags (flags win).
    pub fn build(file: Option<&Document>, flags: &Flags) -> Result<Config, ConfigError> {
        common::build(file, flags)
    }

    /// The ingest policy these settings describe.
    pub fn ingest_policy(&self) -> crate::ingest::Policy {
        crate::ingest::Policy {
            auth: self.auth.clone(),
            max_batch_records: self.max_batch_records,
            records_per_second: self.max_records_per_second,
            records_burst: self.max_records_per_second.saturating_mul(5),
            bytes_per_second: self.max_bytes_per_second,
            bytes_burst: self.max_bytes_per_second.saturating_mul(5),
            max_record_bytes: self.max_record_bytes,
            max_series_per_node: self.max_series_per_node,
            max_clock_skew: self.max_clock_skew,
        }
    }

    /// The SQLite file inside the data directory.
    pub fn db_path(&self) -> PathBuf {
        self.data_dir.join("boltwatch.db")
    }
}

impl boltwatch_common::daemon::DaemonConfig for Config {
    /// Loads `auth_tokens` into `auth` and checks that every secret file
    /// the config names reads and is not empty.
    fn read_files(&mut self) -> Result<(), ConfigError> {
        if let Some(p) = &self.auth_tokens {
            self.auth = Some(load_auth_tokens(p)?);
        }
        let rw = &self.remote_write;
        let secrets = [
            ("api_token_file", &self.api_token_file),
            ("api_write_token_file", &self.api_write_token_file),
            ("remote_write.bearer_token_file", &rw.bearer_token_file),
            (
                "remote_write.basic_auth_password_file",
                &rw.basic_auth_password_file,
            ),
            ("tls.cert", &self.tls.cert),
            ("tls.key", &self.tls.key),
            ("tls.client_ca", &self.tls.client_ca),
            ("remote_write.tls_ca_file", &rw.tls_ca_file),
            ("remote_write.tls_cert_file", &rw.tls_cert_file),
            ("remote_write.tls_key_file", &rw.tls_key_file),
        ];
        for (key, p) in secrets {
            if let Some(p) = p {
                secret_file(key, p)?;
            }
        }
        Ok(())
    }

    fn summary(&self) -> String {
        let api = self
            .api_listen
            .map_or("on the HTTP address".to_string(), |a| a.to_string());
        let agents = self
            .auth_tokens
            .as_ref()
            .map_or("any agent (no auth_tokens)".to_string(), |p| {
                format!("agent tokens from {}", p.display())
            });
        format!(
            "config OK: gRPC {}, HTTP {}, API {api}, data dir {}, {agents}, {} remote write endpoint(s)",
            self.grpc_listen,
            self.http_listen,
            self.data_dir.display(),
            self.remote_write.urls.len()
        )
    }
}

/// Checks that the secret file `path` of `key` reads and is not empty.
fn secret_file(key: &str, path: &Path) -> Result<(), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if text.trim().is_empty() {
        return Err(ConfigError::Invalid {
            file: path.display().to_string(),
            line: 1,
            key: key.into(),
            message: "the file is empty".into(),
        });
    }
    Ok(())
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

mod keys;
#[cfg(test)]
mod tests;
