//! The documentation against the tree: `docs/architecture.md` names every
//! workspace crate and every top-level module of each (the rule is stated
//! on that page, "How this page is kept complete"), and every relative link
//! in the README and `docs/` leads to a file, and a heading, that exist.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .into()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The double-quoted strings of the TOML array `key = [...]` (which may
/// span lines) at the start of a line of `toml`.
fn toml_array(toml: &str, key: &str) -> Vec<String> {
    let start = toml
        .lines()
        .scan(0, |at, line| {
            let here = *at;
            *at += line.len() + 1;
            Some((here, line))
        })
        .find(|(_, line)| {
            line.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|(at, _)| at)
        .unwrap_or_else(|| panic!("no `{key} = [...]` in the workspace Cargo.toml"));
    let open = start + toml[start..].find('[').expect("an array");
    let close = open + toml[open..].find(']').expect("a closed array");
    toml[open + 1..close]
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The `name = "..."` of the `[package]` table of a member's Cargo.toml.
fn package_name(toml: &str) -> Option<String> {
    let package = &toml[toml.find("[package]")?..];
    package
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .find_map(|l| {
            let rest = l.strip_prefix("name")?.trim_start().strip_prefix('=')?;
            Some(rest.trim().trim_matches('"').to_string())
        })
}

/// The top-level `mod` declarations of a crate root (`mod x;`,
/// `pub mod x;`, `pub(crate) mod x { .. }` at the start of a line), less
/// those right after `#[cfg(test)]`.
fn top_level_mods(src: &str) -> Vec<String> {
    let mut mods = Vec::new();
    let mut after_cfg_test = false;
    for line in src.lines() {
        let rest = line
            .strip_prefix("pub ")
            .or_else(|| {
                line.strip_prefix("pub(")
                    .and_then(|r| r.split_once(") ").map(|(_, r)| r))
            })
            .unwrap_or(line);
        if let Some(decl) = rest.strip_prefix("mod ") {
            let name: String = decl
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !after_cfg_test && !name.is_empty() {
                mods.push(name);
            }
        }
        let attr = line.trim();
        if attr.starts_with("#[") {
            after_cfg_test |= attr == "#[cfg(test)]";
        } else if !attr.is_empty() {
            after_cfg_test = false;
        }
    }
    mods
}

/// Each `## ` section of a page, by its heading line.
fn sections(page: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut starts: Vec<usize> = page.match_indices("\n## ").map(|(i, _)| i + 1).collect();
    if page.starts_with("## ") {
        starts.insert(0, 0);
    }
    for (n, &s) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(page.len());
        let body = &page[s..end];
        let heading = body.lines().next().unwrap_or_default();
        out.push((heading, body));
    }
    out
}

#[test]
fn architecture_names_every_crate_and_module() {
    let root = workspace();
    let page = read(&root.join("docs/architecture.md"));
    let sections = sections(&page);
    let members = toml_array(&read(&root.join("Cargo.toml")), "members");
    assert!(!members.is_empty(), "no workspace members");
    let mut missing = Vec::new();
    let mut packages = BTreeSet::new();
    for dir in &members {
        let manifest = root.join(dir).join("Cargo.toml");
        let Some(package) = package_name(&read(&manifest)) else {
            missing.push(format!("{}: no [package] name", manifest.display()));
            continue;
        };
        packages.insert(package.clone());
        let lib = root.join(dir).join("src/lib.rs");
        let crate_root = if lib.exists() {
            lib
        } else {
            root.join(dir).join("src/main.rs")
        };
        let mods = top_level_mods(&read(&crate_root));
        let shown = format!("`{package}`");
        let Some((_, section)) = sections.iter().find(|(h, _)| h.contains(&shown)) else {
            missing.push(format!(
                "crate {package} ({dir}/): no `## ` heading naming {shown}, \
                 and so none of its modules {mods:?}"
            ));
            continue;
        };
        let rel = crate_root
            .strip_prefix(&root)
            .unwrap()
            .display()
            .to_string();
        for m in mods {
            let path = format!("{dir}/src/{m}");
            if !(section.contains(&format!("`{m}`"))
                || section.contains(&format!("`{m}/`"))
                || section.contains(&path))
            {
                missing.push(format!(
                    "module `{m}` of {package} ({rel}): not in its section as `{m}`, `{m}/` or {path}"
                ));
            }
        }
    }
    for (heading, _) in &sections {
        for named in heading.split('`').skip(1).step_by(2) {
            if named.starts_with("boltwatch-") && !packages.contains(named) {
                missing.push(format!(
                    "section {heading:?} names {named}, which is not a workspace member"
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md is out of date (the rule is in its section \
         \"How this page is kept complete\"):\n{}",
        missing.join("\n")
    );
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation
/// other than `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown page's headings (outside fenced blocks).
fn anchors(page: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in page.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of a page, outside
/// fenced blocks and code spans.
fn links(page: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in page.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let text: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        let mut rest = text.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(close) = after.find(')') else { break };
            out.push(after[..close].to_string());
            rest = &after[close..];
        }
    }
    out
}

#[test]
fn readme_and_docs_links_resolve() {
    let root = workspace();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs.iter().cloned());
    let mut broken = Vec::new();
    for page in &pages {
        let text = read(page);
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, frag) = target.split_once('#').unwrap_or((&target, ""));
            let dest = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !dest.exists() {
                broken.push(format!("{name}: ({target}): no file {}", dest.display()));
                continue;
            }
            let markdown = dest.extension().is_some_and(|e| e == "md");
            if !frag.is_empty() && markdown && !anchors(&read(&dest)).contains(frag) {
                broken.push(format!("{name}: ({target}): no heading #{frag}"));
            }
        }
    }
    // The README's Documentation list links every docs page.
    let readme = read(&root.join("README.md"));
    for doc in &docs {
        let rel = doc.strip_prefix(&root).unwrap().display().to_string();
        if !readme.contains(&format!("]({rel})")) {
            broken.push(format!("README.md: no link to {rel}"));
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
