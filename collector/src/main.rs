//! The `boltwatch-collector` binary: parses flags, loads the config (bad
//! config exits 64 before any socket is bound), starts logging, binds the
//! listeners and calls [`boltwatch_collector::run`] until SIGINT or SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use boltwatch_collector::config::{self, LogFormat, Overrides};
use boltwatch_collector::{Config, Listeners};
use clap::{Parser, Subcommand};

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
        /// gRPC listen address [default: 127.0.0.1:50071].
        #[arg(long)]
        grpc_listen: Option<String>,
        /// HTTP listen address [default: 127.0.0.1:9471].
        #[arg(long)]
        http_listen: Option<String>,
        /// Directory of the SQLite store [default: ./boltwatch-data].
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// TOML config file; flags override it.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Log format: text or json [default: text].
        #[arg(long)]
        log_format: Option<String>,
    },
}

/// EX_CONFIG from sysexits.h.
const EXIT_CONFIG: u8 = 64;

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => b.init(),
        LogFormat::Json => b.json().init(),
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Command::Serve {
        grpc_listen,
        http_listen,
        data_dir,
        config: config_path,
        log_format,
    } = cli.command;
    let built = config_path
        .as_deref()
        .map(config::load_file)
        .transpose()
        .and_then(|file| {
            Config::build(
                file,
                Overrides {
                    grpc_listen,
                    http_listen,
                    data_dir,
                    log_format,
                },
            )
        });
    let config = match built {
        Ok(c) => c,
        Err(e) => {
            eprintln!("boltwatch-collector: config: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    init_tracing(config.log_format);
    match serve(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("boltwatch-collector: {e:#}");
            ExitCode::FAILURE
        }
    }
}
