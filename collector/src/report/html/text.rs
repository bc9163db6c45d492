//! Text into HTML: the one escaping every part of the page uses.

/// Escapes text for HTML (element content and quoted attributes).
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
