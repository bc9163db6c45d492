//! The verbs layer as the probe sees it: one link's RDMA port, every call
//! non-blocking. The real one (`verbs.rs`, through `dlopen`) runs a QP state
//! transition on a blocking thread and reports it done through
//! [`Port::qp_state`]; the tests' fake models Apple's documented behaviour.

use thiserror::Error;

/// Queue-pair states the probe drives through, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum QpState {
    /// Freshly created.
    Reset,
    /// Initialised: port and access flags set.
    Init,
    /// Ready to receive: the peer's GID and QP number known.
    Rtr,
    /// Ready to send.
    Rts,
}

/// A work completion. A send completion says only that the local adapter
/// took the buffer (Thunderbolt has no hardware acks), never delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// A send left the adapter (`ok`: status success).
    Send {
        /// Status success.
        ok: bool,
    },
    /// A frame landed in a posted receive buffer.
    Recv {
        /// Status success.
        ok: bool,
        /// The bytes received.
        data: Vec<u8>,
    },
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
/// A verbs call that failed, with what the library said.
pub enum VerbsError {
    #[error("port is down")]
    /// The port is not ACTIVE.
    PortDown,
    #[error("protection domain allocation failed")]
    /// `ibv_alloc_pd` (or the buffers) failed.
    PdAlloc,
    #[error("queue-pair budget of the device is used up")]
    /// Creating our QP would pass the device's cap.
    QpBudget,
    #[error("modify_qp failed with errno {0}")]
    /// `ibv_modify_qp` failed with this errno.
    Modify(i32),
    #[error("work request rejected with errno {0}")]
    /// `ibv_post_send`/`ibv_post_recv` failed with this errno.
    Post(i32),
    #[error("verbs library not loadable: {0}")]
    /// The library or one of its symbols is missing.
    Library(String),
}

/// One link's RDMA port: a device, its protection domain and at most the
/// one unreliable-connection queue pair the probe owns.
pub trait Port {
    /// The port's state is ACTIVE.
    fn active(&self) -> bool;
    /// Queue pairs in use on the device, the applications' and ours.
    fn qps_in_use(&self) -> u32;
    /// Allocates the PD, the registered buffers, the CQ and one UC QP.
    fn create_uc_qp(&mut self) -> Result<(), VerbsError>;
    /// Starts the transition to `to`; done when [`Port::qp_state`] says so.
    fn start_transition(&mut self, to: QpState) -> Result<(), VerbsError>;
    /// The state the QP has reached.
    fn qp_state(&self) -> QpState;
    /// Posts `frames` receive buffers of one 4 KiB frame each.
    fn post_recv(&mut self, frames: usize) -> Result<(), VerbsError>;
    /// Posts one `IBV_WR_SEND` of `frame`.
    fn post_send(&mut self, frame: &[u8]) -> Result<(), VerbsError>;
    /// Completions since the last poll (never blocks).
    fn poll(&mut self) -> Vec<Completion>;
}
