//! Targets without a port: retransmits and CPU time fail with
//! [`Unsupported`]; the engine still runs and reports neither.

use std::io;

use super::{CpuTimes, SocketStats};
use crate::platform::{Source, Support, Unsupported};

/// Nothing measurable here.
pub(super) const SUPPORT: Support = Support::Unsupported;

/// Unsupported here.
pub struct Sys;

impl SocketStats for Sys {
    fn tcp_retransmits(&self, _sock: &std::net::TcpStream) -> io::Result<u64> {
        Err(Unsupported::new(Source::SocketStats).into())
    }
    fn process_cpu(&self) -> io::Result<CpuTimes> {
        Err(Unsupported::new(Source::SocketStats).into())
    }
}
