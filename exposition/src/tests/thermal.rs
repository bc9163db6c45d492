//! Temperatures and throttling.

use super::*;
use boltwatch_proto::v1::{TemperatureSensor, ThermalReading, Throttle};

fn thermal(celsius: f64, throttle: Option<(bool, Option<f64>)>) -> Payload {
    Payload::Thermal(ThermalReading {
        sensors: vec![TemperatureSensor {
            name: "cpu".into(),
            celsius,
            ..Default::default()
        }],
        throttle: throttle.map(|(throttled, ratio)| Throttle {
            throttled,
            pressure_level: u32::from(throttled),
            cpu_frequency_ratio: ratio,
            throttle_events: 0,
            source: "thermal_throttle".into(),
            ..Default::default()
        }),
    })
}

#[test]
fn newest_temperature_wins() {
    let mut m = Metrics::new();
    m.apply_record(&rec("a", "b", 2, 200, thermal(55.5, None)));
    m.apply_record(&rec("a", "b", 1, 100, thermal(40.0, None)));
    let cpu = "boltwatch_temperature_celsius{node=\"a\",sensor=\"cpu\"}";
    assert_eq!(value(&m, cpu).as_deref(), Some("55.5"));
    let text = m.render();
    assert!(
        !text.contains("boltwatch_thermal_throttled{"),
        "no signal, no series"
    );
}

#[test]
fn within_a_boot_the_later_record_wins_whatever_its_time_stamp() {
    let mut m = Metrics::new();
    let cpu = "boltwatch_temperature_celsius{node=\"a\",sensor=\"cpu\"}";
    // Seq 1 stamped a day ahead, then seq 2 at the right time.
    let day = 86_400_000_000_000;
    m.apply_record(&rec("a", "b", 1, 1_000 + day, thermal(99.0, None)));
    m.apply_record(&rec("a", "b", 2, 1_000, thermal(40.0, None)));
    assert_eq!(value(&m, cpu).as_deref(), Some("40"));
    // An earlier boot's record replayed late does not win by its seq...
    m.apply_record(&rec("a", "old", 9, 500, thermal(70.0, None)));
    assert_eq!(value(&m, cpu).as_deref(), Some("40"));
    // ...a new boot's wins by its time.
    m.apply_record(&rec("a", "new", 1, 2_000, thermal(41.0, None)));
    assert_eq!(value(&m, cpu).as_deref(), Some("41"));
}

#[test]
fn throttle_follows_the_newest_reading_and_an_absent_ratio_is_no_sample() {
    let mut m = Metrics::new();
    m.apply_record(&rec("a", "b1", 1, 1, thermal(70.0, Some((true, None)))));
    let throttled = "boltwatch_thermal_throttled{node=\"a\"}";
    let pressure = "boltwatch_thermal_pressure_level{node=\"a\"}";
    let ratio = "boltwatch_cpu_frequency_ratio{node=\"a\"}";
    assert_eq!(value(&m, throttled).as_deref(), Some("1"));
    assert_eq!(value(&m, pressure).as_deref(), Some("1"));
    assert_eq!(value(&m, ratio), None, "absent is no sample, not 0");
    m.apply_record(&rec(
        "a",
        "b1",
        2,
        2,
        thermal(60.0, Some((false, Some(0.5)))),
    ));
    assert_eq!(value(&m, throttled).as_deref(), Some("0"));
    assert_eq!(value(&m, ratio).as_deref(), Some("0.5"));
    // A later reading without the ratio (a macOS agent) keeps the last
    // measured value rather than dropping it to 0.
    m.apply_record(&rec("a", "b1", 3, 3, thermal(61.0, Some((false, None)))));
    assert_eq!(value(&m, ratio).as_deref(), Some("0.5"));
}

/// A reading of an agent that reports throttling as a level.
fn level(in_episode: bool, seconds: f64) -> Payload {
    Payload::Thermal(ThermalReading {
        sensors: vec![],
        throttle: Some(Throttle {
            // The old per-reading flag: only the reading an episode began in.
            throttled: false,
            level_known: true,
            in_episode,
            throttled_seconds: seconds,
            source: "thermal_throttle".into(),
            ..Default::default()
        }),
    })
}

#[test]
fn throttled_is_the_level_and_seconds_sum_over_boots() {
    let mut m = Metrics::new();
    let throttled = "boltwatch_thermal_throttled{node=\"a\"}";
    let seconds = "boltwatch_thermal_throttled_seconds_total{node=\"a\"}";
    m.apply_record(&rec("a", "b1", 1, 1, level(true, 5.0)));
    m.apply_record(&rec("a", "b1", 2, 2, level(true, 10.0)));
    assert_eq!(
        value(&m, throttled).as_deref(),
        Some("1"),
        "the whole episode"
    );
    // A late replay of boot 1 does not lower its figure.
    m.apply_record(&rec("a", "b1", 1, 1, level(true, 5.0)));
    m.apply_record(&rec("a", "b2", 1, 3, level(false, 2.5)));
    assert_eq!(value(&m, throttled).as_deref(), Some("0"));
    assert_eq!(value(&m, seconds).as_deref(), Some("12.5"));
}

/// macOS readings: Moderate is kept as the level but is not throttled,
/// even from an agent that still flagged it; Heavy is throttled.
#[test]
fn macos_moderate_is_a_level_not_throttling() {
    let mac = |level: u32, flagged: bool| {
        Payload::Thermal(ThermalReading {
            sensors: vec![],
            throttle: Some(Throttle {
                throttled: flagged,
                pressure_level: level,
                level_known: true,
                in_episode: flagged,
                source: "notify".into(),
                ..Default::default()
            }),
        })
    };
    let mut m = Metrics::new();
    let throttled = "boltwatch_thermal_throttled{node=\"m\"}";
    let pressure = "boltwatch_thermal_pressure_level{node=\"m\"}";
    m.apply_record(&rec("m", "b1", 1, 1, mac(1, true)));
    assert_eq!(
        value(&m, throttled).as_deref(),
        Some("0"),
        "an older agent's Moderate"
    );
    assert_eq!(value(&m, pressure).as_deref(), Some("1"));
    m.apply_record(&rec("m", "b1", 2, 2, mac(2, true)));
    assert_eq!(value(&m, throttled).as_deref(), Some("1"));
    assert_eq!(value(&m, pressure).as_deref(), Some("2"));
    m.apply_record(&rec("m", "b1", 3, 3, mac(1, false)));
    assert_eq!(value(&m, throttled).as_deref(), Some("0"));
}
