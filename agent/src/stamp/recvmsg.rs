//! The `recvmsg` call both unix receive paths make, and the sender address
//! it yields. Each OS file (`timestamp_linux.rs`, `timestamp_macos.rs`)
//! only sizes the control buffer and reads its own control messages.

use std::io;
use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, SockaddrLike, SockaddrStorage};

use super::Received;

/// Receives one datagram into `buf` with control messages into `cmsg` (a
/// buffer sized by the caller for the messages it asked for),
/// handing each control message to `read` to fill in the metadata.
/// `nonblocking` returns `WouldBlock` at once when nothing is queued.
pub(crate) fn recv_with(
    sock: &UdpSocket,
    buf: &mut [u8],
    mut cmsg: Vec<u8>,
    nonblocking: bool,
    mut read: impl FnMut(ControlMessageOwned, &mut Received),
) -> io::Result<Received> {
    let mut iov = [IoSliceMut::new(buf)];
    let flags = if nonblocking {
        MsgFlags::MSG_DONTWAIT
    } else {
        MsgFlags::empty()
    };
    let msg = recvmsg::<SockaddrStorage>(sock.as_raw_fd(), &mut iov, Some(&mut cmsg), flags)
        .map_err(io::Error::from)?;
    let mut out = Received {
        len: msg.bytes,
        from: msg.address.as_ref().and_then(to_socket_addr),
        kernel_rx_unix_ns: None,
        generation: None,
        ttl: None,
    };
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            read(c, &mut out);
        }
    }
    Ok(out)
}

fn to_socket_addr(s: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    if let Some(v6) = s.as_sockaddr_in6() {
        return Some(SocketAddr::V6((*v6).into()));
    }
    let _ = s.family();
    None
}
