use std::time::Duration;

use super::*;

#[derive(Debug, PartialEq)]
struct Demo {
    interval: Duration,
    names: Vec<String>,
    on: bool,
    port: i64,
}

type K = Key<Demo>;

const KEYS: &[K] = &[
    K::new("interval", "time between things", |c, v| {
        set(
            &mut c.interval,
            v.duration(Duration::from_millis(1)..=Duration::from_secs(60)),
        )
    })
    .flag("interval", "D")
    .default("1s"),
    K::new("part.names", "names", |c, v| set(&mut c.names, v.list()))
        .repeated("name", "NAME")
        .off("no-names", "[]", "no names")
        .default("a,b"),
    K::new("part.on", "on or off", |c, v| set(&mut c.on, v.bool()))
        .off("off", "false", "turn it off")
        .default("true"),
    K::new("part.port", "a port", |c, v| {
        set(&mut c.port, v.int(1..=65535))
    })
    .was("port")
    .default("80"),
];

impl Schema for Demo {
    fn keys() -> &'static [Key<Self>] {
        KEYS
    }
    fn blank() -> Self {
        Demo {
            interval: Duration::ZERO,
            names: Vec::new(),
            on: false,
            port: 0,
        }
    }
    fn finish(&mut self, at: &Where<'_, Self>) -> Result<(), ConfigError> {
        if self.port == 99 && self.on {
            return Err(at.error(&["part.on", "part.port"], "99 must be off"));
        }
        Ok(())
    }
}

fn parse(text: &str, flags: &[(&str, &str)]) -> Result<Demo, ConfigError> {
    let doc = Document::parse::<Demo>("f.toml", text)?;
    build(Some(&doc), &Flags::from_pairs(flags))
}

#[test]
fn defaults_then_file_then_flags() {
    let d = parse("", &[]).unwrap();
    assert_eq!(d.interval, Duration::from_secs(1));
    assert_eq!(d.names, ["a", "b"]);
    assert!(d.on);
    let d = parse(
        "interval = \"5s\"\n[part]\nnames = [\"x\"]\nport = 8\n",
        &[],
    )
    .unwrap();
    assert_eq!(
        (d.interval, d.names.len(), d.port),
        (Duration::from_secs(5), 1, 8)
    );
    let d = parse(
        "interval = \"5s\"\n",
        &[
            ("interval", "10ms"),
            ("name", "p"),
            ("name", "q"),
            ("off", ""),
        ],
    )
    .unwrap();
    assert_eq!(d.interval, Duration::from_millis(10));
    assert_eq!(d.names, ["p", "q"]);
    assert!(!d.on);
    assert!(parse("", &[("no-names", "")]).unwrap().names.is_empty());
}

