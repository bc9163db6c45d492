//! The sleep detector on synthetic clock readings: a machine that reads
//! its clocks every 100 ms, and sleeps or not in between.

use super::*;

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;
const HOUR: u64 = 3_600 * SEC;

/// A simulated machine: realtime and the suspend-counting clock advance
/// always, the awake clock only while awake. The clocks start at
/// different offsets, as real ones do.
struct Machine {
    unix_ns: u64,
    suspend_ns: u64,
    awake_ns: u64,
}

impl Machine {
    fn new() -> Machine {
        Machine {
            unix_ns: 1_700_000_000 * SEC,
            suspend_ns: 5 * HOUR,
            awake_ns: 2 * HOUR,
        }
    }

    fn awake(&mut self, ns: u64) {
        self.unix_ns += ns;
        self.suspend_ns += ns;
        self.awake_ns += ns;
    }

    fn asleep(&mut self, ns: u64) {
        self.unix_ns += ns;
        self.suspend_ns += ns;
    }

    fn read(&self) -> ClockReading {
        ClockReading {
            unix_ns: self.unix_ns,
            suspend_ns: self.suspend_ns,
            awake_ns: self.awake_ns,
        }
    }
}

fn gap(kind: PowerKind, at: u64, slept: u64) -> PowerEvent {
    PowerEvent {
        kind,
        at_unix_ns: at,
        slept_ns: slept,
        source: PowerSource::ClockGap,
    }
}

fn notified(kind: PowerKind, at: u64) -> PowerEvent {
    PowerEvent {
        kind,
        at_unix_ns: at,
        slept_ns: 0,
        source: PowerSource::Notification,
    }
}

#[test]
fn an_eight_hour_sleep_is_one_sleep_and_one_wake_with_its_length() {
    let mut m = Machine::new();
    let mut d = SleepDetector::new();
    assert_eq!(
        d.on_reading(m.read()),
        vec![],
        "the first reading is the baseline"
    );
    m.awake(100 * MS);
    assert_eq!(d.on_reading(m.read()), vec![]);
    // Went to sleep 40 ms after that reading, woke 8 h later, read 60 ms after.
    m.awake(40 * MS);
    let fell_asleep = m.unix_ns;
    m.asleep(8 * HOUR);
    m.awake(60 * MS);
    let read_at = m.unix_ns;
    assert_eq!(
        d.on_reading(m.read()),
        vec![
            gap(PowerKind::Sleep, read_at - 8 * HOUR, 0),
            gap(PowerKind::Wake, read_at, 8 * HOUR),
        ]
    );
    // Placed late by the time awake after the wake, never more than one
    // reading interval.
    assert_eq!(read_at - 8 * HOUR - fell_asleep, 60 * MS);
    m.awake(100 * MS);
    assert_eq!(
        d.on_reading(m.read()),
        vec![],
        "the gap is the new baseline"
    );
}

#[test]
fn no_sleep_over_a_day_of_readings_is_no_event() {
    let mut m = Machine::new();
    let mut d = SleepDetector::new();
    for _ in 0..(24 * 3600 * 10) {
        assert_eq!(d.on_reading(m.read()), vec![]);
        m.awake(100 * MS);
    }
}

#[test]
fn several_sleeps_are_each_found_with_their_own_length() {
    let mut m = Machine::new();
    let mut d = SleepDetector::new();
    d.on_reading(m.read());
    let sleeps = [SEC, 90 * SEC, 2 * HOUR, 3 * SEC + 7];
    let mut found = Vec::new();
    for s in sleeps {
        for _ in 0..20 {
            m.awake(100 * MS);
            found.extend(d.on_reading(m.read()));
        }
        m.asleep(s);
        m.awake(10 * MS);
        found.extend(d.on_reading(m.read()));
    }
    let wakes: Vec<u64> = found
        .iter()
        .filter(|e| e.kind == PowerKind::Wake)
        .map(|e| e.slept_ns)
        .collect();
    assert_eq!(wakes, sleeps);
    assert_eq!(found.len(), 2 * sleeps.len());
}

