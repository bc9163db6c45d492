//! A metric family's declaration ([`Family`]: name, type, unit, help,
//! labels) and the one writer of the Prometheus text exposition format
//! 0.0.4 ([`Exposition`]). Domain modules declare their families as
//! constants and hand the exposition their samples; nothing else writes
//! metric text.

use std::fmt::Write as _;

/// The Prometheus metric type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// Only goes up (resets on restart).
    Counter,
    /// Any value; the newest observation.
    Gauge,
    /// Classic histogram: `_bucket{le}`, `_sum`, `_count`.
    Histogram,
}

impl Type {
    /// The `# TYPE` word.
    pub fn as_str(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        }
    }
}

/// A metric family, declared once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// Full name, `boltwatch_` prefixed (counters end in `_total`).
    pub name: &'static str,
    /// Metric type.
    pub kind: Type,
    /// Unit the name carries (`seconds`, `bytes`, `celsius`,
    /// `bits_per_second`), empty for counts, ratios and states.
    pub unit: &'static str,
    /// `# HELP` text.
    pub help: &'static str,
    /// Label names, in the order samples give their values (`le` of
    /// histograms is added by the exposition).
    pub labels: &'static [&'static str],
}

/// Declares a domain's families, one a line, in exposition order:
/// `IDENT = Type("name", "unit", labels, "help");` becomes `pub const
/// IDENT: Family`, and the list of them all becomes `pub const FAMILIES`.
#[macro_export]
macro_rules! families {
    ($($id:ident = $kind:ident($name:expr, $unit:literal, $labels:expr, $help:expr);)+) => {
        $(
            #[doc = concat!("`", $name, "`: ", $help)]
            pub const $id: $crate::family::Family = $crate::family::Family {
                name: $name,
                kind: $crate::family::Type::$kind,
                unit: $unit,
                help: $help,
                labels: $labels,
            };
        )+
        /// This domain's families, in exposition order.
        pub const FAMILIES: &[$crate::family::Family] = &[$($id),+];
    };
}
pub use crate::families;

/// Label sets the families share.
pub mod labels {
    /// Per node.
    pub const NODE: &[&str] = &["node"];
    /// Per direction of a link, seen from `node`.
    pub const NODE_PEER: &[&str] = &["node", "peer"];
    /// Per interface of a node.
    pub const NODE_INTERFACE: &[&str] = &["node", "interface"];
    /// Per service checked on a peer.
    pub const NODE_PEER_SERVICE: &[&str] = &["node", "peer", "service"];
    /// A peer and the interface whose carrier it follows.
    pub const NODE_PEER_INTERFACE: &[&str] = &["node", "peer", "interface"];
    /// A process's own series.
    pub const NONE: &[&str] = &[];
}

/// A sample value as the text format writes it.
pub trait Value {
    /// Appends the value.
    fn write(&self, o: &mut String);
}

impl Value for u64 {
    fn write(&self, o: &mut String) {
        let _ = write!(o, "{self}");
    }
}

impl Value for u32 {
    fn write(&self, o: &mut String) {
        let _ = write!(o, "{self}");
    }
}

impl Value for f64 {
    fn write(&self, o: &mut String) {
        o.push_str(&fmt_f64(*self));
    }
}

impl Value for bool {
    fn write(&self, o: &mut String) {
        o.push(if *self { '1' } else { '0' });
    }
}

/// One series of a classic histogram, as exported.
#[derive(Debug, Clone, Copy)]
pub struct Buckets<'a> {
    /// Upper bounds, ascending (`+Inf` is implied).
    pub bounds: &'a [f64],
    /// Non-cumulative counts per bound; extra slots (overflow) are ignored.
    pub counts: &'a [u64],
    /// Sum of the observations.
    pub sum: f64,
    /// Number of observations (the `+Inf` bucket).
    pub count: u64,
}

