//! Agent configuration: a TOML file, overridden by command-line flags, checked
//! once into a [`Config`].
//!
//! Every error names the file, the key and the line, because a soak that
//! fails to start at 2 a.m. should say exactly what to fix. Parsing is pure
//! ([`RawConfig::from_toml`]); the binary edge reads the file and merges
//! flags.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

mod bandwidth;

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
        /// File name (or `<flags>`).
        file: String,
        /// 1-based line.
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
        /// The offending key.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// One peer to probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// The peer's node name.
    pub name: String,
    /// Its STAMP reflector address.
    pub addr: SocketAddr,
}

/// A TCP service to check on every peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// Name in records and labels, e.g. `ssh`.
    pub name: String,
    /// TCP port.
    pub port: u16,
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

/// The checked agent configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// This node's name.
    pub node: String,
    /// Collector gRPC endpoint, e.g. `http://10.0.0.1:50071`.
    pub collector: String,
    /// STAMP reflector listen address.
    pub listen: SocketAddr,
    /// Peers to probe.
    pub peers: Vec<PeerConfig>,
    /// Time between probes to one peer.
    pub probe_interval: Duration,
    /// A probe unanswered after this long is lost.
    pub probe_timeout: Duration,
    /// Root of the sysfs tree (tests point it at a fixture).
    pub sysfs_root: PathBuf,
    /// Time between interface counter reads.
    pub counters_interval: Duration,
    /// Time between thermal reads.
    pub thermal_interval: Duration,
    /// Directory of the durable spool; one agent per directory (default
    /// `/var/lib/boltwatch/spool/<node>`).
    pub spool_dir: PathBuf,
    /// Cap on the spool's bytes; beyond it the oldest records are dropped
    /// (and counted).
    pub spool_max_bytes: u64,
    /// File holding the bearer token presented to the collector.
    pub token_file: Option<PathBuf>,
    /// The token itself, if already known (the lab sets it; `main` reads
    /// `token_file` into it).
    pub token: Option<String>,
    /// Interface to probe through, overriding discovery.
    pub interface: Option<String>,
    /// Log format.
    pub log_format: LogFormat,
    /// TCP services checked on every peer's address (default `ssh=22`).
    pub services: Vec<ServiceConfig>,
    /// Time between service checks.
    pub service_interval: Duration,
    /// Consecutive missing probes that open an outage.
    pub outage_after_missing: u32,
    /// Run scheduled bandwidth tests and the bandwidth server.
    pub bandwidth_enabled: bool,
    /// Bandwidth server listen address (TCP, iperf3 protocol).
    pub bandwidth_listen: SocketAddr,
    /// How often each peer's bandwidth is tested.
    pub bandwidth_interval: Duration,
    /// Length of one test (whole seconds: iperf3's protocol carries
    /// seconds).
    pub bandwidth_duration: Duration,
    /// Parallel TCP streams per direction.
    pub bandwidth_streams: u32,
    /// Largest share of wall time spent testing (over 10 minutes).
    pub bandwidth_duty_cycle: f64,
    /// Per-peer bandwidth server addresses; a peer not listed is tested at
    /// its STAMP address's IP on our own `bandwidth_listen` port.
    pub bandwidth_peers: std::collections::BTreeMap<String, SocketAddr>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            node: String::new(),
            collector: "http://127.0.0.1:50071".into(),
            listen: "0.0.0.0:862".parse().expect("valid literal"),
            peers: Vec::new(),
            probe_interval: Duration::from_millis(100),
            probe_timeout: Duration::from_secs(1),
            sysfs_root: PathBuf::from("/sys"),
            counters_interval: Duration::from_secs(1),
            thermal_interval: Duration::from_secs(5),
            spool_dir: PathBuf::from(DEFAULT_SPOOL_DIR),
            spool_max_bytes: 1 << 30,
            token_file: None,
            token: None,
            interface: None,
            log_format: LogFormat::Text,
            services: vec![ServiceConfig {
                name: "ssh".into(),
                port: 22,
            }],
            service_interval: Duration::from_secs(5),
            outage_after_missing: 3,
            bandwidth_enabled: true,
            bandwidth_listen: "0.0.0.0:5202".parse().expect("valid literal"),
            bandwidth_interval: Duration::from_secs(300),
            bandwidth_duration: Duration::from_secs(10),
            bandwidth_streams: 4,
            bandwidth_duty_cycle: 0.05,
            bandwidth_peers: Default::default(),
        }
    }
}

