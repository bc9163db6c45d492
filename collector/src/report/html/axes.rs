//! Chart geometry, pure: the time axis (ticks on round hours, dates where a
//! day starts), linear and log value axes with round ticks, and the SVG of
//! a frame with its gridlines. Every chart of the page shares the plot
//! box, so the charts of a link line up in time.

use std::fmt::Write;

use crate::soak::time;

/// The SVG's width and height, px.
pub const W: f64 = 960.0;
pub const H: f64 = 220.0;
/// The plot box inside it.
pub const PAD_L: f64 = 80.0;
pub const PAD_R: f64 = 64.0;
pub const PAD_T: f64 = 18.0;
pub const PAD_B: f64 = 30.0;

const MIN: u64 = 60 * 1_000_000_000;
/// Time tick steps tried in turn, the first giving at most 13 ticks.
const STEPS: [u64; 12] = [
    MIN,
    5 * MIN,
    15 * MIN,
    30 * MIN,
    60 * MIN,
    120 * MIN,
    180 * MIN,
    360 * MIN,
    720 * MIN,
    1440 * MIN,
    2 * 1440 * MIN,
    7 * 1440 * MIN,
];

/// The time axis of `[from, to)`.
pub struct Time {
    pub from: u64,
    pub to: u64,
}

impl Time {
    /// x of `t`, clamped to the plot.
    pub fn x(&self, t: u64) -> f64 {
        let span = (self.to - self.from).max(1) as f64;
        PAD_L + (t.clamp(self.from, self.to) - self.from) as f64 / span * (W - PAD_L - PAD_R)
    }

    /// Tick times (UTC-aligned multiples of the step) and their labels:
    /// `HH:MM`, or the date `MM-DD` where a day starts.
    pub fn ticks(&self) -> Vec<(u64, String)> {
        let span = self.to.saturating_sub(self.from);
        let step = STEPS
            .into_iter()
            .find(|s| span / s <= 12)
            .unwrap_or(span / 12 + 1);
        let mut t = self.from.div_ceil(step) * step;
        let mut out = Vec::new();
        while t <= self.to {
            let s = time::format(t);
            let label = if t % (1440 * MIN) == 0 && span > 6 * 60 * MIN {
                s[5..10].to_string()
            } else {
                s[11..16].to_string()
            };
            out.push((t, label));
            t += step;
        }
        out
    }
}

/// A value axis: linear from 0 (or the lowest value below it), or
/// logarithmic over the values' decades.
#[derive(Clone, Copy)]
pub struct Scale {
    pub lo: f64,
    pub hi: f64,
    pub log: bool,
}

impl Scale {
    /// A linear scale covering `vals` (and `extra`, a threshold to show).
    pub fn linear(vals: impl Iterator<Item = f64>, extra: Option<f64>) -> Scale {
        let (lo, hi) = bounds(vals.chain(extra));
        let lo = lo.min(0.0);
        let hi = if hi <= lo { lo + 1.0 } else { hi * 1.08 };
        Scale { lo, hi, log: false }
    }

    /// A log scale over whole decades covering `vals` (positive ones)
    /// and `extra`.
    pub fn log(vals: impl Iterator<Item = f64>, extra: Option<f64>) -> Scale {
        let (lo, hi) = bounds(vals.chain(extra).filter(|v| *v > 0.0));
        let (lo, hi) = if lo.is_finite() {
            (lo, hi)
        } else {
            (1.0, 10.0)
        };
        let lo = 10f64.powf(lo.log10().floor());
        let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
        Scale { lo, hi, log: true }
    }

    /// Where `v` lies from `lo` (0) to `hi` (1), clamped.
    pub fn frac(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        f.clamp(0.0, 1.0)
    }

    /// y of `v`, clamped to the plot.
    pub fn y(&self, v: f64) -> f64 {
        PAD_T + (1.0 - self.frac(v)) * (H - PAD_T - PAD_B)
    }

    /// x of `v` when this scale runs along the plot's width.
    pub fn x(&self, v: f64) -> f64 {
        PAD_L + self.frac(v) * (W - PAD_L - PAD_R)
    }

