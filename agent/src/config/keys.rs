//! Every agent config key, defined once: TOML path, flag, default, help and
//! validation. The `run` table of docs/deployment.md is generated from this table and a
//! test keeps the two equal.
//!
//! Sections group what belongs together: `[spool]`, `[services]`,
//! `[bandwidth]` (with `[bandwidth.peers]`); the rest is top level. The
//! flat names these keys had before the sections (`spool_dir`,
//! `bandwidth_listen`, ...) are still accepted, with a note in the log.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use boltwatch_common::config::{
    check_tls_pair, log_format_key, set, tls_cert_key, tls_key_key, ConfigError, HasTlsPair, Key,
    Origin, TlsPair, Where,
};
use boltwatch_common::log::LogFormat;

use super::model::Config;
use super::parse;

/// Where the spool lives unless configured (one subdirectory per node).
pub const DEFAULT_SPOOL_DIR: &str = "/var/lib/boltwatch/spool";

impl boltwatch_common::config::HasLogFormat for Config {
    fn log_format_mut(&mut self) -> &mut LogFormat {
        &mut self.log_format
    }
}

impl HasTlsPair for Config {
    fn tls_pair(&mut self) -> TlsPair<'_> {
        TlsPair::new(&mut self.tls.cert, &mut self.tls.key)
    }
}

type K = Key<Config>;

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The longest interval a periodic read accepts.
const DAY: Duration = secs(86_400);

