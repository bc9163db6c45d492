//! The server's one test slot: who holds it, whether its data streams
//! are still arriving, and whether it is only finishing (results
//! exchanged), in which case the next client waits for it instead of
//! hearing busy.

use std::net::TcpStream;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
pub(super) struct Slot {
    pub(super) busy: bool,
    /// The session is exchanging results: its client's test is over, and
    /// that client may already be starting the next one.
    pub(super) finishing: bool,
    pub(super) streams_tx: Option<mpsc::Sender<TcpStream>>,
}

/// How long a new control connection waits for a finishing session to
/// end before it is told busy. Stock iperf3 serves one test at a time and
/// only accepts the next connection after the previous session's
/// teardown, so a client that starts its next test right after the last
/// one's results waits in the backlog there; here it waits this long.
pub(super) const FINISHING_WAIT: Duration = Duration::from_secs(2);

/// Frees the slot however the session ends.
pub(super) struct SlotGuard(pub(super) Arc<Mutex<Slot>>);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.busy = false;
        s.finishing = false;
        s.streams_tx = None;
    }
}

/// Locks the slot, first waiting (at most `wait`, [`FINISHING_WAIT`] in
/// the server) while a session is only finishing, so the next test of
/// the same client is served rather than refused.
pub(super) fn lock_unless_finishing(
    slot: &Mutex<Slot>,
    wait: Duration,
) -> std::sync::MutexGuard<'_, Slot> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        let g = slot.lock().unwrap_or_else(|p| p.into_inner());
        if !(g.busy && g.finishing) || std::time::Instant::now() >= deadline {
            return g;
        }
        drop(g);
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_client_waits_for_a_finishing_session_but_not_for_a_running_one() {
        let slot = Arc::new(Mutex::new(Slot {
            busy: true,
            finishing: true,
            streams_tx: None,
        }));
        // The session's thread ends (its guard drops) while the accept
        // loop waits: the loop then sees a free slot.
        let guard = SlotGuard(slot.clone());
        let ender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(guard);
        });
        // The bound only stops a broken test; the guard drops long before.
        let bound = Duration::from_secs(60);
        assert!(!lock_unless_finishing(&slot, bound).busy);
        ender.join().unwrap();
        // A running test (not finishing) is reported busy at once.
        slot.lock().unwrap().busy = true;
        let g = lock_unless_finishing(&slot, bound);
        assert!(g.busy && !g.finishing);
    }
}
