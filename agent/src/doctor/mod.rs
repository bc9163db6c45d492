//! `boltwatch-agent doctor`: run once on a host, it reads every platform
//! source the way the agent does and compares each with the OS's own tool,
//! prints one table row per comparison, and saves every raw capture in a
//! folder laid out as test fixtures (`sys/...` mirrors sysfs so the
//! agent's readers can be pointed at it; `macos/...` and `linux/...` hold
//! tool output), so the first run on a new machine turns into regression
//! tests.
//!
//! A subcommand rather than a shell script because the point is to
//! exercise the agent's own readers (SIOCGIFMEDIA, the interface MIB,
//! sysfs, the STAMP receive path, the system_profiler parser), which a
//! script could only reach through the agent anyway.
//!
//! - Linux: carrier vs `ip -s -j link` (`LOWER_UP`), counters vs the same
//!   output read before and after the agent's read, temperatures vs the raw
//!   sysfs files, discovery n/a, kernel RX timestamps present or not.
//! - macOS: carrier vs `ifconfig -v`, counters vs `netstat -ibn`,
//!   temperatures vs `powermetrics --samplers smc` (root only; Intel only:
//!   on Apple silicon the row says "not checkable" and why), the thermal
//!   pressure level vs `powermetrics --samplers thermal` (root only),
//!   Thunderbolt discovery vs `system_profiler`, kernel RX timestamps.
//!
//! `--rdma` prints only the RDMA probe's readiness rows ([`rdma`]).
//!
//! Exit status: 0 when no row disagrees, 1 when one does, 2 when the
//! doctor itself cannot run (bad flags, capture folder not writable).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::Command;

use clap::Parser;
use serde::Serialize;

mod captures;
pub mod compare;
mod fabric;
mod rdma;
mod row;

pub(crate) use captures::Captures;
pub use row::{Row, Verdict};

crate::platform::os_module!(mod imp);

/// `boltwatch-agent doctor [--out DIR] [--interface NAME]...`
#[derive(Debug, Parser)]
#[command(
    name = "boltwatch-agent doctor",
    about = "Compare every platform source with the OS's own tool and save the raw captures"
)]
pub struct Args {
    /// Folder for the captures and `report.{txt,json}`; created, must not
    /// hold an earlier run. Default `boltwatch-doctor-<unix seconds>`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Interfaces to check (repeatable); default every interface.
    #[arg(long = "interface", short = 'i')]
    pub interfaces: Vec<String>,
    /// Only the RDMA probe's readiness (docs/rdma.md): library, devices,
    /// rdma_ctl, ports, GID, bridge off, the probe; on the interfaces
    /// given, else those discovery calls Thunderbolt or a bridge.
    #[arg(long)]
    pub rdma: bool,
}

/// If the first argument is `doctor`, runs it and exits the process with
/// its status; otherwise returns. `main` calls this first, so the doctor
/// costs it one line and none of its subcommands.
pub fn intercept() {
    let mut argv: Vec<OsString> = std::env::args_os().collect();
    if argv.get(1).is_none_or(|a| a != "doctor") {
        return;
    }
    argv.remove(1);
    let args = Args::parse_from(argv);
    let code = match run(&args, &mut io::stdout()) {
        Ok(report) if report.disagreements() == 0 => 0,
        Ok(_) => 1,
        Err(e) => {
            eprintln!("boltwatch-agent doctor: {e}");
            2
        }
    };
    std::process::exit(code);
}

/// Every row of one run, and where the captures went.
#[derive(Debug, Serialize)]
pub struct Report {
    /// `std::env::consts::OS`.
    pub os: &'static str,
    /// The capture folder.
    pub out: PathBuf,
    /// The comparisons.
    pub rows: Vec<Row>,
}

impl Report {
    /// Rows that disagree.
    pub fn disagreements(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::Disagree(_)))
            .count()
    }
}

/// The table, one row per comparison, columns padded to fit.
pub fn render(rows: &[Row]) -> String {
    let head = ["SOURCE", "SUBJECT", "AGENT", "OS TOOL", "VERDICT"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.source.to_owned(),
                r.subject.clone(),
                r.agent.clone(),
                r.os_tool.clone(),
                r.verdict.label(),
            ]
        })
        .collect();
    let mut width = head.map(str::len);
    for c in &cells {
        for (w, s) in width.iter_mut().zip(c) {
            *w = (*w).max(s.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |c: [&str; 5]| {
        for (i, (s, w)) in c.iter().zip(width).enumerate() {
            if i == 4 {
                let _ = writeln!(out, "{s}");
            } else {
                let _ = write!(out, "{s:<w$}  ");
            }
        }
    };
    line(head);
    for c in &cells {
        line([&c[0], &c[1], &c[2], &c[3], &c[4]]);
    }
    out
}

/// A carrier for the table: up, down or unknown.
pub(crate) fn show(c: Option<bool>) -> &'static str {
    match c {
        Some(true) => "up",
        Some(false) => "down",
        None => "unknown",
    }
}

/// Runs `program args`, saves its stdout (and stderr, when not empty) as
/// `rel` under the captures, and returns stdout; `Err` says why not.
pub(crate) fn tool(
    cap: &Captures,
    rel: &str,
    program: &str,
    args: &[&str],
) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    let _ = cap.save(rel, &out.stdout);
    if !out.stderr.is_empty() {
        let _ = cap.save(&format!("{rel}.stderr"), &out.stderr);
    }
    if !out.status.success() {
        // The tool's own first word on why (powermetrics: "must be invoked
        // as the superuser", "unrecognized sampler: smc").
        let why = String::from_utf8_lossy(&out.stderr);
        let why = why
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        return Err(format!(
            "{program} {} exited with {}{}{why}",
            args.join(" "),
            out.status,
            if why.is_empty() { "" } else { ": " }
        ));
    }
    String::from_utf8(out.stdout).map_err(|_| format!("{program} printed no UTF-8"))
}

