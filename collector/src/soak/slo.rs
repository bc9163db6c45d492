//! SLO thresholds of a soak and their TOML file. Keys are defined once with
//! the config mechanism both binaries use ([`boltwatch_common::config`]), so
//! an unknown key or a bad value names the file, the line and the key.
//!
//! ```toml
//! rtt_worst_ms = 0.5
//! rtt_p99_ms = 0.25
//! interruptions_max = 0
//! availability_min_percent = 99.9
//! bandwidth_mean_min_gbps = 60
//! temperature_worst_max_celsius = 45
//! completeness_min_percent = 99.9
//! link_availability_min_percent = 99.99
//! interface_errors_max = 0
//! require = ["rtt_worst", "rtt_p99", "completeness"]
//! ```

use std::path::Path;

use boltwatch_common::config::{self as common, ConfigError, Document, Key, Schema};
use serde::{Deserialize, Serialize};

/// Pass/fail thresholds; a line whose threshold is `None` is reported but
/// does not decide the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Largest RTT allowed, ms.
    pub rtt_worst_ms: f64,
    /// Largest RTT p99 allowed, ms.
    pub rtt_p99_ms: f64,
    /// Most link interruptions allowed.
    pub interruptions_max: u64,
    /// Lowest service availability allowed, percent.
    pub availability_min_percent: f64,
    /// Lowest mean TCP bandwidth allowed, Gbps.
    pub bandwidth_mean_min_gbps: Option<f64>,
    /// Highest temperature allowed, C.
    pub temperature_worst_max_celsius: Option<f64>,
    /// Lowest data completeness allowed, percent.
    pub completeness_min_percent: f64,
    /// Lowest link availability (1 - UAS / range) allowed per directed
    /// link, percent: its complement is the link's error budget. A soak
    /// stored before the key had none and reads the default.
    #[serde(default = "default_link_availability")]
    pub link_availability_min_percent: f64,
    /// Most receive and transmit errors the soak's interfaces may grow by
    /// (a soak stored before the key existed reads the default).
    #[serde(default)]
    pub interface_errors_max: u64,
    /// The verdict lines (keys of [`LINES`]) that fail without data; any
    /// other line without data says so and does not decide, as a machine
    /// without sshd or sensors cannot measure them. Stored soaks from before
    /// this key read the default.
    #[serde(default = "default_require")]
    pub require: Vec<String>,
}

/// `link_availability_min_percent`'s default (also for soaks stored
/// before it).
fn default_link_availability() -> f64 {
    99.99
}

/// The key of every verdict line (`report::soak::verdict`), the names
/// `require` takes; collector/tests/slo_require.rs checks them against
/// the lines a report has.
pub const LINES: &[&str] = &[
    "rtt_worst",
    "rtt_p99",
    "interruptions",
    "availability",
    "bandwidth_mean",
    "temperature_worst",
    "completeness",
    "error_budget",
    "interface_errors",
];

/// What every machine running agents can measure: RTT and completeness.
const REQUIRE_DEFAULT: &str = "rtt_worst,rtt_p99,completeness";

fn default_require() -> Vec<String> {
    REQUIRE_DEFAULT.split(',').map(String::from).collect()
}

/// A `require` entry: one of [`LINES`].
fn line_key(k: &str) -> Result<String, String> {
    match LINES.contains(&k) {
        true => Ok(k.to_string()),
        false => Err(format!(
            "`{k}` is not a verdict line ({})",
            LINES.join(", ")
        )),
    }
}

type K = Key<Slo>;

/// Every SLO key.
pub const KEYS: &[K] = &[
    K::new("rtt_worst_ms", "largest RTT, ms", |c, v| {
        c.rtt_worst_ms = v.float(0.0..=1e6)?;
        Ok(())
    })
    .default("0.5"),
    K::new("rtt_p99_ms", "largest RTT p99, ms", |c, v| {
        c.rtt_p99_ms = v.float(0.0..=1e6)?;
        Ok(())
    })
    .default("0.25"),
    K::new("interruptions_max", "most link interruptions", |c, v| {
        c.interruptions_max = v.int(0..=i64::MAX)? as u64;
        Ok(())
    })
    .default("0"),
    K::new(
        "availability_min_percent",
        "lowest service availability, %",
        |c, v| {
            c.availability_min_percent = v.float(0.0..=100.0)?;
            Ok(())
        },
    )
    .default("99.9"),
    K::new(
        "bandwidth_mean_min_gbps",
        "lowest mean TCP bandwidth, Gbps",
        |c, v| {
            c.bandwidth_mean_min_gbps = Some(v.float(0.0..=1e4)?);
            Ok(())
        },
    ),
    K::new(
        "temperature_worst_max_celsius",
        "highest temperature, C",
        |c, v| {
            c.temperature_worst_max_celsius = Some(v.float(-50.0..=200.0)?);
            Ok(())
        },
    ),
    K::new(
        "completeness_min_percent",
        "lowest data completeness, %",
        |c, v| {
            c.completeness_min_percent = v.float(0.0..=100.0)?;
            Ok(())
        },
    )
    .default("99.9"),
    K::new(
        "link_availability_min_percent",
        "lowest link availability (error budget), %",
        |c, v| {
            c.link_availability_min_percent = v.float(0.0..=100.0)?;
            Ok(())
        },
    )
    .default("99.99"),
    K::new(
        "interface_errors_max",
        "most interface errors grown (receive and transmit, all interfaces)",
        |c, v| {
            c.interface_errors_max = v.int(0..=i64::MAX)? as u64;
            Ok(())
        },
    )
    .default("0"),
    K::new("require", "verdict lines that fail without data", |c, v| {
        c.require = v.list_of(line_key)?;
        Ok(())
    })
    .default(REQUIRE_DEFAULT),
];

