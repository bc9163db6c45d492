//! The store commands of the binary (`soak`, `report`, `export`, `prune`): thin
//! edges that open the store `serve` uses, named by `--data-dir` or
//! `--config`, with their own connection, so they work while `serve` runs.

pub mod export;
pub mod prune;
pub mod soak;

use std::path::PathBuf;

use boltwatch_collector::config::{self, Config};
use clap::Args;

/// Which store: the same resolution as `serve`.
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// The collector's TOML config file (its `data_dir` is used).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// The collector's data directory (overrides the config file).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
}

impl StoreArgs {
    pub fn db_path(&self) -> Result<PathBuf, config::ConfigError> {
        let file = self.config.as_deref().map(config::load_file).transpose()?;
        let dir = self.data_dir.as_ref().map(|d| d.display().to_string());
        let pairs: Vec<(&str, &str)> = dir.iter().map(|d| ("data-dir", d.as_str())).collect();
        let c = Config::build(file.as_ref(), &config::Flags::from_pairs(&pairs))?;
        Ok(c.db_path())
    }

    /// The store's file, which must exist: these commands read or amend a
    /// store `serve` made and never create one, as one run from the wrong
    /// directory would otherwise answer from an empty store it just made.
    pub fn existing_db_path(&self) -> anyhow::Result<PathBuf> {
        let path = self.db_path()?;
        if !path.exists() {
            // Absolute, so a run from the wrong directory shows where it
            // looked.
            let tried = std::path::absolute(&path).unwrap_or(path);
            anyhow::bail!(
                "no store at {} (the default --data-dir is ./boltwatch-data, \
                 relative to where this runs); name serve's store with \
                 --data-dir DIR or --config FILE",
                tried.display()
            );
        }
        Ok(path)
    }
}