/// The key table, in the order docs/deployment.md lists it.
pub const KEYS: &[K] = &[
    K::new("node", "node name in every record", |c, v| {
        c.node = v.nonempty()?.to_string();
        Ok(())
    })
    .flag("node", "NAME")
    .default_doc("host name"),
    K::new("collector", "collector gRPC endpoint", |c, v| {
        set(&mut c.collector, parse::url(v.str()?))
    })
    .flag("collector", "URL")
    .default("http://127.0.0.1:50071"),
    K::new("listen", "STAMP reflector (UDP)", |c, v| {
        set(&mut c.listen, v.addr())
    })
    .flag("listen", "ADDR")
    .default("0.0.0.0:862"),
    K::new(
        "metrics_listen",
        "serve this node's own Prometheus `/metrics` here (TCP; scrape the node directly, with or without a collector)",
        |c, v| {
            c.metrics_listen = Some(v.addr()?);
            Ok(())
        },
    )
    .flag("metrics-listen", "ADDR")
    .default_doc("off"),
    K::new(
        "peers",
        "peer reflector to probe, `NAME=ADDR` (a list, or a `[peers]` table); `IP%IF:PORT` or `[IPv6%IF]:PORT` binds the probes to interface `IF`",
        |c, v| {
            c.peers = v.entries_of(parse::peer)?;
            let mut names = BTreeSet::new();
            match c.peers.iter().find(|p| !names.insert(&p.name)) {
                Some(p) => Err(format!("peer `{}` listed twice", p.name)),
                None => Ok(()),
            }
        },
    )
    .repeated("peer", "NAME=ADDR"),
    K::new(
        "probe_interval",
        "time between probes per peer; `fast` is the fast profile, 10ms (100 Hz)",
        |c, v| set(&mut c.probe_interval, parse::probe_interval(v)),
    )
    .flag("probe-interval", "D")
    .default("100ms"),
    K::new(
        "probe_timeout",
        "a probe unanswered this long is lost",
        |c, v| set(&mut c.probe_timeout, v.duration(Duration::from_nanos(1)..=secs(60))),
    )
    .flag("probe-timeout", "D")
    .default("1s"),
    K::new(
        "probe_late_multiplier",
        "a probe unanswered for this many times the link's recent p99 round trip is late; `outage_after_missing` late probes in a row open an outage",
        |c, v| {
            c.probe_late.multiplier = v.float(1.0..=1000.0)?;
            Ok(())
        },
    )
    .default("4"),
    K::new(
        "probe_late_floor",
        "the late bound is never shorter than this (nor longer than `probe_timeout`)",
        |c, v| set(&mut c.probe_late.floor, v.duration(ms(1)..=secs(60))),
    )
    // Off by default (the bound is then `probe_timeout`'s 1 s): late
    // probes tolerate a stall of only (k - 1) x interval + the bound, and
    // a loaded host stalls its probes longer several times a minute, each
    // a short probe-loss outage (bench/detect-results.md); the fast
    // profile's users set it (5ms) with the rate where the host is quiet.
    .default("1s"),
    K::new("interface", "probe through this interface", |c, v| {
        c.interface = Some(v.nonempty()?.to_string());
        Ok(())
    })
    .flag("interface", "IF")
    .default_doc("discovered"),
    log_format_key(),
    K::new(
        "token_file",
        "bearer token for the collector's `--auth-tokens`",
        |c, v| {
            c.token_file = Some(v.path()?);
            Ok(())
        },
    )
    .flag("token-file", "FILE")
    .default_doc("none"),
    K::new(
        "tls.ca",
        "PEM CA that signed the collector's certificate; needed for an `https://` collector",
        |c, v| {
            c.tls.ca = Some(v.path()?);
            Ok(())
        },
    )
    .flag("tls-ca", "FILE")
    .default_doc("none"),
    tls_cert_key(
        "PEM client certificate for mutual TLS (its DNS name is the node name)",
        "none",
    ),
    tls_key_key(),
    K::new(
        "sysfs_root",
        "Linux sysfs root (fixtures in tests)",
        |c, v| set(&mut c.sysfs_root, v.path()),
    )
    .flag("sysfs-root", "DIR")
    .default("/sys"),
    K::new("counters_interval", "interface counter reads", |c, v| {
        set(&mut c.counters_interval, v.duration(ms(10)..=DAY))
    })
    .default("1s"),
    K::new("thermal_interval", "thermal reads", |c, v| {
        set(&mut c.thermal_interval, v.duration(ms(10)..=DAY))
    })
    .default("5s"),
    K::new(
        "path_mtu_interval",
        "time between in-band path MTU discoveries, one peer after another (padded don't-fragment STAMP probes, at most the probe rate)",
        |c, v| set(&mut c.path_mtu_interval, v.duration(secs(1)..=DAY)),
    )
    .default("5m"),
    K::new(
        "outage_after_missing",
        "consecutive missing probes that open an outage",
        |c, v| {
            c.outage_after_missing = v.int(1..=1000)? as u32;
            Ok(())
        },
    )
    .default("3"),
    K::new(
        "prevent_sleep",
        "macOS: hold a `PreventUserIdleSystemSleep` power assertion while the agent runs, so the node does not idle-sleep off the fabric (Linux: not supported, logged)",
        |c, v| {
            c.prevent_sleep = Some(v.bool()?);
            Ok(())
        },
    )
    .flag("prevent-sleep", "BOOL")
    .default_doc("on under launchd, else off"),
    K::new(
        "fabric.check_interval",
        "time between fabric check rounds (settings that take a cluster down; docs/fabric.md)",
        |c, v| set(&mut c.fabric_check_interval, v.duration(secs(1)..=DAY)),
    )
    .default("60s"),
    K::new(
        "fabric.tcp_clock_margin",
        "macOS: the `uptime_under_tcp_limit` check fails this long before 49 days 17 hours of uptime",
        |c, v| set(&mut c.fabric_tcp_clock_margin, v.duration(Duration::ZERO..=30 * DAY)),
    )
    .default("3d"),
    K::new(
        "fabric.expect_rdma",
        "report `rdma_ready` (failing) even where RDMA is switched off",
        |c, v| {
            c.fabric_expect_rdma = v.bool()?;
            Ok(())
        },
    )
    .default("false"),
    K::new(
        "rdma.enabled",
        "run the RDMA probe: one UC queue pair per link, ping-pong over verbs (docs/rdma.md)",
        |c, v| {
            c.rdma_enabled = v.bool()?;
            Ok(())
        },
    )
    .default("false"),
    K::new(
        "rdma.interval",
        "time between RDMA pings on one link (64 B and 4 KiB alternate)",
        |c, v| set(&mut c.rdma_interval, v.duration(Duration::from_millis(200)..=DAY)),
    )
    .default("1s"),
    K::new(
        "rdma.watchdog",
        "longest one queue-pair state transition may take before the port is marked wedged",
        |c, v| set(&mut c.rdma_watchdog, v.duration(Duration::from_millis(100)..=Duration::from_secs(60))),
    )
    .default("5s"),
    K::new(
        "rdma.side_port",
        "TCP port of the RDMA probe's dead-peer side channel (16-byte beats between the agents of a link)",
        |c, v| {
            c.rdma_side_port = v.int(1..=65535)? as u16;
            Ok(())
        },
    )
    .default("8862"),
    K::new(
        "rdma.job_windows",
        "daily UTC windows `HH:MM-HH:MM` in which a job owns the links: the RDMA probe sends nothing",
        |c, v| set(&mut c.rdma_job_windows, v.list_of(crate::rdma::jobs::JobWindow::parse)),
    )
    .default_doc("none"),
    K::new(
        "rdma.burst_interval",
        "time between RDMA send-bandwidth bursts on one link (`boltwatch_rdma_send_bandwidth_bytes_per_second`); skipped like pings in job windows",
        |c, v| {
            c.rdma_burst_interval = Some(v.duration(secs(10)..=DAY)?);
            Ok(())
        },
    )
    .default_doc("off"),
    K::new(
        "rdma.burst_bytes",
        "bytes one RDMA burst sends, in 4 KiB frames the peer grants 6 at a time (at most 16 MiB; a burst also ends after 50 ms)",
        |c, v| {
            let max = crate::rdma::burst::MAX_BYTES as i64;
            c.rdma_burst_bytes = v.int(4096..=max)? as u64;
            Ok(())
        },
    )
    .default("1048576"),
    K::new("spool.dir", "durable spool (one agent per dir)", |c, v| {
        set(&mut c.spool_dir, v.path())
    })
    .flag("spool-dir", "DIR")
    .default(DEFAULT_SPOOL_DIR)
    .default_doc("/var/lib/boltwatch/spool/<node>")
    .was("spool_dir"),
    K::new(
        "spool.max_bytes",
        "spool cap; oldest dropped and counted beyond it",
        |c, v| {
            c.spool_max_bytes = v.int(1 << 20..=1 << 40)? as u64;
            Ok(())
        },
    )
    .flag("spool-max-bytes", "N")
    .default("1073741824")
    .was("spool_max_bytes"),
    K::new(
        "services.tcp",
        "TCP service `NAME=PORT` checked on every peer",
        |c, v| set(&mut c.services, v.list_of(parse::service)),
    )
    .repeated("service", "NAME=PORT")
    .off("no-services", "[]", "check no services")
    .default("ssh=22")
    .was("services"),
    K::new(
        "services.interval",
        "time between service checks",
        |c, v| set(&mut c.service_interval, v.duration(ms(10)..=DAY)),
    )
    .default("5s")
    .was("service_interval"),
    K::new(
        "bandwidth.enabled",
        "run the bandwidth server and scheduled tests",
        |c, v| set(&mut c.bandwidth_enabled, v.bool()),
    )
    .off("no-bandwidth", "false", "no server, no scheduled tests")
    .default("true")
    .was("bandwidth_enabled"),
    K::new(
        "bandwidth.listen",
        "iperf3-compatible bandwidth server",
        |c, v| set(&mut c.bandwidth_listen, v.addr()),
    )
    .flag("bandwidth-listen", "ADDR")
    .default("0.0.0.0:5202")
    .was("bandwidth_listen"),
    K::new(
        "bandwidth.interval",
        "time between tests of each peer (jittered)",
        |c, v| set(&mut c.bandwidth_interval, v.duration(secs(1)..=DAY)),
    )
    .flag("bandwidth-interval", "D")
    .default("5m")
    .was("bandwidth_interval"),
    K::new(
        "bandwidth.duration",
        "length of each test (whole seconds)",
        |c, v| {
            // The server refuses tests longer than a minute from anyone
            // (a long test keeps a node busy for strangers); ours fit too.
            let d = v.duration(secs(1)..=secs(60))?;
            if d.subsec_nanos() != 0 {
                return Err(format!("{d:?}: must be whole seconds"));
            }
            c.bandwidth_duration = d;
            Ok(())
        },
    )
    .flag("bandwidth-duration", "D")
    .default("10s")
    .was("bandwidth_duration"),
    K::new("bandwidth.streams", "parallel TCP streams", |c, v| {
        c.bandwidth_streams = v.int(1..=128)? as u32;
        Ok(())
    })
    .default("4")
    .was("bandwidth_streams"),
    K::new(
        "bandwidth.duty_cycle",
        "at most this share of wall time in tests",
        |c, v| set(&mut c.bandwidth_duty_cycle, v.float(0.001..=1.0)),
    )
    .default("0.05")
    .was("bandwidth_duty_cycle"),
    K::new(
        "bandwidth.peers",
        "a peer's bandwidth server, `NAME = \"ADDR\"` (`ADDR%IF` binds the test to interface `IF`)",
        |c, v| {
            c.bandwidth_peers =
                v.entries()?
                    .iter()
                    .map(|e| {
                        let (name, addr) = e.split_once('=').unwrap_or((e, ""));
                        let a = parse::scoped_addr(addr).map_err(|err| format!("`{name}`: {err}"))?;
                        Ok((name.trim().to_string(), a))
                    })
                    .collect::<Result<BTreeMap<_, _>, String>>()?;
            Ok(())
        },
    )
    .default_doc("peer's IP, our port")
    .was("bandwidth_peers"),
    K::new(
        "bandwidth.allow",
        "CIDR whose hosts may test against our server besides the peers",
        |c, v| set(&mut c.bandwidth_allow, v.list_of(parse::cidr)),
    )
    .repeated("bandwidth-allow", "CIDR")
    .default_doc("peers and loopback only"),
    K::new(
        "bandwidth.expected",
        "Gbit/s expected of every link (a number), or per peer (`NAME = \"GBPS\"`, `*` for the rest); the bandwidth alerts compare against it",
        |c, v| {
            let range = 0.001..=1000.0;
            let parse = |name: &str, g: &str| -> Result<(String, f64), String> {
                let x: f64 = g
                    .trim()
                    .parse()
                    .map_err(|e| format!("`{name}`: `{g}`: {e} (expected Gbit/s)"))?;
                if !range.contains(&x) {
                    return Err(format!("`{name}`: {x} is outside 0.001..1000 Gbit/s"));
                }
                Ok((name.trim().to_string(), x))
            };
            c.bandwidth_expected = match v.float(range.clone()) {
                Ok(g) => BTreeMap::from([("*".to_string(), g)]),
                Err(_) => v.entries_of(|e| {
                    let (name, g) = e.split_once('=').unwrap_or(("*", e));
                    parse(name, g)
                })?,
            };
            Ok(())
        },
    )
    .default_doc("none"),
    K::new(
        "bandwidth.expected_share",
        "share (0.01..1) of the negotiated speed of the interface towards a peer expected of the link, for peers `bandwidth.expected` does not cover; none where the interface reports no speed",
        |c, v| {
            c.bandwidth_expected_share = Some(v.float(0.01..=1.0)?);
            Ok(())
        },
    )
    .default_doc("none"),
];

