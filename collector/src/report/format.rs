//! The report formats (`report --format`, `?format=` on the API): which
//! renderer writes each and the HTTP content type it is served as.

use super::baseline::Comparison;
use super::soak::Report;
use super::{html, render};

/// The formats `report --format` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned text.
    Table,
    /// Markdown.
    Md,
    /// JSON.
    Json,
    /// One HTML page.
    Html,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        Ok(match s {
            "table" => Format::Table,
            "md" | "markdown" => Format::Md,
            "json" => Format::Json,
            "html" => Format::Html,
            _ => return Err(format!("format `{s}`: use table, md, json or html")),
        })
    }
}

impl Format {
    /// Renders `r`.
    pub fn render(self, r: &Report) -> String {
        self.render_compared(r, None)
    }

    /// Renders `r`, with its comparison with a baseline when given.
    pub fn render_compared(self, r: &Report, c: Option<&Comparison>) -> String {
        let extra = || c.map(render::comparison).into_iter().collect();
        match self {
            Format::Table => render::table_with(r, extra()),
            Format::Md => render::markdown_with(r, extra()),
            Format::Json => render::json_with(r, c),
            Format::Html => html::page_with(r, extra()),
        }
    }

    /// The HTTP content type.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Table => "text/plain; charset=utf-8",
            Format::Md => "text/markdown; charset=utf-8",
            Format::Json => "application/json",
            Format::Html => "text/html; charset=utf-8",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse() {
        assert_eq!("html".parse::<Format>(), Ok(Format::Html));
        assert_eq!("markdown".parse::<Format>(), Ok(Format::Md));
        assert!("pdf".parse::<Format>().is_err());
    }
}
