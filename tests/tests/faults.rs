//! Nothing lost, with the real binaries on loopback: the collector killed
//! with SIGKILL five times while two agents probe fast, an agent killed and
//! restarted on its spool ([`restarts`]), a damaged spool and a spool cap
//! hit while the collector is away, drops counted and RSS flat ([`spool`]),
//! authenticated agents ([`auth`]), and garbage at every port
//! ([`garbage`]). Every wait is bounded; no assertion is about speed.

#[path = "faults/auth.rs"]
mod auth;
#[path = "faults/garbage.rs"]
mod garbage;
#[path = "faults/restarts.rs"]
mod restarts;
#[path = "faults/spool.rs"]
mod spool;
#[path = "faults/support.rs"]
mod support;
