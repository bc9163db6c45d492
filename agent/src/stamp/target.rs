//! The peer a STAMP session probes: shared by the session-sender, `ping`
//! and the session they both run.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

use tracing::warn;

use super::imp;

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

impl Target {
    /// A UDP socket for probing this target (`what` names the probes in
    /// errors and logs): on an ephemeral port of the peer's family, bound
    /// to `bind_device` when set, so the path measured is the one the
    /// probes take. A required bind that fails is an error; otherwise the
    /// failure is logged and the routing table decides.
    pub(crate) fn probe_socket(&self, what: &str) -> io::Result<UdpSocket> {
        let v6 = self.addr.is_ipv6();
        let any: IpAddr = if v6 {
            Ipv6Addr::UNSPECIFIED.into()
        } else {
            Ipv4Addr::UNSPECIFIED.into()
        };
        let socket = UdpSocket::bind(SocketAddr::new(any, 0))?;
        let Some(dev) = &self.bind_device else {
            return Ok(socket);
        };
        match imp::bind_device(&socket, dev, v6) {
            Ok(()) => Ok(socket),
            Err(e) if self.bind_required => Err(io::Error::new(
                e.kind(),
                format!(
                    "cannot bind {what} to {dev} (the scope of {}): {e}",
                    self.peer
                ),
            )),
            Err(e) => {
                warn!(device = %dev, peer = %self.peer, error = %e,
                    "cannot bind {what} to the device; the routing table decides");
                Ok(socket)
            }
        }
    }
}
