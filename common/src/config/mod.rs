//! One definition per config key, and the one way keys are read.
//!
//! A program's configuration is a struct and a table of [`Key`]s, one per
//! setting, each saying everything about it in one place: its TOML path
//! (`probe_interval`, `bandwidth.listen`; a dot is a `[section]`), its flag,
//! its default, its help text and the setter that validates a [`Value`] into
//! the struct (ripgrep's `flags/defs.rs` is the model). From that table come
//! the file parser (unknown keys refused with their line), the command-line
//! flags ([`Flags`]), the merge (default, then file, then flags) and the
//! documented flag table ([`markdown_table`], in docs/deployment.md), so
//! none can drift from another.
//!
//! Rules that span keys (a peer named in `[bandwidth.peers]` must be a
//! peer) and defaults computed from other keys live in
//! [`Schema::finish`], which reports at the key's origin through [`Where`].
//! A key that moved keeps its old name in [`Key::was`]: still accepted, and
//! noted in [`Document::renamed`] for the binary to log.
//!
//! Adding a key: one entry in the table, its field in the struct (and in
//! `blank`), and the table in docs/deployment.md, which its test prints
//! when it differs.

mod error;
mod flags;
mod table;
mod tls;
mod value;

pub use error::{line_of, ConfigError, FLAGS};
pub use flags::Flags;
pub use table::{between_markers, check_table, markdown_table};
pub use tls::{check_tls_pair, tls_cert_key, tls_key_key, HasTlsPair, TlsPair};
pub use value::Value;

use std::path::Path;

use toml::de::{DeTable, DeValue};

/// Sets one key of `C` from a value, or says what is wrong with it.
pub type Setter<C> = fn(&mut C, &Value) -> Result<(), String>;

/// The body of a setter that only stores what a [`Value`] reading gives:
/// `|c, v| set(&mut c.listen, v.addr())`.
pub fn set<T>(field: &mut T, value: Result<T, String>) -> Result<(), String> {
    *field = value?;
    Ok(())
}

/// A flag that turns a key off (`--no-services`, `--no-bandwidth`).
#[derive(Debug, Clone, Copy)]
pub struct Off {
    /// Long flag name, without dashes.
    pub flag: &'static str,
    /// The value it sets, as TOML (`false`, `[]`).
    pub value: &'static str,
    /// Help text.
    pub help: &'static str,
}

/// Everything about one setting.
pub struct Key<C: 'static> {
    /// TOML path; `a.b` is key `b` of section `[a]`.
    pub key: &'static str,
    /// Long flag name without dashes, if the setting has one.
    pub flag: Option<&'static str>,
    /// The flag argument's placeholder (`D`, `ADDR`).
    pub value_name: &'static str,
    /// The flag may be repeated; its values form a list.
    pub repeated: bool,
    /// A flag that sets the key to an "off" value.
    pub off: Option<Off>,
    /// The default, as a flag would spell it; empty: none applied (the
    /// struct's blank value stands, or [`Schema::finish`] computes it).
    pub default: &'static str,
    /// The default as documented, when it differs from `default`.
    pub default_doc: Option<&'static str>,
    /// Help text: one line, lower case, no final period.
    pub help: &'static str,
    /// The key's earlier name, still accepted (with a note) so deployed
    /// files keep working.
    pub was: Option<&'static str>,
    /// Validates and stores a value.
    pub set: Setter<C>,
}

impl<C> Key<C> {
    /// A file-only key without a default.
    pub const fn new(key: &'static str, help: &'static str, set: Setter<C>) -> Self {
        Key {
            key,
            flag: None,
            value_name: "",
            repeated: false,
            off: None,
            default: "",
            default_doc: None,
            help,
            was: None,
            set,
        }
    }

    /// The key's earlier (flat) name, still accepted.
    pub const fn was(mut self, old: &'static str) -> Self {
        self.was = Some(old);
        self
    }

    /// Adds a flag `--flag VALUE`.
    pub const fn flag(mut self, flag: &'static str, value_name: &'static str) -> Self {
        self.flag = Some(flag);
        self.value_name = value_name;
        self
    }

    /// Adds a repeatable flag `--flag VALUE` (values form a list).
    pub const fn repeated(mut self, flag: &'static str, value_name: &'static str) -> Self {
        self.repeated = true;
        self.flag(flag, value_name)
    }

    /// Adds a flag that sets the key to `value` (TOML text).
    pub const fn off(
        mut self,
        flag: &'static str,
        value: &'static str,
        help: &'static str,
    ) -> Self {
        self.off = Some(Off { flag, value, help });
        self
    }

