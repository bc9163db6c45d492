//! The dead-peer side channel's one frame: 16 bytes over TCP between the
//! agents of a link, magic `BWRB`, version 1, a zero pad, and the sender's
//! own beat counter. Pure codec. Fixed size so a reader takes exactly 16
//! bytes and nothing a stranger sends can make it read more.

/// Bytes of a beat.
pub const LEN: usize = 16;
const MAGIC: &[u8; 4] = b"BWRB";
const VERSION: u8 = 1;

/// Encodes beat number `n`.
pub fn encode(n: u64) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[..4].copy_from_slice(MAGIC);
    b[4] = VERSION;
    b[8..].copy_from_slice(&n.to_le_bytes());
    b
}

/// The beat number, or `None` for anything that is not a version-1 beat.
pub fn decode(b: &[u8; LEN]) -> Option<u64> {
    let ok = &b[..4] == MAGIC && b[4] == VERSION && b[5..8] == [0, 0, 0];
    ok.then(|| u64::from_le_bytes(b[8..].try_into().expect("8 bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beats_round_trip_and_anything_else_is_refused() {
        assert_eq!(decode(&encode(7)), Some(7));
        assert_eq!(decode(&encode(u64::MAX)), Some(u64::MAX));
        let mut http = [0u8; LEN];
        http.copy_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(decode(&http), None);
        let mut v2 = encode(1);
        v2[4] = 2;
        assert_eq!(decode(&v2), None);
        let mut pad = encode(1);
        pad[6] = 1;
        assert_eq!(decode(&pad), None);
    }
}
