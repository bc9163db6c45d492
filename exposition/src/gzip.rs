//! gzip for `/metrics`: Prometheus sends `Accept-Encoding: gzip` on every
//! scrape, and the exposition of a large mesh compresses about tenfold.

use std::io::Write as _;

/// Whether the request's `Accept-Encoding` values (each header line's
/// text) list gzip with a non-zero quality (`gzip`, `gzip;q=0.5`; not
/// `gzip;q=0`).
pub fn accepted<'a>(accept_encoding: impl IntoIterator<Item = &'a str>) -> bool {
    accept_encoding
        .into_iter()
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or("");
            let q = parts
                .find_map(|p| p.strip_prefix("q="))
                .map_or(1.0, |q| q.parse::<f64>().unwrap_or(0.0));
            name.eq_ignore_ascii_case("gzip") && q > 0.0
        })
}

/// `body` gzipped (default level: the exposition is rendered per scrape).
pub fn compress(body: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::default(),
    );
    // Writing to a Vec cannot fail.
    let _ = enc.write_all(body);
    enc.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn gzip_only_when_asked_with_nonzero_quality() {
        assert!(accepted(["gzip"]));
        assert!(accepted(["deflate, GZIP;q=0.5"]));
        assert!(accepted(["identity", "gzip"]));
        assert!(!accepted(["gzip;q=0"]));
        assert!(!accepted(["identity"]));
        assert!(!accepted([]));
    }

    #[test]
    fn round_trips() {
        let text = "# HELP a b\n".repeat(100);
        let gz = compress(text.as_bytes());
        assert!(gz.len() < text.len() / 4);
        let mut back = String::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut back)
            .unwrap();
        assert_eq!(back, text);
    }
}
