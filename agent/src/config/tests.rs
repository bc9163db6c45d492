use std::path::PathBuf;
use std::time::Duration;

use boltwatch_common::config::check_table;

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    with_flags(text, &[])
}

fn with_flags(text: &str, flags: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let doc = Config::parse("agent.toml", text)?;
    Config::build(Some(&doc), &Flags::from_pairs(flags))
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn full_file_parses() {
    let c = parse(
        "node = \"a\"\ncollector = \"http://10.0.0.9:50071\"\nlisten = \"0.0.0.0:8620\"\n\
         peers = [\"b=10.0.0.2:862\"]\nprobe_interval = \"50ms\"\nsysfs_root = \"/tmp/sys\"\n",
    )
    .unwrap();
    assert_eq!(c.node, "a");
    assert_eq!(c.probe_interval, Duration::from_millis(50));
    assert_eq!(
        c.peers,
        vec![PeerConfig {
            name: "b".into(),
            addr: "10.0.0.2:862".parse().unwrap(),
            interface: None,
        }]
    );
    assert_eq!(c.sysfs_root, PathBuf::from("/tmp/sys"));
}

#[test]
fn defaults_are_the_documented_ones() {
    let c = Config::default();
    assert_eq!(c.collector, "http://127.0.0.1:50071");
    assert_eq!(c.listen, "0.0.0.0:862".parse().unwrap());
    assert_eq!(c.probe_interval, Duration::from_millis(100));
    assert_eq!(c.probe_timeout, Duration::from_secs(1));
    assert_eq!(c.sysfs_root, PathBuf::from("/sys"));
    assert_eq!(
        (c.counters_interval, c.thermal_interval),
        (Duration::from_secs(1), Duration::from_secs(5))
    );
    assert_eq!(c.spool_dir, PathBuf::from(DEFAULT_SPOOL_DIR));
    assert_eq!(c.spool_max_bytes, 1 << 30);
    assert_eq!(
        c.services,
        vec![ServiceConfig {
            name: "ssh".into(),
            port: 22
        }]
    );
    assert_eq!(c.service_interval, Duration::from_secs(5));
    assert_eq!(c.outage_after_missing, 3);
    assert!(c.bandwidth_enabled);
    assert_eq!(c.bandwidth_listen, "0.0.0.0:5202".parse().unwrap());
    assert_eq!(c.bandwidth_interval, Duration::from_secs(300));
    assert_eq!(c.bandwidth_duration, Duration::from_secs(10));
    assert_eq!((c.bandwidth_streams, c.bandwidth_duty_cycle), (4, 0.05));
    assert_eq!(
        (c.node.as_str(), c.token_file.as_ref(), c.interface.as_ref()),
        ("", None, None)
    );
}

#[test]
fn peers_as_table() {
    let c = parse("node = \"a\"\n[peers]\nb = \"10.0.0.2:862\"\nc = \"10.0.0.3:862\"\n").unwrap();
    assert_eq!(c.peers.len(), 2);
}

/// A bad value or key: the error starts with the file, the line and the key.
#[test]
fn errors_name_file_line_and_key() {
    let cases = [
        // A duration that is not one.
        (
            "node = \"a\"\n\nprobe_interval = \"quick\"\n",
            "agent.toml:3: key `probe_interval`",
        ),
        // A misspelt key.
        (
            "node = \"a\"\nprobe_intervall = \"1s\"\n",
            "agent.toml:2: key `probe_intervall`",
        ),
        // A string where a number goes.
        (
            "node = \"a\"\n[spool]\nmax_bytes = \"many\"\n",
            "agent.toml:3: key `spool.max_bytes`",
        ),
        // A peer address without a port.
        (
            "node = \"a\"\npeers = [\"b=10.0.0.2\"]\n",
            "agent.toml:2: key `peers`",
        ),
        // Out of range.
        (
            "\n[bandwidth]\nstreams = 0\n",
            "agent.toml:3: key `bandwidth.streams`",
        ),
    ];
    for (text, start) in cases {
        let e = err(text);
        assert!(e.starts_with(start), "{e}");
    }
    let e = err("[spool]\ndirectory = \"/s\"\n");
    assert_eq!(e, "agent.toml:2: key `spool.directory`: unknown key");
}

#[test]
fn flat_names_from_before_the_sections_still_work_and_are_noted() {
    let text = "services = []\nservice_interval = \"1s\"\nspool_dir = \"/s\"\n\
                bandwidth_streams = 2\n[bandwidth_peers]\nb = \"10.0.0.2:7000\"\n\
                [peers]\nb = \"10.0.0.2:862\"\n";
    let doc = Config::parse("agent.toml", text).unwrap();
    assert_eq!(doc.renamed.len(), 5, "{:?}", doc.renamed);
    assert!(
        doc.renamed.contains(
            &"agent.toml:3: key `spool_dir` is now `spool.dir`; the old name still works".into()
        ),
        "{:?}",
        doc.renamed
    );
    let c = Config::build(Some(&doc), &Flags::default()).unwrap();
    assert!(c.services.is_empty());
    assert_eq!(c.service_interval, Duration::from_secs(1));
    assert_eq!(c.spool_dir, PathBuf::from("/s"));
    assert_eq!(c.bandwidth_streams, 2);
    assert_eq!(c.bandwidth_peers["b"], "10.0.0.2:7000".parse().unwrap());
}

#[test]
fn flags_override_file() {
    let c = with_flags(
        "node = \"a\"\nprobe_interval = \"1s\"\npeers = [\"q=127.0.0.1:8\"]\n",
        &[
            ("node", "z"),
            ("probe-interval", "10ms"),
            ("peer", "p=127.0.0.1:9"),
        ],
    )
    .unwrap();
    assert_eq!(c.node, "z");
    assert_eq!(c.probe_interval, Duration::from_millis(10));
    assert_eq!(c.peers.len(), 1);
    assert_eq!(c.peers[0].name, "p");
    let e = with_flags("", &[("spool-max-bytes", "10")])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("command line: flag `--spool-max-bytes`"),
        "{e}"
    );
}

