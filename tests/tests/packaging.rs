//! The packages of packaging/: the Homebrew formula parses (`ruby -c`) and
//! installs only what the repository has; the .deb is built by
//! packaging/deb/build-deb.sh from the built binaries, installed for real
//! with dpkg into a scratch root (maintainer scripts included, run with
//! DPKG_ROOT), its units pass `systemd-analyze verify` there, and removal
//! and purge leave nothing of it. And `--version` names the commit built
//! from, or says there was no git checkout to ask.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use boltwatch_tests::procs::bin;

// The helper both build scripts include, to check its fallback directly.
#[allow(dead_code)]
mod commit {
    include!("../../build-support/commit.rs");
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (see .ci/test for the tools the tests need)"))
}

fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        text(&out)
    );
    text(&out)
}

/// The quoted first argument of every `NAME "..."` call in `rb`, e.g. the
/// files of `.install "..."` and the crates of `std_cargo_args(path: "...")`.
fn quoted_after(rb: &str, call: &str) -> Vec<String> {
    rb.lines()
        .filter_map(|l| l.split_once(call))
        .filter_map(|(_, rest)| rest.split('"').nth(1).map(str::to_string))
        .collect()
}

#[test]
fn homebrew_formula_parses_and_installs_only_what_the_repo_has() {
    let formula = repo().join("packaging/homebrew/boltwatch.rb");
    let out = ok(Command::new("ruby").arg("-c").arg(&formula));
    assert!(out.contains("Syntax OK"), "{out}");
    let rb = std::fs::read_to_string(&formula).unwrap();
    let files = quoted_after(&rb, ".install ");
    assert!(files.len() >= 5, "{files:?}");
    for f in &files {
        assert!(
            repo().join(f).is_file(),
            "the formula installs {f}, not in the repository"
        );
    }
    // Both binaries come from `cargo install --path CRATE`, each crate's one
    // binary named after it.
    let crates = quoted_after(&rb, "std_cargo_args(path: ");
    assert_eq!(crates, ["agent", "collector"]);
    for c in &crates {
        let manifest = std::fs::read_to_string(repo().join(c).join("Cargo.toml")).unwrap();
        let name = format!("boltwatch-{c}");
        assert!(manifest.contains(&format!("name = \"{name}\"")), "{c}");
        assert!(
            rb.contains(&format!("bin}}/{name}")),
            "the test block runs {name}"
        );
    }
    // What the service and post_install read was installed.
    for used in quoted_after(&rb, "pkgshare/")
        .iter()
        .filter(|u| u.contains('/'))
    {
        let base = Path::new(used).file_name().unwrap().to_str().unwrap();
        assert!(
            files.iter().any(|f| f.ends_with(base)),
            "{used} is read but never installed"
        );
    }
    assert!(
        rb.contains("opt_bin/\"boltwatch-agent\""),
        "the service runs the agent"
    );
}

#[test]
fn version_names_the_commit_built_from() {
    let head = ok(Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(repo()));
    let head = head.trim();
    for b in ["boltwatch-agent", "boltwatch-collector"] {
        let v = ok(Command::new(bin(b)).arg("--version"));
        assert_eq!(
            v.trim(),
            format!("{b} {} (commit {head})", env!("CARGO_PKG_VERSION")),
            "{b}"
        );
    }
    // Outside a checkout (a source tarball): said, not a build failure.
    let nowhere = tempfile::tempdir().unwrap();
    assert_eq!(commit::commit_in(nowhere.path()), commit::NO_CHECKOUT);
    assert_eq!(commit::commit_in(&repo()), head);
}

/// A scratch root dpkg can install into: an empty dpkg database, this
/// host's account files (useradd --prefix adds to them) and unit tree
/// (`systemd-analyze verify` resolves sysinit.target and friends).
fn scratch_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    for d in [
        "etc",
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "usr/lib/systemd",
    ] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::write(r.join("var/lib/dpkg/status"), "").unwrap();
    for f in ["passwd", "group", "shadow", "gshadow"] {
        std::fs::copy(Path::new("/etc").join(f), r.join("etc").join(f))
            .unwrap_or_else(|e| panic!("/etc/{f}: {e}"));
    }
    ok(Command::new("cp")
        .arg("-a")
        .arg("/usr/lib/systemd/system")
        .arg(r.join("usr/lib/systemd")));
    root
}

