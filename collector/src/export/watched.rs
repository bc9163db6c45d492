//! What the collector watches of its own surroundings (`crate::run::watched`
//! reads them): the free space of the store's filesystem, so a full disk
//! shows before the store refuses batches, and the expiry of every TLS
//! certificate file it is configured with, so a rotation is not learnt
//! from agents that stopped connecting.

use std::collections::BTreeMap;

use boltwatch_exposition::family::{families, labels, Exposition};
use boltwatch_exposition::{Domain, Subjects};

families! {
    FS_FREE = Gauge("boltwatch_store_filesystem_free_bytes", "bytes", labels::NONE, "Bytes an unprivileged writer can still use on the filesystem holding the store (statvfs f_bavail times f_frsize), read every watch interval.");
    CERT_EXPIRY = Gauge("boltwatch_tls_certificate_expiry_timestamp_seconds", "seconds", &["file"], "Unix time the first certificate of the configured PEM file expires (notAfter); the ingest certificate, the client CA and remote write's CA and client certificate, as configured.");
}

/// State behind the watched families.
#[derive(Debug, Default, Clone)]
pub struct WatchedMetrics {
    free_bytes: Option<u64>,
    /// File path -> notAfter, unix seconds.
    certs: BTreeMap<String, i64>,
}

impl WatchedMetrics {
    /// The newest free-space reading (`None`: unreadable, no sample).
    pub fn set_free_bytes(&mut self, bytes: Option<u64>) {
        self.free_bytes = bytes;
    }

    /// The newest expiry of a certificate file (`None`: unreadable or
    /// not a certificate, no sample: the reader logs why).
    pub fn set_cert_expiry(&mut self, file: &str, not_after: Option<i64>) {
        match not_after {
            Some(t) => {
                self.certs.insert(file.to_string(), t);
            }
            None => {
                self.certs.remove(file);
            }
        }
    }
}

impl Domain for WatchedMetrics {
    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let none: [&str; 0] = [];
        e.family(&FS_FREE, self.free_bytes.map(|b| (none, b)));
        e.family(
            &CERT_EXPIRY,
            self.certs.iter().map(|(f, t)| ([f.as_str()], *t as f64)),
        );
    }
}
