//! boltwatch-collector (being assembled).
#![deny(missing_docs)]

pub mod report;
