//! Linux checks of `doctor`: carrier and counters against `ip -s -j link`
//! (netlink, not sysfs), temperatures against the raw sysfs files. The
//! sysfs files the agent read are copied under `sys/` in the captures, so
//! `SysfsCounters`/`SysfsThermal` can be pointed at the folder later.

use std::fs;
use std::path::Path;

use super::compare::{self, Counts, IpLink};
use super::{show, tool, Captures, Row, Verdict};
use crate::counters::{CounterSource, SysfsCounters};
use crate::thermal::{parse_millidegrees, plausible, SysfsThermal, ThermalSource};

const SYS: &str = "/sys";

/// Files of `class/net/<if>` the counters reader looks at.
const NET_FILES: [&str; 15] = [
    "carrier",
    "operstate",
    "mtu",
    "speed",
    "type",
    "carrier_up_count",
    "carrier_down_count",
    "statistics/rx_bytes",
    "statistics/tx_bytes",
    "statistics/rx_packets",
    "statistics/tx_packets",
    "statistics/rx_errors",
    "statistics/tx_errors",
    "statistics/rx_dropped",
    "statistics/tx_dropped",
];

/// iproute2's `ip`, wherever Debian put it (`/usr/sbin` is not on every
/// PATH).
fn ip_program() -> &'static str {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("ip")
}

fn ip_links(cap: &Captures, rel: &str) -> Result<Vec<IpLink>, String> {
    let text = tool(cap, rel, ip_program(), &["-s", "-j", "link", "show"])?;
    compare::parse_ip_links(&text).map_err(|e| format!("ip -j: {e}"))
}

pub(super) fn rows(cap: &Captures, only: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    let before = ip_links(cap, "linux/ip-s-j-link.before.json");
    let mut names = crate::discovery::names_in(&Path::new(SYS).join("class/net"));
    names.retain(|n| only.is_empty() || only.contains(n));
    let mut counters = SysfsCounters::new(Path::new(SYS));
    let ours: Vec<_> = names
        .iter()
        .map(|n| {
            for f in NET_FILES {
                cap.copy_sys(Path::new(SYS), &format!("class/net/{n}/{f}"));
            }
            counters.read(n)
        })
        .collect();
    let after = ip_links(cap, "linux/ip-s-j-link.after.json");
    for (name, read) in names.iter().zip(ours) {
        let find = |l: &Result<Vec<IpLink>, String>| -> Result<IpLink, String> {
            let l = l.as_ref().map_err(Clone::clone)?;
            l.iter()
                .find(|x| &x.name == name)
                .cloned()
                .ok_or_else(|| "not in ip's list".to_owned())
        };
        let (b, a) = match (find(&before), find(&after)) {
            (Ok(b), Ok(a)) => (b, a),
            (Err(e), _) | (_, Err(e)) => {
                for source in ["link", "counters"] {
                    rows.push(Row {
                        source,
                        subject: name.clone(),
                        agent: String::new(),
                        os_tool: "ip -s -j link".into(),
                        verdict: Verdict::Unavailable(e.clone()),
                    });
                }
                continue;
            }
        };
        let read = read.map_err(|e| e.to_string());
        rows.push(carrier_row(name, read.as_ref().ok(), &b, &a));
        rows.push(match &read {
            Err(e) => Row {
                source: "counters",
                subject: name.clone(),
                agent: format!("error: {e}"),
                os_tool: "ip -s -j link".into(),
                verdict: Verdict::Disagree("the agent could not read them".into()),
            },
            Ok(c) => counters_row(name, &Counts::of(c), &b.counts, &a.counts),
        });
    }
    rows.push(thermal_row(cap, Path::new(SYS)));
    rows.push(Row {
        source: "discovery",
        subject: "thunderbolt ports".into(),
        agent: "sysfs thunderbolt-net".into(),
        os_tool: "-".into(),
        verdict: Verdict::NotApplicable("system_profiler is macOS only".into()),
    });
    rows
}

fn carrier_row(
    name: &str,
    read: Option<&boltwatch_proto::v1::InterfaceCounters>,
    before: &IpLink,
    after: &IpLink,
) -> Row {
    let ours = read.and_then(|c| c.carrier_known.then_some(c.carrier));
    let (b, a) = (before.carrier(), after.carrier());
    let verdict = if b != a {
        Verdict::NotApplicable("carrier changed during the check".into())
    } else if ours == b {
        Verdict::Agree
    } else {
        Verdict::Disagree(format!("agent {} , ip {}", show(ours), show(b)))
    };
    Row {
        source: "link",
        subject: name.to_owned(),
        agent: format!("carrier {} (sysfs)", show(ours)),
        os_tool: format!("ip: carrier {} [{}]", show(b), before.flags.join(",")),
        verdict,
    }
}

