//! Property tests for the agent's bad-input surfaces: the STAMP packet
//! parser (every datagram from the network), the spool's frame scanner
//! (whatever a crash left on disk), and the config and token-file parsers
//! (whatever an operator typed). None may panic; config errors always name
//! the file and a line.
//!
//! The cases come from a fixed seed and `props.proptest-regressions` is
//! replayed first (see `boltwatch_common::testing`); docs/internals.md,
//! "Tests", says how to explore with random seeds.

use boltwatch_agent::config::{self, Config, Flags};
use boltwatch_agent::spool::segment;
use boltwatch_agent::stamp::packet::{
    ErrorEstimate, NtpTimestamp, ReflectorPacket, SenderPacket, PACKET_LEN,
};
use boltwatch_common::testing::{config_text, error_line, names_a_line_of, proptest_config};
use proptest::prelude::*;

const KEYS: &[&str] = &[
    "node",
    "collector",
    "listen",
    "peers",
    "probe_interval",
    "probe_timeout",
    "sysfs_root",
    "counters_interval",
    "thermal_interval",
    "dir",
    "max_bytes",
    "token_file",
    "interface",
    "log_format",
    "tcp",
    "interval",
    "outage_after_missing",
    "enabled",
    "duration",
    "streams",
    "duty_cycle",
    "bogus",
];

const SECTIONS: &[&str] = &[
    "[peers]",
    "[spool]",
    "[services]",
    "[bandwidth]",
    "[bandwidth.peers]",
    "[bogus]",
];

const VALUES: &[&str] = &[
    "\"a\"",
    "\"\"",
    "\"10ms\"",
    "\"0s\"",
    "\"99999h\"",
    "0",
    "-1",
    "1048576",
    "1099511627777",
    "true",
    "[\"b=127.0.0.1:9\"]",
    "[\"b=127.0.0.1:9\", \"b=127.0.0.1:10\"]",
    "[\"nonsense\"]",
    "{ b = \"127.0.0.1:9\" }",
    "\"127.0.0.1:99999\"",
    "\"http://x:1\"",
    "\"ftp://x\"",
    "[\"ssh=22\", \"x=0\"]",
    "\"json\"",
    "\"yaml\"",
    "1.5",
    "[",
    "\"unterminated",
];

fn text() -> impl Strategy<Value = String> {
    config_text(KEYS, VALUES, SECTIONS)
}

proptest! {
    #![proptest_config(proptest_config(512))]

    #[test]
    fn stamp_decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        let s = SenderPacket::decode(&bytes);
        let r = ReflectorPacket::decode(&bytes);
        prop_assert_eq!(s.is_ok(), bytes.len() >= PACKET_LEN);
        prop_assert_eq!(r.is_ok(), bytes.len() >= PACKET_LEN);
    }

    #[test]
    fn stamp_sender_round_trips(seq: u32, ts: u64, ee: u16, ssid: u16) {
        let p = SenderPacket {
            seq,
            timestamp: NtpTimestamp(ts),
            error_estimate: ErrorEstimate::from_u16(ee),
            ssid,
        };
        let back = SenderPacket::decode(&p.encode()).unwrap();
        prop_assert_eq!(back, p);
    }

    #[test]
    fn spool_scan_never_panics_and_stays_in_bounds(
        bytes in prop::collection::vec(any::<u8>(), 0..512)
    ) {
        let (frames, end, err) = segment::scan(&bytes);
        prop_assert!(end <= bytes.len());
        prop_assert_eq!(err.is_none(), end == bytes.len());
        prop_assert!(frames.iter().all(|f| f.len() <= segment::MAX_FRAME));
    }

    #[test]
    fn spool_scan_recovers_every_whole_frame_before_a_cut(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..8),
        cut_back in 1usize..40,
    ) {
        let mut buf = Vec::new();
        let mut ends = Vec::new();
        for p in &payloads {
            segment::encode(p, &mut buf);
            ends.push(buf.len());
        }
        let cut = buf.len().saturating_sub(cut_back);
        let (frames, end, _) = segment::scan(&buf[..cut]);
        let whole = ends.iter().filter(|&&e| e <= cut).count();
        prop_assert_eq!(frames.len(), whole);
        prop_assert_eq!(end, if whole == 0 { 0 } else { ends[whole - 1] });
        for (f, p) in frames.iter().zip(&payloads) {
            prop_assert_eq!(*f, p.as_slice());
        }
    }

    #[test]
    fn config_text_never_panics_and_errors_name_file_and_line(t in text()) {
        let built = Config::parse("agent.toml", &t).and_then(|doc| {
            Config::build(Some(&doc), &Flags::from_pairs(&[("node", "n")]))
        });
        if let Err(e) = built {
            prop_assert!(names_a_line_of(&e.to_string(), "agent.toml", &t), "{} in\n{}", e, t);
        }
    }

    #[test]
    fn token_file_never_panics(t in text()) {
        if let Err(e) = config::parse_token("token", &t) {
            let line = error_line(&e.to_string(), "token");
            prop_assert!(line >= 1);
        }
    }
}
