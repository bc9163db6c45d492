//! `boltwatch-agent`: the command line. Parses flags, loads config, starts
//! logging and the runtime, and hands over to the library. `anyhow` lives
//! here only.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use boltwatch_agent::config::{self, Config, LogFormat, Overrides};
use boltwatch_agent::health::Health;
use boltwatch_agent::run::{self, Listeners};
use boltwatch_agent::stamp::ping::{self, PingOptions};
use boltwatch_agent::stamp::spawn_reflector;
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

mod cli_bandwidth;
use cli_bandwidth::{BandwidthArgs, BandwidthServerArgs};

/// Link telemetry agent for Thunderbolt clusters.
#[derive(Debug, Parser)]
#[command(name = "boltwatch-agent", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent: probe peers, watch links, stream to the collector.
    Run(Box<RunArgs>),
    /// Send STAMP probes to a reflector and print the round trips.
    Ping(PingArgs),
    /// Run a standalone STAMP reflector until killed.
    Reflect(ReflectArgs),
    /// Run one bandwidth test against an iperf3-compatible server.
    Bandwidth(BandwidthArgs),
    /// Serve bandwidth tests to iperf3 clients and other agents.
    BandwidthServer(BandwidthServerArgs),
}

/// Flags of `run`; each overrides the same key of the config file.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// TOML config file (see agent.example.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// This node's name (default: the host name).
    #[arg(long)]
    node: Option<String>,
    /// Collector gRPC URL (default http://127.0.0.1:50071).
    #[arg(long)]
    collector: Option<String>,
    /// STAMP reflector listen address (default 0.0.0.0:862).
    #[arg(long)]
    listen: Option<String>,
    /// A peer to probe, NAME=IP:PORT; repeatable.
    #[arg(long = "peer", value_name = "NAME=ADDR")]
    peers: Vec<String>,
    /// Time between probes to each peer (default 100ms).
    #[arg(long)]
    probe_interval: Option<String>,
    /// A probe unanswered after this is lost (default 1s).
    #[arg(long)]
    probe_timeout: Option<String>,
    /// Root of sysfs (default /sys; tests point it at a fixture tree).
    #[arg(long)]
    sysfs_root: Option<PathBuf>,
    /// Probe through this interface instead of the discovered one.
    #[arg(long)]
    interface: Option<String>,
    /// Log format: text or json.
    #[arg(long)]
    log_format: Option<String>,
    /// A TCP service to check on every peer, NAME=PORT; repeatable
    /// (default ssh=22).
    #[arg(long = "service", value_name = "NAME=PORT")]
    services: Vec<String>,
    /// Check no services.
    #[arg(long, conflicts_with = "services")]
    no_services: bool,
    /// Durable spool directory (default /var/lib/boltwatch/spool).
    #[arg(long)]
    spool_dir: Option<PathBuf>,
    /// Spool cap in bytes (default 1 GiB).
    #[arg(long)]
    spool_max_bytes: Option<u64>,
    /// File with the bearer token for the collector.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Bandwidth server listen address (default 0.0.0.0:5202).
    #[arg(long)]
    bandwidth_listen: Option<String>,
    /// Time between bandwidth tests of each peer (default 5m).
    #[arg(long)]
    bandwidth_interval: Option<String>,
    /// Length of each bandwidth test, whole seconds (default 10s).
    #[arg(long)]
    bandwidth_duration: Option<String>,
    /// Run no bandwidth tests and no bandwidth server.
    #[arg(long)]
    no_bandwidth: bool,
}

/// `boltwatch-agent ping ADDR[:PORT] [-c N] [-i INTERVAL] [-W TIMEOUT]`.
#[derive(clap::Args, Debug)]
struct PingArgs {
    /// Reflector, `ADDR[:PORT]` (port 862 by default).
    target: String,
    /// Probes to send.
    #[arg(short = 'c', long, default_value_t = 10)]
    count: u64,
    /// Time between probes: seconds (`0.2`) or a duration (`200ms`).
    #[arg(short = 'i', long, default_value = "1", value_parser = ping::parse_duration)]
    interval: Duration,
    /// A probe unanswered after this long is lost.
    #[arg(short = 'W', long, default_value = "1", value_parser = ping::parse_duration)]
    timeout: Duration,
    /// Send through this device (SO_BINDTODEVICE / IP_BOUND_IF).
    #[arg(short = 'I', long)]
    interface: Option<String>,
    /// Take t1 in userspace even where kernel TX timestamps exist.
    #[arg(long)]
    userspace_tx: bool,
}

