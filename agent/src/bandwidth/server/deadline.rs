//! One deadline for a test's whole set-up, from accept to `TEST_START`.
//!
//! A per-read timeout alone does not bound the set-up: a client that sends
//! one byte just before each timeout keeps every read alive, and the
//! cookie, the parameter frame and each stream's cookie are many reads, so
//! it could hold the server's one test slot for as long as it liked. Every
//! read of the set-up therefore waits at most the per-read timeout *and*
//! what is left of this deadline, and fails once it has passed.

use std::io::{self, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The instant a test's set-up must be over by.
#[derive(Debug, Clone, Copy)]
pub(super) struct SetupDeadline {
    at: Instant,
}

impl SetupDeadline {
    /// A deadline `budget` from now.
    pub(super) fn after(budget: Duration) -> SetupDeadline {
        SetupDeadline {
            at: Instant::now() + budget,
        }
    }

    /// This deadline, or `step` from now if that comes first: a step's own
    /// limit within the set-up's.
    pub(super) fn within(&self, step: Duration) -> SetupDeadline {
        SetupDeadline {
            at: self.at.min(Instant::now() + step),
        }
    }

    /// The instant itself, for waits that are not socket reads.
    pub(super) fn at(&self) -> Instant {
        self.at
    }

    /// True once the deadline has passed.
    pub(super) fn passed(&self) -> bool {
        Instant::now() >= self.at
    }

    /// The longest a single wait may take now: `per_read`, cut to what is
    /// left of the deadline; a `TimedOut` error once nothing is left.
    pub(super) fn wait(&self, per_read: Duration) -> io::Result<Duration> {
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(passed());
        }
        Ok(left.min(per_read))
    }

    /// `s` read under this deadline, each read waiting at most `per_read`.
    pub(super) fn reader<'s>(&self, s: &'s TcpStream, per_read: Duration) -> Bounded<'s> {
        Bounded {
            s,
            deadline: *self,
            per_read,
        }
    }
}

/// A socket whose every read is bounded by a [`SetupDeadline`].
pub(super) struct Bounded<'s> {
    s: &'s TcpStream,
    deadline: SetupDeadline,
    per_read: Duration,
}

impl Read for Bounded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Armed before every read, not once per `read_exact`: a drip of one
        // byte per read would otherwise restart the wait each time.
        self.s
            .set_read_timeout(Some(self.deadline.wait(self.per_read)?))?;
        let mut s = self.s;
        match s.read(buf) {
            // A wait cut short by the deadline says so, not "would block".
            Err(e) if is_wait(&e) && self.deadline.passed() => Err(passed()),
            r => r,
        }
    }
}

fn is_wait(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn passed() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "set-up deadline passed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    fn a_drip_under_the_per_read_timeout_still_ends_at_the_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        let dripper = std::thread::spawn(move || {
            // Bounded: 200 bytes at most, or until the server hangs up.
            for _ in 0..200 {
                if client.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let deadline = SetupDeadline::after(Duration::from_millis(300));
        let mut r = deadline.reader(&server, Duration::from_secs(1));
        let mut got = 0usize;
        let mut buf = [0u8; 16];
        let err = loop {
            match r.read(&mut buf) {
                Ok(0) => panic!("the dripper hung up first"),
                Ok(n) => got += n,
                Err(e) => break e,
            }
        };
        // Without the deadline every byte would arrive (each read gets
        // one long before the per-read timeout) and only the dripper's
        // end would stop the reads.
        assert!(got < 200, "read all {got} bytes: {err}");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        drop(server);
        dripper.join().unwrap();
    }
}
