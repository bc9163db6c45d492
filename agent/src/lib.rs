//! boltwatch-agent: one per node. Probes every peer with STAMP, watches link
//! state, interface counters and temperatures, and streams it all to the
//! collector.
//!
//! # Layout
//! - [`config`]: TOML file plus flags, checked once into a `Config`.
//! - [`sink`]: the channel every measurement is emitted into, and the
//!   observers through which producers report events to other parts.
//! - [`health`]: the agent's own counters (malformed packets, drops).
//! - [`clock`]: the one timeline every compared time is read from (counts
//!   sleep, never steps), and the correction that turns it into record time.
//! - [`stamp`]: STAMP (RFC 8762) packet codec, reflector, session-sender,
//!   the one-shot `ping` and the per-window RTT statistics.
//! - [`counters`]: interface counters, one file per OS.
//! - [`thermal`]: temperatures and throttling, one file per OS.
//! - [`discovery`]: which interface reaches a peer, what kind of link it is.
//! - [`doctor`]: `boltwatch-agent doctor`, each source against the OS's tool.
//! - [`link`]: event-driven link up/down, one file per OS.
//! - [`platform`]: the bottom layer: how per-OS code is chosen, the source
//!   names and their `Unsupported` error, shared macOS calls, and the xnu
//!   struct layouts and ioctl numbers; imports no concern.
//! - [`support`]: which sources this OS supports, gathered from each
//!   concern's OS file.
//! - [`outage`]: the per-peer outage trackers (carrier, probe loss, service,
//!   sleep); pure.
//! - [`power`]: system sleep and wake (the clock gap, macOS power
//!   notifications) and the `prevent_sleep` assertion, one file per OS.
//! - [`service`]: TCP connect checks of peer services (SSH).
//! - [`bandwidth`]: iperf3-compatible bandwidth tests.
//! - [`rdma`]: the opt-in RDMA probe: verbs through `dlopen`, one UC queue
//!   pair per link, its pure state machine.
//! - [`run`]: the agent as roles (reflector, senders, link watcher, sampler,
//!   services, bandwidth, outage tracker, path watch, power, health,
//!   transport),
//!   each started by its own function and stopped by one token; `run(config,
//!   listeners, shutdown)` is shared by `main`, the lab and the tests.
//! - [`metrics`]: the node's own Prometheus `/metrics` (`--metrics-listen`),
//!   from the records it spools, through the collector's exposition crate.
//! - [`error`]: the library's error type.
//! - [`spool`]: the durable on-disk log of records awaiting the collector's
//!   ack; replayed per boot after a crash.
//! - [`transport`]: the gRPC stream to the collector, fed from the spool,
//!   with reconnect and backoff.
#![deny(missing_docs)]

pub mod bandwidth;
pub mod clock;
pub mod config;
pub mod counters;
pub mod discovery;
pub mod doctor;
pub mod error;
pub mod fabric;
pub mod health;
pub mod link;
pub mod metrics;
pub mod outage;
pub mod platform;
pub mod power;
pub mod rdma;
pub mod run;
pub mod service;
pub mod sink;
pub mod spool;
pub mod stamp;
pub mod support;
pub mod thermal;
pub mod transport;
