//! End-to-end tests of the collector: real gRPC over loopback into `run`, a
//! real SQLite store in a temp dir, HTTP via reqwest, `/metrics` linted by
//! the real `promtool`. One module per concern: [`ingest`], [`api`],
//! [`metrics`], [`protocol`], [`config`].

mod common;

#[path = "collector/api.rs"]
mod api;
#[path = "collector/config.rs"]
mod config;
#[path = "collector/ingest.rs"]
mod ingest;
#[path = "collector/metrics.rs"]
mod metrics;
#[path = "collector/protocol.rs"]
mod protocol;
#[path = "collector/support.rs"]
mod support;
