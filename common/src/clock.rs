//! Clocks.

/// The realtime clock in unix nanoseconds (0 if the clock is before 1970,
/// which only a broken RTC produces; records then sort first rather than
/// failing).
pub fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn realtime_is_after_2020_and_monotone_enough() {
        let a = super::now_unix_ns();
        let b = super::now_unix_ns();
        assert!(a > 1_577_836_800_000_000_000, "{a}");
        assert!(b >= a);
    }
}
