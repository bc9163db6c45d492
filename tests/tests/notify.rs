//! systemd's notify protocol against the real binaries: the test binds the
//! Unix datagram socket systemd would (`NOTIFY_SOCKET`), starts the agent or
//! the collector with it, and reads what arrives.
//!
//! - READY=1 comes first, and by then the listeners answer.
//! - WATCHDOG=1 keeps coming while the work loops progress, and stops while
//!   one is wedged: the agent's sampler is made to block on a FIFO in its
//!   sysfs root (the process and its other threads keep running), then
//!   released, and WATCHDOG=1 resumes.
//! - WATCHDOG_USEC sets the check period; a WATCHDOG_PID naming another
//!   process turns the watchdog off.
//!
//! Nothing here asserts a duration: only which messages arrive, in which
//! order, and how many.

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use boltwatch_tests::procs::{
    bin, collector_serve, free_tcp_port, free_udp_port, http_get, wait_for, Proc,
};

/// How long a test waits for a message before it gives up (a bound on a
/// hang, not an assertion on speed).
const PATIENCE: Duration = Duration::from_secs(60);

/// The socket systemd would hold, bound in a temp dir.
struct NotifySocket {
    sock: UnixDatagram,
    path: std::path::PathBuf,
}

impl NotifySocket {
    fn bind(dir: &Path) -> NotifySocket {
        let path = dir.join("notify.sock");
        let sock = UnixDatagram::bind(&path).expect("binding the notify socket");
        NotifySocket { sock, path }
    }

    /// The next datagram, waiting at most `limit`.
    fn recv_within(&self, limit: Duration) -> Option<String> {
        self.sock.set_read_timeout(Some(limit)).unwrap();
        let mut buf = [0u8; 4096];
        match self.sock.recv(&mut buf) {
            Ok(n) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                None
            }
            Err(e) => panic!("reading the notify socket: {e}"),
        }
    }

    /// The next datagram; fails the test after [`PATIENCE`].
    fn recv(&self, what: &str, proc: &Proc) -> String {
        self.recv_within(PATIENCE).unwrap_or_else(|| {
            panic!(
                "no notify message ({what}) within {PATIENCE:?}; log:\n{}",
                proc.log_text()
            )
        })
    }

    /// Every datagram already queued.
    fn drain(&self) -> Vec<String> {
        self.sock.set_nonblocking(true).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.sock.recv(&mut buf) {
            out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        self.sock.set_nonblocking(false).unwrap();
        out
    }

    /// Waits for `n` WATCHDOG=1 messages; any other message fails.
    fn watchdogs(&self, n: usize, proc: &Proc) {
        for i in 0..n {
            let m = self.recv(&format!("WATCHDOG=1 #{}", i + 1), proc);
            assert_eq!(m, "WATCHDOG=1\n", "unexpected message");
        }
    }
}

