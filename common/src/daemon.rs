//! The binary edge both daemons (`boltwatch-agent run`, `boltwatch-collector
//! serve`) share: the config flags, the way from flags to a checked config
//! (or exit 78), `--check-config`, logging, the allocator's arena cap
//! ([`crate::memory`]), and the supervision around the running service
//! (READY=1, the watchdog, SIGHUP log reopening, SIGINT and SIGTERM).

use std::fmt::Display;
use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::{build, ConfigError, Document, Flags, HasLogFormat, Schema};
use crate::{exit, log, memory, notify, reopen, signal};

/// `--config FILE`, `--check-config` and one flag per key of `C` (flags
/// override the file).
#[derive(Debug, clap::Args)]
pub struct ConfigArgs<C: Schema> {
    /// TOML config file; flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Load and check the config (file, flags and the files it names),
    /// print a summary and exit: 0 when it is good, 78 (EX_CONFIG) when not.
    /// Binds nothing, starts nothing.
    #[arg(long)]
    pub check_config: bool,
    /// One flag per key that has one.
    #[command(flatten)]
    pub flags: Flags<C>,
}

/// What the shared edge needs of a daemon's configuration.
pub trait DaemonConfig: Schema + HasLogFormat {
    /// Reads the files the config names (tokens, secrets): one that is
    /// missing or empty is a config error here (exit 78, no restart loop),
    /// not a runtime failure after the listeners bound.
    fn read_files(&mut self) -> Result<(), ConfigError>;
    /// The one-line `--check-config` summary.
    fn summary(&self) -> String;
    /// What `--check-config` warns about without failing: what the daemon
    /// would survive but an operator wants to know (a peer it cannot reach).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
}

impl<C: DaemonConfig> ConfigArgs<C> {
    /// The checked config with the files it names read, and notes about
    /// keys given by an earlier name (to log once logging is up).
    pub fn load(&self) -> Result<(C, Vec<String>), ConfigError> {
        let file = self
            .config
            .as_deref()
            .map(Document::load::<C>)
            .transpose()?;
        let mut c: C = build(file.as_ref(), &self.flags)?;
        c.read_files()?;
        Ok((c, file.map(|f| f.renamed).unwrap_or_default()))
    }
}

/// A daemon from its flags to its exit status: a config error exits 78
/// (see [`exit::config_error`]); `--check-config` prints the summary and
/// exits 0; otherwise logging starts (the notes about renamed keys are its
/// first lines) and `serve` runs. A failure of `serve` is logged and exits 1.
pub fn run<C: DaemonConfig, E: Display>(
    binary: &str,
    args: &ConfigArgs<C>,
    serve: impl FnOnce(C) -> Result<(), E>,
) -> ExitCode {
    let (mut config, renamed) = match args.load() {
        Ok(c) => c,
        Err(e) => return ExitCode::from(exit::config_error(binary, &e, args.check_config)),
    };
    if args.check_config {
        for note in &renamed {
            println!("note: {note}");
        }
        for warning in config.warnings() {
            println!("warning: {warning}");
        }
        println!("{}", config.summary());
        return ExitCode::SUCCESS;
    }
    log::init(*config.log_format_mut(), "info");
    for note in renamed {
        tracing::warn!("{note}");
    }
    if memory::cap_arenas() {
        tracing::debug!(arenas = memory::ARENAS, "malloc arenas capped");
    }
    match serve(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "{binary} failed");
            eprintln!("{binary}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// What a daemon runs until, once every part started: READY=1 to systemd
/// with `status`, then `watchdog` (see [`notify::watchdog`]) beside the
/// shutdown signal and newsyslog's SIGHUP after rotating the log (launchd;
/// see [`reopen`]); STOPPING=1 when one of them ends.
pub async fn supervise(status: &str, watchdog: impl Future) {
    notify::ready(status);
    tokio::select! {
        _ = signal::shutdown_signal() => {}
        _ = reopen::serve_rotation() => {}
        _ = watchdog => {}
    }
    notify::stopping();
}
