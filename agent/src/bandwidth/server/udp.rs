//! UDP streams of a test: a fresh socket per stream on the listener's
//! address, connected to the client once its connect datagram arrives.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::bandwidth::engine;
use crate::bandwidth::error::BandwidthError;
use crate::bandwidth::iperf3;

/// A UDP socket bound to the test's listening address (shared with the
/// previous stream's socket).
pub(super) fn udp_listener(local: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    // BSDs need SO_REUSEPORT to bind the same address twice.
    #[cfg(target_os = "macos")]
    s.set_reuse_port(true)?;
    s.bind(&local.into())?;
    Ok(s.into())
}

/// Where a UDP stream's connect datagram may come from, and until when.
pub(super) struct UdpFrom<'a> {
    pub(super) client: IpAddr,
    pub(super) deadline: Instant,
    pub(super) refused: &'a AtomicU64,
}

/// Waits for the client's connect datagram on `listener`, connects it to
/// the client, opens the next listener, then replies (so the client's next
/// datagram finds it). A datagram from any other IP is ignored and counted:
/// the source of a datagram is trivially forged, and answering it would
/// aim the test's traffic at whoever was named.
pub(super) fn udp_accept(
    listener: UdpSocket,
    local: SocketAddr,
    from: &UdpFrom<'_>,
    window: Option<usize>,
) -> Result<(UdpSocket, UdpSocket), BandwidthError> {
    let mut b = [0u8; 64];
    let peer = loop {
        let left = from.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(BandwidthError::Protocol(
                "UDP streams did not arrive".into(),
            ));
        }
        listener.set_read_timeout(Some(left))?;
        match listener.recv_from(&mut b) {
            Ok((_, peer)) if peer.ip().to_canonical() == from.client.to_canonical() => break peer,
            Ok((_, peer)) => {
                from.refused.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%peer, "UDP connect datagram from a foreign address ignored");
            }
            Err(e) if crate::bandwidth::engine::is_wait(&e) => {}
            Err(e) => return Err(e.into()),
        }
    };
    listener.connect(peer)?;
    let next = udp_listener(local)?;
    engine::tune_udp(&listener, window)?;
    listener.send(&iperf3::UDP_CONNECT_REPLY.to_ne_bytes())?;
    Ok((listener, next))
}
