//! What unit a PromQL expression yields, read from the metric names
//! (Prometheus base units in the suffix: `_seconds`, `_bytes_per_second`,
//! `_celsius`, `_ratio`, `_total` for counters) and the functions applied
//! to them, and whether a Grafana unit shows it truthfully. Pure.
//!
//! Recording rules (`level:metric:operations`) are read through their
//! operations: `rate*` and `increase*` of the counter named by the metric
//! part, `ratio_*` a ratio, `avg_over_time*` of a 0/1 state a share of
//! time, other `*_over_time`, quantiles and means keep the metric's unit.

use crate::promql::{is_ident, selectors, skip_group, skip_string};

/// The unit of a query's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds (a duration).
    Seconds,
    /// Bytes per second.
    BytesPerSecond,
    /// Bits per second: bytes per second multiplied by 8.
    BitsPerSecond,
    /// Bytes.
    Bytes,
    /// Degrees Celsius.
    Celsius,
    /// A share, 0..1.
    Ratio,
    /// A number of events.
    Count,
    /// Events per second.
    PerSecond,
    /// A unix time, seconds.
    Timestamp,
    /// No unit: a state (0/1), a level, an info series.
    Plain,
}

/// What a series holds before any function: its unit and whether it is a
/// counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Base {
    unit: Unit,
    counter: bool,
    /// A 0/1 state gauge (`_up`, `_ok`, `_throttled`), whose average over
    /// time is a share of time.
    state: bool,
}

fn base(metric: &str) -> Base {
    let (name, counter) = match metric.strip_suffix("_total") {
        Some(n) => (n, true),
        None => (metric, false),
    };
    // Histogram series: `_sum` counts the unit, `_count` and `_bucket` events.
    if let Some(n) = name.strip_suffix("_sum") {
        return Base {
            counter: true,
            ..base(n)
        };
    }
    if name.ends_with("_count") || name.ends_with("_bucket") {
        return Base {
            unit: Unit::Count,
            counter: true,
            state: false,
        };
    }
    let unit = if name.ends_with("_bytes_per_second") {
        Unit::BytesPerSecond
    } else if name.ends_with("_timestamp_seconds") {
        Unit::Timestamp
    } else if name.ends_with("_seconds") {
        Unit::Seconds
    } else if name.ends_with("_bytes") {
        Unit::Bytes
    } else if name.ends_with("_celsius") {
        Unit::Celsius
    } else if name.ends_with("_ratio") {
        Unit::Ratio
    } else if counter {
        Unit::Count
    } else {
        Unit::Plain
    };
    let state = !counter
        && unit == Unit::Plain
        && (name == "up"
            || ["_up", "_ok", "_throttled"]
                .iter()
                .any(|s| name.ends_with(s)));
    Base {
        unit,
        counter,
        state,
    }
}

/// A counter's unit per second.
fn per_second(u: Unit) -> Unit {
    match u {
        Unit::Bytes => Unit::BytesPerSecond,
        Unit::Seconds => Unit::Ratio,
        _ => Unit::PerSecond,
    }
}

/// The unit of a series named `name` under `function` (the innermost
/// function applied to it, if any).
fn selector_unit(name: &str, function: Option<&str>) -> Result<Unit, String> {
    let parts: Vec<&str> = name.split(':').collect();
    let (b, function) = if parts.len() == 3 {
        // A recording rule: the operations say what was applied.
        let ops = parts[2];
        // A rated metric part names a counter with `_total` dropped.
        let counted = ops.starts_with("rate") || ops.starts_with("increase");
        let b = if counted && !parts[1].ends_with("_total") {
            base(&format!("{}_total", parts[1]))
        } else {
            base(parts[1])
        };
        let u = if ops.starts_with("ratio") {
            Unit::Ratio
        } else if ops.starts_with("rate") {
            per_second(b.unit)
        } else if ops.starts_with("increase") {
            b.unit
        } else if ops.starts_with("avg_over_time") && b.state {
            Unit::Ratio
        } else {
            b.unit
        };
        let rated = Base {
            unit: u,
            counter: false,
            state: false,
        };
        (rated, function)
    } else {
        (base(name), function)
    };
    Ok(match function {
        Some("rate" | "irate") if b.counter => per_second(b.unit),
        Some("increase" | "delta") if b.counter => b.unit,
        Some("rate" | "irate" | "increase") => {
            return Err(format!("{} of {name}, not a counter", function.unwrap()))
        }
        Some("changes" | "resets" | "count_over_time") => Unit::Count,
        Some("avg_over_time") if b.state => Unit::Ratio,
        _ if b.counter => return Err(format!("{name}: a raw counter, not rated")),
        _ => b.unit,
    })
}