#[test]
fn jitter_below_the_threshold_is_not_a_sleep() {
    // A thread preempted between the two reads sees the gap off by the
    // preemption: here up to 300 ms, then back.
    let mut d = SleepDetector::new();
    let mut m = Machine::new();
    d.on_reading(m.read());
    for jitter in [300 * MS, 0, 150 * MS, 999 * MS, 0] {
        m.awake(100 * MS);
        let mut r = m.read();
        r.suspend_ns += jitter;
        assert_eq!(d.on_reading(r), vec![], "jitter {jitter}");
    }
    // A sleep just under the threshold is not one either; at it, it is.
    m.asleep(SEC - 1);
    assert_eq!(d.on_reading(m.read()), vec![]);
    m.asleep(SEC);
    assert_eq!(d.on_reading(m.read()).len(), 2);
}

#[test]
fn an_announced_sleep_is_recorded_before_it_and_woken_from_by_the_clocks() {
    let mut m = Machine::new();
    let mut d = SleepDetector::new();
    d.on_reading(m.read());
    m.awake(50 * MS);
    let will_sleep = m.unix_ns;
    assert_eq!(
        d.on_notice(Notice::WillSleep, will_sleep),
        vec![notified(PowerKind::Sleep, will_sleep)]
    );
    assert_eq!(d.on_notice(Notice::WillSleep, will_sleep + 1), vec![]);
    m.asleep(HOUR);
    m.awake(20 * MS);
    // The clocks give the wake and the length; no second sleep.
    assert_eq!(
        d.on_reading(m.read()),
        vec![gap(PowerKind::Wake, m.unix_ns, HOUR)]
    );
    // Has-powered-on seconds later adds nothing.
    m.awake(3 * SEC);
    assert_eq!(d.on_notice(Notice::HasPoweredOn, m.unix_ns), vec![]);
}

#[test]
fn a_sleep_too_short_for_the_clocks_is_woken_from_by_the_notification() {
    let mut m = Machine::new();
    let mut d = SleepDetector::new();
    d.on_reading(m.read());
    d.on_notice(Notice::WillSleep, m.unix_ns);
    m.asleep(400 * MS);
    assert_eq!(d.on_reading(m.read()), vec![]);
    m.awake(2 * SEC);
    assert_eq!(
        d.on_notice(Notice::HasPoweredOn, m.unix_ns),
        vec![notified(PowerKind::Wake, m.unix_ns)]
    );
    // A has-powered-on with no sleep announced (the agent started during a
    // wake) is nothing.
    assert_eq!(d.on_notice(Notice::HasPoweredOn, m.unix_ns), vec![]);
}

#[test]
fn a_clock_that_steps_back_is_no_sleep_and_no_panic() {
    let mut d = SleepDetector::new();
    let m = Machine::new();
    d.on_reading(m.read());
    let mut r = m.read();
    r.suspend_ns = 0;
    r.unix_ns = 0;
    assert_eq!(d.on_reading(r), vec![]);
    // From that odd baseline, a huge jump is a long sleep placed at 0.
    let r = ClockReading {
        unix_ns: 0,
        suspend_ns: u64::MAX,
        awake_ns: 0,
    };
    let e = d.on_reading(r);
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].at_unix_ns, 0);
}

#[test]
fn prevent_sleep_defaults_on_only_under_launchd() {
    assert!(prevent_sleep_wanted(None, Some("io.boltwatch.agent")));
    assert!(!prevent_sleep_wanted(None, None));
    assert!(!prevent_sleep_wanted(None, Some("")));
    // What Terminal's shells carry.
    assert!(!prevent_sleep_wanted(None, Some("0")));
    assert!(prevent_sleep_wanted(Some(true), None));
    assert!(!prevent_sleep_wanted(
        Some(false),
        Some("io.boltwatch.agent")
    ));
}

