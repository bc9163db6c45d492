//! The few OS calls the bandwidth engine needs and std lacks: TCP
//! retransmit counters (Linux `TCP_INFO`, macOS `TCP_CONNECTION_INFO`) and
//! the process CPU time (`getrusage`).
//!
//! Behind the [`SocketStats`] trait with one file per OS, chosen as
//! [`crate::platform`] describes; other targets get `unsupported.rs`,
//! which fails with [`crate::platform::Unsupported`], so the engine still
//! runs there and reports no retransmits.

use std::io;
use std::time::Duration;

use crate::platform::Support;

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod imp;
#[cfg(target_os = "macos")]
#[path = "macos.rs"]
mod imp;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
#[path = "unsupported.rs"]
mod imp;

/// Whether this OS reports retransmits and CPU time.
pub(crate) const SUPPORT: Support = imp::SUPPORT;

/// Process CPU time consumed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Time in user mode.
    pub user: Duration,
    /// Time in the kernel on the process's behalf.
    pub system: Duration,
}

/// Per-OS socket and process statistics.
pub trait SocketStats {
    /// Segments this TCP socket retransmitted since it opened.
    fn tcp_retransmits(&self, sock: &std::net::TcpStream) -> io::Result<u64>;
    /// CPU time used by the whole process.
    fn process_cpu(&self) -> io::Result<CpuTimes>;
}

/// A `timeval` as a duration; negative parts count as 0.
#[cfg_attr(not(any(target_os = "linux", target_os = "macos")), allow(dead_code))]
fn duration_of(sec: i64, usec: i64) -> Duration {
    Duration::from_secs(sec.max(0) as u64) + Duration::from_micros(usec.max(0) as u64)
}

/// The implementation for the running OS.
pub fn sys() -> impl SocketStats {
    imp::Sys
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn retransmits_readable_on_a_real_socket_and_cpu_advances() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[1u8; 4096]).unwrap();
        let mut buf = [0u8; 4096];
        s.read_exact(&mut buf).unwrap();
        // Loopback does not lose segments.
        assert_eq!(sys().tcp_retransmits(&c).unwrap(), 0);
        let a = sys().process_cpu().unwrap();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = sys().process_cpu().unwrap();
        assert!(b.user + b.system > a.user + a.system);
    }
}
