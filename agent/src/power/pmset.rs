//! Reads a setting from `pmset -g` output. Pure: the caller runs the
//! tool. What a cluster node wants of each setting (`sleep 0`,
//! `autorestart 1`, `womp 1`) is judged by the fabric checks
//! (`crate::fabric`), which own those rules.
//!
//! `pmset -g` prints one setting a line, name then value, indented, under
//! a heading (`System-wide power settings:`, `Currently in use:`), e.g.
//! ` sleep                1 (sleep prevented by powerd)`; only the first
//! number after the name is read. The layout is pmset(1)'s `-g` output as
//! macOS 14 and 15 print it; this parser is tested on text built from it.

/// The value of `setting` in `pmset -g` output (the last one printed:
/// `Currently in use` comes after the per-source lists).
pub fn setting(output: &str, name: &str) -> Option<u32> {
    output.lines().rev().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next()? == name).then_some(())?;
        words.next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built from pmset(1)'s `-g` layout, with a Mac mini's default
    /// settings (`sleep 1`, `autorestart 0`, `womp 1`).
    const DEFAULTS: &str = "System-wide power settings:\n\
        Currently in use:\n \
        standby              0\n \
        Sleep On Power Button 1\n \
        autorestart          0\n \
        womp                 1\n \
        powernap             1\n \
        disksleep            10\n \
        sleep                1 (sleep prevented by powerd, sharingd)\n \
        displaysleep         10\n";

    #[test]
    fn each_setting_is_its_own_line_and_garbage_reads_as_unset() {
        assert_eq!(setting(DEFAULTS, "sleep"), Some(1));
        assert_eq!(setting(DEFAULTS, "autorestart"), Some(0));
        assert_eq!(setting(DEFAULTS, "womp"), Some(1));
        // `displaysleep` and `disksleep` are other settings.
        assert_eq!(setting(DEFAULTS, "displaysleep"), Some(10));
        assert_eq!(
            setting("pmset: command not found\n\0\u{fffd}", "sleep"),
            None
        );
        assert_eq!(setting(" sleep x\n sleep\n", "sleep"), None);
    }
}
