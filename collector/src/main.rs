//! The `boltwatch-collector` binary: parses flags, loads the config (bad
//! config exits 78, EX_CONFIG, before any socket is bound), starts logging,
//! binds the listeners and calls [`boltwatch_collector::run`] until SIGINT
//! or SIGTERM. The local soak lives in its own binary, `boltwatch-lab`, so
//! this one does not link the agent.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use boltwatch_collector::config;
use boltwatch_collector::{Config, Listeners};
use boltwatch_common::{log, signal::shutdown_signal};
use clap::{Parser, Subcommand};

mod cli_soak;

#[derive(Parser)]
#[command(name = "boltwatch-collector", version, about = "boltwatch collector")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Receive agent telemetry, store it, serve /metrics and the JSON API.
    Serve {
        /// TOML config file; flags override it.
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        flags: config::Flags,
    },
    /// Soak runs: start, stop, list, show, mark (on the store `serve` uses).
    Soak {
        #[command(flatten)]
        store: cli_soak::StoreArgs,
        #[command(subcommand)]
        op: cli_soak::SoakOp,
    },
    /// The verdict of a soak or a time range: table, md, json or html.
    Report {
        #[command(flatten)]
        store: cli_soak::StoreArgs,
        #[command(flatten)]
        args: cli_soak::ReportArgs,
    },
}

/// EX_CONFIG (78) from sysexits.h: bad configuration, nothing was started.
/// The service unit does not restart on it (`RestartPreventExitStatus`).
const EXIT_CONFIG: u8 = 78;

fn serve(config: Config) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let result = rt.block_on(async {
        let listeners = Listeners::bind(&config).await?;
        boltwatch_collector::run(config, listeners, shutdown_signal()).await
    });
    // `run` has drained and closed the store; don't let a straggling
    // connection task hold the exit.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    tracing::info!("collector stopped");
    result?;
    Ok(())
}

fn load_config(
    path: Option<&std::path::Path>,
    flags: &config::Flags,
) -> Result<Config, config::ConfigError> {
    let file = path.map(config::load_file).transpose()?;
    let mut c = Config::build(file.as_ref(), flags)?;
    if let Some(p) = &c.auth_tokens {
        c.auth = Some(config::load_auth_tokens(p)?);
    }
    Ok(c)
}

/// Prints an error of a `soak` or `report` command: a bad SLO or config
/// file exits 78 like `serve`, anything else 1.
fn failed(e: anyhow::Error) -> ExitCode {
    eprintln!("boltwatch-collector: {e:#}");
    if e.downcast_ref::<config::ConfigError>().is_some() {
        ExitCode::from(EXIT_CONFIG)
    } else {
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    let (config, flags) = match Cli::parse().command {
        Command::Serve { config, flags } => (config, flags),
        Command::Soak { store, op } => {
            return match cli_soak::soak(&store, op) {
                Ok(out) => {
                    print!("{out}");
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
        Command::Report { store, args } => {
            let check = args.check;
            return match cli_soak::report(&store, args) {
                Ok(pass) if check && !pass => ExitCode::from(cli_soak::EXIT_FAIL),
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => failed(e),
            };
        }
    };
    let config = match load_config(config.as_deref(), &flags) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("boltwatch-collector: config: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    log::init(config.log_format, "info");
    match serve(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("boltwatch-collector: {e:#}");
            ExitCode::FAILURE
        }
    }
}
