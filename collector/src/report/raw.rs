//! Raw data out (`boltwatch-collector export`): one stored record as a
//! line of CSV or of JSON lines, so a team can archive the evidence beside
//! the verdict. Pure: a record in, a line out; the command streams them.
//!
//! JSON lines are the API's record objects (`GET /api/v1/records`), one
//! per line. CSV has fixed columns (`time`, `unix_ns`, `node`, `boot_id`,
//! `seq`, `kind`, then `payload` as the same JSON object), quoted as RFC
//! 4180 says; a cell that a spreadsheet would run as a formula (starting
//! `=`, `+`, `-`, `@`) gets a leading `'`, since node names come from
//! agents.

use crate::dto::RecordDto;
use crate::soak::time;

/// `export --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawFormat {
    /// Comma-separated values with a header line.
    Csv,
    /// One JSON object per line.
    Jsonl,
}

impl std::str::FromStr for RawFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<RawFormat, String> {
        match s {
            "csv" => Ok(RawFormat::Csv),
            "jsonl" | "ndjson" => Ok(RawFormat::Jsonl),
            _ => Err(format!("format `{s}`: use csv or jsonl")),
        }
    }
}

/// The CSV columns.
pub const CSV_HEADER: &str = "time,unix_ns,node,boot_id,seq,kind,payload";

impl RawFormat {
    /// The line before the records, if any (with its newline).
    pub fn header(self) -> Option<String> {
        match self {
            RawFormat::Csv => Some(format!("{CSV_HEADER}\n")),
            RawFormat::Jsonl => None,
        }
    }

    /// `r` as one line, with its newline.
    pub fn line(self, r: &RecordDto) -> String {
        match self {
            RawFormat::Jsonl => serde_json::to_string(r).expect("a record serializes") + "\n",
            RawFormat::Csv => {
                let payload = r
                    .payload
                    .as_ref()
                    .map(|p| serde_json::to_string(p).expect("a payload serializes"))
                    .unwrap_or_default();
                let cells = [
                    time::format(r.unix_ns),
                    r.unix_ns.to_string(),
                    cell(&r.node),
                    cell(&r.boot_id),
                    r.seq.to_string(),
                    cell(&r.kind),
                    cell(&payload),
                ];
                cells.join(",") + "\n"
            }
        }
    }
}

/// A text cell: a formula-looking start defused, quoted when it holds a
/// comma, quote or line break (quotes doubled).
fn cell(s: &str) -> String {
    let s = match s.chars().next() {
        Some('=' | '+' | '-' | '@') => format!("'{s}"),
        _ => s.to_string(),
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dto::PayloadDto;
    use boltwatch_proto::v1::record::Payload;

    fn record() -> RecordDto {
        let p = Payload::defaults().into_iter().next().unwrap();
        RecordDto {
            node: "a,b".into(),
            boot_id: "=cmd".into(),
            seq: 7,
            unix_ns: 1_795_996_800_000_000_001,
            kind: p.kind().into(),
            payload: Some(PayloadDto::from(&p)),
        }
    }

    #[test]
    fn csv_quotes_and_defuses_cells() {
        assert_eq!(cell("plain"), "plain");
        assert_eq!(cell("a\"b"), "\"a\"\"b\"");
        assert_eq!(cell("-1+1"), "'-1+1");
        assert_eq!(cell("x\ny"), "\"x\ny\"");
        let line = RawFormat::Csv.line(&record());
        assert!(
            line.starts_with("2026-11-30T00:00:00Z,1795996800000000001,\"a,b\",'=cmd,7,"),
            "{line}"
        );
        assert!(line.ends_with("}\"\n"), "{line}");
        assert_eq!(
            RawFormat::Csv
                .header()
                .unwrap()
                .trim_end()
                .split(',')
                .count(),
            7
        );
    }

    #[test]
    fn jsonl_is_the_api_object_on_one_line() {
        let r = record();
        let line = RawFormat::Jsonl.line(&r);
        assert_eq!(line.matches('\n').count(), 1);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["payload"]["kind"], r.kind.as_str());
        assert_eq!(RawFormat::Jsonl.header(), None);
        assert!("xlsx".parse::<RawFormat>().is_err());
    }
}
