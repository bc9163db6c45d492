//! Service definitions: the launchd plists pass the launchd.plist(5) lint
//! (which also refuses a job that would restart-loop on a config error), the
//! lint itself catches what it claims to, and the install scripts parse.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn lint(paths: &[PathBuf]) -> (bool, String) {
    let out = Command::new("python3")
        .arg(repo().join("systemd-launchd/lint/plist_lint.py"))
        .args(paths)
        .output()
        .expect("python3 is needed for the plist lint (apt-get install -y python3)");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn shipped_plists_pass_the_launchd_lint() {
    let plists: Vec<PathBuf> = std::fs::read_dir(repo().join("systemd-launchd"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "plist"))
        .collect();
    assert!(!plists.is_empty(), "no plist under systemd-launchd/");
    let (ok, text) = lint(&plists);
    assert!(ok, "{text}");
}

/// The lint is only worth running if it refuses what it says it refuses:
/// an unknown key, a wrong type, a label that is not the file name, and a
/// restart-on-failure job without the config-error exit status.
#[test]
fn lint_refuses_bad_plists() {
    let shipped =
        std::fs::read_to_string(repo().join("systemd-launchd/io.boltwatch.agent.plist")).unwrap();
    let cases = [
        (
            "unknown key",
            shipped.replace("<key>RunAtLoad</key>", "<key>RunAtLaod</key>"),
            "RunAtLaod",
        ),
        (
            "wrong type",
            shipped.replace(
                "<key>ThrottleInterval</key><integer>10</integer>",
                "<key>ThrottleInterval</key><string>10</string>",
            ),
            "ThrottleInterval",
        ),
        (
            "restart loop",
            shipped.replace(
                "<key>BOLTWATCH_CONFIG_ERROR_EXIT_STATUS</key><string>0</string>",
                "",
            ),
            "EnvironmentVariables.BOLTWATCH_CONFIG_ERROR_EXIT_STATUS",
        ),
        (
            "keepalive key",
            shipped.replace("<key>SuccessfulExit</key>", "<key>SucessfulExit</key>"),
            "KeepAlive.SucessfulExit",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (what, text, key) in cases {
        assert_ne!(
            text, shipped,
            "{what}: the substitution no longer matches the shipped plist"
        );
        let p = dir.path().join("io.boltwatch.agent.plist");
        std::fs::write(&p, text).unwrap();
        let (ok, out) = lint(&[p]);
        assert!(!ok, "{what}: lint passed:\n{out}");
        assert!(
            out.contains(&format!("key {key}")),
            "{what}: lint did not name {key}:\n{out}"
        );
    }
    let p = dir.path().join("io.example.other.plist");
    std::fs::write(&p, &shipped).unwrap();
    let (ok, out) = lint(&[p]);
    assert!(
        !ok && out.contains("key Label"),
        "label/file mismatch not caught:\n{out}"
    );
}

#[test]
fn install_scripts_parse() {
    for s in ["install-macos.sh", "install-linux.sh"] {
        let st = Command::new("bash")
            .arg("-n")
            .arg(repo().join("systemd-launchd").join(s))
            .status()
            .expect("bash");
        assert!(st.success(), "{s} does not parse");
    }
}
