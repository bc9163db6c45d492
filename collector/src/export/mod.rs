//! What the collector exports: [`prometheus`] holds the metric state fed by
//! ingest and renders the text exposition format for `/metrics`.

pub mod prometheus;
