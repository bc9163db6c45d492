//! Pages of `/api/v1` answers: at most `limit` items and at most
//! [`PAGE_BYTES`] of JSON, with an opaque cursor to ask for the next page.
//! Pure: items in, a JSON body out.
//!
//! Why a byte budget as well as a count: `?limit=100000` used to build a
//! 168 MB answer in memory (1.1 GB for four at once). A page now stops at
//! the budget (never below one item), so an answer costs at most a few MiB
//! however large the store, and the client follows `next_cursor`.
//!
//! Cursors are keys, not offsets: the sort key of the last item returned,
//! so records stored meanwhile never shift a page. Every list of the API
//! is paged, each with its own key: records and outages by time, nodes by
//! boot, soaks by start (newest first) and name, marks by time.

use serde::{Deserialize, Serialize};

/// Most JSON bytes of items in one page.
pub const PAGE_BYTES: usize = 4 << 20;

/// Key of a record in the records' order (`unix_ns, node, boot_id, seq`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    /// Agent time, unix ns.
    pub unix_ns: u64,
    /// Node.
    pub node: String,
    /// Boot.
    pub boot_id: String,
    /// Sequence number (for outages: the outage id).
    pub seq: u64,
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

impl Cursor {
    /// The opaque text form.
    pub fn encode(&self) -> String {
        format!(
            "{}.{}.{}.{}",
            self.unix_ns,
            self.seq,
            hex(&self.node),
            hex(&self.boot_id)
        )
    }

    /// Parses [`Cursor::encode`]'s output.
    pub fn decode(s: &str) -> Option<Cursor> {
        let mut it = s.split('.');
        let c = Cursor {
            unix_ns: it.next()?.parse().ok()?,
            seq: it.next()?.parse().ok()?,
            node: unhex(it.next()?)?,
            boot_id: unhex(it.next()?)?,
        };
        it.next().is_none().then_some(c)
    }
}

/// `limit` and `cursor` of a list's query string.
#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    /// At most this many items.
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl PageQuery {
    /// The limit asked for, `default` when absent; an error outside
    /// `1..=max`.
    pub fn limit(&self, default: u32, max: u32) -> Result<u32, String> {
        parse_limit(self.limit, default, max)
    }

    /// The cursor given, if any; an error when it is not one this API gave.
    pub fn cursor(&self) -> Result<Option<Cursor>, String> {
        parse_cursor(self.cursor.as_deref())
    }
}

/// `given`, or `default` when absent; an error outside `1..=max`.
pub fn parse_limit(given: Option<u32>, default: u32, max: u32) -> Result<u32, String> {
    let limit = given.unwrap_or(default);
    if limit == 0 || limit > max {
        return Err(format!("limit {limit} is outside 1..={max}"));
    }
    Ok(limit)
}

/// The cursor `given`, `None` when absent or empty; an error when it is
/// not one [`Cursor::encode`] made.
pub fn parse_cursor(given: Option<&str>) -> Result<Option<Cursor>, String> {
    match given.filter(|c| !c.is_empty()) {
        None => Ok(None),
        Some(c) => Cursor::decode(c)
            .map(Some)
            .ok_or_else(|| format!("cursor `{c}` is not one this API gave")),
    }
}

/// Builds `{"<field>":[items...],"next_cursor":...}` from items in order,
/// each with its cursor, stopping after `limit` items or before the item
/// that would pass [`PAGE_BYTES`] (the first item always fits). `more`
/// says whether items beyond those given exist.
pub struct Page {
    field: &'static str,
    limit: usize,
    budget: usize,
    body: Vec<u8>,
    count: usize,
    last: Option<Cursor>,
    full: bool,
}

impl Page {
    /// An empty page of at most `limit` items under `field`.
    pub fn new(field: &'static str, limit: usize) -> Page {
        Page::with_budget(field, limit, PAGE_BYTES)
    }

    /// [`Page::new`] with another byte budget (tests).
    pub fn with_budget(field: &'static str, limit: usize, budget: usize) -> Page {
        let mut body = Vec::with_capacity(4096);
        body.extend_from_slice(format!("{{\"{field}\":[").as_bytes());
        Page {
            field,
            limit,
            budget,
            body,
            count: 0,
            last: None,
            full: false,
        }
    }

    /// Adds an item; `false` once the page is full (the item was not added
    /// and the caller should stop).
    pub fn push<T: Serialize>(&mut self, item: &T, key: Cursor) -> bool {
        if self.full || self.count >= self.limit {
            self.full = true;
            return false;
        }
        let json = serde_json::to_vec(item).expect("DTOs serialize");
        let used = self.body.len() - self.field.len() - 5;
        if self.count > 0 && used + json.len() + 1 > self.budget {
            self.full = true;
            return false;
        }
        if self.count > 0 {
            self.body.push(b',');
        }
        self.body.extend_from_slice(&json);
        self.count += 1;
        self.last = Some(key);
        true
    }

    /// Items on the page.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the page holds no item.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The JSON body; `next_cursor` is set when an item did not fit.
    pub fn finish(mut self) -> Vec<u8> {
        self.body.extend_from_slice(b"],\"next_cursor\":");
        let next = match (&self.last, self.full) {
            (Some(c), true) => serde_json::to_vec(&c.encode()).expect("a string"),
            _ => b"null".to_vec(),
        };
        self.body.extend_from_slice(&next);
        self.body.push(b'}');
        self.body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> Cursor {
        Cursor {
            unix_ns: i,
            node: "n.1".into(),
            boot_id: "b\u{e9}".into(),
            seq: i,
        }
    }

    #[test]
    fn cursor_round_trips_and_rejects_garbage() {
        let c = key(7);
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        assert_eq!(Cursor::decode("1.2.zz.00"), None);
        assert_eq!(Cursor::decode("1.2.6e"), None);
        assert_eq!(Cursor::decode("1.2.6e.62.9"), None);
    }

    #[test]
    fn page_stops_at_the_budget_and_names_the_next_cursor() {
        let mut p = Page::with_budget("items", 1000, 100);
        let mut pushed = 0;
        for i in 0..1000u64 {
            if !p.push(&"x".repeat(20), key(i)) {
                break;
            }
            pushed += 1;
        }
        assert_eq!(pushed, 4, "4 x 23 bytes fit in 100");
        let v: serde_json::Value = serde_json::from_slice(&p.finish()).unwrap();
        assert_eq!(v["items"].as_array().unwrap().len(), 4);
        let next = Cursor::decode(v["next_cursor"].as_str().unwrap()).unwrap();
        assert_eq!(next, key(3));
    }

    #[test]
    fn one_item_always_fits_and_a_complete_answer_has_no_cursor() {
        let mut p = Page::with_budget("items", 10, 1);
        assert!(p.push(&"a long item", key(0)));
        assert!(!p.push(&"b", key(1)));
        let v: serde_json::Value = serde_json::from_slice(&p.finish()).unwrap();
        assert!(v["next_cursor"].is_string());
        let mut p = Page::new("items", 10);
        assert!(p.push(&1, key(0)));
        let v: serde_json::Value = serde_json::from_slice(&p.finish()).unwrap();
        assert_eq!(v, serde_json::json!({"items": [1], "next_cursor": null}));
    }
}