#[test]
fn spool_and_token_keys() {
    let c = parse("node = \"m\"\n").unwrap();
    assert_eq!(c.spool_dir, PathBuf::from("/var/lib/boltwatch/spool/m"));
    assert_eq!(c.spool_max_bytes, 1 << 30);
    let c =
        parse("node = \"m\"\ntoken_file = \"/t\"\n[spool]\ndir = \"/s\"\nmax_bytes = 2097152\n")
            .unwrap();
    assert_eq!(c.spool_dir, PathBuf::from("/s"));
    assert_eq!(c.spool_max_bytes, 2 << 20);
    assert_eq!(c.token_file, Some(PathBuf::from("/t")));
    let e = err("node = \"m\"\n[spool]\nmax_bytes = 10\n");
    assert!(e.starts_with("agent.toml:3: key `spool.max_bytes`"), "{e}");
    let c = with_flags("", &[("node", "m"), ("spool-dir", "/x")]).unwrap();
    assert_eq!(c.spool_dir, PathBuf::from("/x"));
}

#[test]
fn token_files_are_checked() {
    assert_eq!(parse_token("t", "\n  abc123  \n").unwrap(), "abc123");
    let e = parse_token("t", "\n\n").unwrap_err().to_string();
    assert!(e.starts_with("t:1: key `token`"), "{e}");
    let e = parse_token("t", "\nab cd\n").unwrap_err().to_string();
    assert!(e.starts_with("t:2: key `token`"), "{e}");
}

#[test]
fn example_file_states_the_defaults() {
    let c = parse(include_str!("../../../agent.example.toml")).unwrap();
    assert_eq!(c.node, "mini-a");
    assert_eq!(c.peers.len(), 2);
    let d = Config {
        node: c.node.clone(),
        collector: c.collector.clone(),
        peers: c.peers.clone(),
        spool_dir: c.spool_dir.clone(),
        ..Config::default()
    };
    assert_eq!(c, d);
}

#[test]
fn services_parse_and_empty_list_disables() {
    let c = parse("[services]\ntcp = [\"ssh=22\", \"http=8080\"]\n").unwrap();
    assert_eq!(
        c.services[1],
        ServiceConfig {
            name: "http".into(),
            port: 8080
        }
    );
    assert!(parse("[services]\ntcp = []\n").unwrap().services.is_empty());
    let e = err("\n[services]\ntcp = [\"ssh\"]\n");
    assert!(e.starts_with("agent.toml:3: key `services.tcp`"), "{e}");
    let c = with_flags("", &[("service", "a=1"), ("service", "b=2")]).unwrap();
    assert_eq!(c.services.len(), 2);
    assert!(with_flags("", &[("no-services", "")])
        .unwrap()
        .services
        .is_empty());
}

#[test]
fn duplicate_peer_rejected() {
    assert!(parse("node=\"a\"\npeers=[\"b=1.2.3.4:5\",\"b=1.2.3.5:5\"]\n").is_err());
}

