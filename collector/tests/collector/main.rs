//! End-to-end tests of the collector: real gRPC over loopback into `run`, a
//! real SQLite store in a temp dir, HTTP via reqwest, `/metrics` linted by
//! the real `promtool`. One module per concern: [`ingest`], [`api`],
//! [`metrics`], [`protocol`], [`config`].

#[path = "../common/mod.rs"]
mod common;

mod api;
mod cabling;
mod config;
mod ingest;
mod metrics;
mod protocol;
mod rdma;
mod support;
mod watched;
