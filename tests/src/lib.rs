//! boltwatch end-to-end test support: a network-namespace test bed with
//! real veths, nftables loss, tbf rate limits and link flaps, plus fixture
//! sysfs trees. Nothing here is mocked: the bed drives `ip`, `tc`, `nft`
//! and `sysctl` from Debian and needs root; without them it fails with a
//! message saying what is missing, it never skips.
//!
//! Also here: the `bw-linkwatch` binary (`src/bin/`), which runs the
//! agent's link watcher and prints its records as JSON lines; tests start it
//! inside a node with [`TestBed::exec`].
//!
//! # Layout
//! - [`bed`]: [`TestBed`], the namespaces, links and fault injection.
//! - [`cmd`]: running the tools, [`BedError`], root and tool checks.
//! - [`nft`]: the loss ruleset and the drop-counter parser; pure.
//! - [`sysfs`]: [`SysfsFixture`], fixture `/sys` trees for agents.
//! - [`procs`]: the real agent and collector binaries as child processes,
//!   `/metrics` sampling and the promtool lint.
#![deny(missing_docs)]

pub mod bed;
pub mod cmd;
pub mod nft;
pub mod procs;
pub mod sysfs;

pub use bed::{Link, Node, TestBed};
pub use cmd::BedError;
pub use sysfs::{NetIf, SysfsFixture};
