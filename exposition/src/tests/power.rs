//! Sleeps and time asleep, from `power` records.

use super::*;
use boltwatch_proto::v1::{PowerEvent, PowerEventKind, PowerEventSource};

const SEC: u64 = 1_000_000_000;

fn power(kind: PowerEventKind, at: u64, slept_ns: u64) -> Payload {
    Payload::Power(PowerEvent {
        kind: kind as i32,
        at_unix_ns: at,
        slept_ns,
        source: PowerEventSource::ClockGap as i32,
    })
}

#[test]
fn wakes_count_sleeps_and_add_the_time_asleep_per_node() {
    use PowerEventKind::*;
    let mut m = Metrics::new();
    let t = 1_000 * SEC;
    // No series before the first wake: a sleep alone has no length.
    m.apply_record(&rec("a", "b1", 1, t, power(Sleep, t, 0)));
    assert_eq!(value(&m, "boltwatch_sleeps_total{node=\"a\"}"), None);
    // Slept 6.5 h, woke.
    let slept = 23_400 * SEC;
    m.apply_record(&rec("a", "b1", 2, t + slept, power(Wake, t + slept, slept)));
    assert_eq!(
        value(&m, "boltwatch_sleeps_total{node=\"a\"}").as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&m, "boltwatch_asleep_seconds_total{node=\"a\"}").as_deref(),
        Some("23400")
    );
    // A second, short sleep of the same node, and one of another node.
    m.apply_record(&rec("a", "b1", 3, t, power(Wake, t, SEC / 2)));
    m.apply_record(&rec("c", "b9", 1, t, power(Wake, t, 2 * SEC)));
    assert_eq!(
        value(&m, "boltwatch_sleeps_total{node=\"a\"}").as_deref(),
        Some("2")
    );
    assert_eq!(
        value(&m, "boltwatch_asleep_seconds_total{node=\"a\"}").as_deref(),
        Some("23400.5")
    );
    assert_eq!(
        value(&m, "boltwatch_asleep_seconds_total{node=\"c\"}").as_deref(),
        Some("2")
    );
}
