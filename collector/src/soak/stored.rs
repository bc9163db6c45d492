//! Soaks as the store keeps them: the rules of creating, stopping,
//! marking and deleting one (names, ranges, bounds, mark text), applied
//! before the store's row is written, and the conversion between
//! [`Soak`]/[`Mark`] and the store's rows. The store holds the rows; the
//! rules live here.
//!
//! Every soak is bounded, because anyone holding the write token (or the
//! `soak` command) makes one and every report, every live refresh and
//! every collector start builds it: its report covers every pair of its
//! nodes, its labels and marks go to `/metrics`.

use boltwatch_store::{Db, MarkRow, SoakRow};

use super::{check_name, Mark, Slo, Soak, SoakError};
use crate::ingest::validate::{label_problem, MAX_NAME_BYTES, MAX_TEXT_BYTES};

/// Longest mark text, in bytes.
pub const MAX_MARK_TEXT: usize = 1024;
/// Nodes one soak names at most (its report covers every pair: 64 nodes
/// are 4032 directed links).
pub const MAX_NODES: usize = 64;
/// Labels one soak has at most.
pub const MAX_LABELS: usize = 32;
/// Longest label name, in bytes.
pub const MAX_LABEL_NAME: usize = 64;
/// Marks one soak has at most.
pub const MAX_MARKS: u64 = 1000;
/// Soaks the store keeps at most (ended ones included; `soak delete`
/// makes room).
pub const MAX_SOAKS: u64 = 1000;
/// Soaks not yet ended at most: each one's verdict is rebuilt from its
/// records at every live refresh and every collector start.
pub const MAX_OPEN_SOAKS: u64 = 16;
/// Bytes all soaks and marks take at most: far below what agents' records
/// need, so soak writes can never fill the store.
pub const MAX_SOAK_BYTES: u64 = 16 << 20;
/// Soak and mark writes are refused when less than this is free beside
/// the store: the room left is for agents' records.
pub const SOAK_FREE_RESERVE: u64 = 64 << 20;

fn invalid(what: String) -> SoakError {
    SoakError::Invalid(what)
}

/// Checks a new soak's bounds: nodes, labels.
fn check_bounds(s: &Soak) -> Result<(), SoakError> {
    if s.nodes.len() > MAX_NODES {
        return Err(invalid(format!(
            "`nodes`: {} nodes; a soak names at most {MAX_NODES}",
            s.nodes.len()
        )));
    }
    for (i, n) in s.nodes.iter().enumerate() {
        if n.is_empty() || s.nodes[..i].contains(n) {
            return Err(invalid(format!("`nodes`: `{n}` is empty or named twice")));
        }
        if let Some(why) = label_problem(n, MAX_NAME_BYTES) {
            return Err(invalid(format!("`nodes`: a node name {why}")));
        }
    }
    if s.labels.len() > MAX_LABELS {
        return Err(invalid(format!(
            "`labels`: {} labels; a soak has at most {MAX_LABELS}",
            s.labels.len()
        )));
    }
    for (k, v) in &s.labels {
        let name_ok = !k.is_empty()
            && k.len() <= MAX_LABEL_NAME
            && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !name_ok {
            return Err(invalid(format!(
                "`labels`: a label name is 1 to {MAX_LABEL_NAME} letters, digits or `_`"
            )));
        }
        if let Some(why) = label_problem(v, MAX_TEXT_BYTES) {
            return Err(invalid(format!("`labels`: the value of `{k}` {why}")));
        }
    }
    Ok(())
}

/// Refuses a write of `bytes` more (a new soak when `opens` says whether
/// it is open) beyond the soak budget: [`MAX_SOAKS`], [`MAX_OPEN_SOAKS`],
/// [`MAX_SOAK_BYTES`], [`SOAK_FREE_RESERVE`].
fn check_budget(db: &Db, bytes: u64, opens: Option<bool>, now_ns: u64) -> Result<(), SoakError> {
    let u = db.soak_usage(now_ns)?;
    let full = |what: String| Err(SoakError::Full(what));
    if opens.is_some() && u.soaks >= MAX_SOAKS {
        return full(format!(
            "the store keeps {MAX_SOAKS} soaks at most; delete one first"
        ));
    }
    if opens == Some(true) && u.open >= MAX_OPEN_SOAKS {
        return full(format!(
            "{MAX_OPEN_SOAKS} soaks are running or yet to start, the most at once; stop one first"
        ));
    }
    if u.bytes + bytes > MAX_SOAK_BYTES {
        return full(format!(
            "soaks and marks take {} of their {MAX_SOAK_BYTES} bytes; delete a soak first",
            u.bytes
        ));
    }
    if u.free_bytes.is_some_and(|f| f < SOAK_FREE_RESERVE) {
        return full(format!(
            "less than {SOAK_FREE_RESERVE} bytes are free beside the store; they are kept for agents' records"
        ));
    }
    Ok(())
}

