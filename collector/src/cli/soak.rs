//! The `soak` and `report` subcommands of the binary: thin edges over
//! [`boltwatch_collector::soak`] and [`boltwatch_collector::report`]. They
//! open the store that `serve` uses (named by `--data-dir` or `--config`)
//! with their own connection, so they work while `serve` runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use boltwatch_collector::report::baseline;
use boltwatch_collector::report::format::Format;
use boltwatch_collector::report::soak::Scope;
use boltwatch_collector::soak::{load, stored, time, Mark, Slo, Soak};
use boltwatch_common::clock::now_unix_ns;
use boltwatch_store::Db;
use clap::{Args, Subcommand};

use super::StoreArgs;

/// `soak` operations.
#[derive(Subcommand, Debug)]
pub enum SoakOp {
    /// Start a soak now (or record one after the fact with --from/--to).
    Start {
        /// Soak name: letters, digits, `.`, `_`, `-`.
        name: String,
        /// SLO thresholds (TOML); defaults otherwise.
        #[arg(long)]
        slo: Option<PathBuf>,
        /// Nodes it covers, comma-separated (default: every node).
        #[arg(long, value_delimiter = ',')]
        nodes: Vec<String>,
        /// Start (RFC 3339 or unix seconds; default now).
        #[arg(long)]
        from: Option<String>,
        /// End, for a soak recorded after the fact.
        #[arg(long)]
        to: Option<String>,
        /// Free-form `KEY=VALUE` label; repeatable.
        #[arg(long)]
        label: Vec<String>,
    },
    /// End a running soak now (or at --at).
    Stop {
        /// Soak name.
        name: String,
        /// End time.
        #[arg(long)]
        at: Option<String>,
    },
    /// Delete a soak and its marks (its records stay in the store).
    Delete {
        /// Soak name.
        name: String,
    },
    /// List soaks.
    List,
    /// Elapsed time, marks and the verdict so far.
    Show {
        /// Soak name.
        name: String,
    },
    /// Record what the cluster was doing.
    Mark {
        /// Soak name.
        name: String,
        /// What ("xcode build", "llama.cpp inference").
        text: String,
        /// When it started (default now).
        #[arg(long)]
        at: Option<String>,
        /// When it ended.
        #[arg(long)]
        until: Option<String>,
    },
}

/// `report` arguments.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Report on this soak.
    #[arg(long, conflicts_with_all = ["from", "to"])]
    soak: Option<String>,
    /// Range start (RFC 3339 or unix seconds), without --soak.
    #[arg(long, requires = "to")]
    from: Option<String>,
    /// Range end.
    #[arg(long, requires = "from")]
    to: Option<String>,
    /// Only these nodes (a range report; a soak has its own).
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
    /// SLO file for a range report (a soak has its own).
    #[arg(long)]
    slo: Option<PathBuf>,
    /// table, md, json or html.
    #[arg(long, default_value = "table")]
    format: Format,
    /// Write here instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Exit with status 3 when the verdict is FAIL.
    #[arg(long)]
    pub check: bool,
    /// Compare with this soak: each headline and SLO figure beside the
    /// baseline's, with the difference.
    #[arg(long, conflicts_with_all = ["baseline_from", "baseline_to"])]
    baseline_soak: Option<String>,
    /// Compare with this range (with --baseline-to; the report's nodes
    /// and SLO).
    #[arg(long, requires = "baseline_to")]
    baseline_from: Option<String>,
    /// The baseline range's end.
    #[arg(long, requires = "baseline_from")]
    baseline_to: Option<String>,
}

/// Exit status of `report --check` on a FAIL verdict (1 is an error).
pub const EXIT_FAIL: u8 = 3;

fn t(s: &Option<String>) -> anyhow::Result<Option<u64>> {
    s.as_deref()
        .map(time::parse)
        .transpose()
        .map_err(anyhow::Error::msg)
}

fn load_slo(p: &Option<PathBuf>) -> anyhow::Result<Slo> {
    Ok(match p {
        Some(p) => Slo::load(p)?,
        None => Slo::default(),
    })
}

fn labels(l: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    l.iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => bail!("label `{kv}`: use KEY=VALUE"),
        })
        .collect()
}

fn show(conn: &Db, name: &str) -> anyhow::Result<String> {
    let now = now_unix_ns();
    let s = stored::get(conn, name)?;
    let r = load::soak_report(conn, name, now)?;
    let (from, to) = s.range(now);
    let running = s.running(now);
    let nodes = match s.nodes.is_empty() {
        true => "all".to_string(),
        false => s.nodes.join(","),
    };
    // Said as a person reads it: a running soak started and has run so
    // long; an ended one ran from .. to.
    let mut o = match (running, s.end_unix_ns) {
        _ if now < s.start_unix_ns => format!(
            "soak {}: starts {}, nodes {nodes}\n",
            s.name,
            time::format(s.start_unix_ns),
        ),
        (false, Some(end)) => format!(
            "soak {}: ended, ran {} .. {} ({}), nodes {nodes}\n",
            s.name,
            time::format(s.start_unix_ns),
            time::format(end),
            time::format_duration(to - from),
        ),
        _ => format!(
            "soak {}: running since {} ({} so far), nodes {nodes}\n",
            s.name,
            time::format(s.start_unix_ns),
            time::format_duration(to - from),
        ),
    };
    let measured = r.verdict.lines.iter().any(|l| l.measured.is_some());
    o.push_str(&match (running, measured) {
        (true, false) => "verdict so far: no data yet\n".to_string(),
        (true, true) => format!("verdict so far: {}\n", r.verdict.word()),
        (false, _) => format!("verdict: {}\n", r.verdict.word()),
    });
    for l in &r.verdict.lines {
        o.push_str(&format!(
            "  {:<30} {:>14} {:>14}  {}\n",
            l.name,
            l.measured
                .map_or("no data".into(), |m| format!("{m:.3} {}", l.unit)),
            l.threshold
                .map_or("not set".into(), |t| format!("{} {t}", l.op)),
            l.word()
        ));
    }
    for m in &r.marks {
        o.push_str(&format!(
            "  mark {} {}\n",
            time::format(m.at_unix_ns),
            m.text
        ));
    }
    Ok(o)
}

