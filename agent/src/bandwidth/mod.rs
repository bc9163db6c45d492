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
//! - `error`: [`BandwidthError`]; `addr`: the default ports and
//!   [`resolve`]. Apart from this door so the client, server and control
//!   code take them from their own home.
//! - `sys`: TCP retransmit counters and process CPU time, one file per OS.
//!
//! The truth is at the receiver: a result's bytes are what the receiving
//! side counted, whichever side that is. Results leave as
//! `boltwatch_proto::v1::BandwidthResult`; the caller emits them into the
//! sink.

mod addr;
pub mod client;
mod control;
pub mod engine;
mod error;
pub mod expect;
pub mod injected;
pub mod iperf3;
pub mod load;
pub mod plan;
pub mod schedule;
pub mod server;
pub(crate) mod sys;
pub mod thermals;

pub use addr::{resolve, DEFAULT_PORT, IPERF3_PORT};
pub use client::{run_client, ClientObserver, ClientOptions, IntervalReport};
pub use error::BandwidthError;
pub use server::{spawn_server, ServerOptions};

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
