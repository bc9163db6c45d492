//! Blocking helpers for the iperf3 control connection: state bytes and
//! length-prefixed JSON frames over a `TcpStream`, with the caps from
//! [`super::iperf3`] applied before any allocation.

use super::error::BandwidthError;
use super::iperf3::{self, CodecError, State};
use std::io::{self, Read, Write};
use std::net::TcpStream;

/// Writes one state byte.
pub fn write_state(s: &mut TcpStream, state: State) -> io::Result<()> {
    s.write_all(&[state.to_byte()])
}

/// Reads one state byte; EOF is an error naming the peer's disappearance.
pub fn read_state(s: &mut TcpStream) -> Result<State, BandwidthError> {
    let mut b = [0u8; 1];
    loop {
        return match s.read(&mut b) {
            Ok(0) => Err(BandwidthError::PeerClosed),
            Ok(_) => Ok(State::from_byte(b[0])?),
            // A signal (SIGCHLD of any child of the process) interrupts a
            // read on a socket with a timeout; the kernel does not restart it.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e.into()),
        };
    }
}

/// Writes a length-prefixed JSON document.
pub fn write_frame(s: &mut TcpStream, json: &[u8]) -> io::Result<()> {
    s.write_all(&iperf3::encode_frame(json))
}

/// Reads a length-prefixed JSON document of at most `cap` bytes (from the
/// control socket, or from the server's set-up reader over it).
pub fn read_frame(s: &mut impl Read, cap: usize) -> Result<Vec<u8>, BandwidthError> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h).map_err(eof_is_closed)?;
    let len = iperf3::frame_len(h, cap)?;
    let mut buf = vec![0u8; len];
    s.read_exact(&mut buf).map_err(eof_is_closed)?;
    Ok(buf)
}

/// Reads the two integers after a `SERVER_ERROR` byte.
pub fn read_server_error(s: &mut TcpStream) -> BandwidthError {
    let mut b = [0u8; 8];
    match s.read_exact(&mut b) {
        Ok(()) => {
            let (i_errno, errno) = iperf3::decode_server_error(&b);
            BandwidthError::Server { i_errno, errno }
        }
        Err(_) => BandwidthError::Server {
            i_errno: -1,
            errno: 0,
        },
    }
}

fn eof_is_closed(e: io::Error) -> BandwidthError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        BandwidthError::PeerClosed
    } else {
        BandwidthError::Io(e)
    }
}

impl From<CodecError> for BandwidthError {
    fn from(e: CodecError) -> Self {
        BandwidthError::Protocol(e.to_string())
    }
}
