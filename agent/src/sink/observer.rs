//! [`Observer`]: where a producer reports events to another part of the
//! agent, besides the records it emits. The STAMP sender reports probe
//! outcomes and the link watcher carrier changes this way; the agent points
//! both straight at the outage tracker's input channel, tagging each event
//! with the peer it concerns, so no thread sits between them.

use std::sync::mpsc;

/// Passes events of type `T` on, typically into a channel, converting them
/// on the way. Built from a plain channel sender (`tx.into()`) or with
/// [`Observer::wrapping`].
pub struct Observer<T> {
    send: Box<dyn Fn(T) -> bool + Send>,
}

impl<T> Observer<T> {
    /// An observer sending `wrap(event)` into `tx`.
    pub fn wrapping<M: Send + 'static>(
        tx: mpsc::Sender<M>,
        wrap: impl Fn(T) -> M + Send + 'static,
    ) -> Observer<T> {
        Observer {
            send: Box::new(move |event| tx.send(wrap(event)).is_ok()),
        }
    }

    /// Passes `event` on; false once the receiving end is gone.
    pub fn observe(&self, event: T) -> bool {
        (self.send)(event)
    }
}

impl<T: Send + 'static> From<mpsc::Sender<T>> for Observer<T> {
    fn from(tx: mpsc::Sender<T>) -> Observer<T> {
        Observer::wrapping(tx, |event| event)
    }
}

impl<T> std::fmt::Debug for Observer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_into_the_channel_and_reports_a_closed_one() {
        let (tx, rx) = mpsc::channel::<(usize, u32)>();
        let obs = Observer::wrapping(tx, |n: u32| (7, n));
        assert!(obs.observe(3));
        assert_eq!(rx.recv().unwrap(), (7, 3));
        drop(rx);
        assert!(!obs.observe(4));
        let (tx, rx) = mpsc::channel::<u32>();
        let plain: Observer<u32> = tx.into();
        assert!(plain.observe(5));
        assert_eq!(rx.try_recv(), Ok(5));
    }
}