#[test]
fn bandwidth_keys_flags_and_peer_addresses() {
    let c = parse("peers = [\"b=10.0.0.2:862\", \"c=10.0.0.3:862\"]\n").unwrap();
    assert_eq!(
        c.bandwidth_addr(&c.peers[0]),
        "10.0.0.2:5202".parse().unwrap()
    );
    let text = "peers = [\"b=10.0.0.2:862\", \"c=10.0.0.3:862\"]\n[bandwidth]\n\
                listen = \"0.0.0.0:6000\"\nstreams = 2\nduty_cycle = 0.5\n\
                [bandwidth.peers]\nc = \"10.9.9.9:7000\"\n";
    let c = with_flags(
        text,
        &[("bandwidth-interval", "5s"), ("bandwidth-duration", "2s")],
    )
    .unwrap();
    assert_eq!(
        c.bandwidth_addr(&c.peers[0]),
        "10.0.0.2:6000".parse().unwrap()
    );
    assert_eq!(
        c.bandwidth_addr(&c.peers[1]),
        "10.9.9.9:7000".parse().unwrap()
    );
    assert_eq!(c.bandwidth_interval, Duration::from_secs(5));
    assert_eq!(c.bandwidth_duration, Duration::from_secs(2));
    assert_eq!((c.bandwidth_streams, c.bandwidth_duty_cycle), (2, 0.5));
    assert!(
        !with_flags("", &[("no-bandwidth", "")])
            .unwrap()
            .bandwidth_enabled
    );
}

#[test]
fn infeasible_bandwidth_schedules_name_the_key_that_was_set() {
    // 1 % of 10 minutes (6 s) cannot hold a 10 s test.
    let e = err("\n[bandwidth]\nduty_cycle = 0.01\n");
    assert!(
        e.starts_with("agent.toml:3: key `bandwidth.duty_cycle`"),
        "{e}"
    );
    assert!(parse("[bandwidth]\nduration = \"1500ms\"\n").is_err());
    assert!(parse("[bandwidth]\ninterval = \"10s\"\n").is_err());
    let e = with_flags("", &[("bandwidth-interval", "10s")])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("command line: flag `--bandwidth-interval`"),
        "{e}"
    );
    let e = err("[bandwidth.peers]\nzz = \"10.0.0.9:5202\"\n");
    assert!(e.starts_with("agent.toml:1: key `bandwidth.peers`"), "{e}");
    assert!(e.contains("`zz` is not one of the peers"), "{e}");
}

#[test]
fn docs_run_table_is_the_key_table() {
    let doc = include_str!("../../../docs/deployment.md");
    if let Err(e) = check_table::<Config>(doc, "agent-run-flags") {
        panic!("docs/deployment.md, `boltwatch-agent run`: {e}\n(keys: agent/src/config/keys.rs)");
    }
}

#[test]
fn bandwidth_expected_globally_or_per_peer() {
    use crate::bandwidth::expect::Expected;
    let peers = "peers = [\"b=10.0.0.2:862\", \"c=10.0.0.3:862\"]\n";
    let c = parse(peers).unwrap();
    assert_eq!(c.expected("b"), Expected::Nothing, "none by default");
    let c = parse(&format!("{peers}[bandwidth]\nexpected = 40\n")).unwrap();
    assert_eq!(c.expected("b"), Expected::Fixed(40e9));
    assert_eq!(c.expected("c"), Expected::Fixed(40e9));
    let c = parse(&format!(
        "{peers}[bandwidth.expected]\n\"*\" = \"40\"\nc = \"65.5\"\n"
    ))
    .unwrap();
    assert_eq!(c.expected("b"), Expected::Fixed(40e9));
    assert_eq!(c.expected("c"), Expected::Fixed(65.5e9));
    let c = parse(&format!(
        "{peers}[bandwidth]\nexpected_share = 0.6\n[bandwidth.expected]\nc = \"65.5\"\n"
    ))
    .unwrap();
    assert_eq!(c.expected("b"), Expected::Share(0.6));
    assert_eq!(c.expected("c"), Expected::Fixed(65.5e9));
    let e = err(&format!("{peers}[bandwidth]\nexpected_share = 1.5\n"));
    assert!(
        e.starts_with("agent.toml:3: key `bandwidth.expected_share`"),
        "{e}"
    );
    let e = err(&format!("{peers}[bandwidth.expected]\nzz = \"40\"\n"));
    assert!(
        e.contains("key `bandwidth.expected`") && e.contains("zz"),
        "{e}"
    );
    let e = err(&format!("{peers}[bandwidth]\nexpected = \"fast\"\n"));
    assert!(
        e.starts_with("agent.toml:3: key `bandwidth.expected`"),
        "{e}"
    );
}