impl Config {
    /// Where `peer`'s bandwidth server is: its `bandwidth_peers` entry, else
    /// its STAMP IP with our own bandwidth port (5202 when ours is 0).
    pub fn bandwidth_addr(&self, peer: &PeerConfig) -> SocketAddr {
        if let Some(a) = self.bandwidth_peers.get(&peer.name) {
            return *a;
        }
        let port = match self.bandwidth_listen.port() {
            0 => crate::bandwidth::DEFAULT_PORT,
            p => p,
        };
        SocketAddr::new(peer.addr.ip(), port)
    }
}

/// The file as written: every key optional, spans kept for error messages.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    node: Option<Spanned<String>>,
    collector: Option<Spanned<String>>,
    listen: Option<Spanned<String>>,
    /// `peers = ["b=10.0.0.2:862", ...]` or a table `[peers] b = "10.0.0.2:862"`.
    peers: Option<Spanned<PeersRaw>>,
    probe_interval: Option<Spanned<String>>,
    probe_timeout: Option<Spanned<String>>,
    sysfs_root: Option<Spanned<String>>,
    counters_interval: Option<Spanned<String>>,
    thermal_interval: Option<Spanned<String>>,
    spool_dir: Option<Spanned<String>>,
    spool_max_bytes: Option<Spanned<i64>>,
    token_file: Option<Spanned<String>>,
    interface: Option<Spanned<String>>,
    log_format: Option<Spanned<String>>,
    /// `services = ["ssh=22", "http=80"]`; `[]` disables service checks.
    services: Option<Spanned<Vec<String>>>,
    service_interval: Option<Spanned<String>>,
    outage_after_missing: Option<Spanned<i64>>,
    bandwidth_enabled: Option<Spanned<bool>>,
    bandwidth_listen: Option<Spanned<String>>,
    bandwidth_interval: Option<Spanned<String>>,
    bandwidth_duration: Option<Spanned<String>>,
    bandwidth_streams: Option<Spanned<i64>>,
    bandwidth_duty_cycle: Option<Spanned<f64>>,
    /// `[bandwidth_peers] b = "10.0.0.2:5202"`.
    bandwidth_peers: Option<Spanned<std::collections::BTreeMap<String, String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PeersRaw {
    List(Vec<String>),
    Table(std::collections::BTreeMap<String, String>),
}

/// Command-line values that override the file (all optional).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--node`.
    pub node: Option<String>,
    /// `--collector`.
    pub collector: Option<String>,
    /// `--listen`.
    pub listen: Option<String>,
    /// `--peer NAME=ADDR`, repeatable; replaces the file's peers when given.
    pub peers: Vec<String>,
    /// `--probe-interval`.
    pub probe_interval: Option<String>,
    /// `--probe-timeout`.
    pub probe_timeout: Option<String>,
    /// `--sysfs-root`.
    pub sysfs_root: Option<PathBuf>,
    /// `--interface`.
    pub interface: Option<String>,
    /// `--log-format`.
    pub log_format: Option<String>,
    /// `--service NAME=PORT`, repeatable; replaces the file's list.
    pub services: Vec<String>,
    /// `--no-services`: check no services.
    pub no_services: bool,
    /// `--spool-dir`.
    pub spool_dir: Option<PathBuf>,
    /// `--spool-max-bytes`.
    pub spool_max_bytes: Option<u64>,
    /// `--token-file`.
    pub token_file: Option<PathBuf>,
    /// `--bandwidth-listen`.
    pub bandwidth_listen: Option<String>,
    /// `--bandwidth-interval`.
    pub bandwidth_interval: Option<String>,
    /// `--bandwidth-duration`.
    pub bandwidth_duration: Option<String>,
    /// `--no-bandwidth`: no scheduled tests and no bandwidth server.
    pub no_bandwidth: bool,
}

const FLAGS: &str = "<flags>";

