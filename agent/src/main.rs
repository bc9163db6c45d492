//! `boltwatch-agent`: the command line. Parses flags, loads config, starts
//! logging and the runtime, and hands over to the library. `anyhow` lives
//! here only.

use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use boltwatch_agent::config::Config;
use boltwatch_agent::health::Health;
use boltwatch_agent::run::{self, Listeners};
use boltwatch_agent::stamp::ping::{self, PingOptions};
use boltwatch_agent::stamp::spawn_reflector;
use boltwatch_common::log::{self, LogFormat};
use boltwatch_common::{daemon, notify};
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

mod cli_bandwidth;
use cli_bandwidth::{BandwidthArgs, BandwidthServerArgs};

/// `--version`: the package version and the commit built from
/// (build-support/commit.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("BOLTWATCH_COMMIT"),
    ")"
);

/// Link telemetry agent for Thunderbolt clusters.
#[derive(Debug, Parser)]
#[command(name = "boltwatch-agent", version = VERSION, about)]
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

/// Flags of `run`: the config file, `--check-config`, and one flag per key
/// that has one (defined with the key in `config::keys`).
type RunArgs = daemon::ConfigArgs<Config>;

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
    boltwatch_agent::doctor::intercept();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => return run_cmd(*args),
        Command::Ping(args) => {
            log::init(LogFormat::Text, "warn");
            ping_cmd(args)
        }
        Command::Reflect(args) => {
            log::init(LogFormat::Text, "info");
            reflect_cmd(args)
        }
        Command::Bandwidth(args) => {
            log::init(LogFormat::Text, "warn");
            cli_bandwidth::bandwidth_cmd(args).map(|()| ExitCode::SUCCESS)
        }
        Command::BandwidthServer(args) => {
            log::init(LogFormat::Text, "info");
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
    daemon::run("boltwatch-agent", &args, serve)
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
        let stopped = run::run_supervised(config, listeners, supervised).await?;
        tracing::info!(boot_id = %stopped.boot_id, last_seq = stopped.last_seq, undelivered = stopped.undelivered, "agent stopped");
        Ok(())
    })
}

/// What the agent runs until, once every role started (the reflector's
/// socket is bound, probing began): WATCHDOG=1 goes out only while the
/// sampler turns and the senders close RTT windows.
async fn supervised(live: run::Liveness) {
    let mut progress = notify::Progress::new();
    let watchdog = notify::watchdog(|| std::future::ready(progress.check(&live.counters())));
    daemon::supervise("probing", watchdog).await;
}

fn ping_cmd(args: PingArgs) -> anyhow::Result<ExitCode> {
    if args.interval.is_zero() || args.timeout.is_zero() {
        anyhow::bail!("interval and timeout must be positive");
    }
    let scoped = ping::parse_target(&args.target)?;
    let bind_device = match (scoped.interface.clone(), args.interface) {
        (Some(scope), Some(i)) if scope != i => {
            anyhow::bail!("{scoped} is scoped to {scope}, --interface says {i}")
        }
        (scope, i) => scope.or(i),
    };
    let target = scoped.socket_addr()?;
    let opts = PingOptions {
        target,
        count: args.count,
        interval: args.interval,
        timeout: args.timeout,
        bind_device,
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
    let handle = spawn_reflector(socket, health, CancellationToken::new(), Default::default())
        .context("starting the reflector")?;
    eprintln!("STAMP reflector listening on {local}");
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("reflector thread panicked"))?;
    Ok(ExitCode::SUCCESS)
}
