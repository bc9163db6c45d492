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

    #[test]
    fn a_gap_in_one_boot_counts_exactly() {
        let mut t = LossTally::new();
        t.record("a", 36);
        t.damage(true);
        t.record("a", 38);
        t.record("a", 39);
        t.damage(true);
        t.damage(true);
        t.record("a", 45);
        assert_eq!(t.lost(), 1 + 5);
    }

    #[test]
    fn garbage_between_neighbours_costs_nothing() {
        let mut t = LossTally::new();
        t.record("a", 1);
        t.damage(true);
        t.record("a", 2);
        assert_eq!(t.lost(), 0);
    }

    #[test]
    fn boot_changes_and_tails_count_at_least_one() {
        let mut t = LossTally::new();
        t.damage(true);
        t.record("a", 5);
        t.damage(true);
        t.record("b", 1);
        t.damage(true);
        assert_eq!(t.lost(), 3);
    }

    #[test]
    fn damage_counted_before_is_not_counted_again() {
        let mut t = LossTally::new();
        t.record("a", 1);
        t.damage(false);
        t.record("a", 3);
        t.damage(false);
        assert_eq!(t.lost(), 0);
    }
}
