//! STAMP (RFC 8762) for boltwatch: the packet codec, a stateless reflector,
//! the per-peer session-sender that emits `RttSummary` records, and the
//! one-shot `ping`.
//!
//! # Layout
//! - [`packet`]: wire format and NTP timestamps; pure.
//! - [`probe`]: the in-flight probe table: matching replies, duplicates,
//!   late and foreign answers, overdue and lost probes; pure.
//! - [`late`]: the bound past which an unanswered probe is late, from the
//!   link's own recent round trips; pure.
//! - [`window`]: per-second accounting of probes into `RttSummary`; pure.
//! - [`stats`]: a window's RTT samples finished into exact min, mean, max,
//!   percentiles and a histogram; pure (used by `window` and `ping`).
//! - [`reflector`]: the reflector thread.
//! - [`pmtu`]: in-band path MTU discovery with padded, don't-fragment
//!   test packets (its size search in `pmtu::search` is pure).
//! - `session`: one session's socket, probe table and send loop, shared by
//!   the session-sender and `ping`.
//! - `target`: the peer a session probes ([`Target`]).
//! - [`sender`]: the session-sender thread.
//! - [`ping`]: one-shot probes printed like `ping`.
//! - `timestamp_{linux,macos,unsupported}`: kernel RX timestamps, TTL and
//!   device binding, one file per OS behind the same functions.
//!
//! Probes run on dedicated `std::thread`s with blocking sockets, not on
//! tokio: at 40-80 us round trips a runtime's wake-up hop is as large as
//! the signal. t2 and t4 are kernel RX timestamps; t1 is the kernel's
//! software TX timestamp on Linux (`SO_TIMESTAMPING`), else a userspace
//! read right before `sendto` as `ping(8)` does; t3 is always a userspace
//! read right before `sendto`, since it must be written into the reply
//! before it is sent. All four are on the agent's timeline
//! ([`crate::clock`]: `CLOCK_BOOTTIME` on Linux, `mach_continuous_time` on
//! macOS), whatever clock the kernel stamped with (`imp::CLOCK`, reported
//! in `RttSummary.timestamp_clock`).

use std::net::SocketAddr;

pub mod late;
pub mod packet;
pub mod ping;
pub mod pmtu;
pub mod probe;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod recvmsg;
pub mod reflector;
pub mod sender;
mod session;
pub mod stats;
mod target;
pub mod window;

crate::platform::os_module!(pub(crate) mod imp {
    linux: "timestamp_linux.rs",
    macos: "timestamp_macos.rs",
    other: "timestamp_unsupported.rs"
});

pub use late::LateRule;
pub use packet::{DecodeError, DEFAULT_PORT, PACKET_LEN};
pub use reflector::{spawn_reflector, ReflectorOptions};
pub use sender::{spawn_sender, ProbeEvent, SenderOptions};
pub use target::Target;

/// One datagram as the OS delivered it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    /// Octets received.
    pub len: usize,
    /// Who sent it.
    pub from: Option<SocketAddr>,
    /// Kernel RX timestamp on the agent's timeline ([`crate::clock`]), if
    /// the OS gave one.
    pub kernel_rx_unix_ns: Option<u64>,
    /// The clock-step generation the stamp was moved onto the timeline
    /// under, where that took a wall-clock correction (Linux); a probe
    /// sent under another generation straddles a step.
    pub generation: Option<u64>,
    /// TTL / hop limit of the arriving packet, if reported.
    pub ttl: Option<u8>,
}

/// Largest datagram either end reads; any UDP payload fits.
pub(crate) const MAX_DATAGRAM: usize = 65_536;
