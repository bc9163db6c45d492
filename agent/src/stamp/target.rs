//! The peer a STAMP session probes: shared by the session-sender, `ping`
//! and the session they both run.

use std::net::SocketAddr;

/// The peer a session probes (a session-sender's or `ping`'s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The peer's node name (the `peer` label of its records).
    pub peer: String,
    /// The peer's reflector address.
    pub addr: SocketAddr,
    /// The local interface the probes are expected to leave through (the
    /// `interface` label of its records).
    pub interface: String,
    /// If set, pin the socket to this device (`SO_BINDTODEVICE` on Linux,
    /// `IP_BOUND_IF` on macOS).
    pub bind_device: Option<String>,
    /// A failed bind is an error (the device is the scope of the peer's
    /// address: without it the probes would take another cable). When
    /// false the bind is best effort: logged, and the routing table
    /// decides (the `interface` key).
    pub bind_required: bool,
}
