//! The documented flag table (docs/deployment.md), generated from a key
//! table (a test compares it with the page, so the two cannot drift).

use super::Schema;

fn code(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!("`{s}`")
    }
}

/// A Markdown table: flag, config key, default, meaning; one row per key
/// and one per off flag, in table order.
pub fn markdown_table<C: Schema>() -> String {
    let mut out = String::from("| flag | config key | default | meaning |\n|---|---|---|---|\n");
    for d in C::keys() {
        let flag = d
            .flag
            .map(|f| format!("--{f} {}", d.value_name))
            .unwrap_or_default();
        let help = if d.repeated {
            format!("{}; repeatable", d.help)
        } else {
            d.help.to_string()
        };
        out += &format!(
            "| {} | {} | {} | {} |\n",
            code(&flag),
            code(d.key),
            code(d.documented_default()),
            help
        );
        if let Some(off) = d.off {
            out += &format!(
                "| {} | {} | | {} |\n",
                code(&format!("--{}", off.flag)),
                code(&format!("{} = {}", d.key, off.value)),
                off.help
            );
        }
    }
    out
}

/// The text between `<!-- BEGIN name -->` and `<!-- END name -->` in
/// `doc`, for the test that compares a documented table with
/// [`markdown_table`].
pub fn between_markers<'a>(doc: &'a str, name: &str) -> Option<&'a str> {
    let begin = format!("<!-- BEGIN {name} -->\n");
    let end = format!("<!-- END {name} -->");
    let start = doc.find(&begin)? + begin.len();
    let len = doc[start..].find(&end)?;
    Some(&doc[start..start + len])
}

/// Whether the table between the `name` markers of `doc` is
/// [`markdown_table`] of `C`: the test that keeps a documented flag table
/// and the key definitions from drifting. The error says where the table
/// is and what it should read.
pub fn check_table<C: Schema>(doc: &str, name: &str) -> Result<(), String> {
    let want = markdown_table::<C>();
    if between_markers(doc, name) == Some(want.as_str()) {
        return Ok(());
    }
    Err(format!(
        "the table between <!-- BEGIN {name} --> and <!-- END {name} --> differs from \
         the key definitions; it should read:\n{want}"
    ))
}
