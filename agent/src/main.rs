//! boltwatch-agent command line. Only `ping` and `reflect` live here so far;
//! `run` and `bandwidth` are added by the integrator.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use boltwatch_agent::health::Health;
use boltwatch_agent::stamp::ping::{self, PingOptions};
use boltwatch_agent::stamp::spawn_reflector;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "boltwatch-agent", version, about = "boltwatch node agent")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Send STAMP probes to a reflector and print the round trips.
    Ping(PingArgs),
    /// Run a standalone STAMP reflector until killed.
    Reflect(ReflectArgs),
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

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match cli.command {
        Command::Ping(args) => ping_cmd(args),
        Command::Reflect(args) => reflect_cmd(args),
    }
}

fn ping_cmd(args: PingArgs) -> anyhow::Result<()> {
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
    let stop = AtomicBool::new(false);
    let report = ping::ping(&opts, &stop, &mut std::io::stdout().lock())
        .with_context(|| format!("pinging {target}"))?;
    if report.received == 0 {
        // Like ping(1): no answer at all is a failure exit.
        std::process::exit(1);
    }
    Ok(())
}

fn reflect_cmd(args: ReflectArgs) -> anyhow::Result<()> {
    let socket =
        UdpSocket::bind(args.listen).with_context(|| format!("binding {}", args.listen))?;
    let local = socket.local_addr()?;
    let health = Arc::new(Health::default());
    let stop = Arc::new(AtomicBool::new(false));
    let handle = spawn_reflector(socket, health, stop).context("starting the reflector")?;
    eprintln!("STAMP reflector listening on {local}");
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("reflector thread panicked"))?;
    Ok(())
}
