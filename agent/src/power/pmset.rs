//! What `pmset -g` says about sleep, for `doctor`: a cluster node should
//! have `sleep 0` (never idle-sleep the system: Thunderbolt has no
//! wake-on-LAN) and `autorestart 1` (power back on after a power failure).
//! Pure: the caller runs `pmset -g` and passes its output.
//!
//! `pmset -g` prints one setting a line, name then value, indented, under
//! a heading (`System-wide power settings:`, `Currently in use:`), e.g.
//! ` sleep                1 (sleep prevented by powerd)`; only the first
//! number after the name is read. The layout is pmset(1)'s `-g` output as
//! macOS 14 and 15 print it; this parser is tested on text built from it.

/// One finding: a setting that lets the node go dark, and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The `pmset` setting.
    pub setting: &'static str,
    /// What it is now (`None`: not in the output).
    pub value: Option<u32>,
    /// Why it matters and the command that fixes it.
    pub advice: &'static str,
}

/// The settings `doctor` checks and their wanted values, with advice.
const WANTED: [(&str, u32, &str); 2] = [
    (
        "sleep",
        0,
        "the system idle-sleeps and goes dark (no wake-on-LAN over Thunderbolt): sudo pmset -a sleep 0",
    ),
    (
        "autorestart",
        1,
        "the node stays off after a power failure: sudo pmset -a autorestart 1",
    ),
];

/// The value of `setting` in `pmset -g` output (the last one printed:
/// `Currently in use` comes after the per-source lists).
pub fn setting(output: &str, name: &str) -> Option<u32> {
    output.lines().rev().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next()? == name).then_some(())?;
        words.next()?.parse().ok()
    })
}

/// The checked settings that are not as a cluster node needs them.
pub fn findings(output: &str) -> Vec<Finding> {
    WANTED
        .iter()
        .filter_map(|&(setting, wanted, advice)| {
            let value = self::setting(output, setting);
            (value != Some(wanted)).then_some(Finding {
                setting,
                value,
                advice,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built from pmset(1)'s `-g` layout, with a Mac mini's default
    /// settings (`sleep 1`, `autorestart 0`).
    const DEFAULTS: &str = "System-wide power settings:\n\
        Currently in use:\n \
        standby              0\n \
        Sleep On Power Button 1\n \
        autorestart          0\n \
        powernap             1\n \
        disksleep            10\n \
        sleep                1 (sleep prevented by powerd, sharingd)\n \
        displaysleep         10\n";

    #[test]
    fn a_default_mini_sleeps_and_stays_off_and_is_told_how_to_fix_both() {
        let f = findings(DEFAULTS);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!((f[0].setting, f[0].value), ("sleep", Some(1)));
        assert!(f[0].advice.contains("pmset -a sleep 0"));
        assert_eq!((f[1].setting, f[1].value), ("autorestart", Some(0)));
        // `displaysleep` and `disksleep` are other settings.
        assert_eq!(setting(DEFAULTS, "displaysleep"), Some(10));
    }

    #[test]
    fn a_node_set_up_as_documented_has_no_findings() {
        let good = DEFAULTS
            .replace("sleep                1", "sleep                0")
            .replace("autorestart          0", "autorestart          1");
        assert_eq!(findings(&good), vec![]);
    }

    #[test]
    fn missing_settings_and_garbage_are_findings_not_panics() {
        let f = findings("pmset: command not found\n\0\u{fffd}");
        assert_eq!(f.len(), 2);
        assert!(f.iter().all(|f| f.value.is_none()));
        assert_eq!(setting(" sleep x\n sleep\n", "sleep"), None);
    }
}
