//! macOS log rotation: the newsyslog config rotates exactly the files the
//! launchd jobs write and signals the pid files they keep, and a job sent
//! SIGHUP after its log was renamed writes on into a new file at the old
//! path (run here with the real collector: the mechanism is POSIX).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A file of systemd-launchd/.
fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../systemd-launchd")
        .join(name)
}

fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// One line of a newsyslog.conf(5): the fields boltwatch uses.
#[derive(Debug)]
struct NewsyslogEntry {
    log: String,
    owner_group: Option<String>,
    mode: u32,
    count: u32,
    size_kib: Option<u64>,
    when: String,
    flags: String,
    pid_file: Option<String>,
    signal: Option<u32>,
}

/// Parses newsyslog.conf(5) lines: `logfile [owner:group] mode count size
/// when [flags] [pid_file] [sig_num]`, `#` to the end of a line a comment.
fn parse_newsyslog(text: &str) -> Result<Vec<NewsyslogEntry>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        let at = |m: &str| format!("line {}: {m}: {raw}", i + 1);
        let mut f: Vec<&str> = line.split_whitespace().collect();
        let log = f.remove(0).to_string();
        let owner_group =
            (f.first().is_some_and(|s| s.contains(':'))).then(|| f.remove(0).to_string());
        if f.len() < 4 {
            return Err(at("fewer than mode, count, size and when"));
        }
        let mode = u32::from_str_radix(f[0], 8).map_err(|_| at("mode is not octal"))?;
        let count = f[1].parse().map_err(|_| at("count is not a number"))?;
        let size_kib = match f[2] {
            "*" => None,
            s => Some(s.parse().map_err(|_| at("size is neither * nor KiB"))?),
        };
        let when = f[3].to_string();
        let flags = f.get(4).map_or(String::new(), |s| s.to_string());
        if let Some(bad) = flags.chars().find(|c| !"BCDGJNUWXZ-".contains(*c)) {
            return Err(at(&format!("unknown flag {bad}")));
        }
        let pid_file = f.get(5).map(|s| s.to_string());
        let signal = match f.get(6) {
            None => None,
            Some(s) => Some(s.parse().map_err(|_| at("sig_num is not a number"))?),
        };
        if f.len() > 7 {
            return Err(at("more than nine fields"));
        }
        out.push(NewsyslogEntry {
            log,
            owner_group,
            mode,
            count,
            size_kib,
            when,
            flags,
            pid_file,
            signal,
        });
    }
    Ok(out)
}