/// The innermost function whose parentheses enclose char index `at`
/// (aggregations are not functions: they keep the unit).
fn enclosing_function(chars: &[char], at: usize) -> Option<String> {
    let mut depth = 0i32;
    let mut i = at;
    while i > 0 {
        i -= 1;
        match chars[i] {
            ')' => depth += 1,
            '(' if depth > 0 => depth -= 1,
            '(' => {
                let mut j = i;
                while j > 0 && chars[j - 1].is_whitespace() {
                    j -= 1;
                }
                let end = j;
                while j > 0 && is_ident(chars[j - 1]) {
                    j -= 1;
                }
                let ident: String = chars[j..end].iter().collect();
                if !ident.is_empty() && !crate::promql::AGGREGATIONS.contains(&ident.as_str()) {
                    return Some(ident);
                }
            }
            _ => {}
        }
    }
    None
}

/// The operands of a division at the top level of `expr`, if it is one.
fn top_level_division(expr: &str) -> Result<Option<(String, String)>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => i = skip_string(&chars, i)?,
            '(' => i = skip_group(&chars, i, '(', ')')?,
            '{' => i = skip_group(&chars, i, '{', '}')?,
            '[' => i = skip_group(&chars, i, '[', ']')?,
            '/' => {
                let left: String = chars[..i].iter().collect();
                let right: String = chars[i + 1..].iter().collect();
                return Ok(Some((left, right)));
            }
            _ => i += 1,
        }
    }
    Ok(None)
}

/// The unit `expr` yields. Errors when its parts disagree (seconds next to
/// counts) or a counter is shown raw.
pub fn expr_unit(expr: &str) -> Result<Unit, String> {
    if let Some((num, den)) = top_level_division(expr)? {
        let (n, d) = (expr_unit(&num)?, expr_unit(&den)?);
        return match (n, d) {
            (a, b) if a == b => Ok(Unit::Ratio),
            (Unit::Seconds, Unit::Count) | (Unit::Ratio, Unit::PerSecond) => Ok(Unit::Seconds),
            _ => Err(format!("{n:?} / {d:?} in {expr}")),
        };
    }
    let chars: Vec<char> = expr.chars().collect();
    let text: String = expr.split_whitespace().collect::<Vec<_>>().join(" ");
    let sels = selectors(expr)?;
    if sels.is_empty() {
        return Err(format!("no metric in {expr}"));
    }
    if text.contains("histogram_quantile(") {
        let bucket = sels
            .iter()
            .find(|s| s.name.ends_with("_bucket") || s.name.contains("_bucket:"))
            .ok_or_else(|| format!("histogram_quantile without buckets in {expr}"))?;
        let metric = bucket.name.split(':').nth(1).unwrap_or(&bucket.name);
        return Ok(base(metric.trim_end_matches("_bucket")).unit);
    }
    // Locate each selector to find the function around it.
    let mut units = Vec::new();
    let mut from = 0;
    for s in &sels {
        let at = expr[from..]
            .find(&s.name)
            .map(|p| from + p)
            .ok_or_else(|| format!("{} not found in {expr}", s.name))?;
        from = at + s.name.len();
        let char_at = expr[..at].chars().count();
        let f = enclosing_function(&chars, char_at);
        units.push(selector_unit(&s.name, f.as_deref())?);
    }
    let mut unit = units[0];
    if units.iter().any(|u| *u != unit) {
        return Err(format!("mixed units {units:?} in {expr}"));
    }
    if unit == Unit::Timestamp && text.contains("time() -") {
        unit = Unit::Seconds;
    }
    let times_8 = text.starts_with("8 *") || text.starts_with("-8 *") || text.contains("* 8");
    if times_8 {
        if unit != Unit::BytesPerSecond {
            return Err(format!("× 8 of {unit:?} in {expr}"));
        }
        unit = Unit::BitsPerSecond;
    }
    Ok(unit)
}