fn row_of(s: &Soak) -> SoakRow {
    SoakRow {
        name: s.name.clone(),
        start_unix_ns: s.start_unix_ns,
        end_unix_ns: s.end_unix_ns,
        nodes: s.nodes.clone(),
        slo: serde_json::to_string(&s.slo).expect("plain data serializes"),
        labels: s.labels.clone(),
    }
}

fn soak_of(r: SoakRow) -> Result<Soak, SoakError> {
    let slo: Slo = serde_json::from_str(&r.slo)
        .map_err(|e| SoakError::Invalid(format!("soak `{}`: stored SLO: {e}", r.name)))?;
    Ok(Soak {
        name: r.name,
        start_unix_ns: r.start_unix_ns,
        end_unix_ns: r.end_unix_ns,
        nodes: r.nodes,
        slo,
        labels: r.labels,
    })
}

/// Creates a soak; refuses a bad or taken name.
pub fn create(db: &Db, s: &Soak, now_ns: u64) -> Result<(), SoakError> {
    check_name(&s.name)?;
    check_bounds(s)?;
    let row = row_of(s);
    let open = s.end_unix_ns.is_none_or(|e| e > now_ns);
    check_budget(db, row.stored_bytes(), Some(open), now_ns)?;
    if !db.insert_soak(&row, now_ns)? {
        return Err(SoakError::Exists(s.name.clone()));
    }
    Ok(())
}

/// Ends a running soak at `end_ns`; a soak already ended keeps its end.
pub fn stop(db: &Db, name: &str, end_ns: u64) -> Result<Soak, SoakError> {
    let s = get(db, name)?;
    if s.end_unix_ns.is_none() {
        if end_ns < s.start_unix_ns {
            return Err(SoakError::Invalid(format!(
                "soak `{name}` cannot end before it started"
            )));
        }
        db.set_soak_end(name, end_ns)?;
    }
    get(db, name)
}

/// Deletes a soak and its marks.
pub fn delete(db: &Db, name: &str) -> Result<(), SoakError> {
    if !db.delete_soak(name)? {
        return Err(SoakError::NotFound(name.to_string()));
    }
    Ok(())
}

/// One soak.
pub fn get(db: &Db, name: &str) -> Result<Soak, SoakError> {
    match db.soak(name)? {
        Some(r) => soak_of(r),
        None => Err(SoakError::NotFound(name.to_string())),
    }
}

/// Every soak, newest start first.
pub fn list(db: &Db) -> Result<Vec<Soak>, SoakError> {
    db.soaks()?.into_iter().map(soak_of).collect()
}

/// Adds a mark to a soak: 1 to [`MAX_MARK_TEXT`] bytes of text without
/// control characters (they would reach terminals and reports raw), an
/// end not before its start, at most [`MAX_MARKS`] a soak.
pub fn add_mark(db: &Db, soak: &str, m: &Mark) -> Result<(), SoakError> {
    get(db, soak)?;
    if m.text.is_empty() {
        return Err(invalid(format!("mark text: 1 to {MAX_MARK_TEXT} bytes")));
    }
    if let Some(why) = label_problem(&m.text, MAX_MARK_TEXT) {
        return Err(invalid(format!("mark text {why}")));
    }
    if db.mark_count(soak)? >= MAX_MARKS {
        return Err(invalid(format!(
            "soak `{soak}` has {MAX_MARKS} marks, the most a soak keeps"
        )));
    }
    if m.until_unix_ns.is_some_and(|u| u < m.at_unix_ns) {
        return Err(SoakError::Invalid("mark ends before it starts".into()));
    }
    let row = MarkRow {
        text: m.text.clone(),
        at_unix_ns: m.at_unix_ns,
        until_unix_ns: m.until_unix_ns,
    };
    check_budget(db, row.stored_bytes(soak), None, m.at_unix_ns)?;
    db.insert_mark(soak, &row)?;
    Ok(())
}

