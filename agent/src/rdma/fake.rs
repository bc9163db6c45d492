//! A fake verbs provider for tests, modelling Apple's documented RDMA over
//! Thunderbolt: UC only (RC fails), 10 QPs per device, a frame sent with no
//! receive frame posted at the peer is lost though its completion says
//! success, a port that wedges after N set-ups, a vanishing peer, a
//! corrupted payload, and a delivery delay: a frame's receive completion
//! shows at the peer `latency` after its send, on the test's clock.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use super::frame::{self, Kind};
use super::port::{Completion, Port, QpState, VerbsError};

/// Apple's per-device queue-pair cap.
pub const QP_CAP: u32 = 10;

#[derive(Default)]
pub struct End {
    pub active: bool,
    pub app_qps: u32,
    pub our_qp: bool,
    pub state: Option<QpState>,
    pub target: Option<QpState>,
    pub posted: usize,
    /// Completions and when each becomes visible to `poll`.
    pub completions: VecDeque<(Duration, Completion)>,
    pub sent: u64,
    /// Frames sent while the peer had no receive frame posted (lost).
    pub overrun: u64,
    /// Burst data frames sent.
    pub data_sent: u64,
    pub delivered: u64,
    pub setups: u32,
    /// Transitions stop completing once `setups` exceeds this.
    pub wedge_after: Option<u32>,
    /// `start_transition(Rtr)` fails with this errno.
    pub rtr_errno: Option<i32>,
    pub pd_fails: bool,
}

#[derive(Default)]
pub struct Wire {
    pub ends: [End; 2],
    pub cut: bool,
    /// Flip a byte of the next delivered frame.
    pub corrupt_next: bool,
    /// Drop the next delivered frame silently.
    pub drop_next: bool,
    /// Drop this many of the next burst data frames silently.
    pub drop_data: u64,
    /// The test's clock, set before each tick.
    pub now: Duration,
    /// One-way delivery delay.
    pub latency: Duration,
}

impl Wire {
    /// When the next completion of end `me` becomes visible after `now`.
    pub fn next_completion(&self, me: usize) -> Option<Duration> {
        self.ends[me].completions.iter().map(|c| c.0).min()
    }
}

pub type Shared = Rc<RefCell<Wire>>;

pub fn wire() -> Shared {
    let w: Shared = Rc::default();
    for e in &mut w.borrow_mut().ends {
        e.active = true;
    }
    w
}

pub struct FakePort {
    pub w: Shared,
    pub me: usize,
}

impl FakePort {
    pub fn pair(w: &Shared) -> (Self, Self) {
        let p = |me| FakePort { w: w.clone(), me };
        (p(0), p(1))
    }

    /// Reliable connection: Apple's stack refuses it.
    pub fn create_rc_qp(&mut self) -> Result<(), VerbsError> {
        Err(VerbsError::Modify(95))
    }

    fn with<T>(&self, f: impl FnOnce(&mut End) -> T) -> T {
        f(&mut self.w.borrow_mut().ends[self.me])
    }
}

impl Port for FakePort {
    fn active(&self) -> bool {
        self.with(|e| e.active)
    }

    fn qps_in_use(&self) -> u32 {
        self.with(|e| e.app_qps + u32::from(e.our_qp))
    }

    fn create_uc_qp(&mut self) -> Result<(), VerbsError> {
        self.with(|e| {
            if e.pd_fails {
                return Err(VerbsError::PdAlloc);
            }
            if e.app_qps + u32::from(e.our_qp) >= QP_CAP {
                return Err(VerbsError::QpBudget);
            }
            e.our_qp = true;
            e.setups += 1;
            e.state = Some(QpState::Reset);
            Ok(())
        })
    }

    fn start_transition(&mut self, to: QpState) -> Result<(), VerbsError> {
        self.with(|e| match (to, e.rtr_errno) {
            (QpState::Rtr, Some(errno)) => Err(VerbsError::Modify(errno)),
            _ => {
                e.target = Some(to);
                Ok(())
            }
        })
    }

    fn qp_state(&self) -> QpState {
        self.with(|e| {
            let wedged = e.wedge_after.is_some_and(|n| e.setups > n);
            if !wedged {
                if let Some(t) = e.target.take() {
                    e.state = Some(t);
                }
            }
            e.state.unwrap_or(QpState::Reset)
        })
    }

    fn post_recv(&mut self, frames: usize) -> Result<(), VerbsError> {
        self.with(|e| e.posted += frames);
        Ok(())
    }

    fn post_send(&mut self, frame: &[u8]) -> Result<(), VerbsError> {
        let mut w = self.w.borrow_mut();
        let (peer, now) = (1 - self.me, w.now);
        w.ends[self.me].sent += 1;
        w.ends[self.me]
            .completions
            .push_back((now, Completion::Send { ok: true }));
        let data = frame::decode(frame).is_ok_and(|f| f.kind == Kind::Data);
        w.ends[self.me].data_sent += u64::from(data);
        if w.ends[peer].posted == 0 {
            w.ends[self.me].overrun += 1;
            return Ok(());
        }
        let drop_data = data && w.drop_data > 0;
        w.drop_data -= u64::from(drop_data);
        if w.cut || std::mem::take(&mut w.drop_next) || drop_data {
            return Ok(());
        }
        let mut data = frame.to_vec();
        if std::mem::take(&mut w.corrupt_next) {
            data[frame.len() / 2] ^= 0x40;
        }
        let at = now + w.latency;
        let p = &mut w.ends[peer];
        p.posted -= 1;
        p.delivered += 1;
        p.completions
            .push_back((at, Completion::Recv { ok: true, data }));
        Ok(())
    }

    fn poll(&mut self) -> Vec<Completion> {
        let mut w = self.w.borrow_mut();
        let now = w.now;
        let e = &mut w.ends[self.me];
        let (due, later) = e.completions.drain(..).partition(|c| c.0 <= now);
        e.completions = later;
        due.into_iter().map(|(_, c)| c).collect::<Vec<_>>()
    }
}
