//! The real `boltwatch-collector` binary, for the tests of its commands
//! (kept out of `common`, which the `soak_sim` example also includes and
//! which has no binary to run).

use std::path::Path;

/// Runs the real `boltwatch-collector` binary with `args` then
/// `--data-dir dir`.
pub fn collector_cli(args: &[&str], dir: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_boltwatch-collector"))
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .output()
        .unwrap()
}

/// [`collector_cli`] that must succeed; its standard output.
pub fn collector_cli_ok(args: &[&str], dir: &Path) -> String {
    let out = collector_cli(args, dir);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
