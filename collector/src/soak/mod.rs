//! Soak runs as objects: a named time range over some nodes, with SLO
//! thresholds, free-form labels and workload marks, persisted in the store
//! (migration 2; SQL in [`boltwatch_store::soaks`]) so it survives restarts and
//! is shared by the CLI (`soak`, `report`), the HTTP API ([`api`]) and the
//! live `/metrics` state ([`live`]).
//!
//! - [`slo`]: the thresholds and their TOML file (errors name file, line, key).
//! - [`time`]: RFC 3339 or unix-seconds times.
//! - [`load`]: reads a soak's records from the store into the pure report
//!   builder ([`crate::report::soak`]).

pub mod api;
pub mod live;
pub mod load;
pub mod slo;
pub mod stored;
pub mod time;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use slo::Slo;

/// A soak run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Soak {
    /// Unique name.
    pub name: String,
    /// Start, unix ns.
    pub start_unix_ns: u64,
    /// End, unix ns; `None` while it runs.
    pub end_unix_ns: Option<u64>,
    /// Nodes it covers; empty: every node with records in the range.
    pub nodes: Vec<String>,
    /// Pass/fail thresholds.
    pub slo: Slo,
    /// Free-form labels.
    pub labels: BTreeMap<String, String>,
}

/// What the cluster was doing (an Xcode build, inference, a file copy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    /// Free text.
    pub text: String,
    /// When it started (or the instant it names), unix ns.
    pub at_unix_ns: u64,
    /// When it ended, if it spans time.
    pub until_unix_ns: Option<u64>,
}

/// Why a soak operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    /// No soak of that name.
    #[error("no soak named `{0}`")]
    NotFound(String),
    /// The name is taken.
    #[error("a soak named `{0}` exists already")]
    Exists(String),
    /// Bad input (name, times, labels).
    #[error("{0}")]
    Invalid(String),
    /// The soak budget is spent (soaks, open soaks, bytes, free space).
    #[error("{0}")]
    Full(String),
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] boltwatch_store::StoreError),
}

/// Longest soak name (it becomes a metric label and a URL segment).
pub const MAX_NAME: usize = 64;

/// Checks a soak name: 1..=64 of `[A-Za-z0-9._-]`.
pub fn check_name(name: &str) -> Result<(), SoakError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(SoakError::Invalid(format!(
            "soak name `{name}`: use 1 to {MAX_NAME} letters, digits, `.`, `_` or `-`"
        )))
    }
}

impl Soak {
    /// The range a report covers at `now_ns`: start to end, or to now while
    /// it runs, also when it was created with its planned end (a live
    /// verdict judges the elapsed part, not hours that have not come).
    pub fn range(&self, now_ns: u64) -> (u64, u64) {
        let end = self
            .end_unix_ns
            .unwrap_or(now_ns)
            .min(now_ns)
            .max(self.start_unix_ns);
        (self.start_unix_ns, end)
    }

    /// Whether it runs at `now_ns`.
    pub fn running(&self, now_ns: u64) -> bool {
        self.start_unix_ns <= now_ns && self.end_unix_ns.is_none_or(|e| e > now_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("tb5-72h.1").is_ok());
        for bad in ["", "a b", "x/y", &"n".repeat(65), "é"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn range_runs_to_now_until_stopped() {
        let mut s = Soak {
            name: "s".into(),
            start_unix_ns: 10,
            end_unix_ns: None,
            nodes: vec![],
            slo: Slo::default(),
            labels: Default::default(),
        };
        assert_eq!(s.range(50), (10, 50));
        assert!(s.running(50) && !s.running(5));
        s.end_unix_ns = Some(90);
        assert_eq!(s.range(50), (10, 50), "a planned end: the elapsed part");
        assert!(s.running(50));
        s.end_unix_ns = Some(40);
        assert_eq!(s.range(50), (10, 40));
        assert!(!s.running(50));
    }
}
