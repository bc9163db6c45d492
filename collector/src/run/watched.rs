//! The collector watching its surroundings: every [`EVERY`] (and at
//! start) the free space of the store's filesystem and the expiry of each
//! configured TLS certificate file go to `/metrics`
//! (`crate::export::watched`). A file read again each time follows a
//! rotation without a SIGHUP; one that cannot be read loses its series and
//! is logged, once per change.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::export::SharedMetrics;
use crate::Config;

/// How often the watched figures are read: a disk fills and a certificate
/// nears expiry over hours, so once a minute costs nothing and loses
/// nothing.
pub(super) const EVERY: Duration = Duration::from_secs(60);

/// Each certificate file's notAfter, or why it cannot be read.
type Expiries = Vec<(String, Result<i64, String>)>;

/// What is watched.
#[derive(Debug, Clone)]
struct Watched {
    data_dir: PathBuf,
    certs: Vec<PathBuf>,
}

impl Watched {
    fn of(config: &Config) -> Watched {
        let rw = &config.remote_write;
        let certs = [
            &config.tls.cert,
            &config.tls.client_ca,
            &rw.tls_ca_file,
            &rw.tls_cert_file,
        ];
        Watched {
            data_dir: config.data_dir.clone(),
            certs: certs.into_iter().flatten().cloned().collect(),
        }
    }

    /// One reading: free bytes and each certificate's notAfter (`None`:
    /// unreadable, with why).
    fn read(&self) -> (Option<u64>, Expiries) {
        let free = boltwatch_store::free_bytes(&self.data_dir)
            .map_err(|e| tracing::warn!("watching the store's filesystem: {e}"))
            .ok();
        let certs = self
            .certs
            .iter()
            .map(|p| {
                let expiry = std::fs::read(p)
                    .map_err(|e| e.to_string())
                    .and_then(|b| crate::certs::not_after_unix(&b).map_err(|e| e.to_string()));
                (p.display().to_string(), expiry)
            })
            .collect();
        (free, certs)
    }
}

/// Starts the watch task.
pub(super) fn start(
    config: &Config,
    metrics: &SharedMetrics,
    stop: &watch::Receiver<bool>,
) -> JoinHandle<()> {
    let watched = Watched::of(config);
    let metrics = metrics.clone();
    let mut stop = stop.clone();
    tokio::spawn(async move {
        let mut failing = std::collections::BTreeSet::new();
        loop {
            let w = watched.clone();
            let Ok((free, certs)) = tokio::task::spawn_blocking(move || w.read()).await else {
                return;
            };
            publish(&metrics, free, certs, &mut failing);
            tokio::select! {
                _ = tokio::time::sleep(EVERY) => {}
                _ = stop.changed() => return,
            }
        }
    })
}

/// Puts one reading on `/metrics`, logging a file that became unreadable
/// (once, until it reads again).
fn publish(
    metrics: &SharedMetrics,
    free: Option<u64>,
    certs: Expiries,
    failing: &mut std::collections::BTreeSet<String>,
) {
    let mut m = metrics.lock();
    m.watched().set_free_bytes(free);
    for (file, expiry) in certs {
        match &expiry {
            Err(why) if failing.insert(file.clone()) => {
                tracing::warn!(file = %file, "cannot read the certificate's expiry: {why}");
            }
            Err(_) => {}
            Ok(_) => {
                failing.remove(&file);
            }
        }
        m.watched().set_cert_expiry(&file, expiry.ok());
    }
}
