//! Pure parts of `doctor`: parsers of what the OS's own tools print, and
//! the comparisons of those values with the agent's. No I/O.

use std::collections::BTreeMap;

use boltwatch_proto::v1::InterfaceCounters;
use serde::Serialize;
use serde_json::Value;

/// The byte, packet, error and drop counters of one interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Send errors.
    pub tx_errors: u64,
}

impl Counts {
    /// The agent's counters record, reduced to what every tool prints.
    pub fn of(c: &InterfaceCounters) -> Counts {
        Counts {
            rx_bytes: c.receive_bytes,
            tx_bytes: c.transmit_bytes,
            rx_packets: c.receive_packets,
            tx_packets: c.transmit_packets,
            rx_errors: c.receive_errors,
            tx_errors: c.transmit_errors,
        }
    }

    fn named(&self) -> [(&'static str, u64); 6] {
        [
            ("rx_bytes", self.rx_bytes),
            ("tx_bytes", self.tx_bytes),
            ("rx_packets", self.rx_packets),
            ("tx_packets", self.tx_packets),
            ("rx_errors", self.rx_errors),
            ("tx_errors", self.tx_errors),
        ]
    }
}

/// The agent read its counters between two reads of the OS tool, and
/// counters only grow: every agent value must lie within the tool's
/// before..after. `Err` names the first that does not.
pub fn counts_within(before: &Counts, ours: &Counts, after: &Counts) -> Result<(), String> {
    for ((name, b), ((_, o), (_, a))) in before
        .named()
        .into_iter()
        .zip(ours.named().into_iter().zip(after.named()))
    {
        if o < b || o > a {
            return Err(format!("{name} {o} outside the tool's {b}..{a}"));
        }
    }
    Ok(())
}

/// One interface from `ip -s -j link show`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpLink {
    /// `ifname`.
    pub name: String,
    /// `flags`: `UP`, `LOWER_UP`, `NO-CARRIER`, ...
    pub flags: Vec<String>,
    /// `operstate`.
    pub operstate: String,
    /// `stats64`.
    pub counts: Counts,
}

impl IpLink {
    /// The carrier as `ip` shows it: `LOWER_UP` (`IFF_LOWER_UP`), known
    /// only while the interface is administratively up.
    pub fn carrier(&self) -> Option<bool> {
        let has = |f: &str| self.flags.iter().any(|x| x == f);
        has("UP").then(|| has("LOWER_UP"))
    }
}