#[test]
fn prevent_sleep_is_unset_by_default_and_a_bad_value_names_file_key_and_line() {
    use crate::config::{Config, Flags};
    let build = |text: &str, flags: &[(&str, &str)]| {
        let doc = Config::parse("agent.toml", text)?;
        Config::build(Some(&doc), &Flags::from_pairs(flags))
    };
    assert_eq!(build("", &[]).unwrap().prevent_sleep, None);
    assert_eq!(
        build("prevent_sleep = false\n", &[]).unwrap().prevent_sleep,
        Some(false)
    );
    assert_eq!(
        build("prevent_sleep = false\n", &[("prevent-sleep", "true")])
            .unwrap()
            .prevent_sleep,
        Some(true),
        "the flag wins"
    );
    let e = build("node = \"a\"\nprevent_sleep = \"maybe\"\n", &[])
        .unwrap_err()
        .to_string();
    for part in ["agent.toml", "prevent_sleep", "2"] {
        assert!(e.contains(part), "{part} in {e}");
    }
}

/// The real clocks of this (awake) Linux machine: the suspend-counting one
/// is ahead of the other, and a run of readings finds no sleep.
#[cfg(target_os = "linux")]
#[test]
fn the_linux_clocks_show_no_sleep_while_awake() {
    let mut d = SleepDetector::new();
    let first = read_clocks().unwrap();
    assert!(first.suspend_ns >= first.awake_ns, "{first:?}");
    assert_eq!(d.on_reading(first), vec![]);
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(d.on_reading(read_clocks().unwrap()), vec![]);
    }
}

#[cfg(target_os = "linux")]
#[test]
fn linux_has_no_notifications_and_no_assertion_and_says_so() {
    let e = Notifications::open().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
    let e = Assertion::take("test").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
    assert!(e.to_string().contains("prevent_sleep"), "{e}");
}

#[test]
fn events_become_records_with_their_kind_and_source() {
    use boltwatch_proto::v1 as pb;
    // The record's time is wall-clock time: the timeline's, corrected.
    let wall = crate::clock::Reading {
        correction_ns: 100,
        generation: 0,
    };
    let p = gap(PowerKind::Wake, 7, 5).to_proto(&wall);
    assert_eq!(p.kind, pb::PowerEventKind::Wake as i32);
    assert_eq!(p.source, pb::PowerEventSource::ClockGap as i32);
    assert_eq!((p.at_unix_ns, p.slept_ns), (107, 5));
    let p = notified(PowerKind::Sleep, 3).to_proto(&wall);
    assert_eq!(p.kind, pb::PowerEventKind::Sleep as i32);
    assert_eq!(p.source, pb::PowerEventSource::Notification as i32);
}

mod props {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;

    proptest! {
        // A fixed seed: CI runs the same cases every time.
        #![proptest_config(ProptestConfig {
            rng_seed: RngSeed::Fixed(0x5eed_51ee),
            cases: 256,
            ..ProptestConfig::default()
        })]

        /// Whatever the pattern of awake stretches (read every 100 ms,
        /// with read jitter under the threshold) and sleeps, every sleep
        /// of at least `MIN_SLEEP` is found once, with its exact length
        /// plus the jitter of the two readings around it.
        #[test]
        fn every_sleep_is_found_once(
            plan in prop::collection::vec((1u64..50, 1_000u64..100_000, 0u64..400), 1..12),
        ) {
            let mut m = Machine::new();
            let mut d = SleepDetector::new();
            d.on_reading(m.read());
            let mut wakes = Vec::new();
            for (awake_reads, sleep_ms, jitter_ms) in &plan {
                for _ in 0..*awake_reads {
                    m.awake(100 * MS);
                    let mut r = m.read();
                    r.suspend_ns += jitter_ms * MS;
                    prop_assert_eq!(d.on_reading(r), vec![]);
                    // Back to a clean reading: the jitter was one read's.
                    prop_assert_eq!(d.on_reading(m.read()), vec![]);
                }
                m.asleep(sleep_ms * MS);
                m.awake(MS);
                let e = d.on_reading(m.read());
                prop_assert_eq!(e.len(), 2);
                prop_assert_eq!(e[0].kind, PowerKind::Sleep);
                wakes.push(e[1].slept_ns);
            }
            let want: Vec<u64> = plan.iter().map(|(_, s, _)| s * MS).collect();
            prop_assert_eq!(wakes, want);
        }
    }
}
