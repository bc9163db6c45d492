//! macOS checks of `doctor`: carrier from `SIOCGIFMEDIA` against
//! `ifconfig -v`, the interface MIB counters against `netstat -ibn` read
//! before and after, temperatures against `powermetrics --samplers smc`
//! (root only; "not checkable" on Apple silicon, which has no such
//! sampler), the pressure level against `powermetrics --samplers thermal`
//! (root only), and the Thunderbolt ports of the agent's system_profiler
//! parser against the raw JSON. Every tool output lands under `macos/` in
//! the captures, named as `agent/tests/fixtures/macos/` names them.

use std::os::fd::AsFd;
use std::path::Path;

use boltwatch_proto::throttle::pressure_throttled;

use super::compare::{self, Counts};
use super::{show, tool, Captures, Row, Verdict};
use crate::counters::{CounterSource, MibCounters};
use crate::discovery::parse::parse_system_profiler_thunderbolt;
use crate::platform::{macos, xnu};
use crate::thermal::default_source;
use crate::thermal::smc::{sensor_group, Group};

fn netstat(cap: &Captures, rel: &str) -> Result<std::collections::BTreeMap<String, Counts>, String> {
    tool(cap, rel, "/usr/sbin/netstat", &["-ibn"]).map(|t| compare::parse_netstat_ibn(&t))
}

pub(super) fn rows(cap: &Captures, only: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    let list = tool(cap, "macos/ifconfig-l.txt", "/sbin/ifconfig", &["-l"]).unwrap_or_default();
    let mut names: Vec<String> = list.split_whitespace().map(str::to_owned).collect();
    names.retain(|n| only.is_empty() || only.contains(n));
    let ifconfig = tool(cap, "macos/ifconfig-v-a.txt", "/sbin/ifconfig", &["-v", "-a"]);
    let before = netstat(cap, "macos/netstat-ibn.before.txt");
    let sock = macos::ioctl_socket();
    let mut mib = MibCounters::new();
    let ours: Vec<_> = names.iter().map(|n| mib.read(n)).collect();
    let after = netstat(cap, "macos/netstat-ibn.after.txt");
    for (name, read) in names.iter().zip(ours) {
        let media = sock
            .as_ref()
            .ok()
            .and_then(|s| macos::media_status(s.as_fd(), name).ok());
        let agent = xnu::carrier_from_media(media);
        rows.push(match &ifconfig {
            Err(e) => unavailable("link", name, "ifconfig -v", e),
            Ok(text) => {
                let os = compare::ifconfig_status(text, name);
                Row {
                    source: "link",
                    subject: name.clone(),
                    agent: format!("carrier {} (SIOCGIFMEDIA)", show(agent)),
                    os_tool: format!("ifconfig -v: status {}", show(os)),
                    verdict: if agent == os {
                        Verdict::Agree
                    } else {
                        Verdict::Disagree(format!("agent {}, ifconfig {}", show(agent), show(os)))
                    },
                }
            }
        });
        let (b, a) = match (&before, &after) {
            (Ok(b), Ok(a)) => (b.get(name), a.get(name)),
            (Err(e), _) | (_, Err(e)) => {
                rows.push(unavailable("counters", name, "netstat -ibn", e));
                continue;
            }
        };
        rows.push(match (read, b, a) {
            (Err(e), _, _) => Row {
                source: "counters",
                subject: name.clone(),
                agent: format!("error: {e}"),
                os_tool: "netstat -ibn".into(),
                verdict: Verdict::Disagree("the agent could not read them".into()),
            },
            (Ok(_), None, _) | (Ok(_), _, None) => {
                unavailable("counters", name, "netstat -ibn", "no <Link#> row")
            }
            (Ok(c), Some(b), Some(a)) => {
                let ours = Counts::of(&c);
                Row {
                    source: "counters",
                    subject: name.clone(),
                    agent: format!("rx {} B, tx {} B (if MIB)", ours.rx_bytes, ours.tx_bytes),
                    os_tool: format!(
                        "netstat -ibn: rx {}..{} B, tx {}..{} B",
                        b.rx_bytes, a.rx_bytes, b.tx_bytes, a.tx_bytes
                    ),
                    verdict: match compare::counts_within(b, &ours, a) {
                        Ok(()) => Verdict::Agree,
                        Err(e) => Verdict::Disagree(e),
                    },
                }
            }
        });
    }
    rows.extend(thermal_rows(cap));
    rows.push(discovery_row(cap));
    rows.push(sleep_row(cap));
    rows
}

fn unavailable(source: &'static str, subject: &str, tool: &str, why: &str) -> Row {
    Row {
        source,
        subject: subject.to_owned(),
        agent: String::new(),
        os_tool: tool.to_owned(),
        verdict: Verdict::Unavailable(why.to_owned()),
    }
}

/// What `powermetrics` gave for the thermal rows: run once per sampler,
/// since one unknown sampler (smc on Apple silicon) fails the whole run.
fn powermetrics(cap: &Captures, sampler: &str) -> Result<String, String> {
    // powermetrics refuses anyone but root, and says so: that message is
    // the row's reason.
    tool(
        cap,
        &format!("macos/powermetrics-{sampler}.txt"),
        "/usr/bin/powermetrics",
        &["--samplers", sampler, "-i", "1", "-n", "1"],
    )
}

fn verdict(c: compare::Check) -> Verdict {
    match c {
        compare::Check::Pass => Verdict::Agree,
        compare::Check::Fail(w) => Verdict::Disagree(w),
        compare::Check::NotCheckable(w) => Verdict::NotApplicable(w),
    }
}

