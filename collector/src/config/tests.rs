use boltwatch_common::config::check_table;

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    let doc = Config::parse("collector.toml", text)?;
    Config::build(Some(&doc), &Flags::default())
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn full_file_parses() {
    let c = parse(
        "grpc_listen = \"0.0.0.0:50071\"\nhttp_listen = \"0.0.0.0:9471\"\n\
         data_dir = \"/var/lib/boltwatch\"\nlog_format = \"json\"\npreface_timeout = \"2s\"\n\
         max_message_bytes = 4194304\nshutdown_grace = \"1s\"\n",
    )
    .unwrap();
    assert_eq!(c.grpc_listen, "0.0.0.0:50071".parse().unwrap());
    assert_eq!(c.data_dir, PathBuf::from("/var/lib/boltwatch"));
    assert_eq!(c.log_format, LogFormat::Json);
    assert_eq!(c.preface_timeout, Duration::from_secs(2));
    assert_eq!(c.max_message_bytes, 4_194_304);
    assert_eq!(
        c.db_path(),
        PathBuf::from("/var/lib/boltwatch/boltwatch.db")
    );
}

#[test]
fn defaults_are_the_documented_ones() {
    let c = Config::default();
    assert_eq!(c.grpc_listen, "127.0.0.1:50071".parse().unwrap());
    assert_eq!(c.http_listen, "127.0.0.1:9471".parse().unwrap());
    assert_eq!(c.data_dir, PathBuf::from("./boltwatch-data"));
    assert_eq!(c.log_format, LogFormat::Text);
    assert_eq!(c.preface_timeout, Duration::from_secs(2));
    assert_eq!(c.max_message_bytes, 8 * 1024 * 1024);
    assert_eq!(c.shutdown_grace, Duration::from_secs(5));
    assert_eq!((c.auth_tokens.is_none(), c.auth.is_none()), (true, true));
    assert_eq!(
        (c.max_batch_records, c.max_records_per_second),
        (4096, 20_000)
    );
}

#[test]
fn resource_limits_have_documented_defaults_and_parse() {
    let c = Config::default();
    assert_eq!(c.max_bytes_per_second, 8 << 20);
    assert_eq!(c.max_record_bytes, 256 << 10);
    assert_eq!(c.max_series_per_node, 1024);
    assert_eq!(
        (c.max_connections, c.max_connections_per_address),
        (1024, 32)
    );
    assert_eq!(c.hello_timeout, Duration::from_secs(10));
    assert_eq!(c.max_pending_per_address, 8);
    assert_eq!(c.max_clock_skew, Duration::from_secs(300));
    assert_eq!((c.api_listen, c.api_token_file.clone()), (None, None));
    let c = parse(
        "max_bytes_per_second = 1048576\nmax_record_bytes = 4096\nmax_series_per_node = 8\n\
         max_connections = 10\nmax_connections_per_address = 2\nhello_timeout = \"1s\"\n\
         api_listen = \"127.0.0.1:9472\"\napi_token_file = \"/etc/t\"\n",
    )
    .unwrap();
    assert_eq!(c.max_bytes_per_second, 1 << 20);
    assert_eq!(c.api_listen, Some("127.0.0.1:9472".parse().unwrap()));
    assert_eq!(c.api_token_file, Some(PathBuf::from("/etc/t")));
    let p = c.ingest_policy();
    assert_eq!(
        (p.bytes_burst, p.max_record_bytes, p.max_series_per_node),
        (5 << 20, 4096, 8)
    );
}

#[test]
fn example_file_states_the_defaults() {
    let c = parse(include_str!("../../collector.example.toml")).unwrap();
    assert_eq!(c, Config::default());
}

#[test]
fn empty_file_gives_defaults() {
    assert_eq!(parse("").unwrap(), Config::default());
}

