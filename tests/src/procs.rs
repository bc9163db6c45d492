//! Real processes for end-to-end tests: the built `boltwatch-agent` and
//! `boltwatch-collector` binaries, started on loopback (or inside a test-bed
//! namespace), killed when their handle drops, even when a test panics.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The binaries the tests drive that belong to other packages (each
/// package is named after its one binary): cargo builds a package's own
/// binaries before its integration tests, but not these, so
/// `cargo test -p boltwatch-tests` alone would run whatever stale build
/// sits in target/, and a clean clone would have none at all.
const PRODUCTS: [&str; 3] = ["boltwatch-agent", "boltwatch-collector", "boltwatch-lab"];

/// Path of a binary in this test's target directory. The agent,
/// collector and lab are (re)built first, once per test process, with the same
/// profile and target directory as the test itself, so a test never runs
/// a stale binary; a build failure fails the test with cargo's message.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/e2e-<hash> -> target/<profile>/<name>; a
    // helper binary already sits in target/<profile>.
    let mut dir = exe.parent().expect("target dir");
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir.parent().expect("target dir");
    }
    if PRODUCTS.contains(&name) {
        if let Err(e) = build_products(dir) {
            panic!("{e}");
        }
    }
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} not built; run the whole suite with `bash .ci/test` (see README)",
        p.display()
    );
    p
}

/// Builds [`PRODUCTS`] into `profile_dir` (target/<profile>, or
/// target/<triple>/<profile>) once per process.
fn build_products(profile_dir: &Path) -> Result<(), String> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cmd = build_command(profile_dir)?;
            let shown = format!("{cmd:?}");
            let mut cmd = cmd;
            let out = cmd
                .output()
                .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "building the agent and collector for the tests failed: `{shown}`\n{}",
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        })
        .clone()
}

/// `cargo build` of [`PRODUCTS`] matching the running test's profile,
/// target triple and target directory.
fn build_command(profile_dir: &Path) -> Result<Command, String> {
    let unknown = || {
        format!(
            "cannot tell the target directory from {}",
            profile_dir.display()
        )
    };
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(unknown)?;
    let mut target_dir = profile_dir.parent().ok_or_else(unknown)?;
    // Cargo marks its target directory with CACHEDIR.TAG; one level up
    // means a cross build in target/<triple>/<profile>.
    let mut triple = None;
    if !target_dir.join("CACHEDIR.TAG").exists() {
        let up = target_dir.parent().ok_or_else(unknown)?;
        if up.join("CACHEDIR.TAG").exists() {
            triple = target_dir.file_name().and_then(|n| n.to_str());
            target_dir = up;
        }
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .args(["--bins", "--quiet"]);
    for p in PRODUCTS {
        cmd.args(["-p", p]);
    }
    match profile {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    if let Some(t) = triple {
        cmd.args(["--target", t]);
    }
    Ok(cmd)
}

pub use boltwatch_common::testing::{free_tcp_port, free_udp_port};

/// A child process that is killed and reaped on drop; its stderr goes to a
/// log file that is printed if the test fails.
pub struct Proc {
    /// Name for messages.
    pub name: String,
    child: Option<std::process::Child>,
    /// Where stderr goes.
    pub log: PathBuf,
}

impl Proc {
    /// Spawns `cmd`, logging stderr to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: PathBuf) -> Proc {
        let file = std::fs::File::create(&log).expect("log file");
        cmd.stdout(Stdio::null()).stderr(file);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {name}: {e}"));
        Proc {
            name: name.into(),
            child: Some(child),
            log,
        }
    }

    /// OS process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// True while the process runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Sends SIGTERM and waits (bounded) for a clean exit; returns the exit
    /// code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                return st.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGKILL and reaps.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The stderr log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "---- {} log ({}) ----\n{}",
                self.name,
                self.log.display(),
                self.log_text()
            );
        }
    }
}

/// The API write token every test collector started here accepts.
pub const WRITE_TOKEN: &str = "test-write-token";

/// A running collector.
pub struct Collector {
    /// The process.
    pub proc: Proc,
    /// gRPC address.
    pub grpc: SocketAddr,
    /// HTTP address.
    pub http: SocketAddr,
}

/// How a test's collector listens and what else it is told.
#[derive(Debug, Clone, Default)]
pub struct CollectorOptions {
    /// (gRPC, HTTP) ports; free ones when `None` (a restart passes the
    /// first run's, so agents reconnect to the same address).
    pub ports: Option<(u16, u16)>,
    /// gRPC on every address, so agents inside test-bed namespaces reach
    /// it at their node's `host_addr`; HTTP stays on loopback, for the test.
    pub for_bed: bool,
    /// More `serve` flags (`--config`, `--auth-tokens`, TLS files...).
    pub flags: Vec<String>,
}

impl Collector {
    /// Starts `boltwatch-collector serve` on free loopback ports with
    /// `data_dir`, and waits until `/healthz` answers.
    pub fn start(dir: &Path, data_dir: &Path) -> Collector {
        Self::launch(dir, data_dir, &CollectorOptions::default())
    }

    /// As [`Collector::start`] with the store under `dir/data`, gRPC on
    /// every address for agents in a test bed's namespaces.
    pub fn for_bed(dir: &Path) -> Collector {
        let opts = CollectorOptions {
            for_bed: true,
            ..Default::default()
        };
        Self::launch(dir, &dir.join("data"), &opts)
    }

