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
        /// `NODE TOKEN` lines: agents must present a token allowed for
        /// their node. Without it every agent is accepted.
        #[arg(long)]
        auth_tokens: Option<PathBuf>,
    },
    /// A real local soak: this collector and N agents on loopback, probing
    /// in a full mesh; prints a table per link at the end.
    Lab {
        /// How long to probe.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        duration: std::time::Duration,
        /// Agents in the mesh (2..16).
        #[arg(long, default_value_t = 2)]
        nodes: usize,
        /// Probe interval of every agent.
        #[arg(long, default_value = "100ms", value_parser = parse_duration)]
        probe_interval: std::time::Duration,
        /// Where /metrics is served while the lab runs (127.0.0.1:0 picks a
        /// free port).
        #[arg(long, default_value = "127.0.0.1:9471")]
        http_listen: std::net::SocketAddr,
        /// Keep the store here instead of a temporary directory.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Run bandwidth tests between the agents this often (each agent
        /// has a bandwidth server either way).
        #[arg(long, value_parser = parse_duration)]
        bandwidth_interval: Option<std::time::Duration>,
    },
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (expected e.g. 60s, 5m)"))
}

fn lab(opts: boltwatch_collector::lab::LabOptions) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("boltwatch-collector lab: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        let mut out = std::io::stdout();
        boltwatch_collector::lab::run(opts, &mut out).await
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("boltwatch-collector lab: {e}");
            ExitCode::FAILURE
        }
    }
}

/// EX_CONFIG from sysexits.h.
const EXIT_CONFIG: u8 = 64;

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
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
    let (grpc_listen, http_listen, data_dir, config_path, log_format, auth_tokens) =
        match cli.command {
            Command::Serve {
                grpc_listen,
                http_listen,
                data_dir,
                config,
                log_format,
                auth_tokens,
            } => (
                grpc_listen,
                http_listen,
                data_dir,
                config,
                log_format,
                auth_tokens,
            ),
            Command::Lab {
                duration,
                nodes,
                probe_interval,
                http_listen,
                data_dir,
                bandwidth_interval,
            } => {
                return lab(boltwatch_collector::lab::LabOptions {
                    duration,
                    nodes,
                    probe_interval,
                    http_listen,
                    data_dir,
                    bandwidth_interval,
                })
            }
        };
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
                    auth_tokens,
                },
            )
        })
        .and_then(|mut c| {
            if let Some(p) = &c.auth_tokens {
                c.auth = Some(config::load_auth_tokens(p)?);
            }
            Ok(c)
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
