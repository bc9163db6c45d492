//! Reports over stored records. [`summary`] holds the math (pure); the soak
//! reports in Markdown, JSON and HTML build on it.

pub mod summary;
