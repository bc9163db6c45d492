// The commit a binary is built from, for `--version`: shared by
// agent/build.rs and collector/build.rs through `include!`, so both say it
// the same way. `cargo install --path agent` builds in the checkout, so the
// repository's git is there; a build from a source tarball (a Homebrew
// formula, a distribution package) has no git, and says so unless the
// packager sets BOLTWATCH_COMMIT. `pub(crate)`: tests/tests/packaging.rs
// includes it in a module and checks the fallback.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What `--version` says when there is no git to ask.
pub(crate) const NO_CHECKOUT: &str = "unknown, not a git checkout";

/// Sets `BOLTWATCH_COMMIT` for the crate: BOLTWATCH_COMMIT from the
/// environment, else [`commit_in`] the crate's directory. Reruns when HEAD
/// moves (a commit, a checkout), not on every source change.
fn emit_commit() {
    println!("cargo:rerun-if-env-changed=BOLTWATCH_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    let here = Path::new(".");
    let commit = match std::env::var("BOLTWATCH_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => {
            watch_head(here);
            commit_in(here)
        }
    };
    println!("cargo:rustc-env=BOLTWATCH_COMMIT={commit}");
}

/// `git rev-parse --short HEAD` in `dir`, or [`NO_CHECKOUT`].
pub(crate) fn commit_in(dir: &Path) -> String {
    git(dir, &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| NO_CHECKOUT.into())
}

/// `git ARGS` in `dir`, trimmed; None when git is missing or `dir` is not
/// in a checkout.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

/// Reruns this script when HEAD or the branch it names moves. Only files
/// that exist are named: cargo reruns a script every build for a missing
/// one. `--git-path` resolves a worktree's HEAD and the shared refs.
fn watch_head(dir: &Path) {
    let mut paths = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(r) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        paths.push(r);
    }
    for p in paths {
        if let Some(f) = git(dir, &["rev-parse", "--git-path", &p]).map(PathBuf::from) {
            if dir.join(&f).exists() {
                println!("cargo:rerun-if-changed={}", f.display());
            }
        }
    }
}
