//! The node's own sleeps, as the outage tracker needs them: an outage
//! whose span overlaps a sleep of this node has cause `SLEEP`. A sleeping
//! node's probes are not sent, its carrier drops and its replies stop;
//! whatever the tracker saw, the sleep explains it. Pure, no clock.
//!
//! The same sleep may be told twice (the tracker's own clock reading and
//! the power role's events, see `run::power`): a sleep inside a period
//! already known is ignored, and a repeated wake only adds a duplicate
//! period, which changes no answer.

use std::collections::VecDeque;

use crate::power::{PowerEvent, PowerKind};

/// Sleep periods kept: far more than can overlap one outage.
const KEPT: usize = 32;

/// Sleeps known so far, unix ns.
#[derive(Debug, Default)]
pub(super) struct Sleeps {
    /// Asleep since, when a sleep was told and its wake not yet.
    asleep_since: Option<u64>,
    /// Ended sleeps `[from, to]`, oldest first.
    periods: VecDeque<(u64, u64)>,
}

impl Sleeps {
    /// Takes a sleep or wake.
    pub(super) fn on_event(&mut self, e: &PowerEvent) {
        match e.kind {
            PowerKind::Sleep => {
                let known = self
                    .periods
                    .iter()
                    .any(|&(from, to)| from <= e.at_unix_ns && e.at_unix_ns <= to);
                if self.asleep_since.is_none() && !known {
                    self.asleep_since = Some(e.at_unix_ns);
                }
            }
            PowerKind::Wake => {
                let from = e.at_unix_ns.saturating_sub(e.slept_ns);
                let from = self.asleep_since.take().map_or(from, |s| s.min(from));
                if self.periods.len() == KEPT {
                    self.periods.pop_front();
                }
                self.periods.push_back((from, e.at_unix_ns));
            }
        }
    }

    /// Whether `[start, end]` overlaps a sleep (one still going on counts
    /// until its wake).
    pub(super) fn overlap(&self, start: u64, end: u64) -> bool {
        self.asleep_since.is_some_and(|s| s <= end)
            || self
                .periods
                .iter()
                .any(|&(from, to)| from <= end && start <= to)
    }
}
