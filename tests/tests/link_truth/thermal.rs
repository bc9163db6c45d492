//! A throttle counter in a fixture sysfs drives
//! `boltwatch_thermal_throttled`.

use std::time::Duration;

use boltwatch_tests::cluster::{AgentOptions, Cluster};
use boltwatch_tests::procs::{sample, wait_for};
use boltwatch_tests::{NetIf, SysfsFixture};

use crate::support::{lint, serial};

#[test]
fn throttle_fixture_drives_thermal_throttled() {
    let _g = serial();
    let fixture = SysfsFixture::new().unwrap();
    // A complete tree for node 0's agent: its link interface (counters and
    // carrier are read from this root too) and one CPU's throttle counter.
    let bed_if = "tb1";
    fixture.set_netif(bed_if, &NetIf::default()).unwrap();
    let count_file = "devices/system/cpu/cpu0/thermal_throttle/core_throttle_count";
    fixture.write(count_file, "0").unwrap();
    let opts = AgentOptions {
        extra: vec![vec![
            "--sysfs-root".into(),
            fixture.root().display().to_string(),
        ]],
        config: "thermal_interval = \"200ms\"\ncounters_interval = \"200ms\"\n".into(),
        ..Default::default()
    };
    let c = Cluster::start(2, &opts);
    assert_eq!(c.bed.link_if(0, 1).unwrap(), bed_if);
    let throttled = || {
        sample(
            &c.metrics(),
            "boltwatch_thermal_throttled",
            &[("node", "n0")],
        )
    };
    wait_for("throttled = 0", Duration::from_secs(20), || {
        throttled() == Some(0.0)
    });
    // Throttling goes on: the count grows at every read until the metric
    // shows it (bounded: 200 bumps).
    let mut count = 0u64;
    let mut seen = false;
    for _ in 0..200 {
        count += 7;
        fixture.write(count_file, &count.to_string()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        if throttled() == Some(1.0) {
            seen = true;
            break;
        }
    }
    assert!(
        seen,
        "boltwatch_thermal_throttled never became 1\n{}",
        c.logs()
    );
    assert_eq!(
        sample(
            &c.metrics(),
            "boltwatch_thermal_pressure_level",
            &[("node", "n0")]
        ),
        Some(1.0)
    );
    // Throttling stops: the count stays, the metric follows back to 0.
    wait_for("throttled back to 0", Duration::from_secs(20), || {
        throttled() == Some(0.0)
    });
    // The fixture was complete: counters came from it, no read errors.
    let m = c.metrics();
    assert_eq!(
        sample(
            &m,
            "boltwatch_link_up",
            &[("node", "n0"), ("interface", bed_if)]
        ),
        Some(1.0)
    );
    let log = c.agents[0].as_ref().unwrap().log_text();
    assert!(!log.contains("cannot read interface counters"), "{log}");
    lint(&m);
}
