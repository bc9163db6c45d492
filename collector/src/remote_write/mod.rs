//! Prometheus remote write 1.0 from the store: every record's
//! series, at the record's own time, to any number of endpoints
//! (VictoriaMetrics, Prometheus, Mimir, Thanos Receive, Cortex).
//!
//! - [`wire`]: the `WriteRequest` messages and the snappy body (pure).
//! - [`series`]: samples from records through a per-endpoint exporter state,
//!   the same families and values `/metrics` shows (pure).
//! - the store's arrival-order log (`boltwatch_store::Db::log_after`,
//!   endpoint positions) is what it reads and where it saves how far
//!   each endpoint got.
//! - [`sender`]: one task per endpoint: batch, post, retry with backoff and
//!   jitter on 5xx, 429 and transport errors, give up on other 4xx (counted
//!   as failed), bound the backlog (counted as dropped), save the position
//!   after each delivered batch, so a restart resumes where it left off
//!   (only an in-flight batch can be sent twice).
//!
//! Settings are shared by every endpoint (`[remote_write]` in the config);
//! `https://` endpoints trust only `tls_ca_file` (no bundled roots), with
//! an optional client certificate.

pub mod lag;
pub mod sender;
pub mod series;
pub mod wire;

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;

use crate::export::SharedMetrics;
use boltwatch_store::StoreHandle;

/// What `[remote_write]` configures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settings {
    /// Endpoints, `http://HOST:PORT/PATH`; none: remote write is off.
    pub urls: Vec<String>,
    /// Added to every series (`cluster`); a series' own label wins.
    pub external_labels: Vec<(String, String)>,
    /// Extra request headers (tenant headers such as `X-Scope-OrgID`).
    pub headers: Vec<(String, String)>,
    /// `Authorization: Bearer` with this file's trimmed contents.
    pub bearer_token_file: Option<PathBuf>,
    /// Basic auth user; the password comes from `basic_auth_password_file`.
    pub basic_auth_username: Option<String>,
    /// Basic auth password file.
    pub basic_auth_password_file: Option<PathBuf>,
    /// Most records per request.
    pub batch_records: usize,
    /// Most records an endpoint may lag behind the store; older ones are
    /// skipped (their samples counted as dropped).
    pub max_backlog_records: u64,
    /// Per-request timeout.
    pub timeout: Duration,
    /// PEM CA trusted for `https://` endpoints (only it: no bundled roots).
    pub tls_ca_file: Option<PathBuf>,
    /// PEM client certificate for receivers that require one.
    pub tls_cert_file: Option<PathBuf>,
    /// PEM key of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
}

/// Credentials read from their files at startup.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    /// None.
    #[default]
    None,
    /// `Authorization: Bearer TOKEN`.
    Bearer(String),
    /// Basic auth.
    Basic(String, String),
}

/// Checks a label name as Prometheus does (`[a-zA-Z_][a-zA-Z0-9_]*`, not
/// reserved `__`).
pub fn check_label_name(n: &str) -> Result<(), String> {
    let mut chars = n.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !n.starts_with("__");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{n}` is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, no leading __)"
        ))
    }
}

/// Checks an endpoint URL: `http://` (TLS is not built yet).
pub fn check_url(u: &str) -> Result<(), String> {
    let url = reqwest::Url::parse(u).map_err(|e| format!("`{u}`: {e}"))?;
    match url.scheme() {
        "http" | "https" if url.host().is_some() => Ok(()),
        _ => Err(format!(
            "`{u}`: expected an http:// or https://HOST[:PORT]/PATH URL"
        )),
    }
}

/// Splits `NAME=VALUE` entries.
pub fn pairs(entries: Vec<String>) -> Result<Vec<(String, String)>, String> {
    entries
        .into_iter()
        .map(|e| match e.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(format!("`{e}`: expected NAME=VALUE")),
        })
        .collect()
}

fn read_secret(path: &std::path::Path) -> Result<String, std::io::Error> {
    Ok(std::fs::read_to_string(path)?.trim().to_string())
}

/// The TLS material of the endpoints, read at startup like the
/// credentials: the CA to trust and the client identity, if any.
#[derive(Clone, Default)]
pub struct TlsFiles {
    /// The CA certificate(s).
    pub ca: Option<reqwest::Certificate>,
    /// Client certificate and key.
    pub identity: Option<reqwest::Identity>,
}

impl Settings {
    /// Reads the credential files (at startup, so a missing file stops the
    /// collector instead of failing every request).
    pub fn auth(&self) -> Result<Auth, crate::Error> {
        let io = |what: String| move |source| crate::Error::Io { what, source };
        if let Some(p) = &self.bearer_token_file {
            let t = read_secret(p).map_err(io(format!("reading {}", p.display())))?;
            return Ok(Auth::Bearer(t));
        }
        match (&self.basic_auth_username, &self.basic_auth_password_file) {
            (Some(u), Some(p)) => {
                let pw = read_secret(p).map_err(io(format!("reading {}", p.display())))?;
                Ok(Auth::Basic(u.clone(), pw))
            }
            _ => Ok(Auth::None),
        }
    }

    /// Reads the TLS files (at startup: a missing or bad file stops the
    /// collector, naming it).
    pub fn tls(&self) -> Result<TlsFiles, crate::Error> {
        let read = |p: &PathBuf| {
            std::fs::read(p).map_err(|source| crate::Error::Io {
                what: format!("reading {}", p.display()),
                source,
            })
        };
        let bad = |p: &PathBuf, e: reqwest::Error| crate::Error::Io {
            what: format!("{} is not usable PEM", p.display()),
            source: std::io::Error::other(e.to_string()),
        };
        let ca = match &self.tls_ca_file {
            Some(p) => Some(reqwest::Certificate::from_pem(&read(p)?).map_err(|e| bad(p, e))?),
            None => None,
        };
        let identity = match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(c), Some(k)) => {
                let mut pem = read(c)?;
                pem.push(b'\n');
                pem.extend(read(k)?);
                Some(reqwest::Identity::from_pem(&pem).map_err(|e| bad(c, e))?)
            }
            _ => None,
        };
        Ok(TlsFiles { ca, identity })
    }
}

/// Starts one sender task per endpoint; they stop when `stop` turns true.
pub fn spawn(
    settings: &Settings,
    store: StoreHandle,
    metrics: SharedMetrics,
    stop: watch::Receiver<bool>,
) -> Result<Vec<tokio::task::JoinHandle<()>>, crate::Error> {
    let auth = settings.auth()?;
    let tls = settings.tls()?;
    let mut tasks = Vec::new();
    for url in &settings.urls {
        let s = sender::Sender::new(
            url,
            settings,
            sender::Credentials {
                auth: auth.clone(),
                tls: tls.clone(),
            },
            store.clone(),
            metrics.clone(),
        )?;
        tasks.push(tokio::spawn(s.run(stop.clone())));
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_names_urls_and_pairs() {
        assert!(check_label_name("cluster").is_ok());
        assert!(check_label_name("__name__").is_err());
        assert!(check_label_name("1x").is_err());
        assert!(check_url("http://127.0.0.1:8428/api/v1/write").is_ok());
        assert!(check_url("https://vm/api/v1/write").is_ok());
        assert!(check_url("https://").is_err());
        assert!(check_url("ftp://vm/api/v1/write").is_err());
        assert!(check_url("vm:8428").is_err());
        assert_eq!(
            pairs(vec!["cluster=east".into()]).unwrap(),
            vec![("cluster".to_string(), "east".to_string())]
        );
        assert!(pairs(vec!["cluster".into()]).is_err());
    }
}
