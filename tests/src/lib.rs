//! boltwatch end-to-end test support: a network-namespace test bed with
//! real veths, nftables loss, tbf rate limits and link flaps, plus fixture
//! sysfs trees. Nothing here is mocked: the bed drives `ip`, `tc`, `nft`
//! and `sysctl` from Debian and needs root; without them it fails with a
//! message saying what is missing, it never skips.
//!
//! Also here, in `src/bin/`: `bw-linkwatch`, which runs the agent's link
//! watcher and prints its records as JSON lines (tests start it inside a
//! node with [`TestBed::exec`]); `bw-listen`, a TCP listener standing in for
//! a peer's service; and `bw-link-detect`, the detection-latency bench.
//!
//! # Layout
//! - [`bed`]: [`TestBed`], the namespaces, links and fault injection.
//! - [`bridged`]: the bed reshaped as three nodes on one node's bridge.
//! - [`cmd`]: running the tools, [`BedError`], root and tool checks.
//! - [`nft`]: the loss ruleset and the drop-counter parser; pure.
//! - [`sysfs`]: [`SysfsFixture`], fixture `/sys` trees for agents.
//! - [`cluster`]: [`cluster::Cluster`], a collector plus one agent per bed
//!   node, with API helpers.
//! - [`procs`]: the real agent and collector binaries as child processes,
//!   `/metrics` sampling and the promtool lint.
//! - [`prometheus`]: Debian's real Prometheus as a child process, and its
//!   query API.
//! - [`grafana`]: the shipped dashboard's panels and queries, variables
//!   substituted; pure.
//! - [`promql`]: the selectors of a PromQL expression; pure.
//! - [`units`]: the unit a PromQL expression yields and the Grafana units
//!   that show it; pure.
#![deny(missing_docs)]

pub mod bed;
pub mod bridged;
pub mod cluster;
pub mod cmd;
pub mod grafana;
pub mod nft;
pub mod procs;
pub mod prometheus;
pub mod promql;
pub mod rdma_feed;
pub mod rules;
pub mod sysfs;
pub mod units;

pub use bed::{BedOptions, Link, Node, TestBed};
pub use cmd::BedError;
pub use sysfs::{NetIf, SysfsFixture};