/// `dpkg --root=ROOT ARGS`, maintainer scripts run outside a chroot with
/// DPKG_ROOT set (the scratch root has no shell of its own), dependencies
/// not checked (its database has no libc6).
fn dpkg(root: &Path, args: &[&str]) -> Output {
    run(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["--force-script-chrootless", "--force-depends"])
        .args(args))
}

const UNITS: [&str; 2] = ["boltwatch-agent.service", "boltwatch-collector.service"];

#[test]
fn deb_installs_verifies_and_purges_in_a_scratch_root() {
    let bin_dir = bin("boltwatch-agent").parent().unwrap().to_path_buf();
    bin("boltwatch-collector");
    let out_dir = tempfile::tempdir().unwrap();
    let deb = ok(Command::new("bash")
        .arg(repo().join("packaging/deb/build-deb.sh"))
        .arg("--bin-dir")
        .arg(&bin_dir)
        .arg("--out")
        .arg(out_dir.path()));
    let deb = PathBuf::from(deb.trim());
    let fields = ok(Command::new("dpkg-deb").arg("--field").arg(&deb));
    assert!(fields.contains("Package: boltwatch\n"), "{fields}");
    assert!(fields.contains("Depends: libc6"), "{fields}");

    let root = scratch_root();
    let r = root.path();
    let out = dpkg(r, &["-i", deb.to_str().unwrap()]);
    assert!(out.status.success(), "dpkg -i: {}", text(&out));
    for f in [
        "usr/bin/boltwatch-agent",
        "usr/bin/boltwatch-collector",
        "etc/boltwatch/agent.toml",
        "etc/boltwatch/collector.toml",
        "usr/share/doc/boltwatch/README.md",
    ] {
        assert!(r.join(f).is_file(), "{f} not installed");
    }
    let passwd = std::fs::read_to_string(r.join("etc/passwd")).unwrap();
    assert!(
        passwd.contains("\n_boltwatch:"),
        "no system user _boltwatch"
    );
    let host = ok(Command::new("hostname").arg("-s"));
    let config = std::fs::read_to_string(r.join("etc/boltwatch/agent.toml")).unwrap();
    assert!(
        config.contains(&format!("node = \"{}\"", host.trim())),
        "{config}"
    );
    ok(Command::new(r.join("usr/bin/boltwatch-agent"))
        .args(["run", "--check-config", "--config"])
        .arg(r.join("etc/boltwatch/agent.toml")));

    let mut verify = Command::new("systemd-analyze");
    verify
        .args(["verify", "--man=no"])
        .arg(format!("--root={}", r.display()));
    for u in UNITS {
        let installed = std::fs::read_to_string(r.join("lib/systemd/system").join(u)).unwrap();
        assert!(installed.contains("ExecStart=/usr/bin/boltwatch-"), "{u}");
        verify.arg(format!("/lib/systemd/system/{u}"));
    }
    let out = run(&mut verify);
    // verify exits 0 on an unknown key and only warns: any output fails.
    assert!(
        out.status.success() && text(&out).trim().is_empty(),
        "systemd-analyze verify: {}\n{}",
        out.status,
        text(&out)
    );

    let out = dpkg(r, &["-r", "boltwatch"]);
    assert!(out.status.success(), "dpkg -r: {}", text(&out));
    assert!(!r.join("usr/bin/boltwatch-agent").exists());
    assert!(!r
        .join("lib/systemd/system/boltwatch-agent.service")
        .exists());
    assert!(
        r.join("etc/boltwatch/agent.toml").exists(),
        "remove keeps the configs"
    );
    let out = dpkg(r, &["-P", "boltwatch"]);
    assert!(out.status.success(), "dpkg -P: {}", text(&out));
    assert!(
        !r.join("etc/boltwatch").exists(),
        "purge leaves /etc/boltwatch"
    );
    let status = dpkg(r, &["-s", "boltwatch"]);
    assert!(!status.status.success(), "still known: {}", text(&status));
}