/// Where the spool lives unless configured.
pub const DEFAULT_SPOOL_DIR: &str = "/var/lib/boltwatch/spool";
/// Smallest accepted `spool_max_bytes` (1 MiB).
const SPOOL_MIN_BYTES: i64 = 1 << 20;
/// Largest accepted `spool_max_bytes` (1 TiB).
const SPOOL_MAX_BYTES: i64 = 1 << 40;

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn line(&self, span: std::ops::Range<usize>) -> usize {
        line_of(self.text, span.start)
    }

    fn invalid(
        &self,
        key: &str,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_string(),
            line: self.line(span),
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// 1-based line number of byte `offset` in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

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

/// Reads and parses a config file.
pub fn load_file(path: &Path) -> Result<(String, String, RawConfig), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file = path.display().to_string();
    let raw = RawConfig::from_toml(&file, &text)?;
    Ok((file, text, raw))
}

/// Reads a bearer token file: the first non-empty line, trimmed. An empty
/// file or a token with characters not allowed in a header is an error.
pub fn read_token(path: &Path) -> Result<String, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_token(&path.display().to_string(), &text)
}

/// The token in a token file's text (see [`read_token`]).
pub fn parse_token(file: &str, text: &str) -> Result<String, ConfigError> {
    let invalid = |line: usize, message: &str| ConfigError::Invalid {
        file: file.to_string(),
        line,
        key: "token".into(),
        message: message.into(),
    };
    let (i, token) = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .find(|(_, l)| !l.is_empty())
        .ok_or_else(|| invalid(1, "the token file is empty"))?;
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(invalid(i, "token must be printable ASCII without spaces"));
    }
    Ok(token.to_string())
}

/// Parses a duration such as `100ms`, `1s`, `5m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("{e} (expected e.g. \"100ms\", \"1s\")"))
}

fn parse_service(s: &str) -> Result<ServiceConfig, String> {
    let (name, port) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected NAME=PORT"))?;
    let port: u16 = port
        .trim()
        .parse()
        .map_err(|e| format!("`{s}`: port: {e}"))?;
    if name.trim().is_empty() || port == 0 {
        return Err(format!(
            "`{s}`: expected NAME=PORT with a non-empty name and port 1..65535"
        ));
    }
    Ok(ServiceConfig {
        name: name.trim().to_string(),
        port,
    })
}

fn parse_peer(s: &str) -> Result<PeerConfig, String> {
    let (name, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected NAME=ADDR:PORT"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("`{s}`: empty peer name"));
    }
    let addr = addr
        .trim()
        .parse()
        .map_err(|e| format!("`{s}`: address `{addr}`: {e} (expected IP:PORT)"))?;
    Ok(PeerConfig {
        name: name.to_string(),
        addr,
    })
}

