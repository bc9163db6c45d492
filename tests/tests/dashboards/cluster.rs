//! What keeps clusters apart in one PromQL expression. Many collectors
//! (one per Thunderbolt cluster) share a database, told apart only by the
//! `cluster` label, and node names repeat across clusters: an aggregation
//! or join that drops `cluster` merges them, and a dashboard selector
//! without the `$cluster` filter shows every cluster at once.

use boltwatch_tests::promql::{is_ident, skip_group, skip_string, AGGREGATIONS, KEYWORDS};

/// The dashboard's cluster filter, as every panel selector must carry it.
pub const FILTER: &str = "cluster=~\"$cluster\"";

/// What an expression must do for clusters to stay apart.
#[derive(Clone, Copy)]
pub struct Demands {
    /// Every selector carries [`FILTER`] (dashboards, not rules).
    pub filter: bool,
    /// Every aggregation keeps `cluster` (`by (cluster, ...)`, or a
    /// `without` list that leaves it). Off only for a heatmap, one
    /// distribution of every selected link by design.
    pub keep: bool,
}

/// The faults of `expr`, one line each; empty when clusters stay apart.
/// Joins (`on (...)`) must always name `cluster`. Errors on brackets that
/// do not balance.
pub fn faults(expr: &str, demands: Demands) -> Result<Vec<String>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '"' | '\'' | '`') {
            i = skip_string(&chars, i)?;
            continue;
        }
        if c == '[' || c == '{' {
            let close = if c == '[' { ']' } else { '}' };
            i = skip_group(&chars, i, c, close)?;
            continue;
        }
        if c == '$' {
            // Grafana variables ($__range, ${node}) are not PromQL names.
            i += 1;
            while i < chars.len() && (is_ident(chars[i]) || chars[i] == '{' || chars[i] == '}') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_digit() || c == '.' {
            // Numbers and durations: 0.99, 5m, 1e-9 (a sign is its own char).
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        if !(c.is_ascii_alphabetic() || c == '_' || c == ':') {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        let ident: String = chars[start..i].iter().collect();
        let next = skip_ws(&chars, i);
        let opens = chars.get(next) == Some(&'(');
        match ident.as_str() {
            "by" | "on" | "without" | "ignoring" | "group_left" | "group_right" if opens => {
                let end = skip_group(&chars, next, '(', ')')?;
                let list: String = chars[next + 1..end - 1].iter().collect();
                let has = list.split(',').any(|l| l.trim() == "cluster");
                let fault = match ident.as_str() {
                    "on" => !has,
                    "by" => demands.keep && !has,
                    "without" | "ignoring" => has,
                    _ => false,
                };
                if fault {
                    out.push(format!("`{ident} ({list})` loses cluster"));
                }
                i = end;
            }
            _ if AGGREGATIONS.contains(&ident.as_str()) && opens => {
                // `sum (x)` with no `by`/`without` before or after merges all.
                let end = skip_group(&chars, next, '(', ')')?;
                let after = skip_ws(&chars, end);
                let grouped = ["by", "without"].iter().any(|k| word_at(&chars, after, k));
                if demands.keep && !grouped {
                    out.push(format!("`{ident}(...)` aggregates away cluster"));
                }
                i = next;
            }
            _ if opens => i = next, // a function call
            _ if KEYWORDS.contains(&ident.to_ascii_lowercase().as_str())
                || AGGREGATIONS.contains(&ident.as_str())
                || [
                    "by",
                    "on",
                    "without",
                    "ignoring",
                    "group_left",
                    "group_right",
                ]
                .contains(&ident.as_str()) => {}
            // A selector.
            _ if demands.filter => {
                let filtered = if chars.get(next) == Some(&'{') {
                    let end = skip_group(&chars, next, '{', '}')?;
                    let matchers: String = chars[next + 1..end - 1].iter().collect();
                    i = end;
                    matchers.split(',').any(|m| m.trim() == FILTER)
                } else {
                    false
                };
                if !filtered {
                    out.push(format!("`{ident}` without {FILTER}"));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

fn skip_ws(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    i
}

/// Whether the word `w` (not a prefix of a longer name) starts at `i`.
fn word_at(chars: &[char], i: usize, w: &str) -> bool {
    let n = w.chars().count();
    i + n <= chars.len()
        && chars[i..i + n].iter().copied().eq(w.chars())
        && !chars.get(i + n).copied().is_some_and(is_ident)
}

#[test]
fn cluster_faults_see_every_way_to_merge_clusters() {
    let panel = Demands {
        filter: true,
        keep: true,
    };
    let rule = Demands {
        filter: false,
        keep: true,
    };
    let ok = |e: &str, d| assert_eq!(faults(e, d).unwrap(), Vec::<String>::new(), "{e}");
    let bad = |e: &str, d| assert_eq!(faults(e, d).unwrap().len(), 1, "{e}");
    ok(
        r#"sum by (cluster, node) (rate(a_total{cluster=~"$cluster",node=~"$node"}[$__rate_interval]))"#,
        panel,
    );
    ok(
        r#"sum(a{cluster=~"$cluster", x="sum(y)"}) by (cluster)"#,
        panel,
    );
    ok(r#"-b:c:d{x="1",cluster=~"$cluster"} * 8 > bool 0.5"#, panel);
    ok(
        "a < on (cluster, node) group_left (kind) b and on (node,cluster) c",
        rule,
    );
    ok("max without (node) (a)", rule);
    bad(r#"sum by (node) (a{cluster=~"$cluster"})"#, panel);
    bad(r#"avg(a{cluster=~"$cluster"})"#, panel);
    bad(r#"a{node=~"$node"}"#, panel);
    bad(r#"a{cluster="lab1"}"#, panel);
    bad(r#"a{cluster=~"$cluster"} / b[5m]"#, panel);
    bad("a and on (node) b", rule);
    bad("a unless ignoring (cluster) b", rule);
    bad("max without (cluster) (a)", rule);
    bad("count(a)", rule);
    // A heatmap may merge (by le), but still filters.
    let heatmap = Demands {
        filter: true,
        keep: false,
    };
    ok(r#"sum by (le) (a_bucket{cluster=~"$cluster"})"#, heatmap);
    bad("sum by (le) (a_bucket)", heatmap);
    assert!(faults("sum(a", rule).is_err());
}
