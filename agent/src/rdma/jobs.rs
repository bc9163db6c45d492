//! `rdma.job_windows`: daily UTC windows (`"22:00-06:00"`) in which a job
//! owns the links, so the probe sends nothing. Pure.

/// One daily window, minutes since 00:00 UTC; `start > end` wraps midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobWindow {
    start: u16,
    end: u16,
}

const DAY_MINUTES: u64 = 24 * 60;

impl JobWindow {
    /// Parses `HH:MM-HH:MM` (UTC, end exclusive).
    pub fn parse(s: &str) -> Result<JobWindow, String> {
        let bad = || format!("`{s}` is not HH:MM-HH:MM (UTC)");
        let (a, b) = s.trim().split_once('-').ok_or_else(bad)?;
        let minute = |t: &str| -> Option<u16> {
            let (h, m) = t.trim().split_once(':')?;
            let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
            (h < 24 && m < 60 && t.trim().len() == 5).then_some(h * 60 + m)
        };
        let (start, end) = (minute(a).ok_or_else(bad)?, minute(b).ok_or_else(bad)?);
        if start == end {
            return Err(format!("`{s}` is empty"));
        }
        Ok(JobWindow { start, end })
    }

    fn contains(self, minute: u16) -> bool {
        if self.start < self.end {
            (self.start..self.end).contains(&minute)
        } else {
            minute >= self.start || minute < self.end
        }
    }
}

/// Whether any window holds the time `unix_ns`.
pub fn job_owns(windows: &[JobWindow], unix_ns: u64) -> bool {
    let minute = (unix_ns / 60_000_000_000 % DAY_MINUTES) as u16;
    windows.iter().any(|w| w.contains(minute))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000_000_000;

    #[test]
    fn windows_hold_their_minutes_and_wrap_midnight() {
        let night = JobWindow::parse("22:00-06:00").unwrap();
        let noon = JobWindow::parse("12:00-12:30").unwrap();
        let w = [night, noon];
        let day = 20_000 * DAY_MINUTES * MIN;
        for (at, owned) in [
            (0, true),
            (5 * 60 + 59, true),
            (6 * 60, false),
            (12 * 60 + 29, true),
            (12 * 60 + 30, false),
            (21 * 60 + 59, false),
            (22 * 60, true),
        ] {
            assert_eq!(job_owns(&w, day + at * MIN), owned, "minute {at}");
        }
        assert!(!job_owns(&[], day));
        for bad in [
            "22:00",
            "24:00-01:00",
            "1:00-02:00",
            "10:00-10:00",
            "aa:bb-cc:dd",
        ] {
            assert!(JobWindow::parse(bad).is_err(), "{bad}");
        }
    }
}
