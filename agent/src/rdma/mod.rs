//! The opt-in RDMA probe (`[rdma] enabled`): one long-lived UC queue pair
//! per link, ping-pong of 64 B and 4 KiB frames checked by sequence and CRC
//! at the receiver (see docs/rdma.md).
//!
//! - [`frame`]: the frame codec; pure.
//! - [`port`]: the verbs layer as a non-blocking trait.
//! - [`probe`]: one link's state machine over a [`port::Port`]; pure.
//!   Its frame exchange (echo, pong, burst rounds) is `exchange.rs`.
//! - [`burst`]: the send-bandwidth burst's credits and tally; pure.
//! - [`abi`]: `#[repr(C)]` verbs structs, asserted against `infiniband/verbs.h`.
//! - [`beat`], [`side`]: the dead-peer TCP side channel between the
//!   agents of a link (codec, pure; server and beater).
//! - [`hello`]: the queue-pair exchange's frame (QP number, GID, PSN)
//!   carried on the side channel; pure.
//! - [`jobs`]: `rdma.job_windows`, when a job owns the links; pure.
//! - [`links`]: which links the probe runs on (inventory, library,
//!   port state) and the GID check; pure.
//! - [`driver`]: one link's probe and window, tick by tick; pure.
//! - [`survey`]: the node's readiness, read once (role and doctor).
//! - [`window`]: a window's outcomes as one `rdma_probe` record; pure.
//! - [`transition`]: each QP transition's `ibv_modify_qp` attributes; pure.
//! - [`verbs`]: the verbs library loaded with `dlopen`, so the agent runs
//!   where it is absent, and `VerbsPort`, the probe's port over it (the
//!   only file with `unsafe`).

pub mod abi;
pub mod beat;
pub mod burst;
pub mod driver;
mod exchange;
pub mod frame;
pub mod hello;
pub mod jobs;
pub mod links;
pub mod port;
pub mod probe;
pub mod side;
pub mod survey;
pub mod transition;
pub mod verbs;
pub mod window;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;
