//! What both boltwatch binaries (agent and collector) use, written once.
//!
//! - [`daemon`]: the binary edge of both daemons: config flags, exit 78,
//!   `--check-config`, logging and supervision.
//! - [`config`]: one definition per config key (TOML key, flag, default,
//!   validation, help), the file/flag/default merge, errors naming file,
//!   line and key, and the flag tables of docs/deployment.md generated from the keys.
//! - [`duration`]: `100ms`, `5s`, `5m` as the config and flags spell them.
//! - [`log`]: [`log::LogFormat`] and the one log setup (`BOLTWATCH_LOG`).
//! - [`signal`]: the SIGINT/SIGTERM shutdown future.
//! - [`exit`]: EX_CONFIG and its launchd override.
//! - [`notify`]: systemd's READY=1 and the progress-driven WATCHDOG=1.
//! - [`reopen`]: the pid file and SIGHUP log reopening newsyslog needs.
//! - [`clock`]: realtime unix nanoseconds.
//! - [`memory`]: at most two malloc arenas on glibc, so freed memory held
//!   per thread stays bounded.
//! - `testing` (feature `testing`): the seeded proptest config and
//!   error-location helpers of the property tests.
#![deny(missing_docs)]

pub mod clock;
pub mod config;
pub mod daemon;
pub mod duration;
pub mod exit;
pub mod log;
pub mod memory;
pub mod notify;
pub mod reopen;
pub mod signal;
#[cfg(feature = "testing")]
pub mod testing;