/// Parses `ip -s -j link show`.
pub fn parse_ip_links(json: &str) -> Result<Vec<IpLink>, serde_json::Error> {
    let v: Vec<Value> = serde_json::from_str(json)?;
    let num = |v: &Value, dir: &str, key: &str| {
        v.pointer(&format!("/stats64/{dir}/{key}"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Ok(v.iter()
        .map(|l| IpLink {
            name: l["ifname"].as_str().unwrap_or_default().to_owned(),
            flags: l["flags"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            operstate: l["operstate"].as_str().unwrap_or_default().to_owned(),
            counts: Counts {
                rx_bytes: num(l, "rx", "bytes"),
                tx_bytes: num(l, "tx", "bytes"),
                rx_packets: num(l, "rx", "packets"),
                tx_packets: num(l, "tx", "packets"),
                rx_errors: num(l, "rx", "errors"),
                tx_errors: num(l, "tx", "errors"),
            },
        })
        .collect())
}

/// The `status:` of `iface` in `ifconfig -v -a` output: `active` is
/// carrier up, `inactive` down; `None` when the interface prints no
/// status (loopback, tunnels) or is absent.
pub fn ifconfig_status(text: &str, iface: &str) -> Option<bool> {
    let mut inside = false;
    for line in text.lines() {
        if !line.starts_with(char::is_whitespace) {
            inside = line.split(':').next() == Some(iface);
            continue;
        }
        if inside {
            if let Some(s) = line.trim().strip_prefix("status:") {
                return match s.trim() {
                    "active" => Some(true),
                    "inactive" => Some(false),
                    _ => None,
                };
            }
        }
    }
    None
}

/// The link-level rows (`<Link#N>`) of `netstat -ibn`, by interface name
/// (a trailing `*`, printed for interfaces that are down, removed). The
/// numbers are taken from the right, since `Address` is empty on some
/// rows: `Ipkts Ierrs Ibytes Opkts Oerrs Obytes Coll`.
pub fn parse_netstat_ibn(text: &str) -> BTreeMap<String, Counts> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        if t.len() < 10 || !t[2].starts_with("<Link#") {
            continue;
        }
        let n: Vec<Option<u64>> = t[t.len() - 7..].iter().map(|x| x.parse().ok()).collect();
        let (Some(ipk), Some(ierr), Some(ib), Some(opk), Some(oerr), Some(ob)) =
            (n[0], n[1], n[2], n[3], n[4], n[5])
        else {
            continue;
        };
        out.entry(t[0].trim_end_matches('*').to_owned())
            .or_insert(Counts {
                rx_bytes: ib,
                tx_bytes: ob,
                rx_packets: ipk,
                tx_packets: opk,
                rx_errors: ierr,
                tx_errors: oerr,
            });
    }
    out
}

/// `(label, celsius)` of every `... temperature: N C` line, as
/// `powermetrics --samplers smc` prints them ("CPU die temperature: 47.61
/// C").
pub fn parse_powermetrics_temps(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| {
            let (label, rest) = l.split_once(':')?;
            if !label.to_ascii_lowercase().contains("temperature") {
                return None;
            }
            let c = rest.trim().strip_suffix('C')?.trim().parse::<f64>().ok()?;
            Some((label.trim().to_owned(), c))
        })
        .collect()
}

/// How a check that may be impossible on this machine came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The agent and the tool agree.
    Pass,
    /// They differ; says how.
    Fail(String),
    /// Nothing independent to compare with here; says why.
    NotCheckable(String),
}

/// Tolerance between the agent's hottest CPU sensor and powermetrics' CPU
/// die temperature (two reads a second apart on a busy die).
pub const CPU_TEMPERATURE_TOLERANCE: f64 = 5.0;

/// The agent's hottest CPU temperature against what `powermetrics
/// --samplers smc` gave: its output, or why it failed (the first line of
/// its stderr included). Intel Macs print "CPU die temperature"; Apple
/// silicon has no `smc` sampler ("unrecognized sampler: smc") and prints
/// no die temperature in any sampler, so there the check is not possible
/// rather than passed or failed.
pub fn cpu_temperature_check(
    powermetrics: Result<&str, &str>,
    agent_cpu_max: Option<f64>,
) -> Check {
    let text =
        match powermetrics {
            Ok(t) => t,
            // "powermetrics: unrecognized sampler: smc" (spelt differently in
            // some reports, hence the tail only).
            Err(e) if e.contains("sampler: smc") => return Check::NotCheckable(
                "powermetrics has no SMC sampler on Apple silicon and prints no die temperature"
                    .into(),
            ),
            Err(e) => return Check::NotCheckable(e.to_owned()),
        };
    let temps = parse_powermetrics_temps(text);
    let Some((_, tool)) = temps.iter().find(|(l, _)| l.starts_with("CPU")) else {
        return Check::NotCheckable("powermetrics printed no CPU die temperature".into());
    };
    match agent_cpu_max {
        None => Check::Fail(format!(
            "the agent found no CPU sensor; powermetrics {tool:.1} C"
        )),
        Some(c) if (c - tool).abs() <= CPU_TEMPERATURE_TOLERANCE => Check::Pass,
        Some(c) => Check::Fail(format!("agent {c:.1} C, SMC {tool:.1} C")),
    }
}

/// The macOS pressure levels by the names powermetrics' `thermal` sampler
/// prints ("Current pressure level: Nominal"), in notify(3) order
/// (`OSThermalNotification.h`).
pub const PRESSURE_NAMES: [&str; 5] = ["Nominal", "Moderate", "Heavy", "Trapping", "Sleeping"];

