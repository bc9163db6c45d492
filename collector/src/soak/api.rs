//! `/api/v1/soaks`: create, list, show, stop, delete, marks and reports
//! over HTTP, the same operations as the `soak` and `report` commands.
//! Writes need the write token (checked at the API's door,
//! [`crate::api::token::require`]); without one configured they are off. Writes open a
//! short-lived connection of their own (SQLite serialises them with the
//! ingest writer; WAL keeps reads going) on a blocking thread.
//!
//! - `POST /api/v1/soaks` `{"name", "start"?, "end"?, "nodes"?, "slo"?, "labels"?}`
//!   (times: RFC 3339 or unix seconds, as a string or a number; `slo`: the
//!   SLO file's keys as an object)
//! - `GET /api/v1/soaks?limit=&cursor=` (newest first, in pages as
//!   [`crate::api::page`] describes), `GET /api/v1/soaks/{name}` (with
//!   marks, elapsed and the verdict so far)
//! - `POST /api/v1/soaks/{name}/stop` `{"at"?}`, `DELETE /api/v1/soaks/{name}`
//! - `GET|POST /api/v1/soaks/{name}/marks` `{"text", "at"?, "until"?}`
//!   (the GET answers with `time`/`timeEnd` in ms too, which Grafana's JSON
//!   and Infinity data sources read as annotations; paged like the rest,
//!   but a page holds every mark a soak may have unless `limit` says less)
//! - `GET /api/v1/soaks/{name}/report?format=table|md|json|html`

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use boltwatch_common::clock::now_unix_ns;
use serde::Deserialize;
use serde_json::{json, Value};

use super::live::{self, Change};
use super::{stored, time, Mark, Slo, Soak, SoakError};
use crate::api::page::{Cursor, Page, PageQuery};
use crate::api::{bad_request, ApiError, AppState};
use crate::report::format::Format;
use boltwatch_store::{Db, StoreHandle};

/// The soak routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/soaks", get(list).post(create))
        .route("/api/v1/soaks/{name}", get(show).delete(delete))
        .route("/api/v1/soaks/{name}/stop", post(stop))
        .route("/api/v1/soaks/{name}/marks", get(marks).post(mark))
        .route("/api/v1/soaks/{name}/report", get(report))
}

impl From<SoakError> for ApiError {
    fn from(e: SoakError) -> Self {
        let code = match &e {
            SoakError::NotFound(_) => StatusCode::NOT_FOUND,
            SoakError::Exists(_) => StatusCode::CONFLICT,
            SoakError::Invalid(_) => StatusCode::BAD_REQUEST,
            SoakError::Full(_) => StatusCode::INSUFFICIENT_STORAGE,
            SoakError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError(code, e.to_string())
    }
}

type Result<T> = std::result::Result<T, ApiError>;

/// Runs `f` on a fresh writing connection on a blocking thread.
async fn write<T: Send + 'static>(
    store: &StoreHandle,
    f: impl FnOnce(&Db) -> std::result::Result<T, SoakError> + Send + 'static,
) -> Result<T> {
    let path = store.path().to_path_buf();
    tokio::task::spawn_blocking(move || f(&Db::open_writer(&path)?))
        .await
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(Into::into)
}

/// [`write`], then soak `name`'s live series brought up to date at once
/// (a new soak, a stop or a mark reaches `/metrics` and dashboard
/// annotations now, not at the next periodic refresh), with the bounded
/// work [`live::after_write`] does for `change`. (The write token was
/// checked at the door: [`crate::api::token::require`].)
async fn write_live<T: Send + 'static>(
    app: &AppState,
    name: String,
    change: Change,
    f: impl FnOnce(&Db, &str) -> std::result::Result<T, SoakError> + Send + 'static,
) -> Result<T> {
    let soak = name.clone();
    let out = write(&app.store, move |db| f(db, &soak)).await?;
    live::after_write(&app.store, &app.metrics, name, change).await;
    Ok(out)
}

