//! The checked agent configuration: [`Config`] and the peer and service
//! entries it holds, with the lookups the rest of the agent asks of it.
//! How each field is read and checked is the key table's business
//! (`keys`); this file only says what the result is.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use boltwatch_common::config::{self as common, ConfigError, Document};
use boltwatch_common::log::LogFormat;

use crate::discovery::scoped::ScopedAddr;

/// The `run` flags, one per key that has a flag (see [`super::keys`]).
pub type Flags = common::Flags<Config>;

/// One peer to probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// The peer's node name.
    pub name: String,
    /// Its STAMP reflector address.
    pub addr: SocketAddr,
    /// The interface scope of the address (`ADDR%IF`): the probes are
    /// bound to it and it is the peer's interface (no route lookup).
    pub interface: Option<String>,
}

impl PeerConfig {
    /// The address with its scope.
    pub fn scoped(&self) -> ScopedAddr {
        ScopedAddr {
            addr: self.addr,
            interface: self.interface.clone(),
        }
    }
}

/// A TCP service to check on every peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// Name in records and labels, e.g. `ssh`.
    pub name: String,
    /// TCP port.
    pub port: u16,
}

/// The checked agent configuration. Field documentation is the key's help
/// in [`super::keys`]; defaults are stated there once.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// This node's name.
    pub node: String,
    /// Collector gRPC endpoint, e.g. `http://10.0.0.1:50071`.
    pub collector: String,
    /// STAMP reflector listen address.
    pub listen: SocketAddr,
    /// Address of the node's own `/metrics` (`None`: not served).
    pub metrics_listen: Option<SocketAddr>,
    /// Peers to probe.
    pub peers: Vec<PeerConfig>,
    /// Time between probes to one peer.
    pub probe_interval: Duration,
    /// A probe unanswered after this long is lost.
    pub probe_timeout: Duration,
    /// When an unanswered probe is late (`probe_late_multiplier`,
    /// `probe_late_floor`).
    pub probe_late: crate::stamp::LateRule,
    /// Root of the sysfs tree (tests point it at a fixture).
    pub sysfs_root: PathBuf,
    /// Time between interface counter reads.
    pub counters_interval: Duration,
    /// Time between thermal reads.
    pub thermal_interval: Duration,
    /// Time between in-band path MTU discoveries towards each peer.
    pub path_mtu_interval: Duration,
    /// Directory of the durable spool; one agent per directory.
    pub spool_dir: PathBuf,
    /// Cap on the spool's bytes; beyond it the oldest records are dropped
    /// (and counted).
    pub spool_max_bytes: u64,
    /// File holding the bearer token presented to the collector.
    pub token_file: Option<PathBuf>,
    /// The token itself, if already known (the lab sets it; `main` reads
    /// `token_file` into it).
    pub token: Option<String>,
    /// TLS to an `https://` collector (`[tls]`).
    pub tls: crate::transport::ClientTls,
    /// Interface to probe through, overriding discovery.
    pub interface: Option<String>,
    /// Log format.
    pub log_format: LogFormat,
    /// TCP services checked on every peer's address.
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
    pub bandwidth_peers: BTreeMap<String, ScopedAddr>,
    /// Networks whose hosts may run tests against our bandwidth server
    /// besides the configured peers (and loopback). Everyone else is
    /// refused: the server sends whatever rate a client asks for.
    pub bandwidth_allow: Vec<ipnet::IpNet>,
    /// Throughput expected of each link, Gbit/s, by peer name; `*` is every
    /// peer not named. Carried in each bandwidth result so the collector's
    /// alerts compare against it; empty: no expectation, no alert.
    pub bandwidth_expected: BTreeMap<String, f64>,
    /// Share of a link's negotiated speed expected of it, for peers
    /// `bandwidth_expected` does not cover (`crate::bandwidth::expect`).
    pub bandwidth_expected_share: Option<f64>,
    /// Hold the macOS idle-sleep assertion; `None`: only under launchd
    /// (`crate::power::prevent_sleep_wanted`).
    pub prevent_sleep: Option<bool>,
    /// Time between fabric check rounds (`crate::fabric`).
    pub fabric_check_interval: Duration,
    /// The uptime check fails this long before the TCP clock limit.
    pub fabric_tcp_clock_margin: Duration,
    /// Report `rdma_ready` even where RDMA is switched off.
    pub fabric_expect_rdma: bool,
    /// Run the RDMA probe (`crate::rdma`); off by default.
    pub rdma_enabled: bool,
    /// Time between RDMA pings on one link.
    pub rdma_interval: Duration,
    /// Watchdog around each queue-pair state transition.
    pub rdma_watchdog: Duration,
    /// TCP port of the dead-peer side channel (`crate::rdma::side`).
    pub rdma_side_port: u16,
    /// When a job owns the links (`crate::rdma::jobs`).
    pub rdma_job_windows: Vec<crate::rdma::jobs::JobWindow>,
    /// Time between send-bandwidth bursts (`crate::rdma::burst`); off
    /// when `None`.
    pub rdma_burst_interval: Option<Duration>,
    /// Bytes per burst (4 KiB frames).
    pub rdma_burst_bytes: u64,
}

impl Default for Config {
    /// Every key's default; `node` empty and `spool_dir` the shared root
    /// (what [`Config::build`] derives from the host name is left out).
    fn default() -> Self {
        common::defaults()
    }
}

impl Config {
    /// What is expected of the link to `peer`
    /// ([`crate::bandwidth::expect`]).
    pub fn expected(&self, peer: &str) -> crate::bandwidth::expect::Expected {
        crate::bandwidth::expect::Expected::for_peer(
            &self.bandwidth_expected,
            self.bandwidth_expected_share,
            peer,
        )
    }

    /// Where `peer`'s bandwidth server is: its `bandwidth.peers` entry, else
    /// its STAMP IP and scope with our own bandwidth port (5202 when ours
    /// is 0).
    pub fn bandwidth_addr(&self, peer: &PeerConfig) -> ScopedAddr {
        if let Some(a) = self.bandwidth_peers.get(&peer.name) {
            return a.clone();
        }
        let port = match self.bandwidth_listen.port() {
            0 => crate::bandwidth::DEFAULT_PORT,
            p => p,
        };
        ScopedAddr {
            addr: SocketAddr::new(peer.addr.ip(), port),
            interface: peer.interface.clone(),
        }
    }

    /// Parses config text; `file` is only used in error messages.
    pub fn parse(file: &str, text: &str) -> Result<Document, ConfigError> {
        Document::parse::<Config>(file, text)
    }

    /// Builds the checked configuration: defaults, then the file, then the
    /// flags, then the rules that span keys.
    pub fn build(file: Option<&Document>, flags: &Flags) -> Result<Config, ConfigError> {
        common::build(file, flags)
    }
}