    /// As [`Collector::start`], as `opts` say.
    pub fn launch(dir: &Path, data_dir: &Path, opts: &CollectorOptions) -> Collector {
        let (grpc_port, http_port) = opts
            .ports
            .unwrap_or_else(|| (free_tcp_port(), free_tcp_port()));
        let grpc: SocketAddr = format!("127.0.0.1:{grpc_port}").parse().unwrap();
        let http: SocketAddr = format!("127.0.0.1:{http_port}").parse().unwrap();
        let listen = if opts.for_bed {
            format!("0.0.0.0:{grpc_port}")
        } else {
            grpc.to_string()
        };
        let mut cmd = collector_serve(listen, http, data_dir);
        // HTTP writes (soaks, marks) are off without a write token; the
        // tests' collectors take one, which they send as `WRITE_TOKEN`.
        let token = dir.join(format!("write-token-{grpc_port}"));
        std::fs::write(&token, WRITE_TOKEN).expect("writing the API write token");
        cmd.arg("--api-write-token-file").arg(&token);
        cmd.args(&opts.flags);
        Self::spawn(dir, cmd, grpc, http)
    }

    /// Spawns `cmd`, logging beside the others in `dir`, and waits until
    /// `/healthz` answers.
    fn spawn(dir: &Path, cmd: Command, grpc: SocketAddr, http: SocketAddr) -> Collector {
        let log = dir.join(format!("collector-{}.log", grpc.port()));
        let proc = Proc::spawn("collector", cmd, log);
        let c = Collector { proc, grpc, http };
        wait_for("collector /healthz", Duration::from_secs(30), || {
            http_get(&c.url("/healthz"))
                .map(|(code, _)| code == 200)
                .unwrap_or(false)
        });
        c
    }

    /// GET `path` on the HTTP API, parsed as JSON; panics on a non-200.
    pub fn json(&self, path: &str) -> serde_json::Value {
        let (code, body) = http_get(&self.url(path)).unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert_eq!(code, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }

    /// `http://<http addr><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.http, path)
    }

    /// The gRPC URL agents connect to.
    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// Body of `/metrics`.
    pub fn metrics(&self) -> String {
        http_get(&self.url("/metrics"))
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// `/api/v1/nodes` parsed.
    pub fn nodes(&self) -> serde_json::Value {
        let (_, body) = http_get(&self.url("/api/v1/nodes")).expect("GET /api/v1/nodes");
        serde_json::from_str(&body).expect("nodes JSON")
    }
}

/// `boltwatch-collector serve` with gRPC on `grpc`, HTTP on `http` and the
/// store in `data_dir`, for the caller to add flags and environment to.
pub fn collector_serve(
    grpc: impl std::fmt::Display,
    http: impl std::fmt::Display,
    data_dir: &Path,
) -> Command {
    let mut cmd = Command::new(bin("boltwatch-collector"));
    cmd.arg("serve")
        .arg("--grpc-listen")
        .arg(grpc.to_string())
        .arg("--http-listen")
        .arg(http.to_string())
        .arg("--data-dir")
        .arg(data_dir);
    cmd
}

/// Starts `boltwatch-agent run` with `args` appended. Unless `args` name
/// one, the spool goes to `dir/spool-<node>` (never the system default, so
/// a test cannot replay another run's records).
pub fn agent(dir: &Path, node: &str, args: &[String]) -> Proc {
    let mut cmd = Command::new(bin("boltwatch-agent"));
    cmd.arg("run").arg("--node").arg(node).args(args);
    if !args.iter().any(|a| a == "--spool-dir") {
        cmd.arg("--spool-dir")
            .arg(dir.join(format!("spool-{node}")));
    }
    // Loopback agents share one address: only one could own the default
    // bandwidth port, and scheduled tests are the bandwidth tests' business.
    if !args
        .iter()
        .any(|a| a.starts_with("--bandwidth") || a == "--no-bandwidth")
    {
        cmd.arg("--no-bandwidth");
    }
    Proc::spawn(
        &format!("agent {node}"),
        cmd,
        dir.join(format!("agent-{node}.log")),
    )
}

/// Polls `cond` every 100 ms until it holds; panics after `limit`. The
/// limit only bounds a broken test, it asserts nothing about speed.
pub fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {what} after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A minimal blocking HTTP/1.0 GET (status, body); no client library needed
/// for loopback tests.
pub fn http_get(url: &str) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http URL");
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_string()))
}

/// POSTs a JSON body to the collector's HTTP API at `http` with the
/// tests' write token ([`WRITE_TOKEN`]); panics unless the answer is 2xx.
pub fn http_post_json(http: SocketAddr, path: &str, body: &str) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(http).expect("collector HTTP");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.0\r\nHost: {http}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {WRITE_TOKEN}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer.split_whitespace().nth(1).unwrap_or_default();
    assert!(status.starts_with('2'), "POST {path}: {answer}");
}

/// The value of the first sample of metric `name` whose labels include all
/// of `labels` (label order does not matter).
pub fn sample(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = match series.split_once('{') {
                Some((n, r)) => (n, r.trim_end_matches('}')),
                None => (series, ""),
            };
            if n != name {
                return None;
            }
            let ok = labels
                .iter()
                .all(|(k, v)| rest.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
            if ok {
                value.parse().ok()
            } else {
                None
            }
        })
}

pub use boltwatch_common::testing::promtool_check;