    /// The default, applied before the file and flags.
    pub const fn default(mut self, default: &'static str) -> Self {
        self.default = default;
        self
    }

    /// How the docs and `--help` state the default, when `default` alone
    /// would mislead (computed defaults, none).
    pub const fn default_doc(mut self, doc: &'static str) -> Self {
        self.default_doc = Some(doc);
        self
    }

    /// The default as documented.
    pub fn documented_default(&self) -> &'static str {
        self.default_doc.unwrap_or(self.default)
    }
}

/// A configuration with a log format, for the one `log_format` key both
/// binaries share ([`log_format_key`]).
pub trait HasLogFormat {
    /// The field the key sets.
    fn log_format_mut(&mut self) -> &mut crate::log::LogFormat;
}

/// The `log_format` key and `--log-format` flag, the same in every binary.
pub const fn log_format_key<C: HasLogFormat>() -> Key<C> {
    Key::new("log_format", "`text` or `json`", |c: &mut C, v| {
        *c.log_format_mut() = v.str()?.parse()?;
        Ok(())
    })
    .flag("log-format", "F")
    .default("text")
}

/// A configuration struct described by a key table.
pub trait Schema: Sized + 'static {
    /// The key table.
    fn keys() -> &'static [Key<Self>];
    /// The struct before any default is applied; every field a key sets is
    /// overwritten by its default, so these values are placeholders.
    fn blank() -> Self;
    /// Cross-key rules and computed defaults, once every key is set.
    fn finish(&mut self, _at: &Where<'_, Self>) -> Result<(), ConfigError> {
        Ok(())
    }
}

/// A parsed config file: each key found, with its line.
#[derive(Debug, Clone)]
pub struct Document {
    /// File name as given (for messages).
    pub name: String,
    /// Key index into [`Schema::keys`], value and 1-based line.
    pub entries: Vec<(usize, Value, usize)>,
    /// Keys given by an earlier name: `file:line: ...` notes to log once
    /// logging is up.
    pub renamed: Vec<String>,
}

impl Document {
    /// Parses TOML `text` against `C`'s keys; `name` is only used in
    /// errors. A key no definition has is refused with its line.
    pub fn parse<C: Schema>(name: &str, text: &str) -> Result<Document, ConfigError> {
        let table = DeTable::parse(text).map_err(|e| ConfigError::Syntax {
            file: name.to_string(),
            line: e.span().map_or(1, |s| line_of(text, s.start)),
            message: e.message().trim().to_string(),
        })?;
        let mut doc = Document {
            name: name.to_string(),
            entries: Vec::new(),
            renamed: Vec::new(),
        };
        doc.walk::<C>("", table.get_ref(), text)?;
        Ok(doc)
    }

    /// Reads and parses a file.
    pub fn load<C: Schema>(path: &Path) -> Result<Document, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Document::parse::<C>(&path.display().to_string(), &text)
    }

    fn walk<C: Schema>(
        &mut self,
        prefix: &str,
        table: &DeTable<'_>,
        text: &str,
    ) -> Result<(), ConfigError> {
        for (k, v) in table.iter() {
            let path = match prefix {
                "" => k.get_ref().to_string(),
                p => format!("{p}.{}", k.get_ref()),
            };
            let line = line_of(text, k.span().start);
            if let Some(i) = C::keys().iter().position(|d| d.key == path) {
                self.entries.push((i, Value::from_toml(v.get_ref()), line));
                continue;
            }
            let section = format!("{path}.");
            let is_section = C::keys().iter().any(|d| d.key.starts_with(&section));
            match v.get_ref() {
                DeValue::Table(t) if is_section => {
                    self.walk::<C>(&path, t, text)?;
                    continue;
                }
                _ => {}
            }
            if let Some(i) = C::keys().iter().position(|d| d.was == Some(&path)) {
                self.renamed.push(format!(
                    "{}:{line}: key `{path}` is now `{}`; the old name still works",
                    self.name,
                    C::keys()[i].key
                ));
                self.entries.push((i, Value::from_toml(v.get_ref()), line));
                continue;
            }
            let message = if is_section {
                "is a section; expected a table".into()
            } else {
                unknown_key::<C>(&path)
            };
            return Err(ConfigError::Invalid {
                file: self.name.clone(),
                line,
                key: path,
                message,
            });
        }
        Ok(())
    }
}

