//! The real `boltwatch-collector` binary, for the tests of its commands
//! (kept out of `common`, which the `soak_sim` example also includes and
//! which has no binary to run).

use std::path::Path;
use std::process::Command;

use boltwatch_common::testing::output_ok;

/// The real `boltwatch-collector` binary with `args` then `--data-dir dir`.
pub fn collector_cli(args: &[&str], dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_boltwatch-collector"));
    cmd.args(args).arg("--data-dir").arg(dir);
    cmd
}

/// [`collector_cli`] run to a successful end; its standard output.
pub fn collector_cli_ok(args: &[&str], dir: &Path) -> String {
    String::from_utf8(output_ok(&mut collector_cli(args, dir)).stdout).unwrap()
}
