//! macOS: `getsockopt(TCP_CONNECTION_INFO)` into our own 112-byte
//! `tcp_connection_info` ([`TcpConnectionInfo`], layout asserted against
//! xnu's `bsd/netinet/tcp.h`), reading `tcpi_txretransmitpackets`; and
//! `getrusage`. The `libc` crate's definition is 176 bytes (it spells the
//! 15 TFO bitfields as separate `u32`s), so its `tcpi_txretransmitbytes`
//! sits at 136, past the 112 bytes the kernel copies: always 0.
#![allow(unsafe_code)]

use super::{duration_of, CpuTimes, SocketStats};
use crate::platform::macos::TcpConnectionInfo;
use crate::platform::{xnu, Support};
use std::io;
use std::os::fd::AsRawFd;

/// Both are measurable on macOS.
pub(super) const SUPPORT: Support = Support::Supported;

/// The macOS implementation.
pub struct Sys;

impl SocketStats for Sys {
    fn tcp_retransmits(&self, sock: &std::net::TcpStream) -> io::Result<u64> {
        let mut info = TcpConnectionInfo::default();
        let mut len = std::mem::size_of::<TcpConnectionInfo>() as libc::socklen_t;
        // SAFETY: the fd is open for the borrow of `sock`; the kernel writes
        // at most `len` bytes into `info`, which is that large.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CONNECTION_INFO,
                (&mut info as *mut TcpConnectionInfo).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // An older kernel with a shorter struct leaves the field unwritten:
        // a zero there would be a made-up measurement.
        let need = xnu::TCPI_TXRETRANSMITPACKETS + 8;
        if (len as usize) < need {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("TCP_CONNECTION_INFO returned {len} bytes, need {need}"),
            ));
        }
        Ok(info.tcpi_txretransmitpackets)
    }

    fn process_cpu(&self) -> io::Result<CpuTimes> {
        // SAFETY: rusage is plain old data, so all-zero is a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable rusage.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(CpuTimes {
            user: duration_of(ru.ru_utime.tv_sec, ru.ru_utime.tv_usec.into()),
            system: duration_of(ru.ru_stime.tv_sec, ru.ru_stime.tv_usec.into()),
        })
    }
}
