//! When a PEM certificate file's first certificate expires (its notAfter),
//! for `boltwatch_tls_certificate_expiry_timestamp_seconds`. Pure: bytes
//! in, a unix time out.
//!
//! The PEM blocks are read by `rustls-pki-types` (already how the TLS
//! files are loaded, `crate::tls`), the DER by `x509-parser` with its
//! default features off (no signature verification, no extra crypto): only
//! the validity is wanted, and webpki, which the tree also has, verifies
//! chains but exposes no notAfter.

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::CertificateDer;

/// Why no expiry can be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CertError {
    /// No PEM `CERTIFICATE` block.
    #[error("no PEM certificate")]
    NoCertificate,
    /// The first block is not a parseable X.509 certificate.
    #[error("not an X.509 certificate: {0}")]
    Parse(String),
}

/// notAfter of the first certificate in `pem` (the leaf of a chain, or the
/// CA of a CA file), unix seconds.
pub fn not_after_unix(pem: &[u8]) -> Result<i64, CertError> {
    let der = CertificateDer::pem_slice_iter(pem)
        .next()
        .ok_or(CertError::NoCertificate)?
        .map_err(|e| CertError::Parse(e.to_string()))?;
    let (_, cert) =
        x509_parser::parse_x509_certificate(&der).map_err(|e| CertError::Parse(e.to_string()))?;
    Ok(cert.validity().not_after.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_expiring(unix: i64) -> String {
        let mut p = rcgen::CertificateParams::new(vec!["c.example".into()]).unwrap();
        p.not_after =
            rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(unix as u64);
        let key = rcgen::KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn reads_the_first_certificates_not_after() {
        // 2031-05-17T03:33:20Z, then a second certificate that must not count.
        let pem = cert_expiring(1_937_532_800) + &cert_expiring(1_000_000_000);
        assert_eq!(not_after_unix(pem.as_bytes()), Ok(1_937_532_800));
    }

    #[test]
    fn says_why_there_is_no_expiry() {
        assert_eq!(not_after_unix(b"just text"), Err(CertError::NoCertificate));
        let bad = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(matches!(
            not_after_unix(bad.as_bytes()),
            Err(CertError::Parse(_))
        ));
    }
}
