//! Linux: `getsockopt(TCP_INFO)` for `tcpi_total_retrans`, `getrusage`.
#![allow(unsafe_code)]

use super::{duration_of, CpuTimes, SocketStats};
use crate::platform::Support;
use std::io;
use std::os::fd::AsRawFd;

/// Both are measurable on Linux.
pub(super) const SUPPORT: Support = Support::Supported;

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

fn rusage() -> io::Result<CpuTimes> {
    // SAFETY: rusage is plain old data, so all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(CpuTimes {
        user: duration_of(ru.ru_utime.tv_sec, ru.ru_utime.tv_usec),
        system: duration_of(ru.ru_stime.tv_sec, ru.ru_stime.tv_usec),
    })
}
