//! Just enough PromQL for checking the shipped rules and dashboards: the
//! metric selectors of an expression (name and range), with Grafana
//! variables (`$node`, `${node}`, `$__rate_interval`) skipped. Pure; no
//! Prometheus needed. Unknown functions and unbalanced brackets are
//! errors, so a misspelt function in a panel is caught.

/// PromQL functions the files may call; anything else followed by `(` is an
/// error, so a misspelt function in a Grafana panel is caught too.
#[rustfmt::skip]
pub const FUNCTIONS: &[&str] = &[
    "abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes", "clamp",
    "clamp_max", "clamp_min", "count_over_time", "delta", "deriv", "floor",
    "histogram_quantile", "idelta", "increase", "irate", "label_replace", "last_over_time",
    "max_over_time", "min_over_time", "predict_linear", "quantile_over_time", "rate",
    "resets", "round", "scalar", "sort", "sort_desc", "stddev_over_time", "sum_over_time",
    "time", "timestamp", "vector",
];

/// Aggregation operators: may be followed by `by (...)` before their `(`.
#[rustfmt::skip]
pub const AGGREGATIONS: &[&str] = &[
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile",
];

/// Keywords followed by a parenthesised label list, which holds no metrics.
#[rustfmt::skip]
pub const LABEL_LIST_KEYWORDS: &[&str] = &[
    "by", "without", "on", "ignoring", "group_left", "group_right",
];

/// Other PromQL keywords and literals.
pub const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "inf", "nan"];

/// One selector of an expression: the metric name and, for a range
/// selector, the range as written (`5m`, `$__range`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// Metric name (or recording rule).
    pub name: String,
    /// The text between `[` and `]` after the selector, if any.
    pub range: Option<String>,
}

/// The metric names a PromQL expression selects, in order of appearance.
/// Errors on an unknown function and on unbalanced brackets.
pub fn metric_names(expr: &str) -> Result<Vec<String>, String> {
    Ok(selectors(expr)?.into_iter().map(|s| s.name).collect())
}

/// The selectors of a PromQL expression, in order of appearance.
/// Errors on an unknown function and on unbalanced brackets.
pub fn selectors(expr: &str) -> Result<Vec<Selector>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names: Vec<Selector> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i = match c {
            '"' | '\'' | '`' => skip_string(&chars, i)?,
            '{' => skip_group(&chars, i, '{', '}')?,
            '[' => skip_group(&chars, i, '[', ']')?,
            '#' => skip_comment(&chars, i),
            '$' => skip_variable(&chars, i)?,
            _ if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                skip_number(&chars, i)
            }
            _ if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let (end, selector) = identifier(expr, &chars, i)?;
                names.extend(selector);
                end
            }
            _ => i + 1,
        };
    }
    Ok(names)
}

/// Index of the newline that ends the comment opening at `start` (or the
/// end).
fn skip_comment(chars: &[char], start: usize) -> usize {
    let mut i = start;
    while i < chars.len() && chars[i] != '\n' {
        i += 1;
    }
    i
}

/// Index just past the Grafana variable at `start`: `$node`, `${node}`,
/// `$__rate_interval`.
fn skip_variable(chars: &[char], start: usize) -> Result<usize, String> {
    let mut i = start + 1;
    if chars.get(i) == Some(&'{') {
        return skip_group(chars, i, '{', '}');
    }
    while i < chars.len() && is_ident(chars[i]) {
        i += 1;
    }
    Ok(i)
}

/// Index just past the number or duration at `start`: 0.5, 50e9, 1e-9,
/// 5m, 0x1F.
fn skip_number(chars: &[char], start: usize) -> usize {
    let mut i = start + 1;
    while i < chars.len() {
        let d = chars[i];
        let exponent_sign = (d == '+' || d == '-') && matches!(chars[i - 1], 'e' | 'E');
        if d.is_ascii_alphanumeric() || d == '.' || d == '_' || exponent_sign {
            i += 1;
        } else {
            break;
        }
    }
    i
}

/// The identifier at `start`: a keyword, an aggregation, a function call
/// (which must be a known function) or a selector. Returns where scanning
/// goes on (past a label list, or past a selector's range) and the
/// selector, if it is one.
fn identifier(
    expr: &str,
    chars: &[char],
    start: usize,
) -> Result<(usize, Option<Selector>), String> {
    let mut i = start;
    while i < chars.len() && is_ident(chars[i]) {
        i += 1;
    }
    let ident: String = chars[start..i].iter().collect();
    let lower = ident.to_ascii_lowercase();
    let mut j = i;
    while j < chars.len() && chars[j].is_whitespace() {
        j += 1;
    }
    let calls = chars.get(j) == Some(&'(');
    if LABEL_LIST_KEYWORDS.contains(&lower.as_str()) {
        let end = if calls {
            skip_group(chars, j, '(', ')')?
        } else {
            i
        };
        return Ok((end, None));
    }
    if KEYWORDS.contains(&lower.as_str()) || AGGREGATIONS.contains(&ident.as_str()) {
        return Ok((i, None));
    }
    if calls {
        if !FUNCTIONS.contains(&ident.as_str()) {
            return Err(format!("unknown function {ident}() in {expr}"));
        }
        return Ok((i, None));
    }
    // `name{...}[range]`: the range belongs to this selector.
    let mut k = i;
    if chars.get(k) == Some(&'{') {
        k = skip_group(chars, k, '{', '}')?;
    }
    let range = if chars.get(k) == Some(&'[') {
        let end = skip_group(chars, k, '[', ']')?;
        i = end;
        Some(chars[k + 1..end - 1].iter().collect())
    } else {
        None
    };
    Ok((i, Some(Selector { name: ident, range })))
}

/// A character of a metric name or keyword.
pub fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Index just past the string literal opening at `start`.
pub fn skip_string(chars: &[char], start: usize) -> Result<usize, String> {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        if chars[i] == '\\' && quote != '`' {
            i += 2;
            continue;
        }
        if chars[i] == quote {
            return Ok(i + 1);
        }
        i += 1;
    }
    Err(format!("unterminated string at {start}"))
}

/// Index just past the group opening at `start`, strings inside respected.
pub fn skip_group(chars: &[char], start: usize, open: char, close: char) -> Result<usize, String> {
    let mut depth = 0usize;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => {
                i = skip_string(chars, i)?;
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err(format!("unbalanced {open}{close} from {start}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_see_what_promql_selects() {
        let expr = r#"sum by (node, le) (rate(a_total{x="y}", le=~"[0-9]"}[5m] offset 1h))
            / on (node) group_left (kind) b:c:d * 50e9 - 1e-9 + ignoring(z) $node_x
            or histogram_quantile(0.99, e_bucket[$__range]) > bool 0.0005"#;
        assert_eq!(
            metric_names(expr).unwrap(),
            ["a_total", "b:c:d", "e_bucket"],
            "label lists, strings, ranges, numbers and variables are not metrics"
        );
        let ranges: Vec<Option<String>> = selectors(expr)
            .unwrap()
            .into_iter()
            .map(|s| s.range)
            .collect();
        assert_eq!(
            ranges,
            [Some("5m".to_string()), None, Some("$__range".to_string())]
        );
        assert!(
            metric_names("rte(a_total[5m])").is_err(),
            "unknown function"
        );
        assert!(metric_names("sum(a{b=\"c\"").is_err(), "unbalanced braces");
    }
}
