//! `boltwatch-agent ping`: one-shot STAMP probes against any reflector,
//! printed like `ping(8)`, with a summary of exact nearest-rank statistics.
//!
//! It drives the same [`Session`] loop as the session-sender (same
//! timestamps, same matching), only with a probe count, no splay, and lines
//! instead of records.

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::imp;
use super::packet::DEFAULT_PORT;
use super::session::{Outcome, Session};
use super::stats::{Accumulator, Summary};
use super::target::Target;
use crate::discovery::scoped::{self, ScopedAddr};
use crate::health::Health;

/// What to ping and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingOptions {
    /// The reflector.
    pub target: SocketAddr,
    /// Probes to send.
    pub count: u64,
    /// Time between probes.
    pub interval: Duration,
    /// A probe unanswered after this long is lost.
    pub timeout: Duration,
    /// Pin the probes to this device; a failed bind is an error (the
    /// operator named the device).
    pub bind_device: Option<String>,
    /// Use the kernel's TX timestamp as t1 where the OS has one; false
    /// forces the userspace read (to measure what the choice is worth).
    pub kernel_tx: bool,
}

/// The outcome of a ping run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PingReport {
    /// Probes sent.
    pub sent: u64,
    /// Probes answered within the timeout.
    pub received: u64,
    /// Probes not answered within the timeout.
    pub lost: u64,
    /// Extra answers to answered probes.
    pub duplicates: u64,
    /// Answers whose RTT came out negative and were left out of `rtt`.
    pub discarded: u64,
    /// Every answer had a kernel RX timestamp (t4).
    pub kernel_rx: bool,
    /// Every answer's probe had a kernel TX timestamp (t1).
    pub kernel_tx: bool,
    /// RTT statistics over the kept samples.
    pub rtt: Summary,
}

/// A bad `ADDR[:PORT]`.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Name resolution failed or returned nothing.
    #[error("cannot resolve {input}: {reason}")]
    Resolve {
        /// What was given.
        input: String,
        /// Why.
        reason: String,
    },
}

/// Parses `ADDR[:PORT]`: `10.0.0.2`, `10.0.0.2:9000`, `::1`, `[::1]:9000`,
/// `host`, `host:9000`, and with an interface scope `169.254.1.2%en2`,
/// `fe80::1%en2`, `[fe80::1%en2]:9000` (an IP, not a name). The port
/// defaults to 862; names are resolved.
pub fn parse_target(input: &str) -> Result<ScopedAddr, TargetError> {
    if input.contains('%') {
        return scoped::parse(input, Some(DEFAULT_PORT)).map_err(|e| TargetError::Resolve {
            input: input.to_string(),
            reason: e.reason,
        });
    }
    resolve_target(input).map(ScopedAddr::from)
}

fn resolve_target(input: &str) -> Result<SocketAddr, TargetError> {
    if let Ok(sa) = input.parse::<SocketAddr>() {
        return Ok(sa);
    }
    if let Ok(ip) = input.trim_matches(['[', ']']).parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    let with_port = match input.rsplit_once(':') {
        Some((_, port)) if port.parse::<u16>().is_ok() => input.to_string(),
        _ => format!("{input}:{DEFAULT_PORT}"),
    };
    let err = |reason: String| TargetError::Resolve {
        input: input.to_string(),
        reason,
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| err(e.to_string()))?
        .next()
        .ok_or_else(|| err("no address".into()))
}

/// Parses a duration as `ping` does (`0.2` seconds) or humantime (`200ms`).
pub use boltwatch_common::duration::parse_seconds_or_duration as parse_duration;

/// Sends `opts.count` probes, printing each answer or loss to `out`, then
/// the summary. Returns early (with what it has) when `stop` is cancelled.
pub fn ping(
    opts: &PingOptions,
    stop: &CancellationToken,
    out: &mut dyn Write,
) -> io::Result<PingReport> {
    let target = Target {
        peer: opts.target.to_string(),
        addr: opts.target,
        interface: String::new(),
        bind_device: opts.bind_device.clone(),
        bind_required: true,
    };
    let mut session = Session::open(
        &target,
        opts.interval,
        opts.timeout,
        // Ping waits for the timeout whatever it calls late.
        super::late::LateRule::default(),
        Arc::new(Health::default()),
        opts.kernel_tx,
    )?;
    writeln!(
        out,
        "STAMP PING {}: {} probes of 44 octets every {:?}, timeout {:?}",
        opts.target, opts.count, opts.interval, opts.timeout
    )?;
    let mut report = PingReport {
        kernel_rx: imp::KERNEL_RX_TIMESTAMPS,
        kernel_tx: opts.kernel_tx,
        ..Default::default()
    };
    let mut acc = Accumulator::new();
    let mut write_err = None;
    session.run(Instant::now(), Some(opts.count), stop, &mut |o| {
        if let Some(l) = report.tally(o, &mut acc, opts.timeout) {
            if let Err(e) = writeln!(out, "{l}") {
                write_err.get_or_insert(e);
            }
        }
    });
    if let Some(e) = write_err {
        return Err(e);
    }
    report.rtt = acc.finish();
    writeln!(out, "--- {} STAMP statistics ---", opts.target)?;
    writeln!(out, "{}", report.summary_line())?;
    Ok(report)
}

