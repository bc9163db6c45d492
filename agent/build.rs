//! Embeds the commit this binary is built from, for `--version`.

include!("../build-support/commit.rs");

fn main() {
    emit_commit();
}
