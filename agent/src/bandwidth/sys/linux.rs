//! Linux: `getsockopt(TCP_INFO)` for `tcpi_total_retrans`, `getrusage`.
#![allow(unsafe_code)]

use super::{CpuTimes, SocketStats};
use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// The Linux implementation.
pub struct Sys;

impl SocketStats for Sys {
    fn tcp_retransmits(&self, sock: &std::net::TcpStream) -> io::Result<u64> {
        // SAFETY: tcp_info is plain old data, so all-zero is a valid value.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        // SAFETY: the fd is open for the borrow of `sock`; the kernel writes at
        // most `len` bytes into `info`, which is that large.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&mut info as *mut libc::tcp_info).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info.tcpi_total_retrans as u64)
    }

    fn process_cpu(&self) -> io::Result<CpuTimes> {
        rusage()
    }
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

fn rusage() -> io::Result<CpuTimes> {
    // SAFETY: rusage is plain old data, so all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(CpuTimes {
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
    })
}
