//! Reports over stored records, pure: [`summary`] holds the per-link RTT,
//! loss and thermal math the lab's closing table prints; [`soak`] builds a
//! soak's report and verdict; [`render`] writes it as a table, Markdown or
//! JSON, [`html`] as one self-contained page with SVG charts; [`format`]
//! names the formats and picks the renderer; [`baseline`] sets a report
//! beside a baseline's; [`raw`] writes stored records as CSV or JSON
//! lines for `export`; [`findings`] lays out the acceptance sections
//! (changepoints, counter growth, inventory, probe overhead).

mod acceptance;
pub mod baseline;
pub mod findings;
pub mod format;
pub mod html;
pub mod raw;
pub mod render;
pub mod section;
pub mod soak;
pub mod summary;
