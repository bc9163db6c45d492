//! Helpers for the workspace's tests (feature `testing`): free loopback
//! ports, a command that must succeed, `promtool check metrics`, and for the property tests their
//! configuration and strategies.
//!
//! One proptest configuration for all of them: a fixed
//! seed, so CI runs the same cases every time, and regression files beside
//! the test sources (`tests/props.proptest-regressions`), committed, so a
//! case that once failed is replayed first forever.
//!
//! Exploring with fresh cases is a separate, deliberate act:
//! `PROPTEST_RNG_SEED=$RANDOM cargo test -p boltwatch-agent --test props`
//! (any u64); a failure is written to the regression file, to be committed
//! with its fix.

use std::collections::BTreeSet;
use std::net::{TcpListener, UdpSocket};
use std::process::{Command, Output};
use std::sync::Mutex;

use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::Union;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};

/// The seed CI uses.
pub const SEED: u64 = 0x626f_6c74_7761_7463; // "boltwatc"

/// `cases` cases from the fixed seed, unless `PROPTEST_RNG_SEED` names
/// another.
pub fn proptest_config(cases: u32) -> Config {
    let default = Config::default();
    let rng_seed = match default.rng_seed {
        RngSeed::Random => RngSeed::Fixed(SEED),
        chosen => chosen,
    };
    Config {
        cases,
        rng_seed,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..default
    }
}

/// The line a `FILE:LINE: ...` error names; panics, naming the message,
/// when it does not start with `file` and a number.
pub fn error_line(msg: &str, file: &str) -> usize {
    let rest = msg
        .strip_prefix(&format!("{file}:"))
        .unwrap_or_else(|| panic!("error does not name {file}: {msg}"));
    rest.split(':')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("error has no line number: {msg}"))
}

/// Whether the `FILE:LINE: ...` error `msg` names `file` and a line of
/// `text` (line 1 also for empty text); panics as [`error_line`] does.
pub fn names_a_line_of(msg: &str, file: &str, text: &str) -> bool {
    let line = error_line(msg, file);
    line >= 1 && line <= text.lines().count().max(1)
}

/// Config-file text of up to eight lines, each one of: `key = value` from
/// the given keys and values (valid and invalid ones alike), a line of
/// TOML-ish punctuation, any string at all, an empty line, or one of
/// `sections` (`[name]` headers; may be empty).
pub fn config_text(
    keys: &'static [&'static str],
    values: &'static [&'static str],
    sections: &'static [&'static str],
) -> impl Strategy<Value = String> {
    let mut lines: Vec<BoxedStrategy<String>> = vec![
        (select(keys), select(values))
            .prop_map(|(k, v)| format!("{k} = {v}"))
            .boxed(),
        "[a-z_\\[\\]=\" #0-9.]{0,30}".boxed(),
        any::<String>().boxed(),
        Just(String::new()).boxed(),
    ];
    if !sections.is_empty() {
        lines.push(select(sections).prop_map(str::to_string).boxed());
    }
    proptest::collection::vec(Union::new(lines), 0..8).prop_map(|l| l.join("\n"))
}

/// A free TCP port on 127.0.0.1, never one this process handed out
/// before.
///
/// The port is released before the caller binds it. Two picks in a row can
/// get the same port back from the kernel (a collector once got one port
/// for gRPC and HTTP and failed to bind the second), so every port handed
/// out is remembered for the life of the test process. Other processes
/// cannot take it meanwhile except by binding port 0 themselves: Linux
/// gives `connect`'s ephemeral ports the other parity.
pub fn free_tcp_port() -> u16 {
    fresh_port(|| TcpListener::bind("127.0.0.1:0")?.local_addr())
}

/// A free UDP port on 127.0.0.1, never one this process handed out before
/// (as [`free_tcp_port`]).
pub fn free_udp_port() -> u16 {
    fresh_port(|| UdpSocket::bind("127.0.0.1:0")?.local_addr())
}

/// Asks the kernel for ports until one is new to this process.
fn fresh_port(mut bind: impl FnMut() -> std::io::Result<std::net::SocketAddr>) -> u16 {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut seen = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..1000 {
        let port = bind().expect("binding a loopback port").port();
        if seen.insert(port) {
            return port;
        }
    }
    panic!("no loopback port left that this test process has not used");
}

/// Runs `cmd` to its end and returns what it printed; panics, naming the
/// program and its standard error, unless it exits 0.
pub fn output_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()));
    assert!(
        out.status.success(),
        "{:?} failed ({}): {}",
        cmd.get_program(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs the real `promtool check metrics` on a body; returns its output on
/// any finding (the metrics follow the conventions: base units, no
/// excuses). Panics if promtool is not installed (tests never skip).
pub fn promtool_check(metrics: &str) -> Result<(), String> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is required (apt-get install -y prometheus); the tests do not skip");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() && text.trim().is_empty() {
        Ok(())
    } else {
        Err(text)
    }
}