/// Runs every check of this OS, writes the captures and the report into
/// the folder, and prints the table to `w`.
pub fn run(args: &Args, w: &mut dyn io::Write) -> io::Result<Report> {
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "boltwatch-doctor-{}",
            boltwatch_common::clock::now_unix_ns() / 1_000_000_000
        ))
    });
    if out.exists() && fs::read_dir(&out)?.next().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not empty", out.display()),
        ));
    }
    fs::create_dir_all(&out)?;
    let cap = Captures { root: out.clone() };
    let rows = if args.rdma {
        rdma::rows(&cap, &args.interfaces)
    } else {
        let mut rows = imp::rows(&cap, &args.interfaces);
        rows.push(kernel_timestamps());
        rows.extend(fabric::rows(&args.interfaces));
        rows
    };
    let report = Report {
        os: std::env::consts::OS,
        out,
        rows,
    };
    let table = render(&report.rows);
    cap.save("report.txt", table.as_bytes())?;
    cap.save(
        "report.json",
        serde_json::to_string_pretty(&report)
            .map_err(io::Error::other)?
            .as_bytes(),
    )?;
    w.write_all(table.as_bytes())?;
    writeln!(w, "captures: {}", report.out.display())?;
    Ok(report)
}

/// A datagram to ourselves over loopback through the STAMP receive path:
/// a kernel RX stamp arrives where the OS has them, and lies between two
/// reads of the probe clock taken before the send and after the receive.
fn kernel_timestamps() -> Row {
    use crate::stamp::imp as ts;
    let clock = ts::CLOCK.as_str_name();
    let res = ts::clock_resolution_ns();
    let mut row = Row {
        source: "kernel_timestamps",
        subject: "loopback datagram".into(),
        agent: String::new(),
        os_tool: format!(
            "expected: {}",
            if ts::KERNEL_RX_TIMESTAMPS {
                "present"
            } else {
                "absent"
            }
        ),
        verdict: Verdict::Agree,
    };
    let probe = || -> io::Result<(u64, Option<u64>, u64)> {
        let rx = UdpSocket::bind("127.0.0.1:0")?;
        ts::enable_rx_metadata(&rx)?;
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
        let tx = UdpSocket::bind("127.0.0.1:0")?;
        let before = ts::now_ns();
        tx.send_to(b"doctor", rx.local_addr()?)?;
        let mut buf = [0u8; 64];
        let got = ts::recv(&rx, &mut buf, false)?;
        Ok((before, got.kernel_rx_unix_ns, ts::now_ns()))
    };
    match probe() {
        Err(e) => {
            row.agent = format!("error: {e}");
            row.verdict = Verdict::Disagree("the receive path failed".into());
        }
        Ok((before, stamp, after)) => {
            row.agent = match stamp {
                Some(_) => format!("present ({clock}, {res} ns)"),
                None => format!("absent ({clock})"),
            };
            row.verdict = match stamp {
                Some(s) if !(before..=after).contains(&s) => Verdict::Disagree(format!(
                    "stamp {s} outside the probe clock's {before}..{after}"
                )),
                Some(_) if ts::KERNEL_RX_TIMESTAMPS => Verdict::Agree,
                None if !ts::KERNEL_RX_TIMESTAMPS => Verdict::Agree,
                _ => Verdict::Disagree("presence differs from what this OS promises".into()),
            };
        }
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_pads_columns_and_names_verdicts() {
        let rows = vec![
            Row {
                source: "link",
                subject: "tb1".into(),
                agent: "carrier up".into(),
                os_tool: "ip: LOWER_UP".into(),
                verdict: Verdict::Agree,
            },
            Row {
                source: "counters",
                subject: "mgmt0".into(),
                agent: "rx 1 B".into(),
                os_tool: "ip -s".into(),
                verdict: Verdict::Disagree("rx_bytes 1 outside 2..3".into()),
            },
        ];
        let t = render(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("SOURCE    SUBJECT  AGENT       OS TOOL       VERDICT"));
        assert!(lines[1].ends_with("agree"));
        assert!(lines[2].ends_with("DISAGREE: rx_bytes 1 outside 2..3"));
        let report = Report {
            os: "linux",
            out: PathBuf::from("x"),
            rows,
        };
        assert_eq!(report.disagreements(), 1);
        let j = serde_json::to_value(&report).unwrap();
        assert_eq!(j["rows"][1]["verdict"]["verdict"], "disagree");
    }

    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn kernel_timestamps_are_present_here() {
        let row = kernel_timestamps();
        assert_eq!(row.verdict, Verdict::Agree, "{row:?}");
        assert!(row.agent.starts_with("present"), "{row:?}");
    }
}
