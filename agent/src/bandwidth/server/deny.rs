//! Telling a client "busy" (or "not for you") the way a stock `iperf3 -s`
//! does, off the accept thread.
//!
//! iperf3 reads the client's cookie, writes `ACCESS_DENIED` and closes.
//! Closing a socket that still holds unread data makes the kernel send a
//! reset instead of a FIN, and a reset can reach the client before it has
//! read the state byte: it then reports "Connection reset by peer" instead
//! of "the server is busy". So a denied connection is read (its cookie),
//! answered, shut down for writing, and drained until the client closes,
//! each step bounded; a small queue in front of one thread bounds the cost
//! of a flood (past it, connections are closed at once).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::bandwidth::iperf3::{State, COOKIE_SIZE};

/// Connections waiting to be denied at most.
const QUEUE: usize = 32;
/// Longest wait for a client's cookie, then for its close.
const STEP: Duration = Duration::from_millis(200);
/// Most bytes read from a denied client while waiting for its close.
const DRAIN_CAP: usize = 64 * 1024;

/// Hands connections to the deny thread; cheap to clone.
#[derive(Clone)]
pub struct Denier(SyncSender<Denied>);

/// A connection to deny, and whether its cookie was already read.
struct Denied {
    stream: TcpStream,
    cookie_read: bool,
}

impl Denier {
    /// Starts the deny thread; it ends when every [`Denier`] is dropped.
    pub fn spawn() -> std::io::Result<(Denier, JoinHandle<()>)> {
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let h = std::thread::Builder::new()
            .name("bw-deny".into())
            .spawn(move || run(rx))?;
        Ok((Denier(tx), h))
    }

    /// Denies a connection whose cookie has not been read.
    pub fn deny(&self, stream: TcpStream) {
        self.send(Denied {
            stream,
            cookie_read: false,
        });
    }

    /// Denies a connection whose cookie was read already.
    pub fn deny_after_cookie(&self, stream: TcpStream) {
        self.send(Denied {
            stream,
            cookie_read: true,
        });
    }

    fn send(&self, d: Denied) {
        match self.0.try_send(d) {
            Ok(()) => {}
            // A flood: close at once rather than queue without bound.
            Err(TrySendError::Full(d)) | Err(TrySendError::Disconnected(d)) => {
                answer(d.stream, true)
            }
        }
    }
}

fn run(rx: Receiver<Denied>) {
    for d in rx {
        answer(d.stream, d.cookie_read);
    }
}

/// Reads the cookie (unless read), writes `ACCESS_DENIED`, shuts down
/// writing and waits (bounded) for the client's close.
fn answer(mut s: TcpStream, cookie_read: bool) {
    let _ = s.set_write_timeout(Some(STEP));
    let _ = s.set_read_timeout(Some(STEP));
    if !cookie_read {
        let mut cookie = [0u8; COOKIE_SIZE];
        let _ = read_up_to(&mut s, &mut cookie, Instant::now() + STEP);
    }
    if s.write_all(&[State::AccessDenied.to_byte()]).is_err() {
        return;
    }
    let _ = s.shutdown(Shutdown::Write);
    // The client reads the state and closes; read until then so nothing
    // is left unread when we close.
    let deadline = Instant::now() + STEP;
    let mut buf = [0u8; 4096];
    let mut drained = 0;
    while drained < DRAIN_CAP && Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// Reads until `buf` is full, EOF, an error or `deadline`.
fn read_up_to(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> usize {
    let mut got = 0;
    while got < buf.len() && Instant::now() < deadline {
        match s.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    got
}