/// A bad value or key: the error starts with the file, the line and the key
/// (a file that does not parse has no key to name).
#[test]
fn errors_name_file_line_and_key() {
    let cases = [
        // Not an address.
        (
            "log_format = \"text\"\n\nhttp_listen = \"localhost\"\n",
            "collector.toml:3: key `http_listen`",
        ),
        // A misspelt key.
        (
            "grpc_listen = \"127.0.0.1:1\"\ndatadir = \"x\"\n",
            "collector.toml:2: key `datadir`",
        ),
        // A string where a number goes.
        (
            "max_message_bytes = \"big\"\n",
            "collector.toml:1: key `max_message_bytes`",
        ),
        // Out of range.
        (
            "preface_timeout = \"1ms\"\n",
            "collector.toml:1: key `preface_timeout`",
        ),
        (
            "max_message_bytes = 10\n",
            "collector.toml:1: key `max_message_bytes`",
        ),
        (
            "log_format = \"xml\"\n",
            "collector.toml:1: key `log_format`",
        ),
        (
            "max_bytes_per_second = 10\n",
            "collector.toml:1: key `max_bytes_per_second`",
        ),
        // An unterminated string at the end (a proptest finding) names a
        // line the file has.
        ("_=\"\"\"\n", "collector.toml:1: "),
        ("\"\"\"\n", "collector.toml:1: "),
    ];
    for (text, start) in cases {
        let e = err(text);
        assert!(e.starts_with(start), "{e}");
    }
}

#[test]
fn flags_override_file_and_name_the_flag() {
    let doc = Config::parse("f", "grpc_listen = \"127.0.0.1:1\"\n").unwrap();
    let c = Config::build(
        Some(&doc),
        &Flags::from_pairs(&[("grpc-listen", "127.0.0.1:2"), ("data-dir", "/tmp/d")]),
    )
    .unwrap();
    assert_eq!(c.grpc_listen.port(), 2);
    assert_eq!(c.data_dir, PathBuf::from("/tmp/d"));
    let e = Config::build(None, &Flags::from_pairs(&[("log-format", "yaml")]))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("command line: flag `--log-format`"), "{e}");
}

#[test]
fn docs_serve_table_is_the_key_table() {
    let doc = include_str!("../../../docs/deployment.md");
    if let Err(e) = check_table::<Config>(doc, "collector-serve-flags") {
        panic!(
            "docs/deployment.md, `boltwatch-collector serve`: {e}\n(keys: collector/src/config.rs)"
        );
    }
}

#[test]
fn tls_settings_come_in_whole_sets() {
    let c =
        parse("[tls]\ncert = \"/etc/c.pem\"\nkey = \"/etc/k.pem\"\nclient_ca = \"/etc/ca.pem\"\n")
            .unwrap();
    assert_eq!(c.tls.client_ca, Some(PathBuf::from("/etc/ca.pem")));
    let cases = [
        (
            "[tls]\ncert = \"/etc/c.pem\"\n",
            "key `tls.cert`: TLS needs both",
        ),
        (
            "[tls]\nclient_ca = \"/etc/ca.pem\"\n",
            "key `tls.client_ca`: mutual TLS needs",
        ),
        (
            "[remote_write]\nurls = [\"https://vm:8428/api/v1/write\"]\n",
            "key `remote_write.urls`: https:// remote write endpoints need",
        ),
        (
            "[remote_write]\ntls_cert_file = \"/etc/c.pem\"\n",
            "key `remote_write.tls_cert_file`: a client certificate needs",
        ),
    ];
    for (text, want) in cases {
        let e = err(text);
        assert!(e.contains(want), "{text}: {e}");
    }
    let c = parse(
        "[remote_write]\nurls = [\"https://vm:8428/api/v1/write\"]\ntls_ca_file = \"/etc/ca.pem\"\n",
    )
    .unwrap();
    assert_eq!(
        c.remote_write.tls_ca_file,
        Some(PathBuf::from("/etc/ca.pem"))
    );
}
