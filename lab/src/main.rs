//! `boltwatch-lab`: a real local soak. One collector and N agents on
//! loopback in one process, a full mesh of STAMP probing over real sockets,
//! real gRPC and the real SQLite store; a table per link at the end.
//!
//! It lives in its own crate because it links both the agent and the
//! collector; the production collector binary links no agent code.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use boltwatch_common::log::{self, LogFormat};
use clap::Parser;

mod lab;
mod progress;

/// A real local soak: a collector and N agents on loopback, probing in a
/// full mesh; prints a table per link at the end.
#[derive(Parser)]
#[command(name = "boltwatch-lab", version)]
struct Args {
    #[command(flatten)]
    lab: lab::LabOptions,
}

fn main() -> ExitCode {
    let opts = Args::parse().lab;
    let style = progress::Style::for_output(std::io::stdout().is_terminal(), opts.duration);
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
        lab::run(opts, style, &mut out).await
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
