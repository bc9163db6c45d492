//! Agent configuration: a TOML file, overridden by command-line flags,
//! checked once into a [`Config`].
//!
//! Every key is defined once, in [`keys`]: its TOML path, flag, default,
//! validation and help (the mechanism is [`boltwatch_common::config`]).
//! Every error names the file, the key and the line, because a soak that
//! fails to start at 2 a.m. should say exactly what to fix. Parsing is pure
//! ([`Config::parse`]); the binary edge reads the file and merges the flags
//! ([`boltwatch_common::daemon::ConfigArgs::load`]).

use boltwatch_common::config::{self as common, Schema};
pub use boltwatch_common::config::{line_of, ConfigError};
pub use boltwatch_common::log::LogFormat;

pub mod keys;
mod model;
mod parse;
#[cfg(test)]
mod tests;

pub use keys::DEFAULT_SPOOL_DIR;
pub use model::{Config, Flags, PeerConfig, ServiceConfig};
pub use parse::{parse_token, read_token};

impl Schema for Config {
    fn keys() -> &'static [common::Key<Self>] {
        keys::KEYS
    }

    fn blank() -> Self {
        keys::blank()
    }

    fn finish(&mut self, at: &common::Where<'_, Self>) -> Result<(), ConfigError> {
        keys::finish(self, at)
    }
}

impl boltwatch_common::daemon::DaemonConfig for Config {
    fn read_files(&mut self) -> Result<(), ConfigError> {
        if let Some(p) = &self.token_file {
            self.token = Some(read_token(p)?);
        }
        Ok(())
    }

    fn warnings(&self) -> Vec<String> {
        crate::transport::reach::unreachable(&self.collector)
            .into_iter()
            .collect()
    }

    fn summary(&self) -> String {
        format!(
            "config OK: node {}, {} peer(s), collector {}, reflector {}, spool {}",
            self.node,
            self.peers.len(),
            self.collector,
            self.listen,
            self.spool_dir.display()
        )
    }
}
