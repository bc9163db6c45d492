//! The serving process itself (the collector's, or the agent's with
//! `--metrics-listen`): the standard `process_*` families every Prometheus
//! client library exports (the names dashboards and the node-mixin
//! already know). Each binary declares its own `build_info` beside them.
//!
//! On Linux the HTTP handler reads `/proc/self/{stat,status,limits,fd}`
//! and `/proc/stat` at each scrape ([`read_self`], the only I/O here) and
//! hands the snapshot in; the parsers are pure and unit-tested. Reading
//! procfs directly costs four small reads per scrape and no dependency
//! (the `procfs` crate would bring far more than six numbers need). On
//! macOS (and any other OS) [`read_self`] returns `None`: the `process_*`
//! families are declared with no samples.

use crate::domain::{Domain, Snapshot, Subjects};
use crate::family::{families, labels, Exposition};

families! {
    CPU_SECONDS = Counter("process_cpu_seconds_total", "seconds", labels::NONE, "Total user and system CPU time spent in seconds.");
    RESIDENT = Gauge("process_resident_memory_bytes", "bytes", labels::NONE, "Resident memory size in bytes.");
    VIRTUAL = Gauge("process_virtual_memory_bytes", "bytes", labels::NONE, "Virtual memory size in bytes.");
    START_TIME = Gauge("process_start_time_seconds", "seconds", labels::NONE, "Start time of the process since unix epoch in seconds.");
    OPEN_FDS = Gauge("process_open_fds", "", labels::NONE, "Number of open file descriptors.");
    MAX_FDS = Gauge("process_max_fds", "", labels::NONE, "Maximum number of open file descriptors.");
    THREADS = Gauge("process_threads", "", labels::NONE, "Number of OS threads in the process.");
}

/// One reading of the process, as the `process_*` families show it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU, seconds.
    pub cpu_seconds: f64,
    /// Resident set, bytes.
    pub resident_bytes: u64,
    /// Virtual size, bytes.
    pub virtual_bytes: u64,
    /// Unix seconds.
    pub start_time_seconds: f64,
    /// Open descriptors.
    pub open_fds: u64,
    /// Soft limit on descriptors.
    pub max_fds: u64,
    /// OS threads.
    pub threads: u64,
}

/// `(utime + stime, starttime)` in clock ticks from `/proc/self/stat`.
/// The command name (field 2) may hold spaces and parentheses, so fields
/// are counted after its last `)`.
pub fn parse_stat(text: &str) -> Option<(u64, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3, so field n is f[n - 3].
    let num = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some((num(14)? + num(15)?, num(22)?))
}

/// A `Key:   N kB` line of `/proc/self/status`, in bytes (or the bare
/// number for unitless keys such as `Threads`).
pub fn status_value(text: &str, key: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.strip_prefix(key).is_some_and(|r| r.starts_with(':')))?;
    let mut words = line[key.len() + 1..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    Some(match words.next() {
        Some("kB") => n * 1024,
        _ => n,
    })
}

/// The soft "Max open files" of `/proc/self/limits`.
pub fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `btime` (boot time, unix seconds) of `/proc/stat`.
pub fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

/// Reads this process's figures from procfs.
#[cfg(target_os = "linux")]
pub fn read_self() -> Option<ProcessStats> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    // USER_HZ, the unit of /proc's tick counts, is 100 on every Linux
    // architecture the agent and collector build for (x86_64, aarch64);
    // the kernel fixes it for userspace whatever CONFIG_HZ is.
    let ticks = 100.0;
    let (cpu, start) = parse_stat(&read("/proc/self/stat")?)?;
    let status = read("/proc/self/status")?;
    let btime = boot_time(&read("/proc/stat")?)?;
    Some(ProcessStats {
        cpu_seconds: cpu as f64 / ticks,
        resident_bytes: status_value(&status, "VmRSS").unwrap_or(0),
        virtual_bytes: status_value(&status, "VmSize").unwrap_or(0),
        start_time_seconds: btime as f64 + start as f64 / ticks,
        open_fds: std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64),
        max_fds: read("/proc/self/limits")
            .as_deref()
            .and_then(max_open_files)
            .unwrap_or(0),
        threads: status_value(&status, "Threads").unwrap_or(0),
    })
}

/// No procfs: no `process_*` samples.
#[cfg(not(target_os = "linux"))]
pub fn read_self() -> Option<ProcessStats> {
    None
}

/// State behind the process families: the latest reading.
pub type ProcessMetrics = Snapshot<Option<ProcessStats>>;

impl Domain for ProcessMetrics {
    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let s = self.get().iter();
        let none = labels::NONE;
        e.family(&CPU_SECONDS, s.clone().map(|s| (none, s.cpu_seconds)));
        e.family(&RESIDENT, s.clone().map(|s| (none, s.resident_bytes)));
        e.family(&VIRTUAL, s.clone().map(|s| (none, s.virtual_bytes)));
        e.family(&START_TIME, s.clone().map(|s| (none, s.start_time_seconds)));
        e.family(&OPEN_FDS, s.clone().map(|s| (none, s.open_fds)));
        e.family(&MAX_FDS, s.clone().map(|s| (none, s.max_fds)));
        e.family(&THREADS, s.map(|s| (none, s.threads)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_counted_after_the_command_name() {
        let stat = "15174 (a ) b) R 15159 15159 9195 0 -1 4194304 120 0 0 0 7 5 0 0 20 0 1 0 469091 3133440 360";
        assert_eq!(parse_stat(stat), Some((12, 469091)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn status_limits_and_btime() {
        let status = "Name:\tx\nVmSize:\t    3892 kB\nVmRSS:\t    2144 kB\nThreads:\t3\n";
        assert_eq!(status_value(status, "VmRSS"), Some(2144 * 1024));
        assert_eq!(status_value(status, "VmSize"), Some(3892 * 1024));
        assert_eq!(status_value(status, "Threads"), Some(3));
        assert_eq!(status_value(status, "Vm"), None);
        let limits = "Limit  Soft Limit Hard Limit Units\nMax open files            20000                40000                files\n";
        assert_eq!(max_open_files(limits), Some(20000));
        assert_eq!(boot_time("cpu 1 2\nbtime 1796027524\n"), Some(1796027524));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_test_process() {
        let s = read_self().expect("procfs");
        assert!(s.resident_bytes > 0 && s.virtual_bytes >= s.resident_bytes);
        assert!(s.threads >= 1 && s.open_fds >= 3 && s.max_fds >= s.open_fds);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started before now, after the machine booted (a year bounds it).
        assert!(s.start_time_seconds <= now + 1.0 && s.start_time_seconds > now - 3e7);
    }
}
