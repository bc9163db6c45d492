//! A key's value as given, whether by the file, a flag or the default, and
//! the typed readings a key's setter takes from it.

use std::net::SocketAddr;
use std::time::Duration;

use toml::de::DeValue;

/// One value for one key.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A TOML string, a flag's argument or a default's text.
    Str(String),
    /// A TOML integer.
    Int(i64),
    /// A TOML float.
    Float(f64),
    /// A TOML boolean.
    Bool(bool),
    /// A TOML array of strings, or a repeated flag's arguments.
    List(Vec<String>),
    /// A TOML table of strings (`[peers] b = "10.0.0.2:862"`).
    Table(Vec<(String, String)>),
    /// Any other TOML value; named in the error.
    Other(&'static str),
}

impl Value {
    /// Converts a parsed TOML value.
    pub fn from_toml(v: &DeValue<'_>) -> Value {
        match v {
            DeValue::String(s) => Value::Str(s.to_string()),
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                .map(Value::Int)
                .unwrap_or(Value::Other("an integer out of range")),
            DeValue::Float(f) => f
                .as_str()
                .parse()
                .map(Value::Float)
                .unwrap_or(Value::Other("a float out of range")),
            DeValue::Boolean(b) => Value::Bool(*b),
            DeValue::Datetime(_) => Value::Other("a datetime"),
            DeValue::Array(a) => a
                .iter()
                .map(|e| e.get_ref().as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Value::List)
                .unwrap_or(Value::Other("an array with non-string items")),
            DeValue::Table(t) => t
                .iter()
                .map(|(k, v)| Some((k.get_ref().to_string(), v.get_ref().as_str()?.to_string())))
                .collect::<Option<Vec<_>>>()
                .map(Value::Table)
                .unwrap_or(Value::Other("a table with non-string values")),
        }
    }

    /// What this is, for "expected X, found Y".
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Str(_) => "a string",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Bool(_) => "a boolean",
            Value::List(_) => "an array",
            Value::Table(_) => "a table",
            Value::Other(k) => k,
        }
    }

    fn expected<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("expected {what}, found {}", self.kind()))
    }

    /// A string.
    pub fn str(&self) -> Result<&str, String> {
        match self {
            Value::Str(s) => Ok(s),
            _ => self.expected("a string"),
        }
    }

    /// A string with something other than blanks in it, trimmed.
    pub fn nonempty(&self) -> Result<&str, String> {
        match self.str()?.trim() {
            "" => Err("must not be empty".into()),
            s => Ok(s),
        }
    }

    /// A file or directory path: a non-empty string.
    pub fn path(&self) -> Result<std::path::PathBuf, String> {
        self.nonempty().map(std::path::PathBuf::from)
    }

    /// An integer (a flag's or default's text is parsed) within `range`.
    pub fn int(&self, range: std::ops::RangeInclusive<i64>) -> Result<i64, String> {
        let n = match self {
            Value::Int(n) => *n,
            Value::Str(s) => parse_text(s, "an integer")?,
            _ => return self.expected("an integer"),
        };
        within(n, &range)
    }

    /// A number within `range` (an integer is accepted).
    pub fn float(&self, range: std::ops::RangeInclusive<f64>) -> Result<f64, String> {
        let x = match self {
            Value::Float(x) => *x,
            Value::Int(n) => *n as f64,
            Value::Str(s) => parse_text(s, "a number")?,
            _ => return self.expected("a number"),
        };
        within(x, &range)
    }

    /// A boolean (`true`/`false` as text from flags and defaults).
    pub fn bool(&self) -> Result<bool, String> {
        match self {
            Value::Bool(b) => Ok(*b),
            Value::Str(s) => s
                .trim()
                .parse()
                .map_err(|_| format!("`{s}`: expected true or false")),
            _ => self.expected("a boolean"),
        }
    }

    /// A duration (`100ms`, `5s`) within `range`.
    pub fn duration(&self, range: std::ops::RangeInclusive<Duration>) -> Result<Duration, String> {
        let text = self.str()?;
        let d = crate::duration::parse(text)?;
        if range.contains(&d) {
            Ok(d)
        } else {
            // Echo what was written (`0ms`, not Debug's `0ns`) and the bounds
            // in the same spelling a config file takes.
            Err(format!(
                "`{}` is outside {}..{}",
                text.trim(),
                humantime::format_duration(*range.start()),
                humantime::format_duration(*range.end())
            ))
        }
    }

    /// A socket address, `IP:PORT`.
    pub fn addr(&self) -> Result<SocketAddr, String> {
        let s = self.str()?;
        s.trim()
            .parse()
            .map_err(|e| format!("`{s}`: {e} (expected IP:PORT)"))
    }

    /// A list of strings; a single string (a default's text) is split at
    /// commas, and an empty one is the empty list.
    pub fn list(&self) -> Result<Vec<String>, String> {
        match self {
            Value::List(l) => Ok(l.clone()),
            Value::Str(s) if s.trim().is_empty() => Ok(Vec::new()),
            Value::Str(s) => Ok(s.split(',').map(|e| e.trim().to_string()).collect()),
            _ => self.expected("an array of strings"),
        }
    }

    /// `NAME=VALUE` entries: a table, or a list of `NAME=VALUE` strings.
    pub fn entries(&self) -> Result<Vec<String>, String> {
        match self {
            Value::Table(t) => Ok(t.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            _ => self.list(),
        }
    }

    /// [`Value::list`] with each item read by `item`; the first error is
    /// the key's.
    pub fn list_of<T, C: FromIterator<T>>(
        &self,
        item: impl FnMut(&str) -> Result<T, String>,
    ) -> Result<C, String> {
        self.list()?.iter().map(String::as_str).map(item).collect()
    }

    /// [`Value::entries`] with each `NAME=VALUE` read by `entry`.
    pub fn entries_of<T, C: FromIterator<T>>(
        &self,
        entry: impl FnMut(&str) -> Result<T, String>,
    ) -> Result<C, String> {
        self.entries()?
            .iter()
            .map(String::as_str)
            .map(entry)
            .collect()
    }
}

/// A number given as text (flags, defaults), trimmed; the error names the
/// text and `what` was expected.
fn parse_text<T>(s: &str, what: &str) -> Result<T, String>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    s.trim()
        .parse()
        .map_err(|e| format!("`{s}`: {e} (expected {what})"))
}

/// `x` if it lies in `range`, else an error naming both.
fn within<T>(x: T, range: &std::ops::RangeInclusive<T>) -> Result<T, String>
where
    T: PartialOrd + std::fmt::Display,
{
    if range.contains(&x) {
        Ok(x)
    } else {
        Err(format!("{x} is outside {}..{}", range.start(), range.end()))
    }
}