/// `boltwatch-agent reflect --listen ADDR`.
#[derive(clap::Args, Debug)]
struct ReflectArgs {
    /// Address to answer on.
    #[arg(long, default_value = "0.0.0.0:862")]
    listen: SocketAddr,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => return run_cmd(*args),
        Command::Ping(args) => {
            init_tracing_with(LogFormat::Text, "warn");
            ping_cmd(args)
        }
        Command::Reflect(args) => {
            init_tracing_with(LogFormat::Text, "info");
            reflect_cmd(args)
        }
        Command::Bandwidth(args) => {
            init_tracing_with(LogFormat::Text, "warn");
            cli_bandwidth::bandwidth_cmd(args).map(|()| ExitCode::SUCCESS)
        }
        Command::BandwidthServer(args) => {
            init_tracing_with(LogFormat::Text, "info");
            cli_bandwidth::bandwidth_server_cmd(args).map(|()| ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("boltwatch-agent: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_cmd(args: RunArgs) -> ExitCode {
    let config = match load_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("boltwatch-agent: config error: {e}");
            // EX_USAGE: bad configuration, nothing was started.
            return ExitCode::from(64);
        }
    };
    init_tracing(config.log_format);
    match serve(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "agent failed");
            ExitCode::FAILURE
        }
    }
}

fn load_config(args: &RunArgs) -> Result<Config, config::ConfigError> {
    let file = match &args.config {
        Some(p) => Some(config::load_file(p)?),
        None => None,
    };
    Config::build(
        file,
        Overrides {
            node: args.node.clone(),
            collector: args.collector.clone(),
            listen: args.listen.clone(),
            peers: args.peers.clone(),
            probe_interval: args.probe_interval.clone(),
            probe_timeout: args.probe_timeout.clone(),
            sysfs_root: args.sysfs_root.clone(),
            interface: args.interface.clone(),
            log_format: args.log_format.clone(),
            services: args.services.clone(),
            no_services: args.no_services,
            spool_dir: args.spool_dir.clone(),
            spool_max_bytes: args.spool_max_bytes,
            token_file: args.token_file.clone(),
            bandwidth_listen: args.bandwidth_listen.clone(),
            bandwidth_interval: args.bandwidth_interval.clone(),
            bandwidth_duration: args.bandwidth_duration.clone(),
            no_bandwidth: args.no_bandwidth,
        },
    )
    .and_then(|mut c| {
        if let Some(p) = &c.token_file {
            c.token = Some(config::read_token(p)?);
        }
        Ok(c)
    })
}

fn serve(config: Config) -> anyhow::Result<()> {
    let listeners = Listeners::bind(&config)?;
    // The probe path runs on its own threads with kernel timestamps; the
    // runtime only ships records and runs checks, so one thread is plenty
    // and keeps the footprint small.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let stopped = run::run(config, listeners, shutdown_signal()).await?;
        tracing::info!(boot_id = %stopped.boot_id, last_seq = stopped.last_seq, undelivered = stopped.undelivered, "agent stopped");
        Ok(())
    })
}

/// Resolves on SIGINT or SIGTERM (launchd and systemd stop with SIGTERM).
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

fn init_tracing(format: LogFormat) {
    init_tracing_with(format, "info");
}

/// Logs to stderr; `BOLTWATCH_LOG` (an `EnvFilter`) overrides `default`.
fn init_tracing_with(format: LogFormat, default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BOLTWATCH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

fn ping_cmd(args: PingArgs) -> anyhow::Result<ExitCode> {
    if args.interval.is_zero() || args.timeout.is_zero() {
        anyhow::bail!("interval and timeout must be positive");
    }
    let target = ping::parse_target(&args.target)?;
    let opts = PingOptions {
        target,
        count: args.count,
        interval: args.interval,
        timeout: args.timeout,
        bind_device: args.interface,
        kernel_tx: !args.userspace_tx,
    };
    let report = ping::ping(
        &opts,
        &CancellationToken::new(),
        &mut std::io::stdout().lock(),
    )
    .with_context(|| format!("pinging {target}"))?;
    // Like ping(1): no answer at all is a failure exit.
    Ok(if report.received == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn reflect_cmd(args: ReflectArgs) -> anyhow::Result<ExitCode> {
    let socket =
        UdpSocket::bind(args.listen).with_context(|| format!("binding {}", args.listen))?;
    let local = socket.local_addr()?;
    let health = Arc::new(Health::default());
    // Runs until killed: nothing cancels the token.
    let handle = spawn_reflector(socket, health, CancellationToken::new())
        .context("starting the reflector")?;
    eprintln!("STAMP reflector listening on {local}");
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("reflector thread panicked"))?;
    Ok(ExitCode::SUCCESS)
}
