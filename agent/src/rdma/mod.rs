//! The opt-in RDMA probe (`[rdma] enabled`): one long-lived UC queue pair
//! per link, ping-pong of 64 B and 4 KiB frames checked by sequence and CRC
//! at the receiver (see docs/rdma.md).
//!
//! - [`frame`]: the frame codec; pure.
//! - [`port`]: the verbs layer as a non-blocking trait.
//! - [`probe`]: one link's state machine over a [`port::Port`]; pure.
//! - [`abi`]: `#[repr(C)]` verbs structs, asserted against `infiniband/verbs.h`.
//! - [`verbs`]: the verbs library loaded with `dlopen`, so the agent runs
//!   where it is absent.

pub mod abi;
pub mod frame;
pub mod port;
pub mod probe;
pub mod verbs;
pub mod window;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;