/// "unknown key", with the nearest known key when it is a typo away: an
/// edit distance (with transpositions) of at most 2, or a fifth of the
/// key for long ones. Similarity scores such as Jaro-Winkler reward the
/// shared `section.` prefix and would suggest any key of the section.
fn unknown_key<C: Schema>(path: &str) -> String {
    let best = C::keys()
        .iter()
        .map(|d| (strsim::osa_distance(path, d.key), d.key))
        .min_by_key(|&(distance, _)| distance);
    match best {
        Some((distance, key)) if distance <= (path.len() / 5).max(2) => {
            format!("unknown key; did you mean `{key}`?")
        }
        _ => "unknown key".into(),
    }
}

/// Where a key's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Its default (or none).
    Default,
    /// The file, at this line.
    File(usize),
    /// A command-line flag.
    Flag(&'static str),
}

/// Where each key was set, for errors raised after the merge.
pub struct Where<'a, C: 'static> {
    file: &'a str,
    origins: Vec<Origin>,
    _c: std::marker::PhantomData<C>,
}

impl<C: Schema> Where<'_, C> {
    fn index(key: &str) -> usize {
        C::keys()
            .iter()
            .position(|d| d.key == key)
            .unwrap_or_else(|| panic!("no config key `{key}`"))
    }

    /// Where `key` came from.
    pub fn origin(&self, key: &str) -> Origin {
        self.origins[Self::index(key)]
    }

    /// An error about `keys` (the first is blamed when none was set),
    /// reported at the first of them the operator set.
    pub fn error(&self, keys: &[&str], message: impl Into<String>) -> ConfigError {
        let (key, origin) = keys
            .iter()
            .map(|k| (*k, self.origin(k)))
            .find(|(_, o)| *o != Origin::Default)
            .unwrap_or((keys[0], Origin::Default));
        let message = message.into();
        match origin {
            Origin::Flag(f) => ConfigError::Invalid {
                file: FLAGS.into(),
                line: 0,
                key: format!("--{f}"),
                message,
            },
            Origin::File(line) => ConfigError::Invalid {
                file: self.file.into(),
                line,
                key: key.into(),
                message,
            },
            // No line says it; line 1 of a file, 0 for flags alone.
            Origin::Default => ConfigError::Invalid {
                file: self.file.into(),
                line: usize::from(self.file != FLAGS),
                key: key.into(),
                message: format!("{message} (with its default)"),
            },
        }
    }
}

/// Builds `C`: defaults, then the file's keys, then the flags, then
/// [`Schema::finish`].
pub fn build<C: Schema>(file: Option<&Document>, flags: &Flags<C>) -> Result<C, ConfigError> {
    let keys = C::keys();
    let mut c: C = defaults();
    let mut origins = vec![Origin::Default; keys.len()];
    let name = file.map_or(FLAGS, |d| d.name.as_str());
    for (i, v, line) in file.map(|d| d.entries.as_slice()).unwrap_or_default() {
        (keys[*i].set)(&mut c, v).map_err(|message| ConfigError::Invalid {
            file: name.into(),
            line: *line,
            key: keys[*i].key.into(),
            message,
        })?;
        origins[*i] = Origin::File(*line);
    }
    for (i, v, flag) in &flags.given {
        (keys[*i].set)(&mut c, v).map_err(|message| ConfigError::Invalid {
            file: FLAGS.into(),
            line: 0,
            key: format!("--{flag}"),
            message,
        })?;
        origins[*i] = Origin::Flag(flag);
    }
    let at = Where {
        file: name,
        origins,
        _c: std::marker::PhantomData,
    };
    c.finish(&at)?;
    Ok(c)
}

/// `C` with every key's default applied and nothing computed (no
/// [`Schema::finish`]): what a `Default` impl returns.
///
/// # Panics
/// When a default does not pass its own key's validation, a bug that
/// every schema's tests catch.
pub fn defaults<C: Schema>() -> C {
    let mut c = C::blank();
    for d in C::keys().iter().filter(|d| !d.default.is_empty()) {
        if let Err(e) = (d.set)(&mut c, &Value::Str(d.default.into())) {
            panic!("default of `{}` is invalid: {e}", d.key);
        }
    }
    c
}

/// The value an [`Off`] flag sets.
pub(crate) fn off_value(off: &Off) -> Value {
    DeValue::parse(off.value)
        .map(|v| Value::from_toml(v.get_ref()))
        .unwrap_or(Value::Other("an unparsable off value"))
}

#[cfg(test)]
mod tests;
