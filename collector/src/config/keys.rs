//! Every collector config key, defined once: TOML path, flag, default,
//! help and validation. The `serve` table of docs/deployment.md is generated from this
//! table and a test keeps the two equal.

use std::time::Duration;

use boltwatch_common::config::{
    log_format_key, set, tls_cert_key, tls_key_key, HasTlsPair, Key, TlsPair,
};

use super::Config;

impl HasTlsPair for Config {
    fn tls_pair(&mut self) -> TlsPair<'_> {
        TlsPair::new(&mut self.tls.cert, &mut self.tls.key)
    }
}

type K = Key<Config>;

/// Every collector key, in the order docs/deployment.md lists them.
pub const KEYS: &[K] = &[
    K::new("grpc_listen", "agent ingest (gRPC)", |c, v| {
        set(&mut c.grpc_listen, v.addr())
    })
    .flag("grpc-listen", "ADDR")
    .default("127.0.0.1:50071"),
    K::new(
        "http_listen",
        "`/metrics`, `/healthz`, `/api/v1/*`",
        |c, v| set(&mut c.http_listen, v.addr()),
    )
    .flag("http-listen", "ADDR")
    .default("127.0.0.1:9471"),
    K::new("data_dir", "SQLite store", |c, v| {
        set(&mut c.data_dir, v.path())
    })
    .flag("data-dir", "DIR")
    .default("./boltwatch-data"),
    log_format_key(),
    K::new(
        "auth_tokens",
        "`NODE TOKEN` lines, `#` comments; agents must present `authorization: Bearer TOKEN` for their node",
        |c, v| {
            c.auth_tokens = Some(v.path()?);
            Ok(())
        },
    )
    .flag("auth-tokens", "FILE")
    .default_doc("none"),
    tls_cert_key(
        "PEM certificate chain; the gRPC port then speaks only TLS (reloaded on SIGHUP)",
        "none (plaintext)",
    ),
    tls_key_key(),
    K::new(
        "tls.client_ca",
        "PEM CA for mutual TLS: agents must present a certificate it signed whose DNS name is their node name",
        |c, v| {
            c.tls.client_ca = Some(v.path()?);
            Ok(())
        },
    )
    .flag("tls-client-ca", "FILE")
    .default_doc("none"),
    K::new(
        "preface_timeout",
        "a gRPC connection without the HTTP/2 preface by then is counted as malformed and closed",
        |c, v| {
            c.preface_timeout =
                v.duration(Duration::from_millis(10)..=Duration::from_secs(300))?;
            Ok(())
        },
    )
    // Short: a connection holds a pending place until then. A TLS
    // handshake and the preface take a few round trips; 2 s is room for
    // a slow WAN link.
    .default("2s"),
    K::new(
        "shutdown_grace",
        "how long shutdown waits for open streams and requests",
        |c, v| set(&mut c.shutdown_grace, v.duration(Duration::ZERO..=Duration::from_secs(300))),
    )
    .default("5s"),
    K::new(
        "max_message_bytes",
        "largest gRPC message",
        // Agents send up to 4 MiB; below 64 KiB even one batch of bandwidth
        // results could be refused.
        |c, v| {
            c.max_message_bytes = v.int(65_536..=268_435_456)? as usize;
            Ok(())
        },
    )
    .default("8388608"),
    K::new(
        "max_batch_records",
        "larger batches get RESOURCE_EXHAUSTED",
        |c, v| {
            c.max_batch_records = v.int(1..=1_000_000)? as usize;
            Ok(())
        },
    )
    .default("4096"),
    K::new(
        "max_records_per_second",
        "per node, bursts of 5 s worth; excess gets RESOURCE_EXHAUSTED",
        |c, v| {
            c.max_records_per_second = v.int(1..=10_000_000)? as u32;
            Ok(())
        },
    )
    .default("20000"),
    K::new(
        "max_bytes_per_second",
        "per node, encoded record bytes, bursts of 5 s worth; excess gets RESOURCE_EXHAUSTED",
        |c, v| {
            c.max_bytes_per_second = v.int(65_536..=1 << 40)? as u64;
            Ok(())
        },
    )
    .default("8388608"),
    K::new(
        "max_record_bytes",
        "largest encoded record; a batch holding a larger one gets INVALID_ARGUMENT",
        // The largest real record (a bandwidth result with its intervals)
        // is a few KiB.
        |c, v| {
            c.max_record_bytes = v.int(1024..=boltwatch_store::MAX_RECORD_BYTES as i64)? as usize;
            Ok(())
        },
    )
    .default("262144"),
    K::new(
        "max_series_per_node",
        "distinct label sets (peer, interface, sensor, service combinations) per node on `/metrics`; records with more are stored but counted in `boltwatch_ingest_series_refused_total`",
        |c, v| {
            c.max_series_per_node = v.int(1..=100_000)? as usize;
            Ok(())
        },
    )
    .default("1024"),
    K::new(
        "max_connections",
        "open gRPC connections in total; more are closed at once",
        |c, v| {
            c.max_connections = v.int(1..=1_000_000)? as usize;
            Ok(())
        },
    )
    .default("1024"),
    K::new(
        "max_connections_per_address",
        "open gRPC connections from one IP address; more are closed at once",
        |c, v| {
            c.max_connections_per_address = v.int(1..=1_000_000)? as usize;
            Ok(())
        },
    )
    .default("32"),
    K::new(
        "hello_timeout",
        "a gRPC connection without a stream that sent a valid, authorised Hello by then is closed",
        |c, v| {
            c.hello_timeout = v.duration(Duration::from_millis(10)..=Duration::from_secs(300))?;
            Ok(())
        },
    )
    .default("10s"),
    K::new(
        "max_pending_per_address",
        "gRPC connections from one IP address still without an accepted Hello; more are closed at once",
        // Agents send their Hello within milliseconds of connecting; 8 per
        // address is room for several agents behind one NAT, and for a
        // burst of short-lived connections (scanners, probes) that arrive
        // before the first is read. 40 sources x 8 are more than the gate
        // holds, and then eviction still lets an agent in.
        |c, v| {
            c.max_pending_per_address = v.int(1..=1_000_000)? as usize;
            Ok(())
        },
    )
    .default("8"),
    K::new(
        "max_clock_skew",
        "records stamped further ahead of the collector's clock are stored but kept off `/metrics`, counted as `clock_skew`",
        |c, v| {
            c.max_clock_skew = v.duration(Duration::from_secs(1)..=Duration::from_secs(86_400))?;
            Ok(())
        },
    )
    .default("5m"),
    K::new(
        "api_listen",
        "serve `/api/v1/*` here instead of on `http_listen`",
        |c, v| {
            c.api_listen = Some(v.addr()?);
            Ok(())
        },
    )
    .flag("api-listen", "ADDR")
    .default_doc("none"),
    K::new(
        "api_token_file",
        "file holding one token; `/api/v1/*` then requires `authorization: Bearer TOKEN`",
        |c, v| {
            c.api_token_file = Some(v.path()?);
            Ok(())
        },
    )
    .flag("api-token-file", "FILE")
    .default_doc("none"),
    K::new(
        "api_write_token_file",
        "file holding the write token; HTTP writes (soak create, stop, delete, marks) then require `authorization: Bearer TOKEN` with it, and answer 403 without this key",
        |c, v| {
            c.api_write_token_file = Some(v.path()?);
            Ok(())
        },
    )
    .flag("api-write-token-file", "FILE")
    .default_doc("none"),
    K::new(
        "http_max_connections",
        "open HTTP connections per listener (`http_listen`, and `api_listen` apart); more are closed at once, counted in `boltwatch_http_refused_total`",
        |c, v| {
            c.http_max_connections = v.int(1..=100_000)? as usize;
            Ok(())
        },
    )
    .default("256"),
    K::new(
        "http_header_timeout",
        "an HTTP connection must send a whole request head within this of opening or of its previous answer (keep-alive), or it is closed",
        |c, v| {
            c.http_header_timeout =
                v.duration(Duration::from_millis(10)..=Duration::from_secs(3600))?;
            Ok(())
        },
    )
    .default("10s"),
    K::new(
        "http_idle_timeout",
        "an HTTP request body or answer that moves no byte for this long is abandoned and its connection closed",
        |c, v| {
            c.http_idle_timeout =
                v.duration(Duration::from_millis(10)..=Duration::from_secs(3600))?;
            Ok(())
        },
    )
    .default("60s"),
    K::new(
        "api_max_concurrent",
        "`/api/v1/*` requests handled at once; more are answered 503 with `Retry-After`",
        |c, v| {
            c.api_max_concurrent = v.int(1..=10_000)? as usize;
            Ok(())
        },
    )
    .default("8"),
    K::new(
        "stale_after",
        "a disconnected agent's gauges (temperatures, throttling, bandwidth, link, services, RTT window) leave `/metrics` after this; `boltwatch_agent_up` stays 0, counters stay",
        |c, v| {
            c.stale_after = v.duration(Duration::from_secs(1)..=Duration::from_secs(86_400))?;
            Ok(())
        },
    )
    .default("5m"),
    K::new(
        "retention.raw",
        "raw RTT summaries and interface counters older than this give way to per-minute rollups, kept for good, that reports read alike; other kinds stay raw; at least 1h",
        |c, v| {
            c.raw_retention =
                Some(v.duration(Duration::from_secs(3600)..=Duration::from_secs(3650 * 86_400))?);
            Ok(())
        },
    )
    .flag("raw-retention", "DURATION")
    .default_doc("none (all raw)"),
    K::new(
        "retention.compact",
        "rewrite the single-record rows live agents leave as packs (less than half the bytes) a minute after they arrive, once every remote_write endpoint has them",
        |c, v| set(&mut c.compact, v.bool()),
    )
    .off("no-compact", "false", "rows stay as they arrived")
    .default("true"),
    K::new(
        "remote_write.urls",
        "Prometheus remote write 1.0 endpoints (`http[s]://HOST:PORT/api/v1/write`); every stored record's series at the record's time",
        |c, v| {
            let urls = v.list()?;
            for u in &urls {
                crate::remote_write::check_url(u)?;
            }
            c.remote_write.urls = urls;
            Ok(())
        },
    )
    .repeated("remote-write", "URL")
    .default("")
    .default_doc("none"),
    K::new(
        "remote_write.external_labels",
        "`NAME=VALUE` labels added to every pushed series, such as `cluster`",
        |c, v| {
            let labels = crate::remote_write::pairs(v.entries()?)?;
            for (k, _) in &labels {
                crate::remote_write::check_label_name(k)?;
            }
            c.remote_write.external_labels = labels;
            Ok(())
        },
    )
    .repeated("remote-write-label", "NAME=VALUE")
    .default("")
    .default_doc("none"),
    K::new(
        "remote_write.headers",
        "`NAME=VALUE` HTTP headers on every remote write request (tenant headers)",
        |c, v| set(&mut c.remote_write.headers, crate::remote_write::pairs(v.entries()?)),
    )
    .default("")
    .default_doc("none"),
    K::new(
        "remote_write.bearer_token_file",
        "file whose contents are sent as `Authorization: Bearer`",
        |c, v| {
            c.remote_write.bearer_token_file = Some(v.path()?);
            Ok(())
        },
    )
    .default_doc("none"),
    K::new(
        "remote_write.basic_auth_username",
        "basic auth user (with `basic_auth_password_file`)",
        |c, v| {
            c.remote_write.basic_auth_username = Some(v.nonempty()?.to_string());
            Ok(())
        },
    )
    .default_doc("none"),
    K::new(
        "remote_write.basic_auth_password_file",
        "file holding the basic auth password",
        |c, v| {
            c.remote_write.basic_auth_password_file = Some(v.path()?);
            Ok(())
        },
    )
    .default_doc("none"),
    K::new(
        "remote_write.tls_ca_file",
        "PEM CA trusted for `https://` endpoints (needed for them; no bundled roots)",
        |c, v| {
            c.remote_write.tls_ca_file = Some(v.path()?);
            Ok(())
        },
    )
    .default_doc("none"),
    K::new(
        "remote_write.tls_cert_file",
        "PEM client certificate for receivers that require one (with `tls_key_file`)",
        |c, v| {
            c.remote_write.tls_cert_file = Some(v.path()?);
            Ok(())
        },
    )
    .default_doc("none"),
    K::new(
        "remote_write.tls_key_file",
        "PEM key of `tls_cert_file`",
        |c, v| {
            c.remote_write.tls_key_file = Some(v.path()?);
            Ok(())
        },
    )
    .default_doc("none"),
    K::new(
        "remote_write.batch_records",
        "most records per remote write request",
        |c, v| {
            c.remote_write.batch_records = v.int(1..=2_000)? as usize;
            Ok(())
        },
    )
    .default("500"),
    K::new(
        "remote_write.max_backlog_records",
        "most stored records an endpoint may lag; older ones are skipped and their samples counted as dropped",
        |c, v| {
            c.remote_write.max_backlog_records = v.int(1..=1_000_000_000)? as u64;
            Ok(())
        },
    )
    .default("10000000"),
    K::new(
        "remote_write.timeout",
        "per remote write request",
        |c, v| {
            c.remote_write.timeout = v.duration(Duration::from_millis(100)..=Duration::from_secs(300))?;
            Ok(())
        },
    )
    .default("30s"),
];
