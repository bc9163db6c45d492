//! The deployment walkthrough (docs/deployment.md), checked by the tools
//! that will read it: its collector and agent configs pass `--check-config`
//! (with the token files it tells how to make), its Prometheus config passes
//! `promtool check config` with the shipped rule files. Its Alertmanager
//! step points at the shipped `dashboards/alertmanager/alertmanager.yml`,
//! which `tests/tests/dashboards` checks with amtool.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use boltwatch_tests::procs::bin;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .into()
}

/// The fenced blocks of `lang` in docs/deployment.md's walkthrough, in order.
fn walkthrough_blocks(lang: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(workspace().join("docs/deployment.md")).unwrap();
    let start = doc
        .find("### Walkthrough: two Mac minis and one collector host")
        .expect("the walkthrough section");
    let section = &doc[start..];
    let end = section[4..].find("\n## ").map_or(section.len(), |i| i + 4);
    let mut blocks = Vec::new();
    let mut rest = &section[..end];
    let fence = format!("```{lang}\n");
    while let Some(i) = rest.find(&fence) {
        let body = &rest[i + fence.len()..];
        let close = body.find("```").expect("a closed block");
        blocks.push(body[..close].to_string());
        rest = &body[close..];
    }
    blocks
}

fn tool(name: &str, package: &str) -> Command {
    let path = Path::new("/usr/bin").join(name);
    assert!(
        path.exists(),
        "{} missing: apt-get install -y {package}",
        path.display()
    );
    Command::new(path)
}

fn ok(out: Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what}: {}\n{text}", out.status);
    text
}

#[test]
fn walkthrough_configs_pass_check_config() {
    let dir = tempfile::tempdir().unwrap();
    let toml = walkthrough_blocks("toml");
    assert_eq!(toml.len(), 2, "collector and agent configs expected");
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        format!("mini-a {}\nmini-b {}\n", "a".repeat(64), "b".repeat(64)),
    )
    .unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{}\n", "a".repeat(64))).unwrap();

    let collector = dir.path().join("collector.toml");
    std::fs::write(&collector, &toml[0]).unwrap();
    // The flag the walkthrough uses outside the unit, for the credential.
    let text = collector_check_config(&collector, &tokens);
    assert!(
        text.contains("gRPC 192.168.10.5:50071, HTTP 127.0.0.1:9471"),
        "{text}"
    );

    let agent = dir.path().join("agent.toml");
    let body = toml[1].replace(
        "/Library/Application Support/boltwatch/token",
        token.to_str().unwrap(),
    );
    assert_ne!(body, toml[1], "the agent config names no token file");
    std::fs::write(&agent, body).unwrap();
    let text = agent_check_config(&agent);
    assert!(text.contains("config OK: node mini-a, 1 peer(s)"), "{text}");
}

#[test]
fn walkthrough_prometheus_config_is_valid_and_alertmanager_is_the_shipped_one() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = walkthrough_blocks("yaml");
    assert_eq!(yaml.len(), 1, "the Prometheus config expected");

    // Prometheus: the rule files where the walkthrough copies them.
    let rules = dir.path().join("boltwatch");
    std::fs::create_dir(&rules).unwrap();
    for f in ["recording.yml", "alerts.yml"] {
        std::fs::copy(
            workspace().join("dashboards/prometheus").join(f),
            rules.join(f),
        )
        .unwrap();
    }
    let prometheus = dir.path().join("prometheus.yml");
    std::fs::write(&prometheus, &yaml[0]).unwrap();
    let out = tool("promtool", "prometheus")
        .args(["check", "config"])
        .arg(&prometheus)
        .output()
        .unwrap();
    let text = ok(out, "promtool check config");
    assert!(
        text.contains("2 rule files found") && text.contains("alerts.yml"),
        "the rule files were not read: {text}"
    );

    // The Alertmanager step installs the shipped file, not a copy.
    let doc = std::fs::read_to_string(workspace().join("docs/deployment.md")).unwrap();
    assert!(
        doc.contains("install -m 0644 dashboards/alertmanager/alertmanager.yml"),
        "step 6 installs the shipped alertmanager.yml"
    );
    assert!(workspace()
        .join("dashboards/alertmanager/alertmanager.yml")
        .is_file());
}