impl Schema for Slo {
    fn keys() -> &'static [K] {
        KEYS
    }

    fn blank() -> Self {
        Slo {
            rtt_worst_ms: 0.0,
            rtt_p99_ms: 0.0,
            interruptions_max: 0,
            availability_min_percent: 0.0,
            bandwidth_mean_min_gbps: None,
            temperature_worst_max_celsius: None,
            completeness_min_percent: 0.0,
            link_availability_min_percent: 0.0,
            interface_errors_max: 0,
            require: Vec::new(),
        }
    }
}

impl Default for Slo {
    fn default() -> Self {
        common::defaults()
    }
}

impl Slo {
    /// Parses SLO TOML; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Slo, ConfigError> {
        let doc = Document::parse::<Slo>(file, text)?;
        common::build(Some(&doc), &common::Flags::default())
    }

    /// Whether the verdict line `key` fails when it has no data.
    pub fn requires(&self, key: &str) -> bool {
        self.require.iter().any(|r| r == key)
    }

    /// Reads an SLO file.
    pub fn load(path: &Path) -> Result<Slo, ConfigError> {
        let doc = Document::load::<Slo>(path)?;
        common::build(Some(&doc), &common::Flags::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_issue_s() {
        let s = Slo::default();
        assert_eq!((s.rtt_worst_ms, s.rtt_p99_ms), (0.5, 0.25));
        assert_eq!(s.interruptions_max, 0);
        assert_eq!(s.availability_min_percent, 99.9);
        assert_eq!(s.completeness_min_percent, 99.9);
        assert_eq!(s.bandwidth_mean_min_gbps, None);
        assert_eq!(s.require, ["rtt_worst", "rtt_p99", "completeness"]);
        assert_eq!(s.link_availability_min_percent, 99.99);
        assert_eq!(s.interface_errors_max, 0);
        let s = Slo::parse("slo.toml", "interface_errors_max = 3\n").unwrap();
        assert_eq!(s.interface_errors_max, 3);
        // A soak stored before the acceptance keys reads their defaults.
        let old: Slo = serde_json::from_str(
            r#"{"rtt_worst_ms":0.5,"rtt_p99_ms":0.25,"interruptions_max":0,
                "availability_min_percent":99.9,"bandwidth_mean_min_gbps":null,
                "temperature_worst_max_celsius":null,"completeness_min_percent":99.9}"#,
        )
        .unwrap();
        assert_eq!(old, Slo::default());
    }

    #[test]
    fn require_takes_line_keys_and_old_soaks_read_the_default() {
        let s = Slo::parse("slo.toml", "require = [\"availability\"]\n").unwrap();
        assert!(s.requires("availability") && !s.requires("rtt_worst"));
        assert!(Slo::parse("slo.toml", "require = []\n")
            .unwrap()
            .require
            .is_empty());
        let e = Slo::parse("slo.toml", "require = [\"ssh\"]\n").unwrap_err();
        assert!(
            e.to_string().starts_with("slo.toml:1: key `require`:"),
            "{e}"
        );
        assert!(e.to_string().contains("`ssh` is not a verdict line"), "{e}");
        // A soak stored before `require` existed.
        let mut json = serde_json::to_value(Slo::default()).unwrap();
        json.as_object_mut().unwrap().remove("require");
        let old: Slo = serde_json::from_value(json).unwrap();
        assert_eq!(old, Slo::default());
    }

    #[test]
    fn file_overrides_and_errors_name_file_line_key() {
        let s = Slo::parse(
            "slo.toml",
            "rtt_worst_ms = 1\nbandwidth_mean_min_gbps = 60\n",
        )
        .unwrap();
        assert_eq!(
            (s.rtt_worst_ms, s.bandwidth_mean_min_gbps),
            (1.0, Some(60.0))
        );
        let e = Slo::parse("slo.toml", "rtt_p99_ms = 0.2\n\nrtt_p99_ms_typo = 3\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "slo.toml:3: key `rtt_p99_ms_typo`: unknown key"
        );
        let e = Slo::parse("slo.toml", "availability_min_percent = 101\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("slo.toml:1: key `availability_min_percent`:"),
            "{e}"
        );
        let e = Slo::parse("slo.toml", "interruptions_max = \"x\"\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("slo.toml:1: key `interruptions_max`"),
            "{e}"
        );
    }
}
