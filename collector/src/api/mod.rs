//! The JSON API under `/api/v1`: nodes with their boots and gaps, stored
//! records decoded into DTOs ([`crate::dto`]), and outages with their start
//! and end records joined. Handlers only translate: the
//! store answers the queries, the exporter state says who is connected.
//! The routes share one [`AppState`] with `/metrics` ([`state`]).
//!
//! Every list comes in pages ([`page`]): at most `limit` items and
//! [`page::PAGE_BYTES`] of JSON each, with `next_cursor` (pass it back as
//! `?cursor=`) when there is more. [`token`] is the optional read token,
//! [`limit`] how many requests are handled at once.

pub mod limit;
pub mod page;
pub mod state;
pub mod token;

pub use state::AppState;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use boltwatch_proto::v1::Record;
use prost::Message;
use serde::Deserialize;

use crate::dto::{join_outages, BootDto, NodeDto, PayloadDto, RecordDto};
use crate::export::SharedMetrics;
use boltwatch_store::{BootRow, RecordFilter, StoreError, StoreHandle, StoredRecord};
use page::{Cursor, Page, PageQuery};

/// Records returned when `limit` is not given.
pub const DEFAULT_LIMIT: u32 = 1_000;
/// Most records (or outages) one request may ask for; a page also stops at
/// [`page::PAGE_BYTES`].
pub const MAX_LIMIT: u32 = 100_000;

/// The `/api/v1` routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/nodes", get(nodes))
        .route("/api/v1/records", get(records))
        .route("/api/v1/outages", get(outages))
}

/// A failed API request, answered as `{"error": ...}`.
#[derive(Debug)]
pub struct ApiError(pub(crate) StatusCode, pub(crate) String);

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        tracing::warn!(error = %e, "API store read failed");
        ApiError(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

/// Boots on a `/api/v1/nodes` page when `limit` is not given.
pub const DEFAULT_NODES_LIMIT: u32 = 1_000;
/// Most boots one `/api/v1/nodes` page may hold (a boot is a few hundred
/// bytes of JSON, so a page stays within a few MiB).
pub const MAX_NODES_LIMIT: u32 = 10_000;

/// Nodes with their boots, paged by boot: at most `limit` boots, in the
/// order node, first seen, boot id. A node whose boots span pages is on
/// each of them with the boots that page holds (its `last_seen_unix_ns`
/// is then that of those boots).
async fn nodes(
    State(store): State<StoreHandle>,
    State(metrics): State<SharedMetrics>,
    Query(q): Query<PageQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let limit = q
        .limit(DEFAULT_NODES_LIMIT, MAX_NODES_LIMIT)
        .map_err(bad_request)? as usize;
    let after = q.cursor().map_err(bad_request)?;
    let key = |b: &BootRow| Cursor {
        node: b.node.clone(),
        unix_ns: b.first_seen_unix_ns,
        boot_id: b.boot_id.clone(),
        seq: 0,
    };
    // One more than the page, to know whether another follows.
    let after = after.map(|a| (a.node, a.unix_ns, a.boot_id));
    let mut page: Vec<BootRow> = store.boots_page(after, limit as u32 + 1).await?;
    let next = (page.len() > limit).then(|| {
        page.truncate(limit);
        page.last().map(|b| key(b).encode())
    });
    let out = group_boots(page, &metrics);
    Ok(Json(
        serde_json::json!({ "nodes": out, "next_cursor": next.flatten() }),
    ))
}

/// Boots in node order, grouped into nodes.
fn group_boots(boots: Vec<BootRow>, metrics: &SharedMetrics) -> Vec<NodeDto> {
    let mut out: Vec<NodeDto> = Vec::new();
    let m = metrics.lock();
    for b in boots {
        if out.last().is_none_or(|n| n.node != b.node) {
            out.push(NodeDto {
                connected: m.connected(&b.node),
                node: b.node.clone(),
                last_seen_unix_ns: 0,
                boots: Vec::new(),
            });
        }
        let n = out.last_mut().expect("pushed above");
        n.last_seen_unix_ns = n.last_seen_unix_ns.max(b.last_seen_unix_ns);
        n.boots.push(BootDto {
            gaps: b.gaps(),
            boot_id: b.boot_id,
            records: b.records,
            highest_seq: b.highest_seq,
            agent_version: b.agent_version,
            os: b.os,
            first_seen_unix_ns: b.first_seen_unix_ns,
            last_seen_unix_ns: b.last_seen_unix_ns,
        });
    }
    out
}

fn to_dto(r: StoredRecord) -> RecordDto {
    // Stored bytes passed validation, so they decode; a kind this build
    // does not know decodes with no payload.
    let payload = Record::decode(r.raw.as_slice())
        .ok()
        .and_then(|d| d.payload)
        .map(|p| PayloadDto::from(&p));
    RecordDto {
        node: r.node,
        boot_id: r.boot_id,
        seq: r.seq,
        unix_ns: r.unix_ns,
        kind: r.kind,
        payload,
    }
}

/// Query of `GET /api/v1/records` and `GET /api/v1/outages`.
#[derive(Debug, Deserialize)]
pub struct RecordsQuery {
    /// Only this node's records (for outages: as recorded by its agent).
    pub node: Option<String>,
    /// Records: only this payload kind.
    pub kind: Option<String>,
    /// Records: only those at or after this agent time, unix ns. Outages:
    /// only those that started at or after it, plus those still open.
    pub since: Option<u64>,
    /// At most this many ([`DEFAULT_LIMIT`] if absent).
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl RecordsQuery {
    fn limit(&self) -> Result<u32, ApiError> {
        page::parse_limit(self.limit, DEFAULT_LIMIT, MAX_LIMIT).map_err(bad_request)
    }

    fn cursor(&self) -> Result<Option<Cursor>, ApiError> {
        page::parse_cursor(self.cursor.as_deref()).map_err(bad_request)
    }
}

/// A 400 answer saying `why`.
pub(crate) fn bad_request(why: String) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, why)
}

