//! iperf3-compatible bandwidth tests: a client that runs a test against a
//! stock `iperf3 -s` or another agent, and a server a stock `iperf3 -c` (or
//! another agent) can test against.
//!
//! # Layout
//! - [`iperf3`]: the control protocol's bytes and JSON documents; pure.
//! - [`plan`]: when to test which peer (interval, jitter, duty-cycle cap,
//!   retry after "busy"); pure, clock injected.
//! - [`engine`]: one blocking thread per data stream, counting bytes.
//! - [`client`]: [`run_client`], the client side of the protocol.
//! - [`server`]: [`spawn_server`], the server side, one test at a time.
//! - [`load`]: the node-wide one-test gate and per-peer load spans (RTT
//!   windows overlapping a test are tagged `under_load`).
//! - [`schedule`]: the agent's scheduler task: [`plan`] driving
//!   [`run_client`], results into the sink.
//! - [`expect`]: the throughput each link is expected to carry
//!   (configured, or a share of its negotiated speed); pure.
//! - [`thermals`]: the node's thermals during a test.
//! - `control`: state bytes and JSON frames on the control socket.
//! - `sys`: TCP retransmit counters and process CPU time, one file per OS.
//!
//! The truth is at the receiver: a result's bytes are what the receiving
//! side counted, whichever side that is. Results leave as
//! `boltwatch_proto::v1::BandwidthResult`; the caller emits them into the
//! sink.

pub mod client;
mod control;
pub mod engine;
pub mod expect;
pub mod injected;
pub mod iperf3;
pub mod load;
pub mod plan;
pub mod schedule;
pub mod server;
pub(crate) mod sys;
pub mod thermals;

pub use client::{run_client, ClientObserver, ClientOptions, IntervalReport};
pub use server::{spawn_server, ServerOptions};

/// The agent's default bandwidth server port (iperf3's own is 5201).
pub const DEFAULT_PORT: u16 = 5202;
/// The port a stock iperf3 server listens on.
pub const IPERF3_PORT: u16 = 5201;

/// Why a bandwidth test failed.
#[derive(Debug, thiserror::Error)]
pub enum BandwidthError {
    /// The options cannot describe a test.
    #[error("invalid options: {0}")]
    Options(String),
    /// The server address did not resolve.
    #[error("cannot resolve {0}")]
    Resolve(String),
    /// Connecting the control channel failed.
    #[error("connecting to {addr}")]
    Connect {
        /// Address tried.
        addr: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The server is running another test (`ACCESS_DENIED`); retry later.
    #[error("server busy: another test is running")]
    Busy,
    /// The server reported an error (`SERVER_ERROR`).
    #[error("server error: i_errno {i_errno}, errno {errno}")]
    Server {
        /// iperf3's error code.
        i_errno: i32,
        /// The OS errno on the server.
        errno: i32,
    },
    /// The server ended the test (`SERVER_TERMINATE`).
    #[error("server terminated the test")]
    ServerTerminated,
    /// The peer closed the control connection mid-protocol.
    #[error("peer closed the control connection")]
    PeerClosed,
    /// The peer broke the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The caller asked the test to stop (agent shutdown).
    #[error("stopped by the agent")]
    Stopped,
    /// Socket I/O on the control or a data connection.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl BandwidthError {
    /// True when the right reaction is a (jittered) retry, not an alarm.
    pub fn is_busy(&self) -> bool {
        matches!(self, BandwidthError::Busy)
    }
}

/// Resolves "host", "host:port", "[v6]:port" or "v6" with `default_port`.
pub fn resolve(target: &str, default_port: u16) -> Result<std::net::SocketAddr, BandwidthError> {
    use std::net::ToSocketAddrs;
    let t = target.trim();
    let with_port = if t.parse::<std::net::SocketAddr>().is_ok() {
        t.to_string()
    } else if t.parse::<std::net::IpAddr>().is_ok() {
        // A bare address; wrap v6 in brackets.
        if t.contains(':') {
            format!("[{t}]:{default_port}")
        } else {
            format!("{t}:{default_port}")
        }
    } else if t
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        t.to_string()
    } else {
        format!("{t}:{default_port}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|_| BandwidthError::Resolve(target.to_string()))?
        .next()
        .ok_or_else(|| BandwidthError::Resolve(target.to_string()))
}

/// A result record for a test that produced no figures (the error says
/// why), so failures reach the collector like successes do.
pub fn failed_result(
    opts: &ClientOptions,
    start_unix_ns: u64,
    err: &BandwidthError,
) -> boltwatch_proto::v1::BandwidthResult {
    boltwatch_proto::v1::BandwidthResult {
        start_unix_ns,
        error: err.to_string(),
        ..client::result_template(opts)
    }
}

/// Emits each result into `sink` as a `Payload::Bandwidth` record stamped
/// with the test's start time.
pub fn emit_results(sink: &crate::sink::Sink, results: Vec<boltwatch_proto::v1::BandwidthResult>) {
    for r in results {
        let at = r.start_unix_ns;
        sink.emit_at(at, boltwatch_proto::v1::record::Payload::Bandwidth(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_forms() {
        assert_eq!(
            resolve("127.0.0.1", 5201).unwrap(),
            "127.0.0.1:5201".parse().unwrap()
        );
        assert_eq!(
            resolve("127.0.0.1:9", 5201).unwrap(),
            "127.0.0.1:9".parse().unwrap()
        );
        assert_eq!(resolve("::1", 5202).unwrap(), "[::1]:5202".parse().unwrap());
        assert_eq!(
            resolve("[::1]:7", 5202).unwrap(),
            "[::1]:7".parse().unwrap()
        );
        assert_eq!(resolve("localhost:8", 1).unwrap().port(), 8);
        assert!(resolve("no.such.host.invalid", 1).is_err());
    }

    #[test]
    fn failed_results_carry_the_error_and_reach_the_sink() {
        let opts = ClientOptions {
            server: "10.0.0.2:5202".into(),
            peer: "mini-2".into(),
            streams: 2,
            mode: iperf3::Mode::Download,
            ..Default::default()
        };
        let r = failed_result(&opts, 42, &BandwidthError::Busy);
        assert_eq!(r.error, "server busy: another test is running");
        assert_eq!(r.peer, "mini-2");
        assert_eq!(r.bytes, 0);
        let (sink, mut rx) = crate::sink::Sink::new();
        emit_results(&sink, vec![r.clone()]);
        let got = rx.try_recv().unwrap();
        assert_eq!(got.unix_ns, 42);
        assert_eq!(
            got.payload,
            boltwatch_proto::v1::record::Payload::Bandwidth(r)
        );
    }
}
