//! `boltwatch-lab`: a real local soak. One collector and N agents on
//! loopback in one process, a full mesh of STAMP probing over real sockets,
//! real gRPC and the real SQLite store; a table per link at the end.
//!
//! It lives in its own crate because it links both the agent and the
//! collector; the production collector binary links no agent code.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use boltwatch_common::duration::parse as parse_duration;
use boltwatch_common::log::{self, LogFormat};
use clap::Parser;

mod lab;
mod progress;

/// A real local soak: a collector and N agents on loopback, probing in a
/// full mesh; prints a table per link at the end.
#[derive(Parser)]
#[command(name = "boltwatch-lab", version)]
struct Args {
    /// How long to probe.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// Agents in the mesh (2..16).
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// Probe interval of every agent.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    probe_interval: Duration,
    /// Where /metrics is served while the lab runs (127.0.0.1:0 picks a
    /// free port).
    #[arg(long, default_value = "127.0.0.1:9471")]
    http_listen: std::net::SocketAddr,
    /// Keep the store here instead of a temporary directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Run bandwidth tests between the agents this often (each agent has a
    /// bandwidth server either way).
    #[arg(long, value_parser = parse_duration)]
    bandwidth_interval: Option<Duration>,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let opts = lab::LabOptions {
        duration: a.duration,
        nodes: a.nodes,
        probe_interval: a.probe_interval,
        http_listen: a.http_listen,
        data_dir: a.data_dir,
        bandwidth_interval: a.bandwidth_interval,
        progress: progress::Style::for_output(std::io::stdout().is_terminal(), a.duration),
    };
    // The table goes to stdout; only warnings to stderr.
    log::init(LogFormat::Text, "warn");
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("boltwatch-lab: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        let mut out = std::io::stdout();
        lab::run(opts, &mut out).await
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("boltwatch-lab: {e}");
            ExitCode::FAILURE
        }
    }
}