/// A soak's marks, oldest first.
pub fn marks(db: &Db, soak: &str) -> Result<Vec<Mark>, SoakError> {
    Ok(db
        .marks(soak)?
        .into_iter()
        .map(|m| Mark {
            text: m.text,
            at_unix_ns: m.at_unix_ns,
            until_unix_ns: m.until_unix_ns,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soak(name: &str) -> Soak {
        Soak {
            name: name.into(),
            start_unix_ns: 100,
            end_unix_ns: None,
            nodes: vec!["a".into(), "b".into()],
            slo: Slo::default(),
            labels: [("team".to_string(), "ops".to_string())].into(),
        }
    }

    #[test]
    fn soaks_persist_with_marks_and_stop_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("boltwatch.db");
        let db = Db::open_writer(&path).unwrap();
        create(&db, &soak("s1"), 1).unwrap();
        assert!(matches!(
            create(&db, &soak("s1"), 1),
            Err(SoakError::Exists(_))
        ));
        assert!(matches!(
            create(&db, &soak("bad name"), 1),
            Err(SoakError::Invalid(_))
        ));
        assert!(matches!(get(&db, "nope"), Err(SoakError::NotFound(_))));
        let mark = |text: &str, until| Mark {
            text: text.into(),
            at_unix_ns: 150,
            until_unix_ns: Some(until),
        };
        add_mark(&db, "s1", &mark("xcode build", 160)).unwrap();
        assert!(add_mark(&db, "s1", &mark("bad", 10)).is_err());
        assert!(add_mark(&db, "s1", &mark("", 160)).is_err());
        assert!(add_mark(&db, "s1", &mark(&"x".repeat(1025), 160)).is_err());
        assert!(add_mark(&db, "s1", &mark("\u{1b}[2J", 160)).is_err());
        assert!(matches!(stop(&db, "s1", 50), Err(SoakError::Invalid(_))));
        assert_eq!(stop(&db, "s1", 200).unwrap().end_unix_ns, Some(200));
        assert_eq!(stop(&db, "s1", 300).unwrap().end_unix_ns, Some(200));
        drop(db);
        // A reopened store (a restarted collector) has them, SLO included.
        let db = Db::open_writer(&path).unwrap();
        let all = list(&db).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(
            all[0],
            Soak {
                end_unix_ns: Some(200),
                ..soak("s1")
            }
        );
        assert_eq!(marks(&db, "s1").unwrap()[0].text, "xcode build");
        delete(&db, "s1").unwrap();
        assert!(matches!(delete(&db, "s1"), Err(SoakError::NotFound(_))));
        assert!(list(&db).unwrap().is_empty());
    }

    #[test]
    fn a_soak_is_bounded_and_the_error_names_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_writer(&dir.path().join("boltwatch.db")).unwrap();
        let refused = |s: Soak| match create(&db, &s, 1) {
            Err(SoakError::Invalid(why)) => why,
            other => panic!("{other:?}"),
        };
        let many = (0..65).map(|i| format!("n{i}")).collect();
        assert!(refused(Soak {
            nodes: many,
            ..soak("a")
        })
        .contains("at most 64"));
        let twice = vec!["a".into(), "a".into()];
        assert!(refused(Soak {
            nodes: twice,
            ..soak("b")
        })
        .contains("twice"));
        let long = vec!["n".repeat(129)];
        assert!(refused(Soak {
            nodes: long,
            ..soak("c")
        })
        .contains("128"));
        let labels = (0..33).map(|i| (format!("k{i}"), "v".into())).collect();
        assert!(refused(Soak {
            labels,
            ..soak("d")
        })
        .contains("at most 32"));
        let bad = [("a b".to_string(), "v".to_string())].into();
        assert!(refused(Soak {
            labels: bad,
            ..soak("e")
        })
        .contains("label name"));
        create(&db, &soak("ok"), 1).unwrap();
        for i in 0..MAX_MARKS {
            let m = Mark {
                text: format!("m{i}"),
                at_unix_ns: 150,
                until_unix_ns: None,
            };
            add_mark(&db, "ok", &m).unwrap();
        }
        let one_more = Mark {
            text: "one more".into(),
            at_unix_ns: 150,
            until_unix_ns: None,
        };
        assert!(
            matches!(add_mark(&db, "ok", &one_more), Err(SoakError::Invalid(w)) if w.contains("1000 marks"))
        );
    }
}
