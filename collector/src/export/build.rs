//! `boltwatch_collector_build_info`, beside the shared `process_*`
//! families (the agent declares its own build info).

use boltwatch_exposition::family::{families, Exposition};
use boltwatch_exposition::{Domain, Subjects};

families! {
    BUILD_INFO = Gauge("boltwatch_collector_build_info", "", &["version"], "The collector's version; always 1.");
}

/// The build info domain (no state: the version is compiled in).
#[derive(Debug, Default, Clone, Copy)]
pub struct BuildInfo;

impl Domain for BuildInfo {
    fn render(&self, e: &mut Exposition, _: &Subjects) {
        e.family(&BUILD_INFO, [([env!("CARGO_PKG_VERSION")], 1u64)]);
    }
}
