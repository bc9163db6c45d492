//! Records in key order from rows in time order.
//!
//! The time index orders `stored` rows by their earliest record's time,
//! and a packed row (see [`super::pack`]) holds up to a minute of records.
//! A reader that promises records in time order therefore holds back
//! what it has expanded until no row still to come can hold an earlier
//! record: every record of a row is at or after the row's time, so once
//! the next row starts at `t`, everything held before `t` is final. At
//! most about a minute of records is held.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// An item with a time; its `Ord` is the full output order, time first.
pub trait Timed: Ord {
    /// The time the output is ordered by first.
    fn unix_ns(&self) -> u64;
}

/// Records held until their place in the output is certain.
#[derive(Debug)]
pub struct Ordered<T> {
    held: BinaryHeap<Reverse<T>>,
}

impl<T> Default for Ordered<T> {
    fn default() -> Self {
        Ordered {
            held: BinaryHeap::new(),
        }
    }
}

impl<T: Timed> Ordered<T> {
    /// Before the records of a row whose earliest time is `row_ns` are
    /// pushed: hands every held record earlier than that to `emit`, in
    /// order. False when `emit` asked to stop.
    pub fn release_before(&mut self, row_ns: u64, emit: &mut impl FnMut(T) -> bool) -> bool {
        while self.held.peek().is_some_and(|t| t.0.unix_ns() < row_ns) {
            let Some(Reverse(t)) = self.held.pop() else {
                break;
            };
            if !emit(t) {
                return false;
            }
        }
        true
    }

    /// Holds a record of the current row.
    pub fn push(&mut self, t: T) {
        self.held.push(Reverse(t));
    }

    /// After the last row: everything held, in order. False when `emit`
    /// asked to stop.
    pub fn finish(&mut self, emit: &mut impl FnMut(T) -> bool) -> bool {
        self.release_before(u64::MAX, emit) && {
            // Records at u64::MAX itself (validation never lets one in).
            while let Some(Reverse(t)) = self.held.pop() {
                if !emit(t) {
                    return false;
                }
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Timed for (u64, u32) {
        fn unix_ns(&self) -> u64 {
            self.0
        }
    }

    /// Rows as (row time, records), the way the time index returns them.
    fn run(rows: &[(u64, Vec<(u64, u32)>)], stop_after: usize) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        let mut emit = |t| {
            out.push(t);
            out.len() < stop_after
        };
        let mut o = Ordered::default();
        for (row_ns, recs) in rows {
            if !o.release_before(*row_ns, &mut emit) {
                return out;
            }
            for r in recs {
                o.push(*r);
            }
        }
        o.finish(&mut emit);
        out
    }

    #[test]
    fn overlapping_rows_come_out_in_full_order() {
        let rows = vec![
            (10, vec![(10, 1), (50, 1), (30, 1)]),
            (20, vec![(20, 2), (30, 0)]),
            (30, vec![(30, 3)]),
            (70, vec![(70, 1), (71, 1)]),
            (70, vec![(70, 0)]),
        ];
        let mut want: Vec<(u64, u32)> = rows.iter().flat_map(|r| r.1.clone()).collect();
        want.sort();
        assert_eq!(run(&rows, usize::MAX), want);
        // Stopping early stops at once, in order.
        assert_eq!(run(&rows, 3), want[..3]);
        assert_eq!(run(&rows, 7), want[..7]);
    }
}
