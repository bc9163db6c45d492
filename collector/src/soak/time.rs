//! Times on the command line and in the API: RFC 3339 (`2026-11-30T09:00:00Z`,
//! fractional seconds allowed, UTC) or unix seconds (`1795942800`, `1795942800.5`).

use std::time::{Duration, UNIX_EPOCH};

/// Parses a time into unix ns.
pub fn parse(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = s
            .parse()
            .map_err(|_| format!("time `{s}`: not unix seconds"))?;
        if !(0.0..=9.2e9).contains(&secs) {
            return Err(format!("time `{s}`: out of range"));
        }
        // Whole seconds exactly, the fraction to the nanosecond.
        let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
        let whole: u64 = whole.parse().unwrap_or(0);
        let frac_ns: u64 = format!("{frac:0<9}")[..9].parse().unwrap_or(0);
        return Ok(whole * 1_000_000_000 + frac_ns);
    }
    let t = humantime::parse_rfc3339_weak(s)
        .map_err(|e| format!("time `{s}`: {e} (use RFC 3339 in UTC or unix seconds)"))?;
    let d = t
        .duration_since(UNIX_EPOCH)
        .map_err(|_| format!("time `{s}`: before 1970"))?;
    u64::try_from(d.as_nanos()).map_err(|_| format!("time `{s}`: out of range"))
}

/// Formats unix ns as RFC 3339 in UTC, to the second.
pub fn format(unix_ns: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_nanos(unix_ns)).to_string()
}

/// A duration as `3d 04:05:06` (or `04:05:06`).
pub fn format_duration(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}:{sec:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_seconds_and_rfc3339_agree() {
        assert_eq!(parse("1796029200").unwrap(), 1_796_029_200_000_000_000);
        assert_eq!(parse("1.25").unwrap(), 1_250_000_000);
        assert_eq!(
            parse("2026-11-30T09:00:00Z").unwrap(),
            parse("1796029200").unwrap()
        );
        assert_eq!(format(1_796_029_200_000_000_000), "2026-11-30T09:00:00Z");
        assert!(parse("yesterday").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn durations_read_as_days_and_clock() {
        assert_eq!(format_duration(3_661_000_000_000), "01:01:01");
        assert_eq!(format_duration(72 * 3600 * 1_000_000_000), "3d 00:00:00");
    }
}
