//! What the link-truth tests share: the promtool check, the lock that
//! keeps them from measuring each other, JSON number reading and the
//! carrier-down events of a node.

use std::sync::Mutex;

use boltwatch_tests::cluster::Cluster;
use boltwatch_tests::procs::promtool_check;
use serde_json::Value;

/// `promtool check metrics` must find nothing, except its one objection
/// to the contract's `*_bits_per_second` names (it wants bytes; link
/// speeds are quoted in bits everywhere, and the issue fixes the name).
pub fn lint(metrics: &str) {
    if let Err(out) = promtool_check(metrics) {
        let other: Vec<&str> = out
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter(|l| !l.contains("_bits_per_second use base unit \"bytes\" instead of \"bits\""))
            .collect();
        assert!(other.is_empty(), "promtool check metrics: {out}");
    }
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the process-wide test lock.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A millisecond in nanoseconds.
pub const MS: u64 = 1_000_000;

/// A JSON number that must be a u64.
pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

/// Carrier-down link events of `iface` recorded by `node` at or after `since`.
pub fn down_events(c: &Cluster, node: usize, iface: &str, since: u64) -> Vec<Value> {
    c.records(node, "link_event")
        .into_iter()
        .filter(|r| {
            let p = &r["payload"];
            u(&r["unix_ns"]) >= since
                && p["interface"] == iface
                && p["carrier"] == false
                && p["source"] != "LINK_EVENT_SOURCE_STARTUP"
        })
        .collect()
}
