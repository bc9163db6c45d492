//! The `boltwatch-collector` binary: parses flags, loads the config (bad
//! config exits 78, EX_CONFIG, before any socket is bound; `--check-config`
//! stops there), starts logging, binds the listeners and calls
//! [`boltwatch_collector::run_supervised`] until SIGINT or SIGTERM, telling
//! systemd READY=1 and WATCHDOG=1 on the way. The local soak lives in its own binary, `boltwatch-lab`, so
//! this one does not link the agent.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use boltwatch_collector::config;
use boltwatch_collector::store::StoreHandle;
use boltwatch_collector::{Config, Listeners};
use boltwatch_common::{exit, log, notify, reopen, signal::shutdown_signal};
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
        /// Load and check the config (file, flags, the token and credential
        /// files it names), print a summary and exit: 0 when it is good, 78
        /// (EX_CONFIG) when not. Binds nothing, opens no store.
        #[arg(long)]
        check_config: bool,
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
/// serves: READY=1 to systemd, then the watchdog beside the shutdown
/// signal. WATCHDOG=1 goes out only when the store writer answered a ping
/// (queued behind the batches before it), so an idle collector with no
/// agents is alive and a wedged writer is not. SIGHUP reopens the log file
/// newsyslog rotated (launchd; see `boltwatch_common::reopen`).
async fn supervised(store: StoreHandle) {
    notify::ready("serving");
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
    tokio::select! {
        _ = shutdown_signal() => {}
        // newsyslog's SIGHUP after rotating the log (launchd).
        _ = reopen::serve_rotation() => {}
        _ = watchdog => {}
    }
    notify::stopping();
}

/// The checked config, with every file it names read: a token or
/// credential file that is missing or empty is a config error here (exit
/// 78, no restart loop), not a runtime failure after the listeners bound.
fn load_config(
    path: Option<&std::path::Path>,
    flags: &config::Flags,
) -> Result<Config, config::ConfigError> {
    let file = path.map(config::load_file).transpose()?;
    let mut c = Config::build(file.as_ref(), flags)?;
    if let Some(p) = &c.auth_tokens {
        c.auth = Some(config::load_auth_tokens(p)?);
    }
    if let Some(p) = &c.api_token_file {
        secret_file("api_token_file", p)?;
    }
    let rw = &c.remote_write;
    if let Some(p) = &rw.bearer_token_file {
        secret_file("remote_write.bearer_token_file", p)?;
    }
    if let Some(p) = &rw.basic_auth_password_file {
        secret_file("remote_write.basic_auth_password_file", p)?;
    }
    let tls_files = [
        ("tls.cert", &c.tls.cert),
        ("tls.key", &c.tls.key),
        ("tls.client_ca", &c.tls.client_ca),
        ("remote_write.tls_ca_file", &rw.tls_ca_file),
        ("remote_write.tls_cert_file", &rw.tls_cert_file),
        ("remote_write.tls_key_file", &rw.tls_key_file),
    ];
    for (key, p) in tls_files {
        if let Some(p) = p {
            secret_file(key, p)?;
        }
    }
    Ok(c)
}

/// Checks that the secret file `path` of `key` reads and is not empty.
fn secret_file(key: &str, path: &std::path::Path) -> Result<(), config::ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| config::ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if text.trim().is_empty() {
        return Err(config::ConfigError::Invalid {
            file: path.display().to_string(),
            line: 1,
            key: key.into(),
            message: "the file is empty".into(),
        });
    }
    Ok(())
}

/// The `--check-config` summary.
fn summary(c: &Config) -> String {
    let api = c
        .api_listen
        .map_or("on the HTTP address".to_string(), |a| a.to_string());
    let agents = c
        .auth_tokens
        .as_ref()
        .map_or("any agent (no auth_tokens)".to_string(), |p| {
            format!("agent tokens from {}", p.display())
        });
    format!(
        "config OK: gRPC {}, HTTP {}, API {api}, data dir {}, {agents}, {} remote write endpoint(s)",
        c.grpc_listen,
        c.http_listen,
        c.data_dir.display(),
        c.remote_write.urls.len()
    )
}

/// Prints an error of a `soak` or `report` command: a bad SLO or config
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
    let (config, check, flags) = match Cli::parse().command {
        Command::Serve {
            config,
            check_config,
            flags,
        } => (config, check_config, flags),
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
        Err(e) => return ExitCode::from(exit::config_error("boltwatch-collector", &e, check)),
    };
    if check {
        println!("{}", summary(&config));
        return ExitCode::SUCCESS;
    }
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