    /// Round tick values: 1, 2, 5 per decade on a log scale, a 1-2-5 step
    /// giving about five ticks on a linear one.
    pub fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut out = Vec::new();
            let mut d = self.lo;
            while d < self.hi * 1.0001 {
                out.extend(
                    [d, 2.0 * d, 5.0 * d]
                        .into_iter()
                        .filter(|v| *v <= self.hi * 1.0001),
                );
                d *= 10.0;
            }
            return out;
        }
        let raw = (self.hi - self.lo) / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        let mut v = (self.lo / step).ceil() * step;
        let mut out = Vec::new();
        while v <= self.hi {
            out.push(v);
            v += step;
        }
        out
    }
}

fn bounds(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    vals.filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        })
}

/// A tick value as short text (`0.05`, `2`, `120`).
pub fn short(v: f64) -> String {
    let s = if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The plot frame, vertical gridlines and labels at the time ticks,
/// horizontal gridlines and labels at `left`'s ticks (unit `unit`), and
/// `right`'s labels on the right edge when given.
pub fn frame(o: &mut String, t: &Time, left: &Scale, unit: &str, right: Option<(&Scale, &str)>) {
    let (x0, x1, y0, y1) = (PAD_L, W - PAD_R, PAD_T, H - PAD_B);
    for (at, label) in t.ticks() {
        let x = t.x(at);
        let _ = write!(
            o,
            r#"<line class="grid" x1="{x:.1}" x2="{x:.1}" y1="{y0}" y2="{y1}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#,
            y1 + 14.0
        );
    }
    for v in left.ticks() {
        let y = left.y(v);
        let _ = write!(
            o,
            r#"<line class="grid" x1="{x0}" x2="{x1}" y1="{y:.1}" y2="{y:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            x0 - 4.0,
            y + 4.0,
            short(v)
        );
    }
    let _ = write!(
        o,
        r#"<text x="4" y="{:.1}" class="unit">{unit}</text>"#,
        y0 - 6.0
    );
    if let Some((sc, unit)) = right {
        for v in sc.ticks() {
            let _ = write!(
                o,
                r#"<text class="right" x="{:.1}" y="{:.1}">{}</text>"#,
                x1 + 4.0,
                sc.y(v) + 4.0,
                short(v)
            );
        }
        let _ = write!(
            o,
            r#"<text class="right unit" x="{:.1}" y="{:.1}">{unit}</text>"#,
            x1 + 4.0,
            y0 - 6.0
        );
    }
    let _ = write!(
        o,
        r#"<rect class="frame" x="{x0}" y="{y0}" width="{:.1}" height="{:.1}"/>"#,
        x1 - x0,
        y1 - y0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;
    /// 2026-11-30T00:00:00Z.
    const T0: u64 = 1_795_996_800 * S;

    #[test]
    fn time_ticks_are_round_hours_with_dates_at_midnight() {
        let t = Time {
            from: T0,
            to: T0 + 72 * 3600 * S,
        };
        let ticks = t.ticks();
        let labels: Vec<&str> = ticks.iter().map(|x| x.1.as_str()).collect();
        assert_eq!(labels[..5], ["11-30", "06:00", "12:00", "18:00", "12-01"]);
        assert_eq!(ticks.len(), 13);
        let short = Time {
            from: T0 + 600 * S,
            to: T0 + 3 * 3600 * S,
        };
        let labels: Vec<String> = short.ticks().into_iter().map(|x| x.1).collect();
        assert_eq!(labels[0], "00:15");
        assert!(
            labels.iter().all(|l| l.len() == 5 && l.contains(':')),
            "{labels:?}"
        );
    }

    #[test]
    fn value_ticks_are_round() {
        let log = Scale::log([0.06, 0.4].into_iter(), Some(1.0));
        assert_eq!((log.lo, log.hi), (0.01, 1.0));
        let t = log.ticks();
        assert_eq!(t.len(), 7, "{t:?}");
        assert!(log.y(0.06) > log.y(0.4), "higher values higher up");
        let lin = Scale::linear([12.0, 71.0].into_iter(), Some(60.0));
        let t = lin.ticks();
        assert_eq!(t.first(), Some(&0.0));
        assert!(
            t.windows(2).all(|w| (w[1] - w[0] - 20.0).abs() < 1e-9),
            "{t:?}"
        );
        assert_eq!(short(0.05), "0.05");
        assert_eq!(short(20.0), "20");
        assert_eq!(short(2.5), "2.5");
    }
}
