//! boltwatch-collector: receives every agent's records over gRPC, stores
//! them durably in SQLite, and serves Prometheus `/metrics` and a JSON API.
//!
//! # Layout
//! - `run`: the composition root, [`run`] and [`run_supervised`]: one file
//!   per role (ingest, upkeep, the startup state), started in order and
//!   stopped the other way.
//! - [`config`]: TOML file plus flags, checked once into a [`Config`].
//! - [`error`]: the crate's [`Error`].
//! - [`ingest`]: the `Telemetry` gRPC service, batch validation and the
//!   HTTP/2-preface acceptor on the gRPC port.
//! - the store is the `boltwatch-store` crate (SQLite: every table and
//!   statement, compaction, retention); [`rebuild`] replays it into the
//!   `/metrics` state at start.
//! - [`export`]: the exporter state behind `/metrics`, one module per
//!   domain, and the Prometheus text rendering; pure. Ingest writes to it,
//!   HTTP reads it.
//! - [`api`] and [`dto`]: the `/api/v1` JSON routes and their shapes.
//! - [`http`]: the HTTP servers for `/metrics`, `/healthz` and `/api/v1`:
//!   an accept loop with a connection cap, header and idle timeouts, then
//!   axum's routes.
//! - `accept`: what the gRPC and HTTP accept loops share: the rule for a
//!   failed `accept` (log, wait 100 ms) and the wait for shutdown.
//! - [`report`]: report math over stored records (lab table, soak reports).
//! - [`soak`]: soak runs as stored objects, their HTTP routes, the report
//!   loader and the live soak state on `/metrics`.
//!
//! # Restarts
//! Records, boots and watermarks live in the store and survive a restart
//! (the `Welcome` after a restart carries them). Metric state does not:
//! accumulated counters (probe counts, the RTT histogram, records received,
//! duplicates, agent stats) restart at 0, which Prometheus handles as a
//! counter reset. Known nodes get their `boltwatch_agent_up 0` and
//! `boltwatch_agent_info` series back from the store at startup.
//!
//! [`run`] takes already-bound listeners and a shutdown future, so tests and
//! the lab (`boltwatch-lab`) bind port 0 and stop it at will.
#![deny(missing_docs)]

mod accept;
pub mod api;
pub mod certs;
pub mod config;
pub mod dto;
pub mod error;
pub mod export;
pub mod http;
pub mod ingest;
pub mod rebuild;
pub mod remote_write;
pub mod report;
mod run;
pub mod soak;
pub mod tls;

pub use config::Config;
pub use error::Error;
pub use run::{run, run_supervised, Listeners};
