//! What every role shares: the sink records leave through, the health
//! counters, the one stop token, and the threads and tasks to wait for.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::error::Error;
use crate::health::Health;
use crate::sink::{Emitted, Sink};

/// A started role's way of being waited for: true when it ended cleanly.
type Join = Box<dyn FnOnce() -> bool + Send>;

/// The roles started so far and what they share.
pub(super) struct Crew {
    /// Where records go.
    pub sink: Sink,
    /// The agent's own counters.
    pub health: Arc<Health>,
    /// Cancelled once, when the agent stops: threads poll it, tasks end on it.
    pub stop: CancellationToken,
    threads: Vec<(String, Join)>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Crew {
    /// A crew stopping on `stop`, and the receiving end of its sink.
    pub fn new(stop: CancellationToken) -> (Crew, UnboundedReceiver<Emitted>) {
        let (sink, records) = Sink::new();
        let crew = Crew {
            sink,
            health: Arc::new(Health::default()),
            stop,
            threads: Vec::new(),
            tasks: Vec::new(),
        };
        (crew, records)
    }

    /// Keeps a started thread named `name` to join at the stop; a thread
    /// that could not start fails the agent.
    pub fn thread(
        &mut self,
        name: impl Into<String>,
        spawned: std::io::Result<std::thread::JoinHandle<()>>,
    ) -> Result<(), Error> {
        let name = name.into();
        match spawned {
            Ok(h) => {
                self.joins(name, move || h.join().is_ok());
                Ok(())
            }
            Err(source) => Err(Error::Spawn { what: name, source }),
        }
    }

    /// Keeps `join`, which stops and waits for a role that brings its own
    /// stop (it runs after the token was cancelled).
    pub fn joins(&mut self, name: impl Into<String>, join: impl FnOnce() -> bool + Send + 'static) {
        self.threads.push((name.into(), Box::new(join)));
    }

    /// Runs `role` as a task until the stop token fires.
    pub fn task(&mut self, role: impl Future<Output = ()> + Send + 'static) {
        let stop = self.stop.clone();
        self.tasks.push(tokio::spawn(async move {
            stop.run_until_cancelled(role).await;
        }));
    }

    /// Cancels the token and waits for every task and thread. The sink and
    /// the health counters stay, for the final record.
    pub async fn stop(&mut self) {
        self.stop.cancel();
        for t in self.tasks.drain(..) {
            if t.await.is_err() {
                warn!("role task panicked");
            }
        }
        for (name, join) in self.threads.drain(..) {
            let clean = tokio::task::spawn_blocking(join).await.unwrap_or(false);
            if !clean {
                warn!(worker = %name, "worker panicked");
            }
        }
    }
}

impl Drop for Crew {
    /// A crew dropped without [`Crew::stop`] (an agent that failed to start
    /// part-way) still stops the roles it started.
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
