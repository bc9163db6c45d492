//! The spool's tap: a function called with every record as the spool
//! numbers it.

use std::sync::Arc;

use boltwatch_proto::v1::Record;

/// Called with every record the spool numbers, as it numbers it: the
/// agent's own `/metrics` sees exactly the records it sends.
#[derive(Clone)]
pub struct Tap(Arc<dyn Fn(&Record) + Send + Sync>);

impl Tap {
    /// A tap calling `f`.
    pub fn new(f: impl Fn(&Record) + Send + Sync + 'static) -> Tap {
        Tap(Arc::new(f))
    }

    /// Shows `r` to the tap.
    pub fn call(&self, r: &Record) {
        (self.0)(r)
    }
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tap")
    }
}
