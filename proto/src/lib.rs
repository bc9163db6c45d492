//! The boltwatch wire schema (`boltwatch.v1`) and the pieces of logic both
//! ends must agree on.
//!
//! # Layout
//! - [`v1`]: the generated protobuf messages and the `Telemetry` gRPC
//!   client and server (see `boltwatch/v1/telemetry.proto`, which documents
//!   every field).
//! - [`kind`]: the payload-kind names (store column, metrics label, API
//!   filter), generated from the schema's `Record.payload` oneof.
//! - [`fabric`]: the fabric checks' names (the agent runs them, the
//!   collector exports the names it knows).
//! - [`histogram`]: the RTT histogram bucket layout shared by the agent
//!   (which fills it) and the collector (which exports it to Prometheus).
//! - [`merge`]: the one rule for merging RTT window statistics (store
//!   rollups and report figures).
//! - [`rdma`]: the RDMA probe's error classes as metric labels.
//! - [`throttle`]: whether a thermal reading says its interval was
//!   throttled.
#![deny(missing_docs)]

pub mod fabric;
pub mod histogram;
pub mod kind;
pub mod merge;
pub mod rdma;
pub mod throttle;
pub mod v1;

pub use kind::{record_kind, KINDS, PAYLOAD_TAGS, UNKNOWN_KIND};

/// The schema revision this crate was built from (sent in `Hello`).
pub const SCHEMA_REVISION: u32 = 1;
