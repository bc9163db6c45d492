//! Compiles the schema with protox (pure Rust), so no `protoc` is needed,
//! and derives the payload-kind names from the `Record.payload` oneof, so
//! a new payload kind is named by the schema alone.

use std::fmt::Write as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "boltwatch/v1/telemetry.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["."])?;
    // The field names of `Record`'s `payload` oneof, in field-number order.
    let record = fds
        .file
        .iter()
        .flat_map(|f| &f.message_type)
        .find(|m| m.name() == "Record")
        .ok_or("no message Record in the schema")?;
    let oneof = record
        .oneof_decl
        .iter()
        .position(|o| o.name() == "payload")
        .ok_or("Record has no oneof payload")?;
    let mut fields: Vec<_> = record
        .field
        .iter()
        .filter(|f| f.oneof_index == Some(oneof as i32))
        .collect();
    fields.sort_by_key(|f| f.number());
    let kinds: Vec<(String, i32)> = fields
        .iter()
        .map(|f| (f.name().to_string(), f.number()))
        .collect();
    tonic_prost_build::configure().compile_fds(fds)?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("payload_kinds.rs");
    std::fs::write(out, kinds_source(&kinds))?;
    Ok(())
}

/// prost's variant name of a oneof field: `link_event` -> `LinkEvent`.
fn variant(field: &str) -> String {
    field
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Appends `pub const {decl}; N] = [items];` with its doc line.
fn const_array(
    s: &mut String,
    doc: &str,
    decl: &str,
    items: impl ExactSizeIterator<Item = String>,
) {
    let _ = writeln!(s, "/// {doc}");
    let _ = writeln!(s, "pub const {decl}; {}] = [", items.len());
    for item in items {
        let _ = writeln!(s, "    {item},");
    }
    let _ = writeln!(s, "];\n");
}

/// Appends a method of `Payload` that matches every kind: `arm(i, kind)`
/// is what follows the variant's name in its arm.
fn match_method(
    s: &mut String,
    doc: &str,
    sig: &str,
    kinds: &[(String, i32)],
    arm: impl Fn(usize, &str) -> String,
) {
    let _ = writeln!(s, "    /// {doc}");
    let _ = writeln!(s, "    pub fn {sig} {{");
    let _ = writeln!(s, "        match self {{");
    for (i, (k, _)) in kinds.iter().enumerate() {
        let _ = writeln!(
            s,
            "            crate::v1::record::Payload::{}{},",
            variant(k),
            arm(i, k)
        );
    }
    let _ = writeln!(s, "        }}\n    }}");
}

fn kinds_source(kinds: &[(String, i32)]) -> String {
    let mut s = String::new();
    const_array(
        &mut s,
        "Every payload kind name, in schema field-number order.",
        "KINDS: [&str",
        kinds.iter().map(|(k, _)| format!("{k:?}")),
    );
    const_array(
        &mut s,
        "The field number of each payload kind in `Record`, in [`KINDS`] order.",
        "PAYLOAD_TAGS: [u32",
        kinds.iter().map(|(_, n)| n.to_string()),
    );
    let _ = writeln!(s, "impl crate::v1::record::Payload {{");
    match_method(
        &mut s,
        "The payload kind's name: its field name in `Record.payload`.",
        "kind(&self) -> &'static str",
        kinds,
        |_, k| format!("(_) => {k:?}"),
    );
    let _ = writeln!(s);
    match_method(
        &mut s,
        "The position of the payload's kind in [`KINDS`].",
        "kind_index(&self) -> usize",
        kinds,
        |i, _| format!("(_) => {i}"),
    );
    let _ = writeln!(s);
    match_method(
        &mut s,
        "Clears the payload's message to its default, keeping the kind and\n    \
         /// the capacity of its strings and lists, so a decoder can reuse it.",
        "clear_message(&mut self)",
        kinds,
        |_, _| "(m) => ::prost::Message::clear(m)".to_string(),
    );
    let _ = writeln!(s);
    defaults_method(&mut s, kinds);
    let _ = writeln!(s, "}}");
    s
}

/// Appends `Payload::defaults()`: one payload of every kind, so a test can
/// cover every kind without naming them (and so cover a new one unasked).
fn defaults_method(s: &mut String, kinds: &[(String, i32)]) {
    let _ = writeln!(
        s,
        "    /// One payload of every kind, its message at its defaults, in [`KINDS`]\n    \
         /// order: for tests that must cover every kind, a new one included."
    );
    let _ = writeln!(s, "    pub fn defaults() -> [Self; {}] {{", kinds.len());
    let _ = writeln!(s, "        [");
    for (k, _) in kinds {
        let _ = writeln!(
            s,
            "            crate::v1::record::Payload::{}(::core::default::Default::default()),",
            variant(k)
        );
    }
    let _ = writeln!(s, "        ]\n    }}");
}