/// Placeholders every key's default overwrites (see
/// [`boltwatch_common::config::Schema::blank`]).
pub(super) fn blank() -> Config {
    let any = SocketAddr::from(([0, 0, 0, 0], 0));
    Config {
        node: String::new(),
        collector: String::new(),
        listen: any,
        metrics_listen: None,
        peers: Vec::new(),
        probe_interval: Duration::ZERO,
        probe_timeout: Duration::ZERO,
        probe_late: crate::stamp::LateRule {
            multiplier: 0.0,
            floor: Duration::ZERO,
        },
        sysfs_root: PathBuf::new(),
        counters_interval: Duration::ZERO,
        thermal_interval: Duration::ZERO,
        path_mtu_interval: Duration::ZERO,
        spool_dir: PathBuf::new(),
        spool_max_bytes: 0,
        token_file: None,
        token: None,
        tls: Default::default(),
        interface: None,
        log_format: LogFormat::Text,
        services: Vec::new(),
        service_interval: Duration::ZERO,
        outage_after_missing: 0,
        prevent_sleep: None,
        fabric_check_interval: Duration::ZERO,
        fabric_tcp_clock_margin: Duration::ZERO,
        fabric_expect_rdma: false,
        rdma_enabled: false,
        rdma_interval: Duration::ZERO,
        rdma_watchdog: Duration::ZERO,
        rdma_side_port: 0,
        rdma_job_windows: Vec::new(),
        rdma_burst_interval: None,
        rdma_burst_bytes: 0,
        bandwidth_enabled: false,
        bandwidth_listen: any,
        bandwidth_interval: Duration::ZERO,
        bandwidth_duration: Duration::ZERO,
        bandwidth_streams: 0,
        bandwidth_duty_cycle: 0.0,
        bandwidth_peers: BTreeMap::new(),
        bandwidth_allow: Vec::new(),
        bandwidth_expected: BTreeMap::new(),
        bandwidth_expected_share: None,
    }
}

