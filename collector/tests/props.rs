//! Property tests for the collector's bad-input surfaces: the raw gRPC
//! message decoder and batch validation (whatever an agent, or anyone
//! reaching the port, sends), and the config and `--auth-tokens` parsers
//! (whatever an operator typed). None may panic; errors name file and line.
//!
//! The cases come from a fixed seed and `props.proptest-regressions` is
//! replayed first (see `boltwatch_common::testing`); docs/internals.md,
//! "Tests", says how to explore with random seeds.

use boltwatch_collector::config::{Config, Flags};
use boltwatch_collector::ingest::auth::AuthTokens;
use boltwatch_collector::ingest::raw::{RawAgentMessage, RawMsg};
use boltwatch_collector::ingest::validate;
use boltwatch_common::testing::{config_text, error_line, names_a_line_of, proptest_config};
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{AgentStats, Record};
use proptest::prelude::*;
use prost::Message;

const KEYS: &[&str] = &[
    "grpc_listen",
    "http_listen",
    "data_dir",
    "log_format",
    "preface_timeout",
    "max_message_bytes",
    "shutdown_grace",
    "auth_tokens",
    "max_batch_records",
    "max_records_per_second",
    "bogus",
];

const VALUES: &[&str] = &[
    "\"127.0.0.1:1\"",
    "\"\"",
    "\"5s\"",
    "\"1ns\"",
    "0",
    "-5",
    "65536",
    "99999999999",
    "true",
    "[1, 2]",
    "\"json\"",
    "\"xml\"",
    "\"/tmp/x\"",
    "[",
    "\"open",
];

fn text() -> impl Strategy<Value = String> {
    config_text(KEYS, VALUES, &[])
}

fn record(node: &str, seq: u64) -> Vec<u8> {
    Record {
        node: node.into(),
        boot_id: "b".into(),
        seq,
        unix_ns: 1,
        payload: Some(Payload::AgentStats(AgentStats::default())),
    }
    .encode_to_vec()
}

proptest! {
    #![proptest_config(proptest_config(512))]

    #[test]
    fn raw_message_decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(RawAgentMessage { msg: Some(RawMsg::Batch(b)) }) =
            RawAgentMessage::decode(bytes.as_slice())
        {
            let _ = validate::batch("a", b.records, &validate::Rules::any_size(&["b"]));
        }
    }

    #[test]
    fn batch_validation_never_panics_and_keeps_good_batches_whole(
        garbage in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..6),
        good in 1u64..20,
    ) {
        let mut raws: Vec<Vec<u8>> = (1..=good).map(|s| record("a", s)).collect();
        prop_assert_eq!(validate::batch("a", raws.clone(), &validate::Rules::any_size(&["b"])).unwrap().len() as u64, good);
        raws.extend(garbage);
        // Any outcome but a panic; a success keeps every record.
        if let Ok(c) = validate::batch("a", raws.clone(), &validate::Rules::any_size(&["b"])) {
            prop_assert_eq!(c.len(), raws.len());
        }
    }

    #[test]
    fn config_text_never_panics_and_errors_name_file_and_line(t in text()) {
        let built = Config::parse("collector.toml", &t)
            .and_then(|doc| Config::build(Some(&doc), &Flags::default()));
        if let Err(e) = built {
            prop_assert!(names_a_line_of(&e.to_string(), "collector.toml", &t), "{} in\n{}", e, t);
        }
    }

    #[test]
    fn auth_file_never_panics_and_errors_name_a_line(t in text()) {
        if let Err(e) = AuthTokens::parse("tokens", &t) {
            let line = error_line(&e.to_string(), "tokens");
            prop_assert!(line <= t.lines().count());
        }
    }
}