/// The plist's string value of `key` (top level or in
/// EnvironmentVariables), read with the same plistlib the lint uses.
fn plist_value(plist: &Path, key: &str) -> String {
    let script = "import plistlib,sys\nj=plistlib.load(open(sys.argv[1],'rb'))\n\
                  print(j.get(sys.argv[2]) or j.get('EnvironmentVariables',{}).get(sys.argv[2],''))";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(plist)
        .arg(key)
        .output()
        .expect("python3");
    assert!(out.status.success(), "{}", output_text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn newsyslog_rotates_both_logs_and_signals_the_jobs() {
    let conf = shipped("boltwatch.newsyslog.conf");
    let entries = parse_newsyslog(&std::fs::read_to_string(&conf).unwrap()).unwrap();
    assert_eq!(entries.len(), 2, "{entries:#?}");
    for (job, e) in ["agent", "collector"].iter().zip(&entries) {
        let plist = shipped(&format!("io.boltwatch.{job}.plist"));
        // The file launchd writes is the one rotated and the one reopened.
        assert_eq!(e.log, plist_value(&plist, "StandardErrorPath"), "{job}");
        assert_eq!(e.log, plist_value(&plist, "StandardOutPath"), "{job}");
        assert_eq!(e.log, plist_value(&plist, "BOLTWATCH_LOG_FILE"), "{job}");
        // newsyslog signals the pid the job writes, with SIGHUP.
        assert_eq!(
            e.pid_file.as_deref(),
            Some(plist_value(&plist, "BOLTWATCH_PID_FILE").as_str()),
            "{job}"
        );
        assert_eq!(e.signal, Some(1), "{job}: SIGHUP reopens the log");
        assert!(!e.flags.contains('N'), "{job}: N would skip the signal");
        // The fresh log newsyslog creates belongs to whom the job runs as,
        // or a non-root job cannot reopen it.
        let owner = match plist_value(&plist, "UserName").as_str() {
            "" => "root:wheel".to_string(),
            user => format!("{user}:{}", plist_value(&plist, "GroupName")),
        };
        assert_eq!(e.owner_group.as_deref(), Some(owner.as_str()), "{job}");
        assert!(
            e.mode & !0o666 == 0 && e.mode & 0o007 == 0,
            "{job}: mode {:o}",
            e.mode
        );
        assert!(e.count >= 1, "{job}: no archives kept");
        assert!(
            e.size_kib.is_some_and(|s| s > 0) || e.when != "*",
            "{job}: neither a size nor a time: never rotated"
        );
        assert!(
            e.flags.contains('J') || e.flags.contains('Z'),
            "{job}: archives uncompressed"
        );
    }
    // install-macos.sh puts it where newsyslog reads it.
    let script = std::fs::read_to_string(shipped("install-macos.sh")).unwrap();
    assert!(
        script.contains("boltwatch.newsyslog.conf /etc/newsyslog.d/boltwatch.conf"),
        "install-macos.sh does not install the newsyslog config"
    );
    // The parser refuses what newsyslog would.
    assert!(parse_newsyslog("/var/log/x.log 640 7 * @T00 Q\n").is_err());
    assert!(parse_newsyslog("/var/log/x.log 9x0 7 * @T00\n").is_err());
    assert!(parse_newsyslog("/var/log/x.log 640 7\n").is_err());
}

/// What newsyslog does to a running job, for real: the collector runs with
/// the plist's variables (pointed into a temp dir), its stderr on the log
/// file; the test renames the log as newsyslog does and sends SIGHUP to the
/// pid in the pid file. The collector must write on into a new file at the
/// old path, and remove the pid file at its stop.
#[test]
fn sighup_reopens_the_rotated_log_and_the_pid_file_is_the_jobs() {
    use boltwatch_tests::procs::{collector_serve, free_tcp_port, wait_for, Proc};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("collector.log");
    let pid_file = dir.path().join("collector.pid");
    let mut cmd = collector_serve(
        format!("127.0.0.1:{}", free_tcp_port()),
        format!("127.0.0.1:{}", free_tcp_port()),
        &dir.path().join("data"),
    );
    cmd.env("BOLTWATCH_LOG_FILE", &log)
        .env("BOLTWATCH_PID_FILE", &pid_file)
        .env_remove("NOTIFY_SOCKET");
    let mut proc = Proc::spawn("collector", cmd, log.clone());
    let limit = std::time::Duration::from_secs(60);
    wait_for("the pid file", limit, || {
        std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
    });
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert_eq!(
        pid.trim(),
        proc.pid().to_string(),
        "the pid file is not the job's"
    );

    let rotated = dir.path().join("collector.log.0");
    std::fs::rename(&log, &rotated).unwrap();
    let st = Command::new("kill")
        .args(["-HUP", pid.trim()])
        .status()
        .unwrap();
    assert!(st.success());
    wait_for("a new log file", limit, || {
        std::fs::read_to_string(&log).is_ok_and(|s| s.contains("log file reopened"))
    });
    assert!(proc.alive(), "SIGHUP killed the collector");
    assert_eq!(proc.terminate(), Some(0));
    let new = std::fs::read_to_string(&log).unwrap();
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(new.contains("collector stopped"), "{new}");
    assert!(old.contains("collector serving"), "{old}");
    assert!(
        !old.contains("log file reopened") && !old.contains("collector stopped"),
        "{old}"
    );
    assert!(!pid_file.exists(), "the pid file outlived the job");
    // Text logs to a file carry no colour codes.
    assert!(
        !old.contains('\u{1b}') && !new.contains('\u{1b}'),
        "ANSI codes in the log file"
    );
}
