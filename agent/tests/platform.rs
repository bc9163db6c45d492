//! Platform readers against fixture trees (`tests/fixtures/sys`, mirroring
//! real sysfs paths), temp-dir trees that change between reads and the real
//! loopback interface: Linux only. The macOS parsers are tested in
//! `macos_captures.rs`.
#![cfg(target_os = "linux")]

use std::fs;
use std::path::{Path, PathBuf};

use boltwatch_agent::discovery::kind;

mod linux {
    use super::*;
    use boltwatch_agent::counters::{self, CounterSource, CountersError, SysfsCounters};
    use boltwatch_agent::discovery::{describe, route_interface, thunderbolt_interfaces};
    use boltwatch_agent::thermal::{self, FilterStats, SysfsThermal, ThermalSource};
    use std::net::UdpSocket;
    use std::time::Duration;

    fn sys_fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sys")
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, format!("{text}\n")).unwrap();
    }

    /// CPU `cpu`'s `core` or `package` throttle count below a sysfs root.
    fn throttle_count(cpu: u32, kind: &str) -> String {
        format!("devices/system/cpu/cpu{cpu}/thermal_throttle/{kind}_throttle_count")
    }

    #[test]
    fn counters_of_an_up_interface() {
        let mut src = SysfsCounters::new(&sys_fixture());
        let c = src.read("eth0").unwrap();
        assert_eq!(c.interface, "eth0");
        assert_eq!(c.receive_bytes, 123_456_789_012);
        assert_eq!(c.transmit_bytes, 98_765_432_109);
        assert_eq!(c.receive_packets, 1_000_001);
        assert_eq!(c.transmit_packets, 900_002);
        assert_eq!((c.receive_errors, c.transmit_errors), (3, 4));
        assert_eq!((c.receive_drops, c.transmit_drops), (5, 6));
        assert!(c.carrier && c.carrier_known);
        assert_eq!((c.carrier_up_count, c.carrier_down_count), (3, 2));
        assert_eq!(c.speed_bits_per_second, 10_000_000_000);
        assert_eq!(c.mtu, 9000);
    }

    #[test]
    fn admin_down_interface_has_unknown_carrier() {
        // down0 has no `carrier` file, as when the kernel answers EINVAL.
        let c = SysfsCounters::new(&sys_fixture()).read("down0").unwrap();
        assert!(!c.carrier_known);
        assert!(!c.carrier);
        assert_eq!(c.speed_bits_per_second, 0, "speed -1 is unknown");
        assert_eq!((c.carrier_up_count, c.carrier_down_count), (0, 0));
        assert_eq!(c.mtu, 1500);
        assert_eq!(c.transmit_bytes, 20);
    }

    #[test]
    fn unreadable_carrier_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        for f in boltwatch_agent::counters::SYSFS_STATISTICS {
            write(dir.path(), &format!("class/net/x0/statistics/{f}"), "1");
        }
        // A directory where the file should be: read() fails (EISDIR), like EINVAL.
        fs::create_dir_all(dir.path().join("class/net/x0/carrier")).unwrap();
        let c = SysfsCounters::new(dir.path()).read("x0").unwrap();
        assert!(!c.carrier_known);
        fs::remove_dir(dir.path().join("class/net/x0/carrier")).unwrap();
        write(dir.path(), "class/net/x0/carrier", "0");
        let c = SysfsCounters::new(dir.path()).read("x0").unwrap();
        assert!(c.carrier_known && !c.carrier);
    }

    #[test]
    fn counter_errors() {
        let mut src = SysfsCounters::new(&sys_fixture());
        assert!(matches!(
            src.read("nope0"),
            Err(CountersError::NoSuchInterface(_))
        ));
        assert!(matches!(
            src.read("../net/eth0"),
            Err(CountersError::NoSuchInterface(_))
        ));
        assert!(matches!(
            src.read(""),
            Err(CountersError::NoSuchInterface(_))
        ));
        match src.read("broken0") {
            Err(CountersError::Parse { path, value }) => {
                assert!(path.ends_with("statistics/rx_bytes"));
                assert_eq!(value, "garbage");
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn real_loopback_counters_grow_with_traffic() {
        const PACKETS: u64 = 50;
        const PAYLOAD: usize = 1000;
        let mut src = counters::default_source(Path::new("/sys"));
        let before = src.read("lo").expect("reading /sys/class/net/lo");
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let buf = [0x5au8; PAYLOAD];
        for _ in 0..PACKETS {
            tx.send_to(&buf, rx.local_addr().unwrap()).unwrap();
        }
        let mut got = 0u64;
        let mut scratch = [0u8; 2048];
        while got < PACKETS {
            match rx.recv(&mut scratch) {
                Ok(n) => {
                    assert_eq!(n, PAYLOAD);
                    got += 1;
                }
                Err(e) => panic!("only {got} of {PACKETS} datagrams came back over lo: {e}"),
            }
        }
        let after = src.read("lo").unwrap();
        // Other processes may use lo too: at least our traffic must show.
        assert!(after.transmit_packets - before.transmit_packets >= PACKETS);
        assert!(after.receive_packets - before.receive_packets >= PACKETS);
        assert!(after.transmit_bytes - before.transmit_bytes >= PACKETS * PAYLOAD as u64);
        assert!(after.receive_bytes - before.receive_bytes >= PACKETS * PAYLOAD as u64);
        assert_eq!(after.mtu, 65536);
    }

    #[test]
    fn thermal_fixture_sensors_filter_and_throttle() {
        let mut src = SysfsThermal::new(&sys_fixture());
        let r = src.read().unwrap();
        let got: Vec<(&str, f64, &str, f64)> = r
            .sensors
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.celsius,
                    s.source.as_str(),
                    s.critical_celsius,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("thermal/x86_pkg_temp", 52.0, "thermal", 105.0),
                ("thermal/acpitz", 27.8, "thermal", 0.0),
                ("hwmon/coretemp/Package id 0", 55.0, "hwmon", 100.0),
                ("hwmon/coretemp/Core 0", 53.0, "hwmon", 100.0),
                ("hwmon/coretemp/Core 8", 54.0, "hwmon", 0.0),
                ("hwmon/nvme/Composite", 38.85, "hwmon", 0.0),
                ("hwmon/nvme/Composite #2", 40.85, "hwmon", 0.0),
                ("hwmon/k10temp/temp1", 61.25, "hwmon", 0.0),
                // hwmon5 keeps its attributes under device/ (old drivers).
                ("hwmon/it8728/SYSTIN", 36.0, "hwmon", 0.0),
            ]
        );
        // acpitz #2 reads 0 C, Core 1 reads 130 C, PMU tcal is a placeholder,
        // iwlwifi_1 has no readable temp.
        let expected = FilterStats {
            out_of_range: 2,
            placeholder: 1,
            unreadable: 1,
        };
        assert_eq!(src.filtered(), expected);
        let t = r.throttle.expect("fixture has thermal_throttle");
        assert_eq!(t.source, "thermal_throttle");
        // core 3 + 1, package 7 counted once for package 0.
        assert_eq!(t.throttle_events, 11);
        assert!(!t.throttled, "first read has no baseline");
        assert!((t.cpu_frequency_ratio.unwrap() - 0.375).abs() < 1e-9);
        // A second read of the unchanged tree: same sensors, not throttled,
        // filter counts accumulate.
        let r2 = src.read().unwrap();
        assert_eq!(r2.sensors.len(), 9);
        assert!(!r2.throttle.unwrap().throttled);
        assert_eq!(src.filtered().total(), 8);
    }

    #[test]
    fn throttle_toggles_when_the_count_grows() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for cpu in [0, 1] {
            for kind in ["core", "package"] {
                write(root, &throttle_count(cpu, kind), "0");
            }
        }
        let mut src = SysfsThermal::new(root);
        let read = |src: &mut SysfsThermal| src.read().unwrap().throttle.unwrap();

        let t = read(&mut src);
        assert!(!t.throttled);
        assert_eq!((t.throttle_events, t.pressure_level), (0, 0));
        assert_eq!(t.cpu_frequency_ratio, None, "no cpufreq: absent");

        write(root, &throttle_count(1, "core"), "1");
        let t = read(&mut src);
        assert!(t.throttled);
        assert_eq!((t.throttle_events, t.pressure_level), (1, 1));

        let t = read(&mut src);
        assert!(!t.throttled, "no new episode since the last read");
        assert_eq!(t.pressure_level, 0);

        // Package counts show on every CPU of the package; counted once.
        for cpu in [0, 1] {
            write(root, &throttle_count(cpu, "package"), "4");
        }
        let t = read(&mut src);
        assert!(t.throttled);
        assert_eq!(t.throttle_events, 5);
        assert!(src.read().unwrap().sensors.is_empty());
    }

    #[test]
    fn cpufreq_alone_reports_ratio_but_never_throttled() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // 3 of 4 GHz and 1 of 2 GHz: the mean ratio is 0.625.
        for (policy, cur, max) in [(0, "3000000", "4000000"), (4, "1000000", "2000000")] {
            let dir = format!("devices/system/cpu/cpufreq/policy{policy}");
            write(root, &format!("{dir}/scaling_cur_freq"), cur);
            write(root, &format!("{dir}/cpuinfo_max_freq"), max);
        }
        let t = SysfsThermal::new(root).read().unwrap().throttle.unwrap();
        assert_eq!(t.source, "cpufreq");
        assert!(!t.throttled);
        assert!((t.cpu_frequency_ratio.unwrap() - 0.625).abs() < 1e-9);
    }

    #[test]
    fn no_sensors_is_an_empty_reading() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("class/thermal")).unwrap();
        let r = thermal::default_source(dir.path()).read().unwrap();
        assert!(r.sensors.is_empty());
        assert!(r.throttle.is_none());
    }

    #[test]
    fn live_sys_thermal_read_succeeds() {
        // This VM has no sensors; on hardware there are some. Either way the
        // read must succeed and every sensor must have passed the filter.
        let mut src = thermal::default_source(Path::new("/sys"));
        let r = src.read().expect("reading /sys thermals");
        for s in &r.sensors {
            assert!(thermal::plausible(s.celsius), "{s:?}");
            assert!(!s.name.is_empty());
        }
    }

    #[test]
    fn route_to_loopback_is_lo() {
        assert_eq!(
            route_interface("127.0.0.1:9".parse().unwrap()).unwrap(),
            "lo"
        );
        assert_eq!(route_interface("[::1]:9".parse().unwrap()).unwrap(), "lo");
    }

    #[test]
    fn describe_real_loopback() {
        let lo = describe("lo", Path::new("/sys"));
        assert_eq!(lo.name, "lo");
        assert_eq!(lo.kind, kind::LOOPBACK);
        assert_eq!(lo.mtu, 65536);
        assert!(
            lo.addresses.iter().any(|a| a == "127.0.0.1/8"),
            "{:?}",
            lo.addresses
        );
        assert!(lo.members.is_empty());
    }

    #[test]
    fn describe_fixture_kinds() {
        let root = sys_fixture();
        for (name, k) in [
            ("lo", kind::LOOPBACK),
            ("eth0", kind::ETHERNET),
            ("thunderbolt0", kind::THUNDERBOLT),
            ("en05", kind::THUNDERBOLT),
            ("br0", kind::BRIDGE),
            ("veth-a", kind::VETH),
            ("dummy0", kind::OTHER),
            ("vlan10", kind::OTHER),
            ("wlan0", kind::WIFI),
            ("nope0", kind::OTHER),
        ] {
            assert_eq!(describe(name, &root).kind, k, "{name}");
        }

        let br = describe("br0", &root);
        assert_eq!(br.members, ["eth0", "veth-a"]);
        assert_eq!(br.mtu, 1500);

        let eth = describe("eth0", &root);
        assert_eq!(eth.speed_bits_per_second, 10_000_000_000);
        assert_eq!(eth.mtu, 9000);

        for (name, speed, generation, why) in [
            ("thunderbolt0", 40_000_000_000, "3", "2 lanes x 20 Gb/s"),
            ("en05", 40_000_000_000, "4", "slower direction of 120/40"),
        ] {
            let tb = describe(name, &root);
            assert_eq!(tb.speed_bits_per_second, speed, "{name}: {why}");
            assert_eq!(tb.generation, generation, "{name}");
        }
        assert_eq!(describe("thunderbolt0", &root).mtu, 65520);
    }

    #[test]
    fn thunderbolt_links_from_fixture() {
        let links = thunderbolt_interfaces(&sys_fixture()).unwrap();
        let names: Vec<&str> = links.iter().map(|l| l.interface.as_str()).collect();
        assert_eq!(names, ["en05", "thunderbolt0"]);

        let en05 = &links[0];
        assert_eq!(en05.xdomain.as_deref(), Some("1-3"));
        assert_eq!(en05.peer_name.as_deref(), Some("Mac mini"));
        assert_eq!((en05.rx_lanes, en05.tx_lanes), (3, 1));
        assert_eq!(en05.rx_bits_per_second(), 120_000_000_000);
        assert_eq!(en05.tx_bits_per_second(), 40_000_000_000);
        assert_eq!(en05.generation, "4");

        let tb0 = &links[1];
        assert_eq!(tb0.xdomain.as_deref(), Some("0-1"));
        assert_eq!(tb0.peer_name.as_deref(), Some("linux-b"));
        assert_eq!(
            tb0.peer_uid.as_deref(),
            Some("d6010000-0042-8c17-83cf-2a1d2f0ba621")
        );
        assert_eq!(en05.peer_uid, None, "no unique_id file");
        assert_eq!(
            tb0.local_uid.as_deref(),
            Some("c2010000-0070-6b0e-2352-1d5c2b97a019"),
            "the host router 0-0's unique_id"
        );
        assert_eq!(en05.local_uid, None, "host router 1-0 has no unique_id");
        // The Hello's interface carries both ends of the cable.
        let tb = describe("thunderbolt0", &sys_fixture());
        assert_eq!(tb.remote_name, "linux-b");
        assert_eq!(tb.remote_uid, "d6010000-0042-8c17-83cf-2a1d2f0ba621");
        assert_eq!(tb.local_uid, "c2010000-0070-6b0e-2352-1d5c2b97a019");
        assert_eq!(tb0.rx_lane_bits_per_second, 20_000_000_000);
        assert_eq!(tb0.bits_per_second(), 40_000_000_000);
        assert_eq!(tb0.generation, "3");

        let empty = tempfile::tempdir().unwrap();
        assert!(thunderbolt_interfaces(empty.path()).unwrap().is_empty());
    }

    /// A network namespace of our own holding a veth pair, plus a process
    /// parked inside it so `/proc/<pid>/root/sys` shows that namespace's
    /// sysfs. Dropping it (also on panic) kills the process and deletes the
    /// namespace.
    struct VethNetns {
        name: String,
        parked: std::process::Child,
    }

    fn ip(args: &[&str]) {
        let out = std::process::Command::new("ip")
            .args(args)
            .output()
            .expect("iproute2 `ip` must be installed (apt-get install iproute2)");
        assert!(
            out.status.success(),
            "ip {args:?} failed (root needed): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    impl VethNetns {
        fn new() -> VethNetns {
            let name = format!("bwplat-{}", std::process::id());
            ip(&["netns", "add", &name]);
            let parked = std::process::Command::new("ip")
                .args(["netns", "exec", &name, "sleep", "60"])
                .spawn();
            let parked = match parked {
                Ok(p) => p,
                Err(e) => {
                    let _ = std::process::Command::new("ip")
                        .args(["netns", "del", &name])
                        .status();
                    panic!("spawning ip netns exec: {e}");
                }
            };
            let ns = VethNetns { name, parked };
            ip(&[
                "-n", &ns.name, "link", "add", "va", "type", "veth", "peer", "name", "vb",
            ]);
            ns
        }

        fn sys(&self) -> PathBuf {
            PathBuf::from(format!("/proc/{}/root/sys", self.parked.id()))
        }
    }

    impl Drop for VethNetns {
        fn drop(&mut self) {
            let _ = self.parked.kill();
            let _ = self.parked.wait();
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &self.name])
                .status();
        }
    }

    /// Polls `check` up to `tries` times, 20 ms apart.
    fn eventually(tries: u32, mut check: impl FnMut() -> bool) -> bool {
        for _ in 0..tries {
            if check() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn real_veth_in_own_netns_carrier_and_kind() {
        let ns = VethNetns::new();
        let root = ns.sys();
        assert!(
            eventually(250, || root.join("class/net/va").exists()),
            "netns sysfs never appeared at {}",
            root.display()
        );
        let mut src = SysfsCounters::new(&root);

        // Admin down: the real kernel answers EINVAL on `carrier`.
        let c = src.read("va").unwrap();
        assert!(!c.carrier_known, "{c:?}");
        assert_eq!(describe("va", &root).kind, kind::VETH);
        assert_eq!(describe("vb", &root).kind, kind::VETH);
        assert_eq!(describe("lo", &root).kind, kind::LOOPBACK);

        ip(&["-n", &ns.name, "link", "set", "va", "up"]);
        ip(&["-n", &ns.name, "link", "set", "vb", "up"]);
        assert!(
            eventually(100, || {
                let c = src.read("va").unwrap();
                c.carrier_known && c.carrier
            }),
            "va never got carrier"
        );
        let up = src.read("va").unwrap();
        assert!(up.carrier_up_count >= 1, "{up:?}");

        // Taking the peer down drops va's carrier and counts it.
        ip(&["-n", &ns.name, "link", "set", "vb", "down"]);
        assert!(
            eventually(100, || {
                let c = src.read("va").unwrap();
                c.carrier_known && !c.carrier
            }),
            "va kept carrier after vb went down"
        );
        let down = src.read("va").unwrap();
        assert_eq!(down.carrier_down_count, up.carrier_down_count + 1);
    }
}
