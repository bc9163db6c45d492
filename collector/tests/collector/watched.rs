//! What the collector watches of itself on `/metrics`: its store
//! filesystem's free bytes (compared with what statvfs says of the same
//! directory) and the notAfter of its TLS certificate file, read from the
//! real file. promtool checks the exposition.

use std::time::Duration;

use boltwatch_common::testing::promtool_check;

use crate::common::*;

/// A self-signed certificate for localhost expiring at `unix` seconds, and
/// its key, as PEM.
fn cert_until(unix: u64) -> (String, String) {
    let mut p = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
    p.not_after = rcgen::date_time_ymd(1970, 1, 1) + Duration::from_secs(unix);
    let key = rcgen::KeyPair::generate().unwrap();
    (p.self_signed(&key).unwrap().pem(), key.serialize_pem())
}

#[tokio::test]
async fn free_bytes_and_certificate_expiry_are_exported() {
    let dir = tempfile::tempdir().unwrap();
    // 2031-05-17T03:33:20Z.
    let (cert, key) = cert_until(1_937_532_800);
    let (cert_path, key_path) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let c = Collector::start_with(&data, |cfg| {
        cfg.tls.cert = Some(cert_path.clone());
        cfg.tls.key = Some(key_path.clone());
    })
    .await;
    let series = format!(
        "boltwatch_tls_certificate_expiry_timestamp_seconds{{file=\"{}\"}}",
        cert_path.display()
    );
    let body = c.wait_metric(&series, 1_937_532_800.0).await;
    promtool_check(&body).unwrap_or_else(|e| panic!("promtool: {e}\n{body}"));
    let free = metric(&body, "boltwatch_store_filesystem_free_bytes").expect("free bytes");
    // The same filesystem read again: other writers move it a little.
    let now = boltwatch_store::free_bytes(&data).unwrap() as f64;
    assert!(
        free > 0.0 && (free - now).abs() <= 0.05 * now,
        "{free} vs {now}"
    );
    c.stop().await;
}