/// The agent's hottest CPU sensor against powermetrics' CPU die
/// temperature (Intel), and its pressure level against powermetrics'
/// (every Mac). The agent reads the SMC core keys (`smc_Tp*`...), falling
/// back to IOHID, whose readings public reports put 8-10 C under the
/// SMC's: the temperature row shows which one a Mac gave. On Apple
/// silicon powermetrics prints no die temperature at all, so that row is
/// "not checkable" with the reason, never a silent pass.
fn thermal_rows(cap: &Captures) -> [Row; 2] {
    let reading = default_source(Path::new("/sys")).read().ok();
    let ours = reading.as_ref().map(|r| r.sensors.as_slice()).unwrap_or_default();
    let level = reading.as_ref().and_then(|r| r.throttle.as_ref()).map(|t| t.pressure_level);
    let cpu_ours = ours
        .iter()
        .filter(|s| {
            s.name.to_ascii_lowercase().contains("cpu")
                || sensor_group(&s.name) == Some(Group::Cpu)
        })
        .map(|s| s.celsius)
        .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))));
    let smc = powermetrics(cap, "smc");
    let temperature = Row {
        source: "thermal",
        subject: "CPU temperature".into(),
        agent: format!(
            "{} sensors, CPU max {}",
            ours.len(),
            cpu_ours.map_or("-".into(), |c| format!("{c:.1} C"))
        ),
        os_tool: match &smc {
            Ok(t) => format!("powermetrics smc: {:?}", compare::parse_powermetrics_temps(t)),
            Err(_) => "powermetrics --samplers smc".into(),
        },
        verdict: verdict(compare::cpu_temperature_check(
            smc.as_deref().map_err(String::as_str),
            cpu_ours,
        )),
    };
    let thermal = powermetrics(cap, "thermal");
    let pressure = Row {
        source: "thermal",
        subject: "pressure level".into(),
        agent: level.map_or("none read (notify)".into(), |l| {
            format!("{} (notify, throttled: {})", compare::pressure_name(l), pressure_throttled(l))
        }),
        os_tool: match thermal.as_deref().map(compare::parse_powermetrics_pressure) {
            Ok(Ok(Some(l))) => format!("powermetrics thermal: {}", compare::pressure_name(l)),
            _ => "powermetrics --samplers thermal".into(),
        },
        verdict: verdict(compare::pressure_check(
            thermal.as_deref().map_err(String::as_str),
            level,
        )),
    };
    [temperature, pressure]
}

/// Whether a running agent holds its `prevent_sleep` assertion, from
/// `pmset -g assertions`.
fn sleep_row(cap: &Captures) -> Row {
    // Captured for the fixtures; the settings are judged by the fabric
    // rows (`sleep_disabled`, `autorestart_enabled`, ...).
    let _ = tool(cap, "macos/pmset-g.txt", "/usr/bin/pmset", &["-g"]);
    let assertions = tool(cap, "macos/pmset-g-assertions.txt", "/usr/bin/pmset", &["-g", "assertions"]);
    let held = assertions
        .as_ref()
        .is_ok_and(|a| a.contains(crate::power::ASSERTION_NAME));
    let agent = format!(
        "prevent_sleep assertion {}",
        if held { "held" } else { "not held (prevent_sleep off or agent stopped)" }
    );
    let (os_tool, verdict) = match assertions {
        Ok(_) => ("pmset -g assertions".to_string(), Verdict::Agree),
        Err(e) => ("pmset -g assertions".to_string(), Verdict::Unavailable(e)),
    };
    Row {
        source: "power",
        subject: "sleep".into(),
        agent,
        os_tool,
        verdict,
    }
}

/// Connected Thunderbolt ports: the agent's parser against a count taken
/// straight from the JSON, plus the peers the parser found, for the eye.
fn discovery_row(cap: &Captures) -> Row {
    let _ = tool(
        cap,
        "macos/system_profiler/SPThunderboltDataType.txt",
        "/usr/sbin/system_profiler",
        &["SPThunderboltDataType"],
    );
    let _ = tool(
        cap,
        "macos/system_profiler/networksetup_listallhardwareports.txt",
        "/usr/sbin/networksetup",
        &["-listallhardwareports"],
    );
    let json = tool(
        cap,
        "macos/system_profiler/SPThunderboltDataType.json",
        "/usr/sbin/system_profiler",
        &["SPThunderboltDataType", "-json"],
    );
    let mut row = Row {
        source: "discovery",
        subject: "thunderbolt ports".into(),
        agent: String::new(),
        os_tool: String::new(),
        verdict: Verdict::Agree,
    };
    let json = match json {
        Ok(j) => j,
        Err(e) => {
            row.verdict = Verdict::Unavailable(e);
            return row;
        }
    };
    let raw = compare::profiler_connected_ports(&json);
    row.os_tool = format!("system_profiler: {} connected", raw.map_or("?".into(), |n| n.to_string()));
    match parse_system_profiler_thunderbolt(&json) {
        Err(e) => row.verdict = Verdict::Disagree(format!("the agent's parser failed: {e}")),
        Ok(ports) => {
            let connected = ports.iter().filter(|p| p.connected).count();
            let peers: Vec<String> = ports
                .iter()
                .flat_map(|p| &p.peers)
                .map(|p| p.mac_model().unwrap_or(&p.name).to_owned())
                .collect();
            row.agent = format!("{connected} connected, peers {peers:?}");
            if raw != Some(connected) {
                row.verdict = Verdict::Disagree(format!("agent {connected}, raw {raw:?}"));
            }
        }
    }
    row
}
