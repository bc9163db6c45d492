//! The collector's and this process' CPU time and memory, from /proc.

use super::BoxError;

/// utime + stime of every thread of `pid`, in clock ticks.
pub fn cpu_ticks(pid: u32) -> Result<u64, BoxError> {
    stat_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat"))?)
}

pub fn cpu_ticks_self() -> Result<u64, BoxError> {
    stat_ticks(&std::fs::read_to_string("/proc/self/stat")?)
}

/// Fields 14 and 15 of /proc/PID/stat; the command name (field 2) may hold
/// spaces, so count from its closing parenthesis.
fn stat_ticks(stat: &str) -> Result<u64, BoxError> {
    let rest = stat.rsplit_once(')').ok_or("no ) in stat")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3, so utime (14) is index 11.
    Ok(f.get(11).ok_or("short stat")?.parse::<u64>()?
        + f.get(12).ok_or("short stat")?.parse::<u64>()?)
}

/// (VmRSS, VmHWM) of `pid` in KiB.
pub fn proc_memory(pid: u32) -> Result<(u64, u64), BoxError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64, BoxError> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .ok_or_else(|| format!("no {name} in /proc/{pid}/status"))?;
        Ok(line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()?)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// USER_HZ, the unit of /proc's CPU times.
pub fn clock_ticks_per_second() -> Result<f64, BoxError> {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()?;
    Ok(String::from_utf8(out.stdout)?.trim().parse()?)
}
