//! The boltwatch wire schema (`boltwatch.v1`) and the pieces of logic both
//! ends must agree on.
//!
//! # Layout
//! - [`v1`]: the generated protobuf messages and the `Telemetry` gRPC
//!   client and server (see `boltwatch/v1/telemetry.proto`, which documents
//!   every field).
//! - [`histogram`]: the RTT histogram bucket layout shared by the agent
//!   (which fills it) and the collector (which exports it to Prometheus).
#![deny(missing_docs)]

pub mod histogram;

/// Generated code for package `boltwatch.v1`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("boltwatch.v1");
}

/// The schema revision this crate was built from (sent in `Hello`).
pub const SCHEMA_REVISION: u32 = 1;

impl v1::record::Payload {
    /// A short, stable name of the payload kind, used as a store column and
    /// a metrics label.
    pub fn kind(&self) -> &'static str {
        use v1::record::Payload;
        match self {
            Payload::Rtt(_) => "rtt",
            Payload::LinkEvent(_) => "link_event",
            Payload::Counters(_) => "counters",
            Payload::Thermal(_) => "thermal",
            Payload::Bandwidth(_) => "bandwidth",
            Payload::Service(_) => "service",
            Payload::Outage(_) => "outage",
            Payload::AgentStats(_) => "agent_stats",
            Payload::Path(_) => "path",
        }
    }
}
