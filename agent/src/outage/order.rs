//! Probe fates in sequence order.
//!
//! The session-sender reports each probe's fate once: answered (as soon as
//! the reply arrives) or lost (when its timeout runs out, up to a second
//! later). So a reply to probe `n + 1` usually arrives before the loss of
//! probe `n` is known. Counting "consecutive missing probes" needs the
//! fates in sequence order; this holds each fate back until every earlier
//! probe's fate is known, then releases the run. Pure, no clock.

use std::collections::HashMap;

/// What became of one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fate {
    /// Answered within the timeout; `at` is when the answer arrived.
    Answered { sent: u64, at: u64 },
    /// Missing: unanswered at the late bound (or at the timeout, if that
    /// came first).
    Lost { sent: u64 },
}

/// Fates held back at most: far more than a timeout's worth of probes at
/// any sane rate. A fate that never comes (it cannot, the sender reports
/// every probe) must not hold the rest forever: beyond this, the oldest
/// missing sequence number is skipped.
const MAX_HELD: usize = 4096;

/// Releases fates in sequence order (u32 sequence numbers, wrapping).
#[derive(Debug, Default)]
pub(super) struct InOrder {
    /// The next sequence number to release; the first one seen starts it.
    next: Option<u32>,
    held: HashMap<u32, Fate>,
}

impl InOrder {
    /// True when `seq`'s fate was already released (or `seq` is older than
    /// the first one seen): news of it now would be dropped.
    pub(super) fn released(&self, seq: u32) -> bool {
        self.next
            .is_some_and(|next| (seq.wrapping_sub(next) as i32) < 0)
    }

    /// Takes `seq`'s fate and returns every fate now releasable, in order.
    /// A fate for a sequence number already released (or older than the
    /// first one seen) is dropped.
    pub(super) fn push(&mut self, seq: u32, fate: Fate) -> Vec<Fate> {
        let next = *self.next.get_or_insert(seq);
        if (seq.wrapping_sub(next) as i32) < 0 {
            return Vec::new();
        }
        self.held.insert(seq, fate);
        let mut out = Vec::new();
        let mut n = next;
        loop {
            while let Some(f) = self.held.remove(&n) {
                out.push(f);
                n = n.wrapping_add(1);
            }
            if self.held.len() <= MAX_HELD {
                break;
            }
            // Skip the hole to the oldest held fate.
            n = *self
                .held
                .keys()
                .min_by_key(|&&s| s.wrapping_sub(n))
                .expect("held is not empty");
        }
        self.next = Some(n);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost(sent: u64) -> Fate {
        Fate::Lost { sent }
    }

    fn answered(sent: u64) -> Fate {
        Fate::Answered { sent, at: sent + 1 }
    }

    #[test]
    fn a_reply_waits_for_the_loss_before_it() {
        let mut o = InOrder::default();
        assert_eq!(o.push(0, answered(0)), vec![answered(0)]);
        // Probe 1 is in flight; 2 and 3 are answered first.
        assert!(o.push(2, answered(2)).is_empty());
        assert!(o.push(3, answered(3)).is_empty());
        assert_eq!(o.push(1, lost(1)), vec![lost(1), answered(2), answered(3)]);
        // Late news of something already released is dropped.
        assert!(o.push(2, lost(2)).is_empty());
        assert_eq!(o.push(4, lost(4)), vec![lost(4)]);
        assert!(o.released(4) && o.released(0) && !o.released(5) && !o.released(9));
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut o = InOrder::default();
        assert_eq!(o.push(u32::MAX, answered(1)), vec![answered(1)]);
        assert!(o.push(1, answered(3)).is_empty());
        assert_eq!(o.push(0, lost(2)), vec![lost(2), answered(3)]);
    }

    #[test]
    fn a_fate_that_never_comes_does_not_hold_the_rest_forever() {
        let mut o = InOrder::default();
        o.push(0, answered(0));
        // Probe 1's fate never arrives.
        let mut released = 0;
        for s in 2..(MAX_HELD as u32 + 3) {
            released += o.push(s, answered(u64::from(s))).len();
        }
        assert!(released > 0, "held forever");
        assert!(o.held.len() <= MAX_HELD);
    }
}
