//! Nothing lost, with the real binaries on loopback: the collector killed
//! with SIGKILL five times while two agents probe fast, an agent killed and
//! restarted on its spool ([`restarts`]), a damaged spool and a spool cap
//! hit while the collector is away, drops counted and RSS flat ([`spool`]),
//! authenticated agents ([`auth`]), and garbage at every port
//! ([`garbage`]). Every wait is bounded; no assertion is about speed.

mod auth;
mod garbage;
mod restarts;
mod spool;
mod support;