impl PingReport {
    /// Counts one outcome of the session (a kept RTT also into `acc`) and
    /// returns the line `ping` prints for it, if any.
    fn tally(&mut self, o: Outcome, acc: &mut Accumulator, timeout: Duration) -> Option<String> {
        match o {
            Outcome::Sent { .. } => {
                self.sent += 1;
                None
            }
            Outcome::Reply {
                seq,
                rtt_ns,
                kernel_rx,
                kernel_tx,
                ..
            } => {
                self.received += 1;
                self.kernel_rx &= kernel_rx;
                self.kernel_tx &= kernel_tx;
                let how = match (kernel_tx, kernel_rx) {
                    (true, true) => "kernel",
                    (false, true) => "kernel RX, userspace TX",
                    (true, false) => "kernel TX, userspace RX",
                    (false, false) => "userspace",
                };
                Some(match rtt_ns {
                    Some(r) => {
                        acc.add(r);
                        format!("seq={seq} rtt={} ms ({how} timestamps)", ms(r))
                    }
                    None => {
                        self.discarded += 1;
                        format!("seq={seq} reply discarded: negative RTT (clock step?)")
                    }
                })
            }
            Outcome::Duplicate { seq, .. } => {
                self.duplicates += 1;
                Some(format!("seq={seq} duplicate reply"))
            }
            Outcome::Lost { seq, .. } => {
                self.lost += 1;
                Some(format!("seq={seq} lost (no reply within {timeout:?})"))
            }
            Outcome::Overdue { .. } | Outcome::Tick => None,
        }
    }

    /// `N sent, M received, x% loss; rtt min/p50/avg/p99/max = ... ms`.
    pub fn summary_line(&self) -> String {
        let loss = if self.sent == 0 {
            0.0
        } else {
            self.lost as f64 * 100.0 / self.sent as f64
        };
        let mut s = format!(
            "{} sent, {} received, {}% loss",
            self.sent,
            self.received,
            trim(loss)
        );
        if self.duplicates > 0 {
            s += &format!(", {} duplicates", self.duplicates);
        }
        if self.rtt.count > 0 {
            let r = &self.rtt;
            s += &format!(
                "; rtt min/p50/avg/p99/max = {}/{}/{}/{}/{} ms",
                ms(r.min_ns),
                ms(r.p50_ns),
                ms(r.mean_ns),
                ms(r.p99_ns),
                ms(r.max_ns)
            );
        }
        s
    }
}

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn trim(pct: f64) -> String {
    let s = format!("{pct:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let p = |s: &str| parse_target(s).unwrap().to_string();
        assert_eq!(p("10.0.0.2"), "10.0.0.2:862");
        assert_eq!(p("10.0.0.2:9000"), "10.0.0.2:9000");
        assert_eq!(p("::1"), "[::1]:862");
        assert_eq!(p("[::1]"), "[::1]:862");
        assert_eq!(p("[::1]:9000"), "[::1]:9000");
        assert_eq!(p("localhost:9000").rsplit(':').next(), Some("9000"));
        assert!(parse_target("no such host.invalid").is_err());
        assert_eq!(p("169.254.1.2%en2"), "169.254.1.2%en2:862");
        assert_eq!(p("[fe80::1%en2]:9000"), "[fe80::1%en2]:9000");
        assert_eq!(p("fe80::1%en2"), "[fe80::1%en2]:862");
        let e = parse_target("host%en2").unwrap_err().to_string();
        assert!(
            e.contains("host%en2") && e.contains("address `host`"),
            "{e}"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0.1"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("10ms"), Ok(Duration::from_millis(10)));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn summary_line_format() {
        let mut r = PingReport {
            sent: 3,
            received: 2,
            lost: 1,
            ..Default::default()
        };
        assert_eq!(r.summary_line(), "3 sent, 2 received, 33.3% loss");
        r.rtt = Summary {
            count: 2,
            min_ns: 31_000,
            mean_ns: 40_600,
            max_ns: 50_000,
            p50_ns: 31_000,
            p99_ns: 50_000,
            sum_ns: 81_000,
            buckets: vec![],
        };
        r.lost = 0;
        r.sent = 2;
        assert_eq!(
            r.summary_line(),
            "2 sent, 2 received, 0% loss; rtt min/p50/avg/p99/max = \
             0.031/0.031/0.041/0.050/0.050 ms"
        );
    }
}