/// The text exposition under construction.
#[derive(Debug, Default, Clone)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Exposition {
        Exposition {
            out: String::with_capacity(16 * 1024),
        }
    }

    /// Writes family `f` (HELP and TYPE, also when it has no series yet)
    /// with one sample per `(label values, value)`.
    pub fn family<'a, L, V>(&mut self, f: &Family, samples: impl IntoIterator<Item = (L, V)>)
    where
        L: AsRef<[&'a str]>,
        V: Value,
    {
        debug_assert_ne!(f.kind, Type::Histogram, "{}", f.name);
        self.header(f);
        for (labels, v) in samples {
            self.sample(f, "", labels.as_ref(), None, &v);
        }
    }

    /// Writes histogram family `f` with one series per `(label values,
    /// buckets)`: cumulative `_bucket{le}` lines, `_sum` and `_count`.
    pub fn histograms<'a, 'b, L>(
        &mut self,
        f: &Family,
        series: impl IntoIterator<Item = (L, Buckets<'b>)>,
    ) where
        L: AsRef<[&'a str]>,
    {
        debug_assert_eq!(f.kind, Type::Histogram, "{}", f.name);
        self.header(f);
        for (labels, h) in series {
            let labels = labels.as_ref();
            let mut cumulative = 0u64;
            for (bound, n) in h.bounds.iter().zip(h.counts) {
                cumulative += n;
                let le = fmt_f64(*bound);
                self.sample(f, "_bucket", labels, Some(&le), &cumulative);
            }
            self.sample(f, "_bucket", labels, Some("+Inf"), &h.count);
            self.sample(f, "_sum", labels, None, &h.sum);
            self.sample(f, "_count", labels, None, &h.count);
        }
    }

    /// The text.
    pub fn finish(self) -> String {
        self.out
    }

    fn header(&mut self, f: &Family) {
        let o = &mut self.out;
        let _ = writeln!(o, "# HELP {} {}", f.name, escape_help(f.help));
        let _ = writeln!(o, "# TYPE {} {}", f.name, f.kind.as_str());
    }

    fn sample(
        &mut self,
        f: &Family,
        suffix: &str,
        values: &[&str],
        le: Option<&str>,
        v: &dyn Value,
    ) {
        debug_assert_eq!(values.len(), f.labels.len(), "{}", f.name);
        let o = &mut self.out;
        o.push_str(f.name);
        o.push_str(suffix);
        let pairs = f.labels.iter().copied().zip(values.iter().copied());
        let mut pairs = pairs.chain(le.map(|le| ("le", le))).peekable();
        if pairs.peek().is_some() {
            o.push('{');
            for (i, (k, v)) in pairs.enumerate() {
                if i > 0 {
                    o.push(',');
                }
                let _ = write!(o, "{k}=\"{}\"", escape_label(v));
            }
            o.push('}');
        }
        o.push(' ');
        v.write(o);
        o.push('\n');
    }
}

/// Escapes a label value: backslash, double quote and line feed.
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Escapes HELP text: backslash and line feed.
pub fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Formats a sample value or `le` bound; Rust's shortest round-trip form,
/// which Prometheus parses back to the same float.
pub fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// Where a record stands in its node's history, for [`Newest`]: its boot
/// (hashed), its sequence number in the boot and its time stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    boot: u64,
    seq: u64,
    unix_ns: u64,
}

impl At {
    /// Older than any record: what [`Newest::seed`] holds.
    const SEED: At = At {
        boot: 0,
        seq: 0,
        unix_ns: 0,
    };

    /// Where `r` stands.
    pub fn of(r: &boltwatch_proto::v1::Record) -> At {
        use std::hash::{Hash, Hasher};
        // Fixed keys: a boot's hash is the same in every process, and
        // only equality is asked of it.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        r.boot_id.hash(&mut h);
        At {
            boot: h.finish(),
            seq: r.seq,
            unix_ns: r.unix_ns,
        }
    }

    /// Whether a record here comes after (or is) one at `held`: within a
    /// boot by sequence number, the agent's own order, so one record
    /// stamped far ahead cannot hold a gauge until its clock catches up;
    /// between boots by time stamp, the only order they share.
    fn not_before(&self, held: &At) -> bool {
        if self.boot == held.boot {
            self.seq >= held.seq
        } else {
            self.unix_ns >= held.unix_ns
        }
    }
}

/// The newest value in the agent's order (see [`At::not_before`]): a
/// record replayed late from a spool does not overwrite a fresher one
/// (ties go to the later arrival).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Newest<T>(Option<(At, T)>);

impl<T> Default for Newest<T> {
    fn default() -> Self {
        Newest(None)
    }
}

impl<T> Newest<T> {
    /// Keeps `value` unless a value of a later record than `at` is held.
    pub fn update(&mut self, at: At, value: T) {
        if self.0.as_ref().is_none_or(|(held, _)| at.not_before(held)) {
            self.0 = Some((at, value));
        }
    }

    /// Sets `value` only when nothing is known yet, older than any record.
    pub fn seed(&mut self, value: T) {
        if self.0.is_none() {
            self.0 = Some((At::SEED, value));
        }
    }

    /// The newest value, if any.
    pub fn get(&self) -> Option<&T> {
        self.0.as_ref().map(|(_, v)| v)
    }
}

/// The label values of a two-part key, such as (node, peer).
pub fn pair((a, b): &(String, String)) -> [&str; 2] {
    [a, b]
}

/// The label values of a three-part key, such as (node, peer, service).
pub fn triple((a, b, c): &(String, String, String)) -> [&str; 3] {
    [a, b, c]
}
