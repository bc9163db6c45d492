//! `--soak NAME`: the lab as a soak that stays inspectable. The soak is
//! stored in the lab's store as `boltwatch-collector soak start` would
//! store it, from the moment every link measures (so its completeness
//! counts no start-up gap) until the duration is up; at the end the
//! report's own headline and verdict sections are printed, the HTML page
//! is written beside the store, and the last lines are the commands that
//! continue or reproduce it.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use boltwatch_collector::report::format::Format;
use boltwatch_collector::report::render::{self, Section};
use boltwatch_collector::report::soak::Report;
use boltwatch_collector::soak::{check_name, load, stored, Slo, Soak, SoakError};
use boltwatch_common::clock::now_unix_ns;
use boltwatch_store::Db;

use super::error::LabError;

/// A soak the lab runs: its name and SLO, checked before anything starts.
pub(super) struct LabSoak {
    name: String,
    slo: Slo,
}

fn soak_err(e: impl std::fmt::Display) -> LabError {
    LabError::Soak(e.to_string())
}

/// `t` (unix ns) down to the start of its agents' RTT window.
fn window_floor(t: u64) -> u64 {
    let w = boltwatch_agent::stamp::sender::WINDOW.as_nanos() as u64;
    t / w * w
}

impl LabSoak {
    /// The soak `name` with the SLO of `slo_file` (the defaults without),
    /// refused before the lab starts when the name is not a soak name, the
    /// SLO file is bad, or the store at `db` already has a soak so named.
    pub fn check(name: &str, slo_file: Option<&Path>, db: &Path) -> Result<LabSoak, LabError> {
        check_name(name).map_err(soak_err)?;
        let slo = match slo_file {
            Some(p) => Slo::load(p).map_err(soak_err)?,
            None => Slo::default(),
        };
        if db.exists() {
            let conn = load::open_reader(db).map_err(soak_err)?;
            match stored::get(&conn, name) {
                Err(SoakError::NotFound(_)) => {}
                Ok(_) => return Err(soak_err(SoakError::Exists(name.into()))),
                Err(e) => return Err(soak_err(e)),
            }
        }
        Ok(LabSoak {
            name: name.to_string(),
            slo,
        })
    }

    /// Stores the soak, starting now, in the store at `db` (which the
    /// running collector has open; WAL lets both write).
    pub fn start(&self, db: &Path) -> Result<(), LabError> {
        let conn = Db::open_writer(db).map_err(soak_err)?;
        let now = now_unix_ns();
        let s = Soak {
            name: self.name.clone(),
            start_unix_ns: now,
            end_unix_ns: None,
            nodes: Vec::new(),
            slo: self.slo.clone(),
            labels: [("source".to_string(), "boltwatch-lab".to_string())].into(),
        };
        stored::create(&conn, &s, now).map_err(soak_err)
    }

    /// Ends the soak at the last RTT-window boundary passed. A window
    /// belongs to a range by its start, and the one still open at the stop
    /// is never stored (the agents stop before it closes): a range ending
    /// inside it would count it as missing. Every window that starts before
    /// a boundary has closed by then and is flushed when the agents stop.
    pub fn stop(&self, db: &Path) -> Result<(), LabError> {
        let conn = Db::open_writer(db).map_err(soak_err)?;
        stored::stop(&conn, &self.name, window_floor(now_unix_ns())).map_err(soak_err)?;
        Ok(())
    }

    /// The soak's report from the store at `db`, once every record is in.
    pub fn report(&self, db: &Path) -> Result<Report, LabError> {
        let conn = load::open_reader(db).map_err(soak_err)?;
        load::soak_report(&conn, &self.name, now_unix_ns()).map_err(soak_err)
    }

    /// Writes the HTML page of `r` into `dir`; its path.
    pub fn write_html(&self, r: &Report, dir: &Path) -> Result<PathBuf, LabError> {
        let path = dir.join(format!("{}.html", self.name));
        std::fs::write(&path, Format::Html.render(r)).map_err(super::error::io(format!(
            "writing the report {}",
            path.display()
        )))?;
        Ok(path)
    }
}

/// The report's title, headline and verdict sections as aligned text (the
/// sections `report --format table` starts with).
pub(super) fn verdict_text(r: &Report) -> String {
    let mut o = format!("{}\n", render::title(r));
    for s in render::sections(r)
        .into_iter()
        .filter(|s| s.title == "headline" || s.title.starts_with("verdict"))
    {
        let _ = write!(o, "\n{}", aligned(&s));
    }
    o
}

/// One section: its title, then header and rows in columns (the first
/// left-aligned, the others right-aligned).
fn aligned(s: &Section) -> String {
    let header: Vec<String> = s.header.iter().map(|h| h.to_string()).collect();
    let rows: Vec<&Vec<String>> = std::iter::once(&header).chain(&s.rows).collect();
    let mut w = vec![0; header.len()];
    for row in &rows {
        for (i, c) in row.iter().enumerate().take(w.len()) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut o = format!("{}\n", s.title);
    for row in rows {
        let mut l = String::new();
        for (i, c) in row.iter().enumerate().take(w.len()) {
            let pad = " ".repeat(w[i] - c.chars().count());
            match i {
                0 => l.push_str(&format!("{c}{pad}")),
                _ => l.push_str(&format!("  {pad}{c}")),
            }
        }
        let _ = writeln!(o, "{}", l.trim_end());
    }
    o
}

/// What a person needs to go on from the lab's soak: where the store and
/// the page are, and the commands that continue or reproduce it, with the
/// binaries' real paths when they sit beside the lab's.
pub(super) struct NextSteps<'a> {
    pub soak: &'a str,
    pub store: &'a Path,
    pub page: &'a Path,
    /// The lab's own arguments for another soak (`--duration 60s --nodes 2`).
    pub lab_args: String,
}

impl NextSteps<'_> {
    pub fn write(&self, out: &mut impl Write) {
        let collector = sibling("boltwatch-collector");
        let lab = sibling("boltwatch-lab");
        let (s, d) = (self.soak, self.store.display());
        let _ = writeln!(
            out,
            "\nstore kept in {d} (delete it with `rm -r {d}` when done)\nreport: {}\n\nto continue or reproduce it:\n  {collector} soak show {s} --data-dir {d}\n  {collector} report --soak {s} --data-dir {d}\n  {collector} serve --data-dir {d}\n  {lab} --soak {s}-2 {} --keep {d}",
            self.page.display(),
            self.lab_args,
        );
        let _ = out.flush();
    }
}

/// `name` beside the running binary when it is there (a cargo build puts
/// all three in target/release), else bare (on the PATH after an install).
fn sibling(name: &str) -> String {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.join(name)))
        .filter(|p| p.exists());
    match beside {
        Some(p) => p.display().to_string(),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_soak_ends_on_the_window_boundary_before_it() {
        let s = 1_000_000_000;
        assert_eq!(
            window_floor(1_796_000_031 * s + 400_000_000),
            1_796_000_031 * s
        );
        assert_eq!(window_floor(1_796_000_031 * s), 1_796_000_031 * s);
    }

    #[test]
    fn sections_are_aligned_in_columns() {
        let s = Section {
            title: "verdict: PASS".into(),
            header: vec!["SLO", "measured"],
            rows: vec![
                vec!["RTT worst".into(), "0.100 ms".into()],
                vec!["data completeness".into(), "no data".into()],
            ],
        };
        assert_eq!(
            aligned(&s),
            "verdict: PASS\nSLO                measured\nRTT worst          0.100 ms\ndata completeness   no data\n"
        );
    }
}
