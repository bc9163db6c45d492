//! Service definitions: the launchd plists pass the launchd.plist(5) lint
//! (which also refuses a job that would restart-loop on a config error, or
//! a non-root job told to write where only root may), the lint itself
//! catches what it claims to, and the install scripts parse. The Linux
//! install runs for real, staged into a scratch root (`--root`): it names
//! the node, creates `/usr/local/bin` and the `_boltwatch` system user, and
//! refuses a config that still says the example's node name.
//! The systemd units pass `systemd-analyze verify` with the binaries at the
//! paths they name and `systemd-analyze security --offline=true` at an
//! exposure of 2.0 or lower, and a config error stops them for good.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use boltwatch_tests::procs::bin;

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
        (
            "user id instead of a name",
            shipped.replace(
                "<key>UserName</key><string>_boltwatch</string>",
                "<key>UserName</key><string>499</string>",
            ),
            "UserName",
        ),
        (
            "non-root job writing its pid file into /var/run",
            shipped.replace(
                "/Library/Logs/boltwatch/agent.pid",
                "/var/run/boltwatch-agent.pid",
            ),
            "EnvironmentVariables.BOLTWATCH_PID_FILE",
        ),
        (
            "non-root job logging into /var/run",
            shipped.replace(
                "<key>StandardErrorPath</key><string>/Library/Logs/boltwatch/agent.log",
                "<key>StandardErrorPath</key><string>/private/var/run/agent.log",
            ),
            "StandardErrorPath",
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
    for s in ["install-macos.sh", "install-linux.sh", "install-common.sh"] {
        let st = Command::new("bash")
            .arg("-n")
            .arg(repo().join("systemd-launchd").join(s))
            .status()
            .expect("bash");
        assert!(st.success(), "{s} does not parse");
    }
}

/// Both scripts take their role and options from the library they source,
/// which refuses an unknown one before anything is built or installed.
#[test]
fn install_scripts_refuse_an_unknown_role() {
    for s in ["install-macos.sh", "install-linux.sh"] {
        for args in [
            &["bogus"][..],
            &["--node"],
            &["--nodes", "x"],
            &["--root", "rel"],
        ] {
            let out = Command::new("bash")
                .arg(repo().join("systemd-launchd").join(s))
                .args(args)
                .output()
                .expect("bash");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{s} {args:?}: {err}");
            assert!(
                err.contains("usage:") && err.contains(s) || err.contains("absolute"),
                "{s} {args:?}: {err}"
            );
        }
    }
}

/// The account the scripts create, as install-common.sh names it.
fn service_user() -> String {
    let lib = std::fs::read_to_string(repo().join("systemd-launchd/install-common.sh")).unwrap();
    let line = lib
        .lines()
        .find_map(|l| l.strip_prefix("readonly SERVICE_USER="))
        .expect("install-common.sh sets SERVICE_USER");
    line.trim().to_string()
}

/// The agent runs as the account the scripts create, on both systems.
#[test]
fn the_agent_runs_as_the_service_user() {
    let user = service_user();
    assert_eq!(user, "_boltwatch");
    let unit = unit_text(UNITS[0]);
    assert_eq!(unit_values(&unit, "User"), std::slice::from_ref(&user));
    assert_eq!(unit_values(&unit, "Group"), std::slice::from_ref(&user));
    assert!(
        unit_values(&unit, "DynamicUser").is_empty(),
        "a dynamic user would shadow the created one"
    );
    let plist = repo().join("systemd-launchd/io.boltwatch.agent.plist");
    for key in ["UserName", "GroupName"] {
        let script =
            "import plistlib,sys\nprint(plistlib.load(open(sys.argv[1],'rb')).get(sys.argv[2],''))";
        let out = Command::new("python3")
            .args(["-c", script])
            .arg(&plist)
            .arg(key)
            .output()
            .expect("python3");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), user, "{key}");
    }
}

