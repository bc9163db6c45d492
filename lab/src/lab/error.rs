//! Why the lab failed.

/// Lab failures.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Bad options.
    #[error("{0}")]
    Options(String),
    /// A socket or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The collector failed.
    #[error("collector: {0}")]
    Collector(#[from] boltwatch_collector::Error),
    /// An agent failed.
    #[error("agent: {0}")]
    Agent(#[from] boltwatch_agent::error::Error),
    /// The `--soak` could not be stored, ended or reported.
    #[error("soak: {0}")]
    Soak(String),
    /// Reading the results back failed.
    #[error("reading results: {0}")]
    Results(String),
}

pub(super) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Io { what, source }
}
