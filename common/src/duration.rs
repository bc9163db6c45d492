//! Durations as config files and flags spell them (`humantime`).

use std::time::Duration;

/// Parses a duration such as `100ms`, `1s`, `5m`.
pub fn parse(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("`{s}`: {e} (expected e.g. \"100ms\", \"5s\", \"5m\")"))
}

/// Parses `0.2` as seconds, the way ping(8) takes `-i`, or else as
/// [`parse`] does.
pub fn parse_seconds_or_duration(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(secs) => Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}")),
        Err(_) => parse(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse(" 100ms ").unwrap(), Duration::from_millis(100));
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert!(parse("fast").unwrap_err().contains("`fast`"));
        assert!(parse("").is_err());
        assert_eq!(
            parse_seconds_or_duration("0.2").unwrap(),
            Duration::from_millis(200)
        );
        assert_eq!(
            parse_seconds_or_duration("200ms").unwrap(),
            Duration::from_millis(200)
        );
        assert!(parse_seconds_or_duration("-1").is_err());
    }
}