async fn read<T: Send + 'static>(
    store: &StoreHandle,
    f: impl FnOnce(&Db) -> std::result::Result<T, SoakError> + Send + 'static,
) -> Result<T> {
    let out = store
        .read(move |db| Ok(f(db)))
        .await
        .map_err(|e| ApiError(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    out.map_err(Into::into)
}

fn when(v: &Option<Value>, what: &str) -> std::result::Result<Option<u64>, SoakError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => time::parse(s).map(Some),
        Some(Value::Number(n)) => time::parse(&n.to_string()).map(Some),
        Some(_) => Err("a time, RFC 3339 or unix seconds".to_string()),
    }
    .map_err(|e| SoakError::Invalid(format!("`{what}`: {e}")))
}

/// Body of `POST /api/v1/soaks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewSoak {
    name: String,
    start: Option<Value>,
    end: Option<Value>,
    #[serde(default)]
    nodes: Vec<String>,
    slo: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// The SLO keys of a JSON object, checked by the SLO file's rules.
fn slo_of(obj: &serde_json::Map<String, Value>) -> std::result::Result<Slo, SoakError> {
    let mut text = String::new();
    for (k, v) in obj {
        if !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(SoakError::Invalid(format!("slo key `{k}`: unknown key")));
        }
        text.push_str(&format!("{k} = {v}\n"));
    }
    Slo::parse("slo", &text).map_err(|e| SoakError::Invalid(e.to_string()))
}

fn describe(s: &Soak, now: u64) -> Value {
    let (from, to) = s.range(now);
    json!({
        "soak": s,
        "start": time::format(s.start_unix_ns),
        "end": s.end_unix_ns.map(time::format),
        "running": s.running(now),
        "elapsed_seconds": (to - from) as f64 / 1e9,
    })
}

async fn create(
    State(app): State<AppState>,
    Json(body): Json<NewSoak>,
) -> Result<(StatusCode, Json<Value>)> {
    let now = now_unix_ns();
    let soak = Soak {
        start_unix_ns: when(&body.start, "start")?.unwrap_or(now),
        end_unix_ns: when(&body.end, "end")?,
        slo: body
            .slo
            .as_ref()
            .map(slo_of)
            .transpose()?
            .unwrap_or_default(),
        name: body.name,
        nodes: body.nodes,
        labels: body.labels,
    };
    if soak.end_unix_ns.is_some_and(|e| e < soak.start_unix_ns) {
        return Err(SoakError::Invalid("`end` is before `start`".into()).into());
    }
    let s = soak.clone();
    write_live(&app, soak.name.clone(), Change::Verdict, move |c, _| {
        stored::create(c, &s, now)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(describe(&soak, now))))
}

/// Soaks on a `GET /api/v1/soaks` page when `limit` is not given.
pub const DEFAULT_SOAKS_LIMIT: u32 = 100;
/// Most soaks one page may hold (a page also stops at
/// [`crate::api::page::PAGE_BYTES`]).
pub const MAX_SOAKS_LIMIT: u32 = 1_000;

/// Soaks newest start first (then by name), in pages.
async fn list(State(store): State<StoreHandle>, Query(q): Query<PageQuery>) -> Result<Response> {
    let limit = q
        .limit(DEFAULT_SOAKS_LIMIT, MAX_SOAKS_LIMIT)
        .map_err(bad_request)?;
    let after = q.cursor().map_err(bad_request)?;
    let now = now_unix_ns();
    let all = read(&store, stored::list).await?;
    let mut page = Page::new("soaks", limit as usize);
    for s in &all {
        let key = Cursor {
            unix_ns: s.start_unix_ns,
            node: s.name.clone(),
            boot_id: String::new(),
            seq: 0,
        };
        // Newest first: later in the list is an earlier start, or the
        // same start and a later name.
        let past = |a: &Cursor| {
            (std::cmp::Reverse(key.unix_ns), &key.node) > (std::cmp::Reverse(a.unix_ns), &a.node)
        };
        if after.as_ref().is_some_and(|a| !past(a)) {
            continue;
        }
        if !page.push(&describe(s, now), key) {
            break;
        }
    }
    Ok(json_page(page))
}

fn json_page(page: Page) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], page.finish()).into_response()
}

