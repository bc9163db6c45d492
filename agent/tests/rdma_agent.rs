//! The agent with `[rdma] enabled = true` on a host whose verbs library
//! (Debian's `libibverbs.so.1`) loads but lists no device (no RDMA
//! hardware, no rxe/siw in the kernel): it starts, says once that the
//! probe is not ready and why, keeps running without burning CPU, and
//! stops cleanly on SIGTERM.

#![cfg(target_os = "linux")]

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIBRARY: &str = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";

/// CPU time (user + system) of process `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name's closing parenthesis; utime, stime
    // are the 14th and 15th fields of the whole line.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn rdma_enabled_without_a_device_starts_says_not_ready_and_idles() {
    assert!(
        std::path::Path::new(LIBRARY).exists(),
        "{LIBRARY} missing: install Debian's libibverbs1 (rdma-core)"
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agent.toml");
    let closed = free_port();
    std::fs::write(
        &config,
        format!(
            "node = \"a\"\ncollector = \"http://127.0.0.1:{closed}\"\n\
             listen = \"127.0.0.1:0\"\n\
             [spool]\ndir = \"{}\"\n\
             [services]\ntcp = []\n\
             [bandwidth]\nenabled = false\n\
             [rdma]\nenabled = true\ninterval = \"200ms\"\n\
             [peers]\nb = \"127.0.0.1:{}\"\n",
            dir.path().join("spool").display(),
            free_port(),
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_boltwatch-agent"))
        .args(["run", "--config"])
        .arg(&config)
        .env("BOLTWATCH_LOG", "warn,boltwatch_agent=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut agent = Agent(child);
    let pid = agent.0.id();
    let mut stderr = agent.0.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });

    // Let the role survey and settle, then measure 3 s of its CPU time: a
    // probe spinning on an empty device list would use all of them.
    std::thread::sleep(Duration::from_secs(2));
    assert!(agent.0.try_wait().unwrap().is_none(), "the agent exited");
    let (t0, c0) = (Instant::now(), cpu_ticks(pid));
    std::thread::sleep(Duration::from_secs(3));
    let ticks = cpu_ticks(pid) - c0;
    // SAFETY: sysconf reads a constant.
    #[allow(unsafe_code)]
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let wall_ticks = t0.elapsed().as_millis() as u64 * hz / 1000;
    assert!(ticks * 4 < wall_ticks, "{ticks} CPU ticks in {wall_ticks}");

    let term = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = agent.0.wait().unwrap();
    let log = reader.join().unwrap();
    assert!(status.success(), "{status}: {log}");
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("RDMA probe not ready"))
        .collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(
        said[0].contains("the verbs library lists no RDMA device"),
        "{log}"
    );
    assert!(said[0].contains("libibverbs.so.1"), "{log}");
}

#[test]
fn doctor_rdma_on_a_host_without_a_device_says_so_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("doctor");
    let run = Command::new(env!("CARGO_BIN_EXE_boltwatch-agent"))
        .args(["doctor", "--rdma", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    assert!(stdout.starts_with("SOURCE"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let row = |subject: &str| {
        rows.iter()
            .find(|r| r["subject"] == subject)
            .unwrap_or_else(|| panic!("no {subject} row:\n{stdout}"))
    };
    assert!(rows.iter().all(|r| r["source"] == "rdma"), "{stdout}");
    assert_eq!(row("library")["verdict"]["verdict"], "agree");
    assert_eq!(row("library")["os_tool"], "dlopen libibverbs.so.1");
    assert_eq!(row("devices")["agent"], "none");
    assert_eq!(row("devices")["verdict"]["verdict"], "disagree");
    let probe = &row("probe")["verdict"];
    assert_eq!(probe["verdict"], "not_applicable");
    assert_eq!(
        probe["detail"],
        "not ready: the verbs library lists no RDMA device"
    );
    assert!(out.join("rdma/survey.txt").exists());
}
