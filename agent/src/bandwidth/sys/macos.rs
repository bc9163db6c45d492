//! macOS: `getsockopt(TCP_CONNECTION_INFO)` (retransmitted bytes divided by
//! the segment size, since XNU counts bytes, not segments), `getrusage`.
#![allow(unsafe_code)]

use super::{CpuTimes, SocketStats};
use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// The macOS implementation.
pub struct Sys;

impl SocketStats for Sys {
    fn tcp_retransmits(&self, sock: &std::net::TcpStream) -> io::Result<u64> {
        // SAFETY: tcp_connection_info is plain old data; all-zero is valid.
        let mut info: libc::tcp_connection_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_connection_info>() as libc::socklen_t;
        // SAFETY: the fd is open for the borrow of `sock`; the kernel writes at
        // most `len` bytes into `info`, which is that large.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CONNECTION_INFO,
                (&mut info as *mut libc::tcp_connection_info).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let mss = u64::from(info.tcpi_maxseg.max(1));
        Ok(info.tcpi_txretransmitbytes.div_ceil(mss))
    }

    fn process_cpu(&self) -> io::Result<CpuTimes> {
        // SAFETY: rusage is plain old data, so all-zero is a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable rusage.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        Ok(CpuTimes {
            user: tv(ru.ru_utime),
            system: tv(ru.ru_stime),
        })
    }
}