/// The level of the last "Current pressure level: NAME" line, as its
/// notify(3) number; `Err` names what was printed when it is no level this
/// table knows, `Ok(None)` when there is no such line.
pub fn parse_powermetrics_pressure(text: &str) -> Result<Option<u32>, String> {
    let Some(name) = text
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("Current pressure level:"))
        .map(str::trim)
    else {
        return Ok(None);
    };
    PRESSURE_NAMES
        .iter()
        .position(|n| n.eq_ignore_ascii_case(name))
        .map(|i| Some(i as u32))
        .ok_or_else(|| format!("unknown pressure level {name:?}"))
}

/// The name of a pressure level for the table.
pub fn pressure_name(level: u32) -> String {
    PRESSURE_NAMES
        .get(level as usize)
        .map_or_else(|| format!("level {level}"), |n| (*n).to_owned())
}

/// The agent's notify(3) pressure level against powermetrics' `thermal`
/// sampler, which exists on Intel and Apple silicon alike. The level can
/// change between the two reads; a difference is reported, not smoothed.
pub fn pressure_check(powermetrics: Result<&str, &str>, agent: Option<u32>) -> Check {
    let text = match powermetrics {
        Ok(t) => t,
        Err(e) => return Check::NotCheckable(e.to_owned()),
    };
    let tool = match parse_powermetrics_pressure(text) {
        Ok(Some(l)) => l,
        Ok(None) => return Check::NotCheckable("powermetrics printed no pressure level".into()),
        Err(e) => return Check::NotCheckable(e),
    };
    match agent {
        None => Check::Fail(format!(
            "the agent read no pressure level; powermetrics {}",
            pressure_name(tool)
        )),
        Some(a) if a == tool => Check::Pass,
        Some(a) => Check::Fail(format!(
            "agent {}, powermetrics {}",
            pressure_name(a),
            pressure_name(tool)
        )),
    }
}

/// Readings of one sensor set the agent could not match within `tol`
/// degrees in `ours`: temperatures drift between two reads, so a match
/// within a degree or two is the same sensor.
pub fn unmatched_temps(raw: &[f64], ours: &[f64], tol: f64) -> Vec<f64> {
    raw.iter()
        .copied()
        .filter(|r| !ours.iter().any(|o| (o - r).abs() <= tol))
        .collect()
}