#[test]
fn errors_name_file_line_and_key() {
    let e = parse("\n[part]\nport = 0\n", &[]).unwrap_err().to_string();
    assert_eq!(e, "f.toml:3: key `part.port`: 0 is outside 1..65535");
    let e = parse("\n\n[part]\non = \"yes\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("f.toml:4: key `part.on`"), "{e}");
    let e = parse("\nbogus = 1\n", &[]).unwrap_err().to_string();
    assert_eq!(e, "f.toml:2: key `bogus`: unknown key");
    let e = parse("[part]\nbogus = 1\n", &[]).unwrap_err().to_string();
    assert_eq!(e, "f.toml:2: key `part.bogus`: unknown key");
    let e = parse("[part]\nnmaes = []\n", &[]).unwrap_err().to_string();
    assert_eq!(
        e,
        "f.toml:2: key `part.nmaes`: unknown key; did you mean `part.names`?"
    );
    let e = parse("part = 1\n", &[]).unwrap_err().to_string();
    assert!(e.contains("key `part`: is a section"), "{e}");
    let e = parse("interval = \"fast\"\n", &[]).unwrap_err().to_string();
    assert!(e.starts_with("f.toml:1: key `interval`: `fast`"), "{e}");
    let e = parse("", &[("interval", "0s")]).unwrap_err().to_string();
    assert_eq!(
        e,
        "command line: flag `--interval`: `0s` is outside 1ms..1m"
    );
    let e = parse("interval = \"0ms\"\n", &[]).unwrap_err().to_string();
    assert_eq!(e, "f.toml:1: key `interval`: `0ms` is outside 1ms..1m");
    let e = parse("x = \n", &[]).unwrap_err().to_string();
    assert!(e.starts_with("f.toml:1: "), "{e}");
}

#[test]
fn cross_key_errors_blame_the_key_that_was_set() {
    let e = parse("\n[part]\nport = 99\n", &[]).unwrap_err().to_string();
    assert_eq!(e, "f.toml:3: key `part.port`: 99 must be off");
    assert!(parse("[part]\nport = 99\non = false\n", &[]).is_ok());
}

#[test]
fn table_lists_every_key_and_off_flag() {
    let t = markdown_table::<Demo>();
    assert!(
        t.contains("| `--interval D` | `interval` | `1s` | time between things |"),
        "{t}"
    );
    assert!(
        t.contains("| `--name NAME` | `part.names` | `a,b` | names; repeatable |"),
        "{t}"
    );
    assert!(
        t.contains("| `--no-names` | `part.names = []` | | no names |"),
        "{t}"
    );
    assert!(t.contains("|  | `part.port` | `80` | a port |"), "{t}");
    let doc = "x\n<!-- BEGIN t -->\nrow\n<!-- END t -->\n";
    assert_eq!(between_markers(doc, "t"), Some("row\n"));
}

#[test]
fn check_table_wants_the_key_table_between_the_markers() {
    let doc = format!(
        "x\n<!-- BEGIN t -->\n{}<!-- END t -->\n",
        markdown_table::<Demo>()
    );
    assert_eq!(check_table::<Demo>(&doc, "t"), Ok(()));
    let stale = doc.replace("a port", "the port");
    let e = check_table::<Demo>(&stale, "t").unwrap_err();
    assert!(
        e.contains("<!-- BEGIN t -->") && e.contains("| a port |"),
        "{e}"
    );
    assert!(check_table::<Demo>("no markers", "t").is_err());
}

#[test]
fn clap_flags_parse_into_values() {
    use clap::{Args, FromArgMatches};
    let cmd = Flags::<Demo>::augment_args(clap::Command::new("t"));
    let m = cmd
        .try_get_matches_from([
            "t",
            "--interval",
            "2s",
            "--name",
            "x",
            "--name",
            "y",
            "--off",
        ])
        .unwrap();
    let f = Flags::<Demo>::from_arg_matches(&m).unwrap();
    let d = build(None, &f).unwrap();
    assert_eq!(d.interval, Duration::from_secs(2));
    assert_eq!(d.names, ["x", "y"]);
    assert!(!d.on);
    let cmd = Flags::<Demo>::augment_args(clap::Command::new("t"));
    assert!(cmd
        .try_get_matches_from(["t", "--name", "x", "--no-names"])
        .is_err());
}

#[test]
fn an_earlier_name_still_works_and_is_noted() {
    let doc = Document::parse::<Demo>("f.toml", "\nport = 8\n").unwrap();
    assert_eq!(
        doc.renamed,
        ["f.toml:2: key `port` is now `part.port`; the old name still works"]
    );
    assert_eq!(
        build::<Demo>(Some(&doc), &Flags::default()).unwrap().port,
        8
    );
    let e = parse("port = 0\n", &[]).unwrap_err().to_string();
    assert_eq!(e, "f.toml:1: key `part.port`: 0 is outside 1..65535");
}

#[test]
fn list_of_and_entries_of_read_each_item_and_stop_at_the_first_error() {
    let port = |s: &str| s.parse::<u16>().map_err(|e| format!("`{s}`: {e}"));
    let list = Value::List(vec!["1".into(), "2".into()]);
    assert_eq!(list.list_of::<_, Vec<_>>(port), Ok(vec![1, 2]));
    assert_eq!(
        Value::Str("1, x, y".into()).list_of::<_, Vec<_>>(port),
        Err("`x`: invalid digit found in string".to_string())
    );
    let table = Value::Table(vec![("a".into(), "1".into()), ("b".into(), "2".into())]);
    let pairs: Vec<(String, String)> = table
        .entries_of(|e| {
            let (k, v) = e.split_once('=').ok_or("no =")?;
            Ok((k.to_string(), v.to_string()))
        })
        .unwrap();
    assert_eq!(pairs, [("a".into(), "1".into()), ("b".into(), "2".into())]);
    assert!(Value::Int(3).list_of::<u16, Vec<_>>(port).is_err());
}

/// An input proptest found (in the agent's and the collector's config
/// files alike): the TOML parser places the error of an unterminated
/// multi-line string at the end of the text, after its only newline; the
/// error must still name line 1.
#[test]
fn an_unterminated_multiline_string_at_the_end_names_line_1() {
    for t in ["_=\"\"\"\n", "\"\"\"\n"] {
        let e = Document::parse::<Demo>("f.toml", t)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("f.toml:1: "), "{e}");
    }
}
