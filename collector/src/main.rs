//! The `boltwatch-collector` binary: parses flags, loads the config (bad
//! config exits 78, EX_CONFIG, before any socket is bound; `--check-config`
//! stops there), starts logging, binds the listeners and calls
//! [`boltwatch_collector::run_supervised`] until SIGINT or SIGTERM, telling
//! systemd READY=1 and WATCHDOG=1 on the way. The local soak lives in its own binary, `boltwatch-lab`, so
//! this one does not link the agent.

use std::process::ExitCode;

use anyhow::Context;
use boltwatch_collector::config;
use boltwatch_collector::{Config, Listeners};
use boltwatch_common::{daemon, exit, notify};
use boltwatch_store::StoreHandle;
use clap::{Parser, Subcommand};

mod cli;

/// `--version`: the package version and the commit built from
/// (build-support/commit.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("BOLTWATCH_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(name = "boltwatch-collector", version = VERSION, about = "boltwatch collector")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Receive agent telemetry, store it, serve /metrics and the JSON API.
    Serve(Box<daemon::ConfigArgs<Config>>),
    /// Soak runs: start, stop, list, show, mark (on the store `serve` uses).
    Soak {
        #[command(flatten)]
        store: cli::StoreArgs,
        #[command(subcommand)]
        op: cli::soak::SoakOp,
    },
    /// The verdict of a soak or a time range: table, md, json or html.
    Report {
        #[command(flatten)]
        store: cli::StoreArgs,
        #[command(flatten)]
        args: cli::soak::ReportArgs,
    },
    /// The records of a range as CSV or JSON lines, streamed (read-only).
    Export {
        #[command(flatten)]
        store: cli::StoreArgs,
        #[command(flatten)]
        args: cli::export::ExportArgs,
    },
    /// Replace raw RTT summaries and counters before a time by per-minute
    /// rollups now (what `retention.raw` does as they age).
    Prune {
        #[command(flatten)]
        store: cli::StoreArgs,
        #[command(flatten)]
        args: cli::prune::PruneArgs,
    },
}

fn serve(config: Config) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let result = rt.block_on(async {
        let listeners = Listeners::bind(&config).await?;
        boltwatch_collector::run_supervised(config, listeners, supervised).await
    });
    // `run` has drained and closed the store; don't let a straggling
    // connection task hold the exit.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    tracing::info!("collector stopped");
    result?;
    Ok(())
}

/// What the collector runs until, once the store is open and every server
/// serves: WATCHDOG=1 goes out only when the store writer answered a ping
/// (queued behind the batches before it), so an idle collector with no
/// agents is alive and a wedged writer is not.
async fn supervised(store: StoreHandle) {
    let watchdog = notify::watchdog(|| {
        let store = store.clone();
        async move {
            if store.writer_answers().await {
                Ok(())
            } else {
                Err("the store writer is gone".to_string())
            }
        }
    });
    daemon::supervise("serving", watchdog).await;
}

/// Prints an error of a `soak`, `report`, `export` or `prune` command: a bad SLO or config
/// file exits 78 like `serve`, anything else 1.
fn failed(e: anyhow::Error) -> ExitCode {
    eprintln!("boltwatch-collector: {e:#}");
    if e.downcast_ref::<config::ConfigError>().is_some() {
        ExitCode::from(exit::EX_CONFIG)
    } else {
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Serve(args) => daemon::run("boltwatch-collector", &args, serve),
        Command::Soak { store, op } => match cli::soak::soak(&store, op) {
            Ok(out) => {
                print!("{out}");
                ExitCode::SUCCESS
            }
            Err(e) => failed(e),
        },
        Command::Export { store, args } => match cli::export::export(&store, args) {
            Ok(done) => {
                eprintln!("exported {} records", done.records);
                if done.rollup_minutes > 0 {
                    eprintln!(
                        "{} rolled-up minutes not exported: retention replaced their raw \
                         RTT summaries and counters by per-minute rollups",
                        done.rollup_minutes
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => failed(e),
        },
        Command::Prune { store, args } => match cli::prune::prune(&store, args) {
            Ok(out) => {
                print!("{out}");
                ExitCode::SUCCESS
            }
            Err(e) => failed(e),
        },
        Command::Report { store, args } => {
            let check = args.check;
            match cli::soak::report(&store, args) {
                Ok(pass) if check && !pass => ExitCode::from(cli::soak::EXIT_FAIL),
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => failed(e),
            }
        }
    }
}
