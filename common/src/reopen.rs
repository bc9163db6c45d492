//! Log rotation for a job whose log file the service manager opened.
//!
//! launchd opens a job's `StandardOutPath`/`StandardErrorPath` once, at
//! start. newsyslog(8) rotates by renaming the file: without help the
//! process goes on writing into the renamed file (later compressed and
//! deleted), and the new one stays empty. So, as syslogd does:
//!
//! - with [`PID_FILE_VAR`] set, the process writes its pid there (removed
//!   at a clean stop) for newsyslog's `pid_file` field;
//! - on SIGHUP, newsyslog's default signal, it reopens [`LOG_FILE_VAR`]'s
//!   path (append, created 0640 if missing) onto stdout and stderr.
//!
//! SIGHUP is handled either way: without a log file to reopen it is logged
//! and ignored, never the default "terminate".

use std::io;
use std::path::{Path, PathBuf};

/// The log file to reopen on SIGHUP (the plist sets it to its
/// `StandardErrorPath`).
pub const LOG_FILE_VAR: &str = "BOLTWATCH_LOG_FILE";
/// Where to write the pid for newsyslog.
pub const PID_FILE_VAR: &str = "BOLTWATCH_PID_FILE";

/// Opens `path` for appending (0640 when created) and puts it on stdout
/// and stderr.
pub fn reopen_stdio(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .open(path)?;
    nix::unistd::dup2_stdout(&file)?;
    nix::unistd::dup2_stderr(&file)?;
    Ok(())
}

/// A pid file, removed when dropped (a clean stop).
#[derive(Debug)]
pub struct PidFile(PathBuf);

impl PidFile {
    /// Writes this process's pid to `path`.
    pub fn write(path: &Path) -> io::Result<PidFile> {
        std::fs::write(path, format!("{}\n", std::process::id()))?;
        Ok(PidFile(path.to_path_buf()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Serves log rotation until dropped: handles SIGHUP, then writes the pid
/// file [`PID_FILE_VAR`] asks for (in that order, so newsyslog never
/// signals a process that would die of SIGHUP), and reopens
/// [`LOG_FILE_VAR`]'s file on every SIGHUP. Dropping it removes the pid
/// file.
pub async fn serve_rotation() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot handle SIGHUP: no log reopening, no pid file");
            return std::future::pending().await;
        }
    };
    let _pid_file = std::env::var_os(PID_FILE_VAR).and_then(|p| {
        let path = PathBuf::from(p);
        PidFile::write(&path)
            .inspect_err(
                |e| tracing::warn!(path = %path.display(), error = %e, "cannot write the pid file"),
            )
            .ok()
    });
    let log = std::env::var_os(LOG_FILE_VAR).map(PathBuf::from);
    while hup.recv().await.is_some() {
        match &log {
            Some(path) => match reopen_stdio(path) {
                Ok(()) => tracing::info!(path = %path.display(), "log file reopened (SIGHUP)"),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot reopen the log file")
                }
            },
            None => tracing::info!("SIGHUP ignored: no {LOG_FILE_VAR} to reopen"),
        }
    }
}
