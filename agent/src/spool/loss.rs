//! How many records a damaged stretch of the spool cost. Pure: no files.
//!
//! The bytes of a damaged stretch do not say how many records they held,
//! but the sequence numbers around it do: a boot's records are written with
//! contiguous seqs, in order, so between the last record before the damage
//! and the first after it (same boot) exactly `after - before - 1` are
//! missing. Where the boot changes across the damage, or nothing follows
//! it (a torn tail), at least one record was lost and one is counted.

/// Walks the surviving records of the spool in file order, noting damage.
#[derive(Debug, Default)]
pub struct LossTally {
    last: Option<(String, u64)>,
    /// Damage seen since `last`; `true` when it is to be counted (damage
    /// found in a file already moved aside was counted when it was found).
    after_damage: Option<bool>,
    lost: u64,
}

impl LossTally {
    /// A tally at the start of the spool.
    pub fn new() -> LossTally {
        LossTally::default()
    }

    /// A damaged stretch; `count` is false when it was counted before.
    pub fn damage(&mut self, count: bool) {
        self.after_damage = Some(self.after_damage.unwrap_or(false) || count);
    }

    /// The next surviving record.
    pub fn record(&mut self, boot: &str, seq: u64) {
        if let Some(count) = self.after_damage.take() {
            if count {
                self.lost += match &self.last {
                    Some((b, s)) if b == boot && seq > *s => seq - s - 1,
                    _ => 1,
                };
            }
        }
        match &mut self.last {
            Some((b, s)) if b == boot => *s = seq,
            _ => self.last = Some((boot.to_string(), seq)),
        }
    }

    /// Records lost to the damage seen, counting damage at the very end.
    pub fn lost(&self) -> u64 {
        self.lost + u64::from(self.after_damage == Some(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What recovery saw, in file order.
    enum Seen {
        /// An intact record of a boot.
        Record(&'static str, u64),
        /// A damaged stretch; `false` when it was counted before.
        Damage(bool),
    }
    use Seen::{Damage, Record};

    /// What a tally of `seen` counts as lost.
    fn lost(seen: &[Seen]) -> u64 {
        let mut t = LossTally::new();
        for s in seen {
            match *s {
                Record(boot, seq) => t.record(boot, seq),
                Damage(fresh) => t.damage(fresh),
            }
        }
        t.lost()
    }

    #[test]
    fn a_gap_in_one_boot_counts_exactly() {
        let seen = [
            Record("a", 36),
            Damage(true),
            Record("a", 38),
            Record("a", 39),
            Damage(true),
            Damage(true),
            Record("a", 45),
        ];
        assert_eq!(lost(&seen), 1 + 5);
    }

    #[test]
    fn garbage_between_neighbours_costs_nothing() {
        assert_eq!(lost(&[Record("a", 1), Damage(true), Record("a", 2)]), 0);
    }

    #[test]
    fn boot_changes_and_tails_count_at_least_one() {
        let seen = [
            Damage(true),
            Record("a", 5),
            Damage(true),
            Record("b", 1),
            Damage(true),
        ];
        assert_eq!(lost(&seen), 3);
    }

    #[test]
    fn damage_counted_before_is_not_counted_again() {
        let seen = [Record("a", 1), Damage(false), Record("a", 3), Damage(false)];
        assert_eq!(lost(&seen), 0);
    }
}
