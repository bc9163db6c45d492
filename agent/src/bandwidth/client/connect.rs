//! The client's sockets: the control and data connections to the server,
//! bound to the interface of a scoped server address before they connect,
//! so a test to `169.254.3.2%en3` runs over that cable whatever the routing
//! table says. A bind that fails is an error, never a silent fall back to
//! the route: a test over the wrong cable would measure the wrong link.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::bandwidth::error::BandwidthError;
use crate::discovery::scoped::ScopedAddr;

/// Where the client connects: the address (IPv6 scope id filled) and the
/// interface to bind to.
#[derive(Debug, Clone)]
pub(super) struct Dest {
    pub(super) addr: SocketAddr,
    device: Option<String>,
    /// As the operator wrote it, for messages and records.
    shown: String,
}

impl Dest {
    /// The destination of `scoped`; fails when its interface is missing.
    pub(super) fn new(scoped: &ScopedAddr) -> Result<Dest, BandwidthError> {
        let addr = scoped
            .socket_addr()
            .map_err(|source| BandwidthError::Connect {
                addr: scoped.to_string(),
                source,
            })?;
        Ok(Dest {
            addr,
            device: scoped.interface.clone(),
            shown: scoped.to_string(),
        })
    }

    /// How the server is named in records and errors.
    pub(super) fn shown(&self) -> &str {
        &self.shown
    }

    fn socket(&self, ty: Type, protocol: Protocol) -> Result<Socket, BandwidthError> {
        let s = Socket::new(Domain::for_address(self.addr), ty, Some(protocol))?;
        if let Some(dev) = &self.device {
            crate::stamp::imp::bind_device(&s, dev, self.addr.is_ipv6()).map_err(|e| {
                BandwidthError::Connect {
                    addr: self.shown.clone(),
                    source: std::io::Error::new(e.kind(), format!("binding to {dev}: {e}")),
                }
            })?;
        }
        Ok(s)
    }

    /// A TCP connection, waiting at most `timeout`.
    pub(super) fn tcp(&self, timeout: Duration) -> Result<TcpStream, BandwidthError> {
        let s = self.socket(Type::STREAM, Protocol::TCP)?;
        s.connect_timeout(&self.addr.into(), timeout)
            .map_err(|source| BandwidthError::Connect {
                addr: self.shown.clone(),
                source,
            })?;
        Ok(s.into())
    }

    /// A UDP socket connected to the server.
    pub(super) fn udp(&self) -> Result<UdpSocket, BandwidthError> {
        let s = self.socket(Type::DGRAM, Protocol::UDP)?;
        let any: SocketAddr = match self.addr {
            SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        s.bind(&any.into())?;
        s.connect(&self.addr.into())?;
        Ok(s.into())
    }
}