/// Connected ports in `system_profiler SPThunderboltDataType -json`,
/// counted straight from the top-level `receptacle_*_tag`s, without the
/// agent's parser.
pub fn profiler_connected_ports(json: &str) -> Option<usize> {
    let v: Value = serde_json::from_str(json).ok()?;
    let buses = v.get("SPThunderboltDataType")?.as_array()?;
    Some(
        buses
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|bus| bus.iter())
            .filter(|(k, _)| k.starts_with("receptacle_") && k.ends_with("_tag"))
            .filter(|(_, t)| t["receptacle_status_key"] == "receptacle_connected")
            .count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(n: u64) -> Counts {
        Counts {
            rx_bytes: n,
            tx_bytes: n,
            rx_packets: n,
            tx_packets: n,
            rx_errors: 0,
            tx_errors: 0,
        }
    }

    #[test]
    fn counters_must_lie_between_the_tool_reads() {
        assert!(counts_within(&c(10), &c(10), &c(10)).is_ok());
        assert!(counts_within(&c(10), &c(15), &c(20)).is_ok());
        let e = counts_within(&c(10), &c(9), &c(20)).unwrap_err();
        assert!(e.starts_with("rx_bytes 9"), "{e}");
        let mut high = c(15);
        high.tx_errors = 1;
        let e = counts_within(&c(10), &high, &c(20)).unwrap_err();
        assert!(e.starts_with("tx_errors 1 outside"), "{e}");
    }

    /// Shape of iproute2 6.1's `ip -s -j link show` on this machine.
    #[test]
    fn ip_json() {
        let j = r#"[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"operstate":"UNKNOWN",
          "stats64":{"rx":{"bytes":10,"packets":2,"errors":0,"dropped":0},"tx":{"bytes":10,"packets":2,"errors":1,"dropped":0}}},
          {"ifindex":5,"ifname":"tb1","flags":["BROADCAST","MULTICAST","UP"],"operstate":"LOWERLAYERDOWN"},
          {"ifindex":6,"ifname":"tb2","flags":["BROADCAST","MULTICAST"],"operstate":"DOWN"}]"#;
        let l = parse_ip_links(j).unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!(l[0].carrier(), Some(true));
        assert_eq!(l[0].counts.tx_errors, 1);
        assert_eq!(l[0].counts.rx_bytes, 10);
        assert_eq!(l[1].carrier(), Some(false));
        assert_eq!(l[2].carrier(), None, "admin down: unknown");
        assert!(parse_ip_links("nope").is_err());
    }

    /// A sample written to the format of macOS `ifconfig -v`.
    #[test]
    fn ifconfig_status_lines() {
        let t = "lo0: flags=8049<UP,LOOPBACK,RUNNING,MULTICAST> mtu 16384\n\tinet 127.0.0.1 netmask 0xff000000\nen2: flags=8963<UP,BROADCAST,SMART,RUNNING,PROMISC,SIMPLEX,MULTICAST> mtu 1500\n\tmedia: autoselect <full-duplex>\n\tstatus: inactive\nen3: flags=8963<UP> mtu 9000\n\tstatus: active\n";
        assert_eq!(ifconfig_status(t, "en2"), Some(false));
        assert_eq!(ifconfig_status(t, "en3"), Some(true));
        assert_eq!(ifconfig_status(t, "lo0"), None);
        assert_eq!(ifconfig_status(t, "en9"), None);
    }

    /// A sample written to the column layout of macOS `netstat -ibn`.
    #[test]
    fn netstat_link_rows() {
        let t = "Name       Mtu   Network       Address            Ipkts Ierrs     Ibytes    Opkts Oerrs     Obytes  Coll\n\
lo0        16384 <Link#1>                        1000     0     200000     1000     0     200000     0\n\
lo0        16384 127           127.0.0.1          1000     -     200000     1000     -     200000     -\n\
en2        9000  <Link#12>     36:a1:5c:00:00:01  52     1       7000       40     2       6000     0\n\
gif0*      1280  <Link#2>                           0     0          0        0     0          0     0\n";
        let m = parse_netstat_ibn(t);
        assert_eq!(m.len(), 3);
        assert_eq!(m["lo0"].rx_bytes, 200_000);
        assert_eq!(
            m["en2"],
            Counts {
                rx_bytes: 7000,
                tx_bytes: 6000,
                rx_packets: 52,
                tx_packets: 40,
                rx_errors: 1,
                tx_errors: 2
            }
        );
        assert!(m.contains_key("gif0"));
    }

    #[test]
    fn powermetrics_lines() {
        let t = "**** SMC sensors ****\n\nCPU die temperature: 47.61 C\nGPU die temperature: 41.00 C\nFan: 1200 rpm\n";
        assert_eq!(
            parse_powermetrics_temps(t),
            [
                ("CPU die temperature".to_owned(), 47.61),
                ("GPU die temperature".to_owned(), 41.0)
            ]
        );
    }

    /// Real `powermetrics` output from Apple silicon and Intel Macs
    /// (agent/tests/fixtures/macos/powermetrics/README.md says where each
    /// came from).
    fn capture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/macos/powermetrics")
            .join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn apple_silicon_temperature_is_not_checkable_and_says_why() {
        let err = capture("apple_silicon_smc.stderr.txt");
        let e = format!(
            "/usr/bin/powermetrics --samplers smc exited with exit status: 1: {}",
            err.trim()
        );
        let c = cpu_temperature_check(Err(&e), Some(52.0));
        assert!(
            matches!(&c, Check::NotCheckable(w) if w.contains("Apple silicon")),
            "{c:?}"
        );
        // The thermal sampler of an Apple silicon Mac: pressure, no die
        // temperature, whichever sampler printed it.
        let thermal = capture("m2_mac14_2_cpu_power_thermal.txt");
        assert!(parse_powermetrics_temps(&thermal).is_empty());
        let c = cpu_temperature_check(Ok(&thermal), Some(52.0));
        assert_eq!(
            c,
            Check::NotCheckable("powermetrics printed no CPU die temperature".into())
        );
        // Not root: the tool's refusal is the reason.
        let c = cpu_temperature_check(Err("powermetrics must be invoked as the superuser"), None);
        assert!(matches!(c, Check::NotCheckable(w) if w.contains("superuser")));
    }

    #[test]
    fn intel_temperature_passes_or_fails() {
        let smc = capture("intel_smc.txt");
        let temps = parse_powermetrics_temps(&smc);
        let (_, cpu) = temps
            .iter()
            .find(|(l, _)| l == "CPU die temperature")
            .unwrap();
        assert_eq!(
            cpu_temperature_check(Ok(&smc), Some(cpu + 4.0)),
            Check::Pass
        );
        assert!(matches!(
            cpu_temperature_check(Ok(&smc), Some(cpu + 6.0)),
            Check::Fail(_)
        ));
        assert!(matches!(
            cpu_temperature_check(Ok(&smc), None),
            Check::Fail(_)
        ));
    }

    #[test]
    fn pressure_levels_from_real_thermal_samplers() {
        let m2 = capture("m2_mac14_2_cpu_power_thermal.txt");
        assert_eq!(parse_powermetrics_pressure(&m2), Ok(Some(0)));
        assert_eq!(pressure_check(Ok(&m2), Some(0)), Check::Pass);
        assert_eq!(
            pressure_check(Ok(&m2), Some(2)),
            Check::Fail("agent Heavy, powermetrics Nominal".into())
        );
        assert!(matches!(pressure_check(Ok(&m2), None), Check::Fail(_)));
        let m1 = capture("m1_max_thermal.txt");
        assert_eq!(parse_powermetrics_pressure(&m1), Ok(Some(0)));
        // The names powermetrics prints for the higher levels.
        let heavy = "**** Thermal pressure ****\n\nCurrent pressure level: Heavy\n";
        assert_eq!(parse_powermetrics_pressure(heavy), Ok(Some(2)));
        assert_eq!(pressure_check(Ok(heavy), Some(2)), Check::Pass);
        assert!(parse_powermetrics_pressure("Current pressure level: Warm\n").is_err());
        assert!(matches!(
            pressure_check(Ok("Current pressure level: Warm\n"), Some(0)),
            Check::NotCheckable(w) if w.contains("Warm")
        ));
        assert!(matches!(
            pressure_check(Ok("CPU Power: 3 mW\n"), Some(0)),
            Check::NotCheckable(_)
        ));
        assert_eq!(pressure_name(1), "Moderate");
        assert_eq!(pressure_name(9), "level 9");
    }

    #[test]
    fn temperatures_match_within_tolerance() {
        assert!(unmatched_temps(&[45.0, 50.0], &[45.5, 49.2, 30.0], 1.0).is_empty());
        assert_eq!(unmatched_temps(&[45.0, 60.0], &[45.5], 1.0), [60.0]);
        assert!(unmatched_temps(&[], &[], 1.0).is_empty());
    }

    #[test]
    fn profiler_ports_counted_without_the_agent_parser() {
        let j = r#"{"SPThunderboltDataType":[
          {"receptacle_1_tag":{"receptacle_status_key":"receptacle_connected"},
           "_items":[{"receptacle_2_tag":{"receptacle_status_key":"receptacle_connected"}}]},
          {"receptacle_1_tag":{"receptacle_status_key":"receptacle_no_devices_connected"}}]}"#;
        assert_eq!(
            profiler_connected_ports(j),
            Some(1),
            "a dock's own ports are not ours"
        );
        assert_eq!(profiler_connected_ports("{}"), None);
    }
}
