//! Running the Debian tools the bed is made of (`ip`, `nft`, `tc`,
//! `sysctl`), and the error type of the harness. A missing tool or missing
//! root is an error with a message that says what to install or how to run:
//! the harness fails, it never skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Everything that can go wrong building or driving a test bed.
#[derive(Debug, thiserror::Error)]
pub enum BedError {
    /// The process is not root; network namespaces need CAP_NET_ADMIN.
    #[error("the netns test bed needs root (CAP_NET_ADMIN); run the tests as root")]
    NotRoot,
    /// A required tool is not installed.
    #[error("`{tool}` not found in PATH or /usr/sbin, /sbin: install Debian package `{package}`")]
    MissingTool {
        /// The executable.
        tool: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// A command ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Exit status as text.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// A command could not be started.
    #[error("starting `{command}`")]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Tool output that could not be understood.
    #[error("unexpected output of `{command}`: {detail}")]
    Parse {
        /// The command line.
        command: String,
        /// What was wrong.
        detail: String,
    },
    /// A node index, interface or link that the bed does not have.
    #[error("no such {0}")]
    NoSuch(String),
    /// Filesystem trouble (fixture trees).
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Finds `tool` in `PATH` or the sbin directories (root's tools live there
/// and are often missing from a test runner's `PATH`).
pub fn find_tool(tool: &'static str, package: &'static str) -> Result<PathBuf, BedError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| is_executable(p))
        .ok_or(BedError::MissingTool { tool, package })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Fails unless the process runs as root.
pub fn require_root() -> Result<(), BedError> {
    if nix::unistd::geteuid().is_root() {
        Ok(())
    } else {
        Err(BedError::NotRoot)
    }
}

/// The resolved paths of the tools the bed drives.
#[derive(Debug, Clone)]
pub struct Tools {
    /// iproute2 `ip`.
    pub ip: PathBuf,
    /// iproute2 `tc`.
    pub tc: PathBuf,
    /// nftables `nft`.
    pub nft: PathBuf,
    /// procps `sysctl`.
    pub sysctl: PathBuf,
}

impl Tools {
    /// Checks root and finds every tool, or says which one is missing.
    pub fn find() -> Result<Tools, BedError> {
        require_root()?;
        Ok(Tools {
            ip: find_tool("ip", "iproute2")?,
            tc: find_tool("tc", "iproute2")?,
            nft: find_tool("nft", "nftables")?,
            sysctl: find_tool("sysctl", "procps")?,
        })
    }
}

/// Renders a command line for messages.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` to completion; a non-zero exit is an error carrying stderr.
pub fn run(cmd: &mut Command) -> Result<Output, BedError> {
    let command = describe(cmd);
    let out = cmd.output().map_err(|source| BedError::Spawn {
        command: command.clone(),
        source,
    })?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(BedError::Command {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Runs `cmd` and returns its stdout as text.
pub fn run_text(cmd: &mut Command) -> Result<String, BedError> {
    Ok(String::from_utf8_lossy(&run(cmd)?.stdout).into_owned())
}