/// Whether Grafana's `unit` (None: unset) shows values of `u` truthfully in
/// a panel of type `kind`.
pub fn shows(unit: Option<&str>, u: Unit, kind: &str) -> bool {
    let unit = unit.unwrap_or("");
    match u {
        Unit::Seconds => unit == "s",
        Unit::BytesPerSecond => matches!(unit, "Bps" | "binBps"),
        Unit::BitsPerSecond => unit == "bps",
        Unit::Bytes => matches!(unit, "bytes" | "decbytes"),
        Unit::Celsius => unit == "celsius",
        Unit::Ratio => unit == "percentunit",
        Unit::Count => matches!(unit, "short" | "none") || (kind == "heatmap" && unit.is_empty()),
        Unit::PerSecond => matches!(unit, "cps" | "pps" | "ops" | "reqps"),
        Unit::Timestamp => unit.starts_with("dateTime"),
        Unit::Plain => matches!(unit, "" | "none" | "short"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_names_and_functions() {
        let good = [
            ("rate(a_bytes_total[1m]) * 8", Unit::BitsPerSecond),
            ("8 * a_bytes_per_second", Unit::BitsPerSecond),
            ("a_bytes_per_second", Unit::BytesPerSecond),
            ("sum by (x) (increase(a_seconds_total[1h]))", Unit::Seconds),
            ("rate(a_seconds_total[1h])", Unit::Ratio),
            ("increase(a_total[1h])", Unit::Count),
            ("sum(rate(a_total[5m]))", Unit::PerSecond),
            ("avg_over_time(a_up[1h])", Unit::Ratio),
            ("max_over_time(a_celsius[1h])", Unit::Celsius),
            ("time() - a_timestamp_seconds", Unit::Seconds),
            ("n:a_bytes:rate1m * 8", Unit::BitsPerSecond),
            ("n:a_probe_loss:ratio_rate5m", Unit::Ratio),
            ("n:a_path_ok:avg_over_time1h", Unit::Ratio),
            ("n:a_outages:increase1h", Unit::Count),
            ("n:a_rtt_seconds:p99_5m", Unit::Seconds),
            ("a_up", Unit::Plain),
            // Divisions and histograms, too long for one line each.
            (
                "sum(increase(a_seconds_sum[1h])) / sum(increase(a_seconds_count[1h]))",
                Unit::Seconds,
            ),
            (
                "sum(increase(a_total[1h])) / sum(increase(b_total[1h]))",
                Unit::Ratio,
            ),
            (
                "histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket[5m])))",
                Unit::Seconds,
            ),
        ];
        for (e, u) in good {
            assert_eq!(expr_unit(e), Ok(u), "{e}");
        }
        for e in [
            "a_total",
            "a_seconds + increase(b_total[1h])",
            "8 * a_celsius",
            "rate(a_celsius[5m])",
        ] {
            assert!(expr_unit(e).is_err(), "{e}");
        }
    }

    #[test]
    fn grafana_units_must_match() {
        let cases = [
            (Some("bps"), Unit::BitsPerSecond, "timeseries", true),
            (Some("bps"), Unit::BytesPerSecond, "timeseries", false),
            (Some("s"), Unit::Count, "stat", false),
            (Some("percentunit"), Unit::Ratio, "stat", true),
            (Some("short"), Unit::PerSecond, "timeseries", false),
            (None, Unit::Plain, "state-timeline", true),
            (None, Unit::Count, "timeseries", false),
        ];
        for (unit, u, kind, truthful) in cases {
            assert_eq!(
                shows(unit, u, kind),
                truthful,
                "{unit:?} for {u:?} in {kind}"
            );
        }
    }
}