/// The command lines of the sh blocks of docs/deployment.md's section
/// "From packages to a running soak", in order.
fn package_commands() -> Vec<String> {
    let doc = std::fs::read_to_string(workspace().join("docs/deployment.md")).unwrap();
    let start = doc
        .find("## From packages to a running soak")
        .expect("the packages section");
    let section = &doc[start..];
    let section = &section[..section[4..].find("\n## ").map_or(section.len(), |i| i + 4)];
    let mut lines = Vec::new();
    let mut inside = false;
    for l in section.lines() {
        match l {
            "```sh" => inside = true,
            "```" => inside = false,
            _ if inside && !l.trim().is_empty() => lines.push(l.to_string()),
            _ => {}
        }
    }
    lines
}

/// The text between `printf '` and the next `'` of `line`, its `\n`s read.
fn printf_text(line: &str) -> String {
    let body = line.split("printf '").nth(1).expect("a printf");
    body[..body.find('\'').unwrap()].replace("\\n", "\n")
}

/// At most ten commands, each numbered in order; the collector config and
/// the agent config they write pass `--check-config`.
#[test]
fn package_path_is_ten_commands_whose_configs_pass_check_config() {
    let cmds = package_commands();
    assert!(
        (1..=10).contains(&cmds.len()),
        "{} commands: {cmds:#?}",
        cmds.len()
    );
    for (i, c) in cmds.iter().enumerate() {
        assert!(
            c.contains(&format!("# {}.", i + 1)),
            "not step {}: {c}",
            i + 1
        );
    }
    assert!(
        cmds[0].contains("packaging/deb/build-deb.sh"),
        "{}",
        cmds[0]
    );
    assert!(workspace().join("packaging/deb/build-deb.sh").is_file());

    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        format!("mini-a {}\nmini-b {}\n", "a".repeat(64), "b".repeat(64)),
    )
    .unwrap();
    let find = |what: &str| cmds.iter().find(|c| c.contains(what)).unwrap().clone();
    let collector = dir.path().join("collector.toml");
    std::fs::write(
        &collector,
        printf_text(&find("/etc/boltwatch/collector.toml")),
    )
    .unwrap();
    let text = collector_check_config(&collector, &tokens);
    assert!(text.contains("gRPC 192.168.10.5:50071"), "{text}");

    // The formula's config (the node line) plus what the step appends.
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{}\n", "a".repeat(64))).unwrap();
    let appended =
        printf_text(&find("etc/boltwatch/agent.toml")).replace("%s", token.to_str().unwrap());
    let agent = dir.path().join("agent.toml");
    std::fs::write(&agent, format!("node = \"mini-a\"\n{appended}")).unwrap();
    let text = agent_check_config(&agent);
    assert!(text.contains("config OK: node mini-a, 1 peer(s)"), "{text}");
}

/// `boltwatch-collector serve --check-config` on `config` with the token
/// file passed by flag, as the walkthroughs do outside the unit; its
/// output, which must say OK.
fn collector_check_config(config: &Path, tokens: &Path) -> String {
    let out = Command::new(bin("boltwatch-collector"))
        .args(["serve", "--check-config", "--config"])
        .arg(config)
        .arg("--auth-tokens")
        .arg(tokens)
        .output()
        .unwrap();
    ok(out, "collector --check-config")
}

/// `boltwatch-agent run --check-config` on `config`; its output, which must
/// say OK.
fn agent_check_config(config: &Path) -> String {
    let out = Command::new(bin("boltwatch-agent"))
        .args(["run", "--check-config", "--config"])
        .arg(config)
        .output()
        .unwrap();
    ok(out, "agent --check-config")
}