fn lines_with(log: &str, needle: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

/// A collector on fresh loopback ports (gRPC, HTTP) that notifies
/// `notify`, with the systemd variables `env` and no inherited log filter.
fn start_collector(dir: &Path, notify: &NotifySocket, env: &[(&str, &str)]) -> (Proc, u16, u16) {
    let (grpc, http) = (free_tcp_port(), free_tcp_port());
    let mut cmd = collector_serve(
        format!("127.0.0.1:{grpc}"),
        format!("127.0.0.1:{http}"),
        &dir.join("data"),
    );
    cmd.env("NOTIFY_SOCKET", &notify.path)
        .env_remove("WATCHDOG_PID")
        .env_remove("BOLTWATCH_LOG")
        .env_remove("RUST_LOG")
        .envs(env.iter().copied());
    let proc = Proc::spawn("collector", cmd, dir.join("collector.log"));
    (proc, grpc, http)
}

#[test]
fn collector_is_ready_once_listening_and_watchdog_follows_the_store_writer() {
    let dir = tempfile::tempdir().unwrap();
    let notify = NotifySocket::bind(dir.path());
    // 2 s: a check every 500 ms.
    let watchdog = [("WATCHDOG_USEC", "2000000")];
    let (mut proc, grpc, http) = start_collector(dir.path(), &notify, &watchdog);

    let first = notify.recv("READY=1", &proc);
    assert!(
        first.lines().next() == Some("READY=1"),
        "the first message is not READY=1: {first:?}"
    );
    assert!(first.contains("STATUS=serving"), "{first:?}");
    // READY=1 means serving: both listeners accept, the store answers.
    std::net::TcpStream::connect(("127.0.0.1", grpc)).expect("gRPC listener at READY=1");
    let (code, body) =
        http_get(&format!("http://127.0.0.1:{http}/healthz")).expect("HTTP listener at READY=1");
    assert_eq!(code, 200, "{body}");

    // No agent is connected: the collector is idle and still alive,
    // because the store writer answers.
    notify.watchdogs(4, &proc);
    let log = proc.log_text();
    assert!(
        log.contains("timeout_ms=2000") && log.contains("check_every_ms=500"),
        "WATCHDOG_USEC not taken:\n{log}"
    );
    assert!(
        lines_with(&log, "withholding WATCHDOG=1").is_empty(),
        "{log}"
    );

    assert_eq!(proc.terminate(), Some(0), "{}", proc.log_text());
    // What came after the last read: watchdogs, then STOPPING=1 last.
    let rest = notify.drain();
    let last = rest.last().expect("STOPPING=1 at shutdown");
    assert_eq!(last, "STOPPING=1\n", "{rest:?}");
    for m in &rest[..rest.len() - 1] {
        assert_eq!(m, "WATCHDOG=1\n", "{rest:?}");
    }
}

#[test]
fn a_watchdog_pid_of_another_process_turns_the_watchdog_off() {
    let dir = tempfile::tempdir().unwrap();
    let notify = NotifySocket::bind(dir.path());
    // systemd sets WATCHDOG_PID to the main process; pid 1 is not us.
    let watchdog = [("WATCHDOG_USEC", "2000000"), ("WATCHDOG_PID", "1")];
    let (mut proc, _grpc, http) = start_collector(dir.path(), &notify, &watchdog);
    let first = notify.recv("READY=1", &proc);
    assert!(first.starts_with("READY=1\n"), "{first:?}");
    wait_for("the watchdog's verdict in the log", PATIENCE, || {
        proc.log_text().contains("systemd watchdog")
    });
    let log = proc.log_text();
    assert!(log.contains("systemd watchdog off"), "{log}");
    // The store writer answers /healthz meanwhile; no WATCHDOG=1 follows.
    for _ in 0..5 {
        let (code, _) = http_get(&format!("http://127.0.0.1:{http}/healthz")).unwrap();
        assert_eq!(code, 200);
    }
    assert_eq!(proc.terminate(), Some(0), "{}", proc.log_text());
    assert_eq!(notify.drain(), vec!["STOPPING=1\n".to_string()]);
}

/// A sysfs tree for `lo` whose `rx_bytes` is a FIFO: the sampler's first
/// read blocks in open(2) until the test writes to it.
fn sysfs_with_a_fifo(root: &Path) -> std::path::PathBuf {
    let stats = root.join("class/net/lo/statistics");
    std::fs::create_dir_all(&stats).unwrap();
    // Every file the reader requires, rx_bytes aside.
    for f in boltwatch_agent::counters::SYSFS_STATISTICS
        .iter()
        .filter(|f| **f != "rx_bytes")
    {
        std::fs::write(stats.join(f), "0\n").unwrap();
    }
    let fifo = stats.join("rx_bytes");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    fifo
}

#[test]
fn agent_watchdog_stops_while_the_sampler_is_wedged_and_resumes_after() {
    let dir = tempfile::tempdir().unwrap();
    let notify = NotifySocket::bind(dir.path());
    let sysfs = dir.path().join("sys");
    let fifo = sysfs_with_a_fifo(&sysfs);

    // The peer: a standalone reflector, so the sender closes answered
    // windows.
    let peer_port = free_udp_port();
    let mut reflect = Command::new(bin("boltwatch-agent"));
    reflect
        .arg("reflect")
        .arg("--listen")
        .arg(format!("127.0.0.1:{peer_port}"));
    let _peer = Proc::spawn("reflector", reflect, dir.path().join("reflector.log"));

    let listen = free_udp_port();
    let config = dir.path().join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "node = \"a\"\nlisten = \"127.0.0.1:{listen}\"\npeers = [\"b=127.0.0.1:{peer_port}\"]\n\
             interface = \"lo\"\nprobe_interval = \"50ms\"\nsysfs_root = \"{}\"\n\
             collector = \"http://127.0.0.1:{}\"\n\n[spool]\ndir = \"{}\"\n\n\
             [bandwidth]\nenabled = false\n",
            sysfs.display(),
            free_tcp_port(),
            dir.path().join("spool").display()
        ),
    )
    .unwrap();
    let mut cmd = Command::new(bin("boltwatch-agent"));
    cmd.arg("run")
        .arg("--config")
        .arg(&config)
        .env("NOTIFY_SOCKET", &notify.path)
        .env("WATCHDOG_USEC", "2000000")
        .env_remove("WATCHDOG_PID")
        .env_remove("BOLTWATCH_LOG")
        .env_remove("RUST_LOG");
    let mut agent = Proc::spawn("agent", cmd, dir.path().join("agent.log"));

    let first = notify.recv("READY=1", &agent);
    assert!(first.starts_with("READY=1\n"), "{first:?}");
    assert!(first.contains("STATUS=probing"), "{first:?}");
    // READY=1 means the reflector answers.
    let out = Command::new(bin("boltwatch-agent"))
        .args(["ping", &format!("127.0.0.1:{listen}"), "-c", "1", "-W", "5"])
        .output()
        .unwrap();
    assert!(out.status.success(), "reflector silent at READY=1: {out:?}");

    // The sampler sits in open(2) of the FIFO: the checks find it stuck
    // and withhold WATCHDOG=1, while the probe windows keep closing.
    wait_for("two withheld watchdogs", PATIENCE, || {
        lines_with(&agent.log_text(), "withholding WATCHDOG=1").len() >= 2
    });
    let withheld = lines_with(&agent.log_text(), "withholding WATCHDOG=1");
    assert!(
        withheld.iter().all(|l| l.contains("sampler")),
        "{withheld:#?}"
    );
    wait_for("a check that blames the sampler alone", PATIENCE, || {
        lines_with(&agent.log_text(), "withholding WATCHDOG=1")
            .iter()
            .any(|l| l.contains("sampler") && !l.contains("probe windows"))
    });
    let early = notify.drain();
    assert!(
        early.is_empty(),
        "WATCHDOG=1 sent while the sampler was stuck: {early:?}"
    );
    assert!(agent.alive(), "{}", agent.log_text());

    // Release it: the blocked open gets a writer and one value; the path
    // then holds a plain file, so the next reads do not block.
    let plain = fifo.with_file_name("rx_bytes.plain");
    std::fs::write(&plain, "0\n").unwrap();
    let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    std::fs::rename(&plain, &fifo).unwrap();
    w.write_all(b"0\n").unwrap();
    drop(w);

    notify.watchdogs(4, &agent);
    assert!(agent.log_text().contains("check_every_ms=500"));
    assert_eq!(agent.terminate(), Some(0), "{}", agent.log_text());
    let rest = notify.drain();
    assert_eq!(
        rest.last().map(String::as_str),
        Some("STOPPING=1\n"),
        "{rest:?}"
    );
}