fn json_body(body: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn records(
    State(store): State<StoreHandle>,
    Query(q): Query<RecordsQuery>,
) -> Result<Response, ApiError> {
    let limit = q.limit()?;
    let after = q.cursor()?;
    let since = q.since.unwrap_or(0).min(i64::MAX as u64);
    let filter = RecordFilter {
        node: q.node.filter(|s| !s.is_empty()),
        kind: q.kind.filter(|s| !s.is_empty()),
        since_unix_ns: since,
        // One more than asked: whether it exists decides next_cursor.
        limit: limit + 1,
    };
    // Decoding is real work: keep it on the blocking thread with the
    // query, one row at a time into the page.
    let body = store
        .read(move |c| {
            let mut page = Page::new("records", limit as usize);
            let key = after
                .as_ref()
                .map(|a| (a.unix_ns, a.node.as_str(), a.boot_id.as_str(), a.seq));
            c.each_record(&filter, key, |r| {
                let cursor = Cursor {
                    unix_ns: r.unix_ns,
                    node: r.node.clone(),
                    boot_id: r.boot_id.clone(),
                    seq: r.seq,
                };
                page.push(&to_dto(r), cursor)
            })?;
            Ok(page.finish())
        })
        .await?;
    Ok(json_body(body))
}

async fn outages(
    State(store): State<StoreHandle>,
    Query(q): Query<RecordsQuery>,
) -> Result<Response, ApiError> {
    let limit = q.limit()?;
    let after = q.cursor()?;
    let node = q.node.filter(|s| !s.is_empty());
    let since = q.since.unwrap_or(0);
    let body = store
        .read(move |c| {
            // Start and end records are joined over the node's whole
            // history; only the answer is paged.
            let mut decoded = Vec::new();
            c.each_record_of_kind(node.as_deref(), "outage", |r| {
                let Ok(rec) = Record::decode(r.raw.as_slice()) else {
                    return;
                };
                if let Some(boltwatch_proto::v1::record::Payload::Outage(o)) = rec.payload {
                    decoded.push((r.node, r.boot_id, o));
                }
            })?;
            let mut page = Page::new("outages", limit as usize);
            for o in join_outages(decoded, since) {
                let key = Cursor {
                    unix_ns: o.start_unix_ns,
                    node: o.node.clone(),
                    boot_id: o.boot_id.clone(),
                    seq: o.outage_id,
                };
                if after.as_ref().is_some_and(|a| key <= *a) {
                    continue;
                }
                if !page.push(&o, key) {
                    break;
                }
            }
            Ok(page.finish())
        })
        .await?;
    Ok(json_body(body))
}