impl Config {
    /// Builds the checked configuration from an optional parsed file
    /// (`(file name, text, raw)`) and the command-line overrides.
    pub fn build(
        file: Option<(String, String, RawConfig)>,
        flags: Overrides,
    ) -> Result<Config, ConfigError> {
        let (file, text, raw) =
            file.unwrap_or_else(|| (FLAGS.to_string(), String::new(), RawConfig::default()));
        let cx = Ctx {
            file: &file,
            text: &text,
        };
        let flag_err = |key: &str, message: String| ConfigError::Invalid {
            file: FLAGS.to_string(),
            line: 0,
            key: key.to_string(),
            message,
        };
        let mut c = Config::default();
        let raw_bw = bandwidth::RawBandwidth {
            enabled: raw.bandwidth_enabled,
            listen: raw.bandwidth_listen,
            interval: raw.bandwidth_interval,
            duration: raw.bandwidth_duration,
            streams: raw.bandwidth_streams,
            duty_cycle: raw.bandwidth_duty_cycle,
            peers: raw.bandwidth_peers,
        };
        let flags_bw = bandwidth::FlagsBandwidth {
            listen: flags.bandwidth_listen.clone(),
            interval: flags.bandwidth_interval.clone(),
            duration: flags.bandwidth_duration.clone(),
            off: flags.no_bandwidth,
        };

        if let Some(v) = raw.node {
            c.node = v.get_ref().trim().to_string();
            if c.node.is_empty() {
                return Err(cx.invalid("node", v.span(), "must not be empty"));
            }
        }
        if let Some(v) = flags.node {
            c.node = v;
        }
        if c.node.is_empty() {
            c.node = nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_else(|| "node".into());
        }

        if let Some(v) = raw.collector {
            c.collector = v.get_ref().clone();
            check_url(&c.collector).map_err(|m| cx.invalid("collector", v.span(), m))?;
        }
        if let Some(v) = flags.collector {
            check_url(&v).map_err(|m| flag_err("--collector", m))?;
            c.collector = v;
        }

        if let Some(v) = raw.listen {
            c.listen = v
                .get_ref()
                .parse()
                .map_err(|e| cx.invalid("listen", v.span(), format!("`{}`: {e}", v.get_ref())))?;
        }
        if let Some(v) = flags.listen {
            c.listen = v
                .parse()
                .map_err(|e| flag_err("--listen", format!("`{v}`: {e}")))?;
        }

        if let Some(v) = raw.peers {
            let span = v.span();
            let entries: Vec<String> = match v.into_inner() {
                PeersRaw::List(l) => l,
                PeersRaw::Table(t) => t.into_iter().map(|(k, a)| format!("{k}={a}")).collect(),
            };
            for e in entries {
                c.peers
                    .push(parse_peer(&e).map_err(|m| cx.invalid("peers", span.clone(), m))?);
            }
        }
        if !flags.peers.is_empty() {
            c.peers.clear();
            for p in &flags.peers {
                c.peers
                    .push(parse_peer(p).map_err(|m| flag_err("--peer", m))?);
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for p in &c.peers {
            if !names.insert(p.name.clone()) {
                return Err(flag_or_file(
                    &cx,
                    "peers",
                    format!("peer `{}` listed twice", p.name),
                ));
            }
        }

        let dur = |key: &str,
                   raw: Option<Spanned<String>>,
                   flag: Option<String>,
                   into: &mut Duration|
         -> Result<(), ConfigError> {
            if let Some(v) = raw {
                *into = parse_duration(v.get_ref()).map_err(|m| cx.invalid(key, v.span(), m))?;
            }
            if let Some(v) = flag {
                *into = parse_duration(&v)
                    .map_err(|m| flag_err(&format!("--{}", key.replace('_', "-")), m))?;
            }
            Ok(())
        };
        let probe_interval_span = raw.probe_interval.as_ref().map(|s| s.span());
        dur(
            "probe_interval",
            raw.probe_interval,
            flags.probe_interval,
            &mut c.probe_interval,
        )?;
        dur(
            "probe_timeout",
            raw.probe_timeout,
            flags.probe_timeout,
            &mut c.probe_timeout,
        )?;
        dur(
            "counters_interval",
            raw.counters_interval,
            None,
            &mut c.counters_interval,
        )?;
        dur(
            "thermal_interval",
            raw.thermal_interval,
            None,
            &mut c.thermal_interval,
        )?;
        if c.probe_interval < Duration::from_millis(1) || c.probe_interval > Duration::from_secs(60)
        {
            let m = format!("{:?} is outside 1ms..60s", c.probe_interval);
            return Err(match probe_interval_span {
                Some(s) => cx.invalid("probe_interval", s, m),
                None => flag_err("--probe-interval", m),
            });
        }
        if c.probe_timeout.is_zero() || c.probe_timeout > Duration::from_secs(60) {
            return Err(flag_or_file(
                &cx,
                "probe_timeout",
                "must be in 1ns..60s".into(),
            ));
        }

        if let Some(v) = raw.sysfs_root {
            c.sysfs_root = PathBuf::from(v.get_ref());
        }
        if let Some(v) = flags.sysfs_root {
            c.sysfs_root = v;
        }
        let spool_dir_set = raw.spool_dir.is_some() || flags.spool_dir.is_some();
        if let Some(v) = raw.spool_dir {
            if v.get_ref().trim().is_empty() {
                return Err(cx.invalid("spool_dir", v.span(), "must not be empty"));
            }
            c.spool_dir = PathBuf::from(v.get_ref());
        }
        if let Some(v) = flags.spool_dir {
            c.spool_dir = v;
        }
        if !spool_dir_set {
            // One directory per node name, so two agents on one host (a
            // bench, a lab) do not fight over the lock.
            c.spool_dir = PathBuf::from(DEFAULT_SPOOL_DIR).join(&c.node);
        }
        if let Some(v) = raw.spool_max_bytes {
            let n = *v.get_ref();
            if !(SPOOL_MIN_BYTES..=SPOOL_MAX_BYTES).contains(&n) {
                return Err(cx.invalid(
                    "spool_max_bytes",
                    v.span(),
                    format!("{n} is outside {SPOOL_MIN_BYTES}..{SPOOL_MAX_BYTES}"),
                ));
            }
            c.spool_max_bytes = n as u64;
        }
        if let Some(v) = flags.spool_max_bytes {
            if !(SPOOL_MIN_BYTES as u64..=SPOOL_MAX_BYTES as u64).contains(&v) {
                return Err(flag_err(
                    "--spool-max-bytes",
                    format!("{v} is outside {SPOOL_MIN_BYTES}..{SPOOL_MAX_BYTES}"),
                ));
            }
            c.spool_max_bytes = v;
        }
        if let Some(v) = raw.token_file {
            c.token_file = Some(PathBuf::from(v.get_ref()));
        }
        if let Some(v) = flags.token_file {
            c.token_file = Some(v);
        }
        if let Some(v) = raw.interface {
            c.interface = Some(v.into_inner());
        }
        if let Some(v) = flags.interface {
            c.interface = Some(v);
        }
        let parse_fmt = |s: &str| match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("`{other}`: expected \"text\" or \"json\"")),
        };
        if let Some(v) = raw.log_format {
            c.log_format =
                parse_fmt(v.get_ref()).map_err(|m| cx.invalid("log_format", v.span(), m))?;
        }
        if let Some(v) = flags.log_format {
            c.log_format = parse_fmt(&v).map_err(|m| flag_err("--log-format", m))?;
        }
        if let Some(v) = raw.services {
            let span = v.span();
            c.services = v
                .into_inner()
                .iter()
                .map(|e| parse_service(e))
                .collect::<Result<_, _>>()
                .map_err(|m| cx.invalid("services", span, m))?;
        }
        if !flags.services.is_empty() {
            c.services = flags
                .services
                .iter()
                .map(|e| parse_service(e))
                .collect::<Result<_, _>>()
                .map_err(|m| flag_err("--service", m))?;
        }
        if flags.no_services {
            c.services.clear();
        }
        dur(
            "service_interval",
            raw.service_interval,
            None,
            &mut c.service_interval,
        )?;
        if let Some(v) = raw.outage_after_missing {
            let n = *v.get_ref();
            if !(1..=1000).contains(&n) {
                return Err(cx.invalid(
                    "outage_after_missing",
                    v.span(),
                    format!("{n} is outside 1..1000"),
                ));
            }
            c.outage_after_missing = n as u32;
        }
        bandwidth::build(&mut c, &cx, raw_bw, flags_bw)?;
        Ok(c)
    }
}