/// A scratch root for a staged install: this host's account files (so
/// `useradd --prefix` has something to add to) and nothing else, not even
/// `/usr/local/bin`.
fn scratch_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    for f in ["passwd", "group", "shadow", "gshadow"] {
        std::fs::copy(Path::new("/etc").join(f), etc.join(f))
            .unwrap_or_else(|e| panic!("/etc/{f}: {e}"));
    }
    root
}

/// The built debug binaries, where `BOLTWATCH_BIN_DIR` points the script.
fn bin_dir() -> PathBuf {
    bin("boltwatch-agent").parent().unwrap().to_path_buf()
}

fn install_linux(root: &Path, args: &[&str]) -> Output {
    Command::new("bash")
        .arg(repo().join("systemd-launchd/install-linux.sh"))
        .arg("--root")
        .arg(root)
        .args(args)
        .env("BOLTWATCH_BIN_DIR", bin_dir())
        .output()
        .expect("bash")
}

/// The `node = ...` line of an installed config.
fn node_of(config: &Path) -> String {
    let text = std::fs::read_to_string(config).unwrap();
    text.lines()
        .find(|l| l.starts_with("node"))
        .unwrap_or_else(|| panic!("no node line in {}", config.display()))
        .to_string()
}

fn user_line(root: &Path, user: &str) -> Vec<String> {
    std::fs::read_to_string(root.join("etc/passwd"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with(&format!("{user}:")))
        .map(str::to_string)
        .collect()
}

/// A fresh staged install: binaries into a `/usr/local/bin` it had to
/// create, the unit, the example config under the host's short name, and
/// the service user as a system account with no login, in the scratch
/// root's files only. Run again (an upgrade) it keeps the config and does
/// not add the user twice; `--node` renames the node.
#[test]
fn linux_install_names_the_node_and_creates_the_user() {
    let root = scratch_root();
    let r = root.path();
    let user = service_user();
    let host_had_user = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .contains(&format!("\n{user}:"));
    let out = install_linux(r, &["agent"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("boltwatch-agent not started"),
        "{}",
        text(&out)
    );
    assert!(r.join("usr/local/bin/boltwatch-agent").is_file());
    assert!(r
        .join("etc/systemd/system/boltwatch-agent.service")
        .is_file());
    let host = Command::new("hostname").arg("-s").output().unwrap();
    let host = String::from_utf8_lossy(&host.stdout).trim().to_string();
    let config = r.join("etc/boltwatch/agent.toml");
    assert_eq!(node_of(&config), format!("node = \"{host}\""));
    let users = user_line(r, &user);
    assert_eq!(users.len(), 1, "{users:?}");
    let f: Vec<&str> = users[0].split(':').collect();
    let uid: u32 = f[2].parse().unwrap();
    assert!(uid > 0 && uid < 1000, "not a system uid: {}", users[0]);
    assert_eq!(f[6], "/usr/sbin/nologin", "{}", users[0]);
    let group = std::fs::read_to_string(r.join("etc/group")).unwrap();
    assert!(
        group.contains(&format!("\n{user}:x:{}:", f[3])),
        "no group {user}"
    );
    let host_has_user = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .contains(&format!("\n{user}:"));
    assert_eq!(
        host_has_user, host_had_user,
        "a staged install touched /etc/passwd"
    );

    // Again, as an upgrade, then with --node.
    let out = install_linux(r, &["agent"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(node_of(&config), format!("node = \"{host}\""));
    assert_eq!(user_line(r, &user).len(), 1);
    let out = install_linux(r, &["--node", "lab-7", "agent"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(node_of(&config), "node = \"lab-7\"");
    // The rest of the example is as shipped.
    let example = std::fs::read_to_string(repo().join("agent.example.toml")).unwrap();
    let installed = std::fs::read_to_string(&config).unwrap();
    assert_eq!(
        example
            .lines()
            .filter(|l| !l.starts_with("node"))
            .collect::<Vec<_>>(),
        installed
            .lines()
            .filter(|l| !l.starts_with("node"))
            .collect::<Vec<_>>()
    );
    let out = install_linux(r, &["--node", "a b", "agent"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

/// A config kept from an install that put the example live: the script
/// stops before the unit is installed, naming the file and the line, and
/// goes on once the line is edited (or `--node` names the node).
#[test]
fn linux_install_refuses_the_example_node_name() {
    let root = scratch_root();
    let r = root.path();
    let config = r.join("etc/boltwatch/agent.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let example = std::fs::read_to_string(repo().join("agent.example.toml")).unwrap();
    let line = 1 + example
        .lines()
        .position(|l| l == "node = \"mini-a\"")
        .expect("the example names mini-a");
    std::fs::write(&config, &example).unwrap();
    let out = install_linux(r, &["agent"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let want = format!("{}:{line}: node = \"mini-a\"", config.display());
    assert!(text(&out).contains(&want), "no {want} in:\n{}", text(&out));
    assert!(
        !r.join("etc/systemd/system/boltwatch-agent.service")
            .exists(),
        "the unit was installed"
    );
    std::fs::write(
        &config,
        example.replace("node = \"mini-a\"", "node = \"mini-q\""),
    )
    .unwrap();
    let out = install_linux(r, &["agent"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(node_of(&config), "node = \"mini-q\"");
    // Naming it explicitly is a choice, not the example left live.
    std::fs::write(&config, &example).unwrap();
    let out = install_linux(r, &["--node", "mini-a", "agent"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// install-macos.sh's id choice (first free id in 400..499 across users
/// and groups), run on `dscl . -list` output in the documented "name id"
/// layout.
#[test]
fn macos_service_user_gets_the_first_free_id_below_500() {
    let free = |listing: &str| {
        let script = format!(
            "source {}/systemd-launchd/install-common.sh agent && first_free_id",
            repo().display()
        );
        let mut child = Command::new("bash")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(listing.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )
    };
    let listing = "_amavisd                                 83\n_www 70\nroot 0\n_oldone 400\n_grp 401\nnobody -2\nalice 501\n";
    assert_eq!(free(listing), (true, "402".into()));
    assert_eq!(free(""), (true, "400".into()));
    let full: String = (400..500).map(|i| format!("u{i} {i}\n")).collect();
    assert!(!free(&full).0, "no free id must fail");
}

const UNITS: [&str; 2] = ["boltwatch-agent.service", "boltwatch-collector.service"];

/// The exposure `systemd-analyze security` may give a shipped unit.
const MAX_EXPOSURE: f64 = 2.0;

const SYSTEMD_ANALYZE: &str = "/usr/bin/systemd-analyze";

fn systemd_analyze(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(SYSTEMD_ANALYZE)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{SYSTEMD_ANALYZE}: {e} (apt-get install -y systemd)"))
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

fn unit_text(unit: &str) -> String {
    std::fs::read_to_string(repo().join("systemd-launchd").join(unit)).unwrap()
}

/// The values of `key=` in a unit's text, in order.
fn unit_values(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
        .map(|v| v.trim().to_string())
        .collect()
}

/// A root directory for `systemd-analyze verify --root`: this machine's
/// unit tree (targets such as sysinit.target must resolve), the shipped
/// units in /etc/systemd/system, and the built binaries at the paths the
/// units' ExecStart names (`with_binaries` false leaves them out).
fn verify_root(with_binaries: bool) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let system = Path::new("/usr/lib/systemd/system");
    assert!(
        system.join("sysinit.target").exists(),
        "{} has no sysinit.target: systemd is not installed (apt-get install -y systemd)",
        system.display()
    );
    let lib = root.path().join("usr/lib/systemd");
    std::fs::create_dir_all(&lib).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(system)
        .arg(&lib)
        .status()
        .unwrap();
    assert!(st.success(), "copying {}", system.display());
    let etc = root.path().join("etc/systemd/system");
    std::fs::create_dir_all(&etc).unwrap();
    for unit in UNITS {
        let text = unit_text(unit);
        std::fs::write(etc.join(unit), &text).unwrap();
        if !with_binaries {
            continue;
        }
        let exec = unit_values(&text, "ExecStart");
        assert_eq!(exec.len(), 1, "{unit}: one ExecStart expected: {exec:?}");
        let program = exec[0].split_whitespace().next().unwrap();
        assert!(
            program.starts_with('/'),
            "{unit}: {program} is not absolute"
        );
        let name = Path::new(program).file_name().unwrap().to_str().unwrap();
        let inside = root.path().join(program.trim_start_matches('/'));
        std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
        std::fs::copy(bin(name), &inside).unwrap();
    }
    root
}

fn verify(root: &Path) -> Output {
    let mut args: Vec<std::ffi::OsString> = vec![
        "verify".into(),
        "--man=no".into(),
        format!("--root={}", root.display()).into(),
    ];
    for unit in UNITS {
        args.push(format!("/etc/systemd/system/{unit}").into());
    }
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    systemd_analyze(&args)
}

#[test]
fn units_pass_systemd_analyze_verify_with_the_binaries_in_place() {
    let root = verify_root(true);
    let out = verify(root.path());
    // verify exits 0 on an unknown key and only warns: any output fails.
    assert!(
        out.status.success() && text(&out).trim().is_empty(),
        "systemd-analyze verify: {}\n{}",
        out.status,
        text(&out)
    );
    // The check is worth something only if it looks at the binaries.
    let bare = verify_root(false);
    let out = verify(bare.path());
    assert!(
        !out.status.success() && text(&out).contains("/usr/local/bin/boltwatch-agent"),
        "verify passed without the binaries:\n{}",
        text(&out)
    );
}

/// `→ Overall exposure level for NAME: 1.5 OK 🙂` -> 1.5.
fn exposure(report: &str) -> Option<f64> {
    let line = report
        .lines()
        .find(|l| l.contains("Overall exposure level for"))?;
    line.rsplit_once(": ")?
        .1
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn units_are_hardened_to_exposure_2_or_lower() {
    let mut scores = Vec::new();
    for unit in UNITS {
        let path = repo().join("systemd-launchd").join(unit);
        let out = systemd_analyze(&[
            "security".as_ref(),
            "--offline=true".as_ref(),
            "--no-pager".as_ref(),
            path.as_os_str(),
        ]);
        let report = text(&out);
        let score =
            exposure(&report).unwrap_or_else(|| panic!("{unit}: no exposure level in:\n{report}"));
        eprintln!("{unit}: exposure {score}");
        assert!(
            score <= MAX_EXPOSURE,
            "{unit}: exposure {score} > {MAX_EXPOSURE}:\n{report}"
        );
        scores.push(score);
    }
    // The parser reads what systemd-analyze prints for a weak unit too.
    let dir = tempfile::tempdir().unwrap();
    let weak = dir.path().join("weak.service");
    std::fs::write(&weak, "[Service]\nExecStart=/bin/true\n").unwrap();
    let out = systemd_analyze(&[
        "security".as_ref(),
        "--offline=true".as_ref(),
        "--no-pager".as_ref(),
        weak.as_os_str(),
    ]);
    let score = exposure(&text(&out)).expect("exposure of a bare unit");
    assert!(score > MAX_EXPOSURE, "a bare unit scored {score}");
}

#[test]
fn units_notify_and_stop_for_good_on_a_config_error() {
    for unit in UNITS {
        let t = unit_text(unit);
        assert_eq!(unit_values(&t, "Type"), ["notify"], "{unit}");
        assert_eq!(unit_values(&t, "NotifyAccess"), ["main"], "{unit}");
        assert_eq!(unit_values(&t, "WatchdogSec").len(), 1, "{unit}");
        // AF_UNIX carries NOTIFY_SOCKET's datagrams.
        let families = unit_values(&t, "RestrictAddressFamilies").join(" ");
        assert!(families.contains("AF_UNIX"), "{unit}: {families}");
        assert_eq!(
            unit_values(&t, "RestartPreventExitStatus"),
            [boltwatch_common::exit::EX_CONFIG.to_string()],
            "{unit}: a config error would restart-loop"
        );
        // launchd's override must not leak into the units.
        assert!(
            !t.contains(boltwatch_common::exit::CONFIG_ERROR_STATUS_VAR),
            "{unit}"
        );
    }
    let agent = unit_values(&unit_text(UNITS[0]), "RestrictAddressFamilies").join(" ");
    assert!(
        agent.contains("AF_NETLINK"),
        "the agent's link events: {agent}"
    );
}

fn collector(args: &[&str], dir: &Path, env: Option<&str>) -> Output {
    let mut cmd = Command::new(bin("boltwatch-collector"));
    cmd.arg("serve")
        .args(args)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env_remove(boltwatch_common::exit::CONFIG_ERROR_STATUS_VAR);
    if let Some(v) = env {
        cmd.env(boltwatch_common::exit::CONFIG_ERROR_STATUS_VAR, v);
    }
    cmd.output().unwrap()
}

#[test]
fn collector_check_config_and_the_config_error_status() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).display().to_string();
    std::fs::write(p("token"), "s3cret\n").unwrap();
    std::fs::write(p("empty"), "\n").unwrap();
    std::fs::write(
        p("good.toml"),
        format!(
            "grpc_listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\napi_token_file = \"{}\"\n",
            p("token")
        ),
    )
    .unwrap();
    std::fs::write(
        p("bad.toml"),
        "grpc_listen = \"127.0.0.1:0\"\nmax_connections = \"many\"\n",
    )
    .unwrap();
    std::fs::write(
        p("no-token.toml"),
        format!("api_token_file = \"{}\"\n", p("missing")),
    )
    .unwrap();
    std::fs::write(
        p("empty-token.toml"),
        format!("api_token_file = \"{}\"\n", p("empty")),
    )
    .unwrap();

    let out = collector(
        &["--config", &p("good.toml"), "--check-config"],
        dir.path(),
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("config OK: gRPC 127.0.0.1:0, HTTP 127.0.0.1:0"),
        "{stdout}"
    );
    // --check-config binds nothing and opens no store.
    assert!(
        !dir.path().join("data").exists(),
        "--check-config opened the store"
    );

    let out = collector(
        &["--config", &p("bad.toml"), "--check-config"],
        dir.path(),
        Some("0"),
    );
    assert_eq!(
        out.status.code(),
        Some(78),
        "--check-config ignores the override: {}",
        text(&out)
    );
    assert!(
        text(&out).contains("bad.toml:2: key `max_connections`"),
        "{}",
        text(&out)
    );

    // Under launchd (override 0) a config error ends the job for good.
    let out = collector(&["--config", &p("bad.toml")], dir.path(), Some("0"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("exiting with status 0"),
        "{}",
        text(&out)
    );
    // Under systemd: 78, which RestartPreventExitStatus stops on.
    let out = collector(&["--config", &p("bad.toml")], dir.path(), None);
    assert_eq!(out.status.code(), Some(78), "{}", text(&out));

    // A token file named but missing or empty is a config error, before
    // any socket is bound, not a runtime failure that restarts.
    let out = collector(&["--config", &p("no-token.toml")], dir.path(), None);
    assert_eq!(out.status.code(), Some(78), "{}", text(&out));
    assert!(text(&out).contains(&p("missing")), "{}", text(&out));
    let out = collector(
        &["--config", &p("empty-token.toml"), "--check-config"],
        dir.path(),
        None,
    );
    assert_eq!(out.status.code(), Some(78), "{}", text(&out));
    assert!(
        text(&out).contains("key `api_token_file`: the file is empty"),
        "{}",
        text(&out)
    );
    assert!(
        !dir.path().join("data").exists(),
        "a config error opened the store"
    );

    // The install scripts' config: the commented example, as shipped.
    let example = repo().join("collector/collector.example.toml");
    let out = collector(
        &["--config", example.to_str().unwrap(), "--check-config"],
        dir.path(),
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}
