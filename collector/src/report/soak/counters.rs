//! Counter growth: how much each interface's error, drop and carrier
//! counters grew from the first to the last `InterfaceCounters` reading
//! in the range. Pure.
//!
//! The counters are the kernel's, cumulative: an agent restart does not
//! reset them (its readings go on from the same values, under a new boot),
//! a host reboot or a re-created interface does. Growth therefore adds up
//! each step between consecutive readings in time order, across boots; a
//! step where a counter went down is a reset, and the value after it is
//! the growth since the reset (as Prometheus' `increase` counts).

use std::collections::BTreeMap;

use boltwatch_proto::v1::InterfaceCounters;
use serde::Serialize;

/// Readings one interface keeps at most (one every 10 s for 72 hours is
/// 26 000): further ones count towards the last reading only.
const MAX_READINGS: usize = 1 << 16;

/// The counters the report follows, in one reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Receive errors.
    pub receive_errors: u64,
    /// Transmit errors.
    pub transmit_errors: u64,
    /// Receive drops.
    pub receive_drops: u64,
    /// Transmit drops.
    pub transmit_drops: u64,
    /// Carrier changes (up and down counts together).
    pub carrier_changes: u64,
}

impl Counts {
    fn of(c: &InterfaceCounters) -> Counts {
        Counts {
            receive_errors: c.receive_errors,
            transmit_errors: c.transmit_errors,
            receive_drops: c.receive_drops,
            transmit_drops: c.transmit_drops,
            carrier_changes: c.carrier_up_count + c.carrier_down_count,
        }
    }

    fn fields(&self) -> [u64; 5] {
        [
            self.receive_errors,
            self.transmit_errors,
            self.receive_drops,
            self.transmit_drops,
            self.carrier_changes,
        ]
    }

    fn from_fields(f: [u64; 5]) -> Counts {
        Counts {
            receive_errors: f[0],
            transmit_errors: f[1],
            receive_drops: f[2],
            transmit_drops: f[3],
            carrier_changes: f[4],
        }
    }

    /// Errors both ways.
    pub fn errors(&self) -> u64 {
        self.receive_errors + self.transmit_errors
    }
}

/// One interface's growth over the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Growth {
    /// Node.
    pub node: String,
    /// Interface.
    pub interface: String,
    /// Counter resets seen (a counter went down).
    pub resets: u64,
    /// Growth of each counter.
    pub growth: Counts,
}

/// Every interface's readings. (How many is not reported: under raw
/// retention a minute keeps its newest reading only, and a report over
/// rolled-up minutes must read as the one over raw records.)
#[derive(Debug, Default)]
pub(super) struct CountersAcc {
    /// (node, interface) -> (time, counts).
    readings: BTreeMap<(String, String), Vec<(u64, Counts)>>,
}

impl CountersAcc {
    /// Reading `c` of `node`, recorded at `unix_ns`.
    pub fn add(&mut self, node: &str, c: &InterfaceCounters, unix_ns: u64) {
        let key = (node.to_string(), c.interface.clone());
        let v = self.readings.entry(key).or_default();
        if v.len() >= MAX_READINGS {
            v.pop();
        }
        v.push((unix_ns, Counts::of(c)));
    }

    /// The growth of every interface, by node and interface.
    pub fn growth(&mut self) -> Vec<Growth> {
        self.readings
            .iter_mut()
            .map(|((node, interface), v)| {
                v.sort_by_key(|r| r.0);
                let (growth, resets) = grow(v.iter().map(|r| r.1));
                Growth {
                    node: node.clone(),
                    interface: interface.clone(),
                    resets,
                    growth,
                }
            })
            .collect()
    }
}

/// Growth of readings in time order, and the steps where any counter
/// went down (resets).
fn grow(readings: impl Iterator<Item = Counts>) -> (Counts, u64) {
    let mut sum = [0u64; 5];
    let mut resets = 0;
    let mut prev: Option<[u64; 5]> = None;
    for r in readings {
        let cur = r.fields();
        if let Some(p) = prev {
            let mut reset = false;
            for i in 0..5 {
                sum[i] += if cur[i] >= p[i] {
                    cur[i] - p[i]
                } else {
                    reset = true;
                    cur[i]
                };
            }
            resets += u64::from(reset);
        }
        prev = Some(cur);
    }
    (Counts::from_fields(sum), resets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(iface: &str, rx_err: u64, tx_drop: u64, up: u64, down: u64) -> InterfaceCounters {
        InterfaceCounters {
            interface: iface.into(),
            receive_errors: rx_err,
            transmit_drops: tx_drop,
            carrier_up_count: up,
            carrier_down_count: down,
            ..Default::default()
        }
    }

    #[test]
    fn growth_adds_steps_across_restarts_and_resets_in_time_order() {
        let mut a = CountersAcc::default();
        // Out of order (rollups come after raw records): sorted by time.
        a.add("a", &reading("bridge0", 1010, 7, 4, 4), 40);
        a.add("a", &reading("bridge0", 1000, 5, 3, 3), 10);
        a.add("a", &reading("bridge0", 1003, 7, 3, 4), 20);
        // An agent restart: the same kernel counters go on.
        a.add("a", &reading("bridge0", 1008, 7, 4, 4), 30);
        // A reboot: counters start again from zero, then grow by 2.
        a.add("a", &reading("bridge0", 0, 0, 1, 0), 50);
        a.add("a", &reading("bridge0", 2, 0, 1, 0), 60);
        a.add("b", &reading("en0", 9, 9, 9, 9), 10);
        let g = a.growth();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].resets, 1);
        assert_eq!(
            g[0].growth,
            Counts {
                // 3, 5, 2, nothing at the reset, 2.
                receive_errors: 12,
                transmit_errors: 0,
                receive_drops: 0,
                transmit_drops: 2,
                carrier_changes: 1 + 1 + 1,
            }
        );
        assert_eq!(g[0].growth.errors(), 12);
        // One reading: no growth known.
        assert_eq!(
            (g[1].interface.as_str(), g[1].growth),
            ("en0", Counts::default())
        );
    }
}