fn flag_or_file(cx: &Ctx<'_>, key: &str, message: String) -> ConfigError {
    // The key's line in the file, when the file set it (0 for flags).
    let line = cx
        .text
        .lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with('='))
        })
        .map_or(0, |i| i + 1);
    ConfigError::Invalid {
        file: cx.file.to_string(),
        line,
        key: key.to_string(),
        message,
    }
}

fn check_url(s: &str) -> Result<(), String> {
    if s.starts_with("http://") || s.starts_with("https://") {
        Ok(())
    } else {
        Err(format!(
            "`{s}`: expected a URL such as http://10.0.0.1:50071"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let raw = RawConfig::from_toml("agent.toml", text)?;
        Config::build(
            Some(("agent.toml".into(), text.into(), raw)),
            Overrides::default(),
        )
    }

    #[test]
    fn full_file_parses() {
        let c = parse(
            "node = \"a\"\ncollector = \"http://10.0.0.9:50071\"\nlisten = \"0.0.0.0:8620\"\n\
             peers = [\"b=10.0.0.2:862\"]\nprobe_interval = \"50ms\"\nsysfs_root = \"/tmp/sys\"\n",
        )
        .unwrap();
        assert_eq!(c.node, "a");
        assert_eq!(c.probe_interval, Duration::from_millis(50));
        assert_eq!(
            c.peers,
            vec![PeerConfig {
                name: "b".into(),
                addr: "10.0.0.2:862".parse().unwrap()
            }]
        );
        assert_eq!(c.sysfs_root, PathBuf::from("/tmp/sys"));
    }

    #[test]
    fn peers_as_table() {
        let c =
            parse("node = \"a\"\n[peers]\nb = \"10.0.0.2:862\"\nc = \"10.0.0.3:862\"\n").unwrap();
        assert_eq!(c.peers.len(), 2);
    }

    #[test]
    fn bad_duration_names_file_key_and_line() {
        let e = parse("node = \"a\"\n\nprobe_interval = \"fast\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("agent.toml:3: key `probe_interval`"), "{e}");
    }

    #[test]
    fn unknown_key_names_file_key_and_line() {
        let e = parse("node = \"a\"\nprobe_intervall = \"1s\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("agent.toml:2:"), "{e}");
        assert!(e.contains("probe_intervall"), "{e}");
    }

    #[test]
    fn wrong_type_names_key_and_line() {
        let e = parse("node = \"a\"\nspool_max_bytes = \"many\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("agent.toml:2:"), "{e}");
    }

    #[test]
    fn bad_peer_address_names_line() {
        let e = parse("node = \"a\"\npeers = [\"b=10.0.0.2\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("agent.toml:2: key `peers`"), "{e}");
    }

    #[test]
    fn flags_override_file() {
        let text = "node = \"a\"\nprobe_interval = \"1s\"\n";
        let raw = RawConfig::from_toml("f", text).unwrap();
        let c = Config::build(
            Some(("f".into(), text.into(), raw)),
            Overrides {
                node: Some("z".into()),
                probe_interval: Some("10ms".into()),
                peers: vec!["p=127.0.0.1:9".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(c.node, "z");
        assert_eq!(c.probe_interval, Duration::from_millis(10));
        assert_eq!(c.peers[0].name, "p");
    }

    #[test]
    fn spool_and_token_keys() {
        let c = parse("node = \"m\"\n").unwrap();
        assert_eq!(c.spool_dir, PathBuf::from("/var/lib/boltwatch/spool/m"));
        assert_eq!(c.spool_max_bytes, 1 << 30);
        let c = parse(
            "node = \"m\"\nspool_dir = \"/s\"\nspool_max_bytes = 2097152\ntoken_file = \"/t\"\n",
        )
        .unwrap();
        assert_eq!(c.spool_dir, PathBuf::from("/s"));
        assert_eq!(c.spool_max_bytes, 2 << 20);
        assert_eq!(c.token_file, Some(PathBuf::from("/t")));
        let e = parse("node = \"m\"\n\nspool_max_bytes = 10\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("agent.toml:3: key `spool_max_bytes`"), "{e}");
    }

    #[test]
    fn token_files_are_checked() {
        assert_eq!(parse_token("t", "\n  abc123  \n").unwrap(), "abc123");
        let e = parse_token("t", "\n\n").unwrap_err().to_string();
        assert!(e.starts_with("t:1: key `token`"), "{e}");
        let e = parse_token("t", "\nab cd\n").unwrap_err().to_string();
        assert!(e.starts_with("t:2: key `token`"), "{e}");
    }

    #[test]
    fn example_file_is_valid() {
        let c = parse(include_str!("../../agent.example.toml")).unwrap();
        assert_eq!(c.node, "mini-a");
        assert_eq!(c.peers.len(), 2);
        assert_eq!(c.listen.port(), 862);
        // The example states the bandwidth defaults.
        let d = Config::default();
        assert_eq!(
            (
                c.bandwidth_enabled,
                c.bandwidth_listen,
                c.bandwidth_interval,
                c.bandwidth_duration,
                c.bandwidth_streams,
                c.bandwidth_duty_cycle
            ),
            (
                d.bandwidth_enabled,
                d.bandwidth_listen,
                d.bandwidth_interval,
                d.bandwidth_duration,
                d.bandwidth_streams,
                d.bandwidth_duty_cycle
            )
        );
    }

    #[test]
    fn services_parse_and_empty_list_disables() {
        let c = parse("services = [\"ssh=22\", \"http=8080\"]\n").unwrap();
        assert_eq!(
            c.services[1],
            ServiceConfig {
                name: "http".into(),
                port: 8080
            }
        );
        assert!(parse("services = []\n").unwrap().services.is_empty());
        let e = parse("\nservices = [\"ssh\"]\n").unwrap_err().to_string();
        assert!(e.starts_with("agent.toml:2: key `services`"), "{e}");
    }

    #[test]
    fn duplicate_peer_rejected() {
        assert!(parse("node=\"a\"\npeers=[\"b=1.2.3.4:5\",\"b=1.2.3.5:5\"]\n").is_err());
    }
}