#[test]
fn scoped_peer_addresses_are_accepted() {
    let c = with_flags(
        "[peers]\nb = \"169.254.3.2%en2:862\"\n",
        &[("peer", "e=169.254.9.9%bridge0:8620")],
    )
    .unwrap();
    let got: Vec<(String, String, Option<String>)> = c
        .peers
        .iter()
        .map(|p| (p.name.clone(), p.addr.to_string(), p.interface.clone()))
        .collect();
    let want =
        |n: &str, a: &str, i: Option<&str>| (n.to_string(), a.to_string(), i.map(String::from));
    assert_eq!(
        got,
        vec![want("e", "169.254.9.9:8620", Some("bridge0")),],
        "a --peer replaces the file's peers"
    );
    let c = parse(
        "[peers]\nb = \"169.254.3.2%en2:862\"\nc = \"[fe80::1%en3]:862\"\nd = \"10.0.0.4:862\"\n\
         [bandwidth.peers]\nc = \"[fe80::1%en3]:7000\"\n",
    )
    .unwrap();
    let got: Vec<_> = c
        .peers
        .iter()
        .map(|p| (p.name.clone(), p.addr.to_string(), p.interface.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            want("b", "169.254.3.2:862", Some("en2")),
            want("c", "[fe80::1]:862", Some("en3")),
            want("d", "10.0.0.4:862", None),
        ]
    );
    // A peer's bandwidth server inherits its scope unless listed.
    assert_eq!(
        c.bandwidth_addr(&c.peers[0]).to_string(),
        "169.254.3.2%en2:5202"
    );
    assert_eq!(
        c.bandwidth_addr(&c.peers[1]).to_string(),
        "[fe80::1%en3]:7000"
    );
    assert_eq!(c.bandwidth_addr(&c.peers[2]).to_string(), "10.0.0.4:5202");
}

#[test]
fn bad_scoped_addresses_name_file_key_and_line() {
    for (text, key, line, why) in [
        (
            "node=\"a\"\npeers = [\"b=10.0.0.2%:862\"]\n",
            "peers",
            2,
            "empty interface",
        ),
        // A table's errors point at its header.
        (
            "[peers]\nb = \"[fe80::1%en2:862\"\n",
            "peers",
            1,
            "missing `]`",
        ),
        (
            "[peers]\nb = \"10.0.0.2%en2\"\n",
            "peers",
            1,
            "expected a port",
        ),
        (
            "\n[peers]\nb = \"10.0.0.2%sixteen-bytes-if:862\"\n",
            "peers",
            2,
            "longer than 15",
        ),
        (
            "[peers]\nb = \"10.0.0.2:862\"\n[bandwidth.peers]\nb = \"10.0.0.2%e n2:7000\"\n",
            "bandwidth.peers",
            3,
            "contains ' '",
        ),
    ] {
        let e = err(text);
        let head = format!("agent.toml:{line}: key `{key}`");
        assert!(e.starts_with(&head), "{text:?}: {e}");
        assert!(e.contains(why), "{text:?}: {e}");
    }
    let e = with_flags("", &[("peer", "b=fe80::1%en2:862")])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("command line: flag `--peer`"), "{e}");
}

#[test]
fn fast_profile_and_late_bound_keys() {
    let c = parse("").unwrap();
    assert_eq!(c.probe_interval, Duration::from_millis(100));
    // Late detection is off by default: the floor is the default timeout.
    assert_eq!(c.probe_late.floor, c.probe_timeout);
    assert_eq!(
        c.probe_late.multiplier,
        crate::stamp::LateRule::default().multiplier
    );
    let c = parse("probe_interval = \"fast\"\n").unwrap();
    assert_eq!(c.probe_interval, Duration::from_millis(10));
    let c = with_flags("", &[("probe-interval", "fast")]).unwrap();
    assert_eq!(c.probe_interval, Duration::from_millis(10));
    let c = parse("probe_late_multiplier = 8\nprobe_late_floor = \"2ms\"\n").unwrap();
    assert_eq!(c.probe_late.multiplier, 8.0);
    assert_eq!(c.probe_late.floor, Duration::from_millis(2));
    let e = err("probe_late_multiplier = 0.5\n");
    assert!(e.contains("key `probe_late_multiplier`"), "{e}");
    let e = err("probe_late_floor = \"0ms\"\n");
    assert!(e.contains("key `probe_late_floor`"), "{e}");
}

#[test]
fn rdma_bursts_are_off_by_default_and_bounded() {
    let c = parse("").unwrap();
    assert_eq!((c.rdma_burst_interval, c.rdma_burst_bytes), (None, 1 << 20));
    let c = parse("[rdma]\nburst_interval = \"5m\"\nburst_bytes = 16777216\n").unwrap();
    assert_eq!(c.rdma_burst_interval, Some(Duration::from_secs(300)));
    assert_eq!(c.rdma_burst_bytes, 16 << 20);
    for bad in [
        "[rdma]\nburst_bytes = 16777217\n",
        "[rdma]\nburst_bytes = 100\n",
        "[rdma]\nburst_interval = \"1s\"\n",
    ] {
        assert!(err(bad).contains("rdma.burst_"), "{bad}: {}", err(bad));
    }
}
