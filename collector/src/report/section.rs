//! [`Section`]: one titled table, the unit every rendering draws.

/// One titled table: every format draws the same list (the HTML page as
/// real `<table>`s), so a new section shows everywhere by being added to
/// [`super::render::sections`].
pub struct Section {
    /// The heading.
    pub title: String,
    /// Column names.
    pub header: Vec<&'static str>,
    /// Cells, one `Vec` per row, as many as `header`.
    pub rows: Vec<Vec<String>>,
}