async fn show(State(store): State<StoreHandle>, Path(name): Path<String>) -> Result<Json<Value>> {
    let now = now_unix_ns();
    let (soak, report) = read(&store, move |c| {
        let soak = stored::get(c, &name)?;
        let report = super::load::soak_report(c, &name, now)?;
        Ok((soak, report))
    })
    .await?;
    let mut v = describe(&soak, now);
    v["marks"] = json!(report.marks);
    v["verdict"] = json!(report.verdict);
    Ok(Json(v))
}

/// Body of `POST .../stop`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StopBody {
    at: Option<Value>,
}

async fn stop(
    State(app): State<AppState>,
    Path(name): Path<String>,
    body: Option<Json<StopBody>>,
) -> Result<Json<Value>> {
    let now = now_unix_ns();
    let at = when(&body.unwrap_or_default().0.at, "at")?.unwrap_or(now);
    let s = write_live(&app, name, Change::Verdict, move |c, name| {
        stored::stop(c, name, at)
    })
    .await?;
    Ok(Json(describe(&s, now)))
}

async fn delete(State(app): State<AppState>, Path(name): Path<String>) -> Result<StatusCode> {
    write_live(&app, name, Change::Deleted, stored::delete).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Body of `POST .../marks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewMark {
    text: String,
    at: Option<Value>,
    until: Option<Value>,
}

async fn mark(
    State(app): State<AppState>,
    Path(name): Path<String>,
    Json(body): Json<NewMark>,
) -> Result<(StatusCode, Json<Value>)> {
    let m = Mark {
        at_unix_ns: when(&body.at, "at")?.unwrap_or_else(now_unix_ns),
        until_unix_ns: when(&body.until, "until")?,
        text: body.text,
    };
    let out = json!(m);
    write_live(&app, name, Change::Marked, move |c, name| {
        stored::add_mark(c, name, &m)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(out)))
}

/// Marks in time order, in pages (by default all of a soak's, which are
/// at most [`super::stored::MAX_MARKS`]).
async fn marks(
    State(store): State<StoreHandle>,
    Path(name): Path<String>,
    Query(q): Query<PageQuery>,
) -> Result<Response> {
    let most = super::stored::MAX_MARKS as u32;
    let limit = q.limit(most, most).map_err(bad_request)?;
    let after = q.cursor().map_err(bad_request)?;
    let all = read(&store, move |c| {
        stored::get(c, &name)?;
        stored::marks(c, &name)
    })
    .await?;
    let mut page = Page::new("marks", limit as usize);
    // The key is the time and the mark's place among those at the same
    // time (the store keeps them in the order they were added).
    let mut same_time = 0;
    for (i, m) in all.iter().enumerate() {
        same_time = match i.checked_sub(1).map(|p| all[p].at_unix_ns) {
            Some(prev) if prev == m.at_unix_ns => same_time + 1,
            _ => 0,
        };
        let key = Cursor {
            unix_ns: m.at_unix_ns,
            node: String::new(),
            boot_id: String::new(),
            seq: same_time,
        };
        if after
            .as_ref()
            .is_some_and(|a| (key.unix_ns, key.seq) <= (a.unix_ns, a.seq))
        {
            continue;
        }
        let annotated = json!({
            "text": m.text,
            "at_unix_ns": m.at_unix_ns,
            "until_unix_ns": m.until_unix_ns,
            "time": m.at_unix_ns / 1_000_000,
            "timeEnd": m.until_unix_ns.map(|u| u / 1_000_000),
        });
        if !page.push(&annotated, key) {
            break;
        }
    }
    Ok(json_page(page))
}

/// Query of the report route.
#[derive(Debug, Deserialize)]
struct ReportQuery {
    format: Option<String>,
}

async fn report(
    State(store): State<StoreHandle>,
    Path(name): Path<String>,
    Query(q): Query<ReportQuery>,
) -> Result<Response> {
    let format: Format = q
        .format
        .as_deref()
        .unwrap_or("json")
        .parse()
        .map_err(|e: String| ApiError(StatusCode::BAD_REQUEST, e))?;
    let now = now_unix_ns();
    let body = read(&store, move |c| {
        Ok(format.render(&super::load::soak_report(c, &name, now)?))
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, format.content_type())], body).into_response())
}
