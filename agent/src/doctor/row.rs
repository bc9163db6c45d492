//! One row of the doctor's table: what was compared, what the agent and
//! the OS's tool said, and how they compare.

use serde::Serialize;

/// How one comparison came out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", content = "detail", rename_all = "snake_case")]
pub enum Verdict {
    /// The agent and the tool say the same.
    Agree,
    /// They differ; says how.
    Disagree(String),
    /// Nothing to compare on this OS or host ("not checkable"); says why.
    NotApplicable(String),
    /// The tool could not be run (missing, needs root); says why.
    Unavailable(String),
}

impl Verdict {
    pub(super) fn label(&self) -> String {
        match self {
            Verdict::Agree => "agree".into(),
            Verdict::Disagree(w) => format!("DISAGREE: {w}"),
            Verdict::NotApplicable(w) => format!("not checkable: {w}"),
            Verdict::Unavailable(w) => format!("unavailable: {w}"),
        }
    }
}

/// One comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The agent's source: `link`, `counters`, `thermal`, `discovery`,
    /// `kernel_timestamps`.
    pub source: &'static str,
    /// What was compared: an interface, a sensor set, a port.
    pub subject: String,
    /// What the agent read.
    pub agent: String,
    /// What the OS tool printed, and which tool.
    pub os_tool: String,
    /// How they compare.
    pub verdict: Verdict,
}