/// Runs a `soak` operation; returns what to print.
pub fn soak(store: &StoreArgs, op: SoakOp) -> anyhow::Result<String> {
    let path = store.existing_db_path()?;
    let conn = Db::open_writer(&path).with_context(|| format!("opening {}", path.display()))?;
    let now = now_unix_ns();
    Ok(match op {
        SoakOp::Start {
            name,
            slo,
            nodes,
            from,
            to,
            label,
        } => {
            let s = Soak {
                name: name.clone(),
                start_unix_ns: t(&from)?.unwrap_or(now),
                end_unix_ns: t(&to)?,
                nodes,
                slo: load_slo(&slo)?,
                labels: labels(&label)?,
            };
            if s.end_unix_ns.is_some_and(|e| e < s.start_unix_ns) {
                bail!("--to is before --from");
            }
            stored::create(&conn, &s, now)?;
            format!("soak {name} started {}\n", time::format(s.start_unix_ns))
        }
        SoakOp::Stop { name, at } => {
            let s = stored::stop(&conn, &name, t(&at)?.unwrap_or(now))?;
            format!(
                "soak {name} ended {}\n",
                time::format(s.end_unix_ns.unwrap_or(now))
            )
        }
        SoakOp::Delete { name } => {
            stored::delete(&conn, &name)?;
            format!("soak {name} deleted (its records stay in the store)\n")
        }
        SoakOp::List => {
            let mut o = format!("{:<24} {:<22} {:<22} {}\n", "name", "start", "end", "nodes");
            for s in stored::list(&conn)? {
                o.push_str(&format!(
                    "{:<24} {:<22} {:<22} {}\n",
                    s.name,
                    time::format(s.start_unix_ns),
                    s.end_unix_ns.map_or("(running)".into(), time::format),
                    if s.nodes.is_empty() {
                        "all".into()
                    } else {
                        s.nodes.join(",")
                    }
                ));
            }
            o
        }
        SoakOp::Show { name } => show(&conn, &name)?,
        SoakOp::Mark {
            name,
            text,
            at,
            until,
        } => {
            let m = Mark {
                text,
                at_unix_ns: t(&at)?.unwrap_or(now),
                until_unix_ns: t(&until)?,
            };
            stored::add_mark(&conn, &name, &m)?;
            format!("marked {name} at {}\n", time::format(m.at_unix_ns))
        }
    })
}

/// The scope of a soak (`soak`), or of a range `from..to` with `nodes`
/// and `slo`.
fn scope(
    conn: &Db,
    soak: Option<&str>,
    range: (Option<u64>, Option<u64>),
    nodes: &[String],
    slo: &Option<PathBuf>,
) -> anyhow::Result<Scope> {
    Ok(match (soak, range) {
        (Some(name), _) => {
            let s = stored::get(conn, name)?;
            load::scope_of(conn, &s, now_unix_ns())?
        }
        (None, (Some(from), Some(to))) if to > from => Scope {
            name: format!("{}..{}", time::format(from), time::format(to)),
            from_unix_ns: from,
            to_unix_ns: to,
            nodes: nodes.to_vec(),
            slo: load_slo(slo)?,
            marks: Vec::new(),
        },
        (None, (Some(_), Some(_))) => bail!("--to must be after --from"),
        _ => bail!("give --soak NAME or --from T --to T"),
    })
}

/// Runs `report`; returns whether the verdict passed.
pub fn report(store: &StoreArgs, a: ReportArgs) -> anyhow::Result<bool> {
    let path = store.existing_db_path()?;
    let conn = load::open_reader(&path)?;
    let current = scope(
        &conn,
        a.soak.as_deref(),
        (t(&a.from)?, t(&a.to)?),
        &a.nodes,
        &a.slo,
    )?;
    // A baseline range takes the report's nodes and SLO, so the figures
    // compare like with like.
    let base = match (&a.baseline_soak, t(&a.baseline_from)?, t(&a.baseline_to)?) {
        (None, None, None) => None,
        (soak, from, to) => Some(
            scope(&conn, soak.as_deref(), (from, to), &current.nodes, &None)
                .map(|mut s| {
                    if soak.is_none() {
                        s.slo = current.slo.clone();
                    }
                    s
                })
                .context("the baseline")?,
        ),
    };
    let r = load::report(&conn, current)?;
    let comparison = match base {
        Some(b) => Some(baseline::compare(&r, &load::report(&conn, b)?)),
        None => None,
    };
    let text = a.format.render_compared(&r, comparison.as_ref());
    write_out(a.out.as_deref(), &text)?;
    Ok(r.verdict.pass)
}

fn write_out(out: Option<&Path>, text: &str) -> anyhow::Result<()> {
    match out {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display())),
        None => {
            use std::io::Write;
            let mut o = std::io::stdout().lock();
            o.write_all(text.as_bytes())?;
            Ok(())
        }
    }
}