/// Computed defaults and the rules that span keys.
pub(super) fn finish(c: &mut Config, at: &Where<'_, Config>) -> Result<(), ConfigError> {
    if c.node.is_empty() {
        c.node = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "node".into());
    }
    if at.origin("spool.dir") == Origin::Default {
        // One directory per node name, so two agents on one host (a bench,
        // a lab) do not fight over the lock.
        c.spool_dir = PathBuf::from(DEFAULT_SPOOL_DIR).join(&c.node);
    }
    if let Some(name) = c
        .bandwidth_expected
        .keys()
        .find(|n| *n != "*" && !c.peers.iter().any(|p| &p.name == *n))
    {
        return Err(at.error(
            &["bandwidth.expected"],
            format!("`{name}` is not one of the peers"),
        ));
    }
    if let Some(name) = c
        .bandwidth_peers
        .keys()
        .find(|n| !c.peers.iter().any(|p| &p.name == *n))
    {
        return Err(at.error(
            &["bandwidth.peers"],
            format!("`{name}` is not one of the peers"),
        ));
    }
    let https = c.collector.starts_with("https://");
    if https && c.tls.ca.is_none() {
        return Err(at.error(
            &["tls.ca", "collector"],
            "an https:// collector needs tls.ca (the CA that signed its certificate)",
        ));
    }
    if !https && (c.tls.ca.is_some() || c.tls.cert.is_some()) {
        return Err(at.error(
            &["tls.ca", "tls.cert", "collector"],
            "TLS settings need an https:// collector URL",
        ));
    }
    check_tls_pair(
        c,
        at,
        "a client certificate needs both tls.cert and tls.key",
    )?;
    // The schedule must be one the planner accepts, by its own rules.
    crate::bandwidth::schedule::plan_config(
        c.bandwidth_interval,
        c.bandwidth_duration,
        c.bandwidth_duty_cycle,
    )
    .map_err(|e| {
        at.error(
            &[
                "bandwidth.interval",
                "bandwidth.duration",
                "bandwidth.duty_cycle",
            ],
            format!(
                "{e} (interval {:?}, duration {:?}, duty cycle {})",
                c.bandwidth_interval, c.bandwidth_duration, c.bandwidth_duty_cycle
            ),
        )
    })?;
    Ok(())
}
