//! Reports over stored records. [`summary`] holds the math (pure): per-link
//! RTT, loss and thermal summaries, which the lab's closing table prints.

pub mod summary;