fn counters_row(name: &str, ours: &Counts, before: &Counts, after: &Counts) -> Row {
    Row {
        source: "counters",
        subject: name.to_owned(),
        agent: format!(
            "rx {} B/{} pkt, tx {} B/{} pkt",
            ours.rx_bytes, ours.rx_packets, ours.tx_bytes, ours.tx_packets
        ),
        os_tool: format!(
            "ip -s: rx {}..{} B, tx {}..{} B",
            before.rx_bytes, after.rx_bytes, before.tx_bytes, after.tx_bytes
        ),
        verdict: match compare::counts_within(before, ours, after) {
            Ok(()) => Verdict::Agree,
            Err(e) => Verdict::Disagree(e),
        },
    }
}

/// Every temperature file the sysfs reader looks at (`thermal_zone*/temp`,
/// `hwmon*/temp*_input`), read raw and copied into the captures.
fn raw_temps(cap: &Captures, sys: &Path) -> Vec<f64> {
    let mut out = Vec::new();
    for (dir, prefix, files) in [
        ("class/thermal", "thermal_zone", &["type", "temp"][..]),
        ("class/hwmon", "hwmon", &["name"][..]),
    ] {
        let Ok(entries) = fs::read_dir(sys.join(dir)) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with(prefix) {
                continue;
            }
            let rel = format!("{dir}/{name}");
            let mut inputs: Vec<String> = files.iter().map(|f| (*f).to_owned()).collect();
            if let Ok(files) = fs::read_dir(e.path()) {
                inputs.extend(
                    files
                        .filter_map(Result::ok)
                        .map(|f| f.file_name().to_string_lossy().into_owned())
                        .filter(|f| f.starts_with("temp") && f != "temp"),
                );
            }
            for f in &inputs {
                cap.copy_sys(sys, &format!("{rel}/{f}"));
                if f == "temp" || f.ends_with("_input") {
                    if let Some(c) = fs::read_to_string(e.path().join(f))
                        .ok()
                        .and_then(|t| parse_millidegrees(&t))
                    {
                        out.push(c);
                    }
                }
            }
        }
    }
    out
}

/// The agent's sysfs thermal reader at `sys` against the raw files there.
fn thermal_row(cap: &Captures, sys: &Path) -> Row {
    // The agent drops readings outside its sanity range on purpose (0 C
    // from an idle sensor, 130 C from a broken one): those are counted,
    // not compared.
    let (raw, filtered): (Vec<f64>, Vec<f64>) =
        raw_temps(cap, sys).into_iter().partition(|c| plausible(*c));
    let ours: Vec<f64> = SysfsThermal::new(sys)
        .read()
        .map(|r| r.sensors.iter().map(|s| s.celsius).collect())
        .unwrap_or_default();
    let unmatched = compare::unmatched_temps(&raw, &ours, 2.0);
    Row {
        source: "thermal",
        subject: "sysfs sensors".into(),
        agent: format!("{} sensors", ours.len()),
        os_tool: format!(
            "raw sysfs: {} readings, {} outside the sanity range",
            raw.len(),
            filtered.len()
        ),
        verdict: if raw.is_empty() && ours.is_empty() && filtered.is_empty() {
            Verdict::NotApplicable("no temperature sensor on this host".into())
        } else if unmatched.is_empty() {
            Verdict::Agree
        } else {
            Verdict::Disagree(format!("no agent sensor within 2 C of {unmatched:?}"))
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_sys() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sys")
    }

    /// The hwmon fixture tree: the raw files and the agent's reader agree
    /// once the reader's filter is allowed for, and the copy mirrors sysfs.
    #[test]
    fn thermal_row_against_the_fixture_tree() {
        let dir = tempfile::tempdir().unwrap();
        let cap = Captures {
            root: dir.path().to_path_buf(),
        };
        let row = thermal_row(&cap, &fixture_sys());
        assert_eq!(row.verdict, Verdict::Agree, "{row:?}");
        assert_eq!(row.agent, "9 sensors");
        assert_eq!(
            row.os_tool,
            "raw sysfs: 9 readings, 2 outside the sanity range"
        );
        let copied = dir.path().join("sys/class/hwmon/hwmon0/temp1_input");
        assert_eq!(
            fs::read(copied).unwrap(),
            fs::read(fixture_sys().join("class/hwmon/hwmon0/temp1_input")).unwrap()
        );
    }

    /// A zone reading 0 C: the agent drops it, the row counts it and
    /// compares the rest.
    #[test]
    fn readings_outside_the_sanity_range_are_counted_not_compared() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys");
        for (zone, milli) in [("thermal_zone0", "45000"), ("thermal_zone1", "0")] {
            let z = sys.join("class/thermal").join(zone);
            fs::create_dir_all(&z).unwrap();
            fs::write(z.join("type"), format!("{zone}_type\n")).unwrap();
            fs::write(z.join("temp"), format!("{milli}\n")).unwrap();
        }
        let cap = Captures {
            root: dir.path().join("out"),
        };
        let row = thermal_row(&cap, &sys);
        assert_eq!(row.verdict, Verdict::Agree, "{row:?}");
        assert_eq!(row.agent, "1 sensors");
        assert_eq!(row.os_tool, "raw sysfs: 1 readings, 1 outside the sanity range");
        assert!(dir.path().join("out/sys/class/thermal/thermal_zone1/temp").is_file());
    }
}
