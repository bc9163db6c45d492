//! One link's probe outcomes over a window, folded into the `rdma_probe`
//! record the agent sends (its RTT statistics through STAMP's exact
//! [`Accumulator`], and its errors by class). Pure.

use std::collections::BTreeMap;

use boltwatch_proto::v1::{RdmaErrorCount, RdmaProbe, RttSummary};

use super::burst::BurstResult;
use super::probe::{ErrorClass, Outcome};
use crate::stamp::stats::Accumulator;

/// Which link a window is about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkId {
    /// Peer node name.
    pub peer: String,
    /// The interface the device is paired with (`en2`).
    pub interface: String,
    /// The verbs device (`rdma_en2`).
    pub device: String,
}

/// Outcomes of the window being filled.
#[derive(Debug, Default)]
pub struct Window {
    start_unix_ns: u64,
    rtts: Accumulator,
    sent: u64,
    lost: u64,
    errors: BTreeMap<ErrorClass, u64>,
    burst: Option<BurstResult>,
}

impl Window {
    /// A window starting at `start_unix_ns`.
    pub fn new(start_unix_ns: u64) -> Window {
        Window {
            start_unix_ns,
            ..Window::default()
        }
    }

    /// A ping left (the probe's sent-frame count grew by `n` pings).
    pub fn sent(&mut self, n: u64) {
        self.sent += n;
    }

    /// Folds one tick's outcomes in.
    pub fn add(&mut self, outcomes: &[Outcome]) {
        for o in outcomes {
            match o {
                Outcome::Rtt { rtt, .. } => self.rtts.add(rtt.as_nanos() as u64),
                Outcome::Lost { .. } => self.lost += 1,
                Outcome::Error(c) => *self.errors.entry(*c).or_default() += 1,
                // The window's newest burst is its figure.
                Outcome::Burst(b) => self.burst = Some(*b),
                // State changes are logged by the role, not counted here.
                Outcome::Wedged | Outcome::Skipped(_) | Outcome::PeerDead | Outcome::PeerBack => {}
            }
        }
    }

    /// The record, or `None` when nothing happened (no ping, no error): a
    /// failed or wedged link stays quiet after saying so once.
    pub fn finish(self, link: &LinkId, end_unix_ns: u64) -> Option<RdmaProbe> {
        let received = self.rtts.len() as u64;
        let quiet = self.sent == 0 && received == 0 && self.lost == 0;
        if quiet && self.errors.is_empty() && self.burst.is_none() {
            return None;
        }
        let s = self.rtts.finish();
        let rtt = s.into_rtt(RttSummary {
            peer: link.peer.clone(),
            interface: link.interface.clone(),
            window_start_unix_ns: self.start_unix_ns,
            window_ns: end_unix_ns.saturating_sub(self.start_unix_ns),
            // Pings of the window still in flight are the next window's.
            sent: self.sent.max(received + self.lost),
            received,
            lost: self.lost,
            ..RttSummary::default()
        });
        let errors = self
            .errors
            .into_iter()
            .map(|(c, count)| RdmaErrorCount {
                class: c.wire() as i32,
                count,
            })
            .collect();
        let b = self.burst.unwrap_or(BurstResult {
            sent_bytes: 0,
            confirmed_bytes: 0,
            elapsed: std::time::Duration::ZERO,
        });
        Some(RdmaProbe {
            rtt: Some(rtt),
            device: link.device.clone(),
            errors,
            burst_sent_bytes: b.sent_bytes,
            burst_confirmed_bytes: b.confirmed_bytes,
            burst_ns: b.elapsed.as_nanos() as u64,
        })
    }
}
