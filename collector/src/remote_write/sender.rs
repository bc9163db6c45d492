//! One endpoint's delivery loop: rebuild the endpoint's exporter state up
//! to its saved position, then read records after it in store order,
//! derive their samples, post them, and save the new position once the
//! receiver accepted them.
//!
//! Failures: 5xx, 429 and transport errors are retried with exponential
//! backoff (250 ms doubling to 30 s) and full jitter over the upper half;
//! any other 4xx means the receiver refuses the data, so the batch's
//! samples are counted as failed, logged, and skipped. While the backlog
//! (records stored after the position) exceeds `max_backlog_records`, the
//! oldest records are applied without sending and their samples counted as
//! dropped, so a receiver down for days costs neither memory nor a flood.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::watch;

use super::lag::Lag;
use super::series::{Deriver, LabelPairs, Point};
use super::wire::{self, Label, Sample, TimeSeries, WriteRequest};
use super::{Auth, Settings};
use crate::export::remote_write::EndpointStats;
use crate::export::SharedMetrics;
use boltwatch_store::{Db, Logged, StoreError, StoreHandle, LOG_CHUNK};

/// First retry delay.
const BACKOFF_MIN: Duration = Duration::from_millis(250);
/// Longest retry delay.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How often an idle sender looks for new records.
const POLL: Duration = Duration::from_millis(500);

/// One endpoint.
pub struct Sender {
    url: String,
    client: reqwest::Client,
    auth: Auth,
    store: StoreHandle,
    db: PathBuf,
    metrics: SharedMetrics,
    deriver: Deriver,
    /// What each fresh deriver is built with.
    external_labels: Vec<(String, String)>,
    batch_records: u32,
    max_backlog: i64,
    lag: Lag,
}

/// How a post ended.
enum Outcome {
    Delivered,
    /// Retry (5xx, 429, transport).
    Retry(String),
    /// Do not retry (other 4xx, an unencodable body).
    Refused(String),
}

/// What a sender presents: request credentials and TLS material, both
/// read from their files at startup.
pub struct Credentials {
    /// Bearer or basic auth.
    pub auth: Auth,
    /// CA and client identity for https:// endpoints.
    pub tls: super::TlsFiles,
}

impl Sender {
    /// A sender for `url` (checked by the config).
    pub fn new(
        url: &str,
        s: &Settings,
        creds: Credentials,
        store: StoreHandle,
        metrics: SharedMetrics,
    ) -> Result<Sender, crate::Error> {
        let Credentials { auth, tls } = creds;
        let mut headers = HeaderMap::new();
        for (k, v) in wire::HEADERS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain(s.headers.iter().cloned())
        {
            let (Ok(k), Ok(v)) = (
                HeaderName::try_from(k.as_str()),
                HeaderValue::try_from(v.as_str()),
            ) else {
                return Err(io_err(
                    format!("remote_write header `{k}`"),
                    "not a valid header",
                ));
            };
            headers.insert(k, v);
        }
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("boltwatch-collector/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .timeout(s.timeout)
            .use_rustls_tls()
            .tls_built_in_root_certs(false);
        if let Some(ca) = tls.ca {
            builder = builder.add_root_certificate(ca);
        }
        if let Some(id) = tls.identity {
            builder = builder.identity(id);
        }
        let client = builder
            .build()
            .map_err(|e| io_err(format!("remote_write client for {url}"), &e.to_string()))?;
        metrics.lock().remote_write().endpoint(url);
        Ok(Sender {
            url: url.to_string(),
            client,
            auth,
            db: store.path().to_path_buf(),
            store,
            metrics,
            deriver: Deriver::new(s.external_labels.clone()),
            external_labels: s.external_labels.clone(),
            batch_records: s.batch_records.clamp(1, LOG_CHUNK as usize) as u32,
            max_backlog: s.max_backlog_records.min(i64::MAX as u64) as i64,
            lag: Lag::default(),
        })
    }

    /// Delivers until `stop` turns true; store errors are logged and
    /// retried after a pause.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut pos = loop {
            match self.restore(&stop).await {
                Ok(Some(p)) => break p,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(endpoint = %self.url, "remote_write: reading the store: {e}")
                }
            }
            if pause(&mut stop, BACKOFF_MAX).await {
                return;
            }
        };
        tracing::info!(endpoint = %self.url, position = pos, series = self.deriver.series(), "remote_write: resuming");
        while !*stop.borrow() {
            match self.step(pos, &mut stop).await {
                Ok(Some(p)) => pos = p,
                Ok(None) => {
                    if pause(&mut stop, POLL).await {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(endpoint = %self.url, "remote_write: store: {e}");
                    if pause(&mut stop, BACKOFF_MAX).await {
                        return;
                    }
                }
            }
        }
    }

    /// Loads the saved position and applies the records up to it, to a
    /// fresh deriver (a failed attempt leaves nothing half applied).
    ///
    /// Everything is read in one read transaction: retention and
    /// compaction rewrite exactly the rows up to the position every
    /// endpoint saved, and either, between two reads, would move records
    /// this had not read yet to where it had already read (into a rollup,
    /// or to a lower position), so they would be missed or applied twice.
    ///
    /// The read checks `stop` between chunks, so a shutdown does not wait
    /// for a long restore (`None`: stopped).
    async fn restore(&mut self, stop: &watch::Receiver<bool>) -> Result<Option<i64>, StoreError> {
        let url = self.url.clone();
        let mut deriver = Deriver::new(self.external_labels.clone());
        let stop = stop.clone();
        let restored = self
            .store
            .read(move |db| {
                db.in_one_read(|snapshot| {
                    let saved = snapshot.log_position(&url)?;
                    // Pruned records were delivered everywhere before they went.
                    snapshot.replay_rollups(|records, _| {
                        records.iter().for_each(|r| deriver.skip(r))
                    })?;
                    let mut pos = 0;
                    while pos < saved {
                        if *stop.borrow() {
                            return Ok(None);
                        }
                        let chunk = snapshot.log_after(pos, LOG_CHUNK)?;
                        let Some(last) = chunk.last() else { break };
                        pos = last.pos;
                        for r in chunk
                            .iter()
                            .filter(|l| l.pos <= saved)
                            .filter_map(|l| l.record.as_ref())
                        {
                            deriver.skip(r);
                        }
                    }
                    Ok(Some((saved, deriver)))
                })
            })
            .await?;
        Ok(restored.map(|(saved, deriver)| {
            self.deriver = deriver;
            saved
        }))
    }

    /// The next chunk of the log after `pos`, cut at `to`: the position it
    /// reaches and its entries at or before `to`; `None` at the log's end.
    async fn chunk_until(
        &self,
        pos: i64,
        to: i64,
    ) -> Result<Option<(i64, Vec<Logged>)>, StoreError> {
        let chunk = self
            .store
            .read(move |db| db.log_after(pos, LOG_CHUNK))
            .await?;
        let Some(last) = chunk.last().map(|l| l.pos) else {
            return Ok(None);
        };
        Ok(Some((
            last,
            chunk.into_iter().filter(|l| l.pos <= to).collect(),
        )))
    }

    /// One batch after `pos`: Some(new position) when something was done.
    async fn step(
        &mut self,
        pos: i64,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<Option<i64>, StoreError> {
        let newest = self.store.read(|db| db.log_newest()).await?;
        self.lag.passed(pos);
        self.lag.seen(newest, now());
        self.show_lag();
        if newest - pos > self.max_backlog {
            let to = newest - self.max_backlog;
            let n = self.drop_until(pos, to).await?;
            tracing::warn!(endpoint = %self.url, records = to - pos, samples = n, "remote_write: backlog over its bound, oldest records dropped");
            self.save(to).await;
            self.lag.passed(to);
            self.show_lag();
            return Ok(Some(to));
        }
        let limit = self.batch_records;
        let chunk = self.store.read(move |db| db.log_after(pos, limit)).await?;
        let Some(end) = chunk.last().map(|l| l.pos) else {
            self.stats(|e| e.pending = 0);
            return Ok(None);
        };
        let points = self.derive(&chunk);
        let n = points.len() as u64;
        self.stats(|e| e.pending = n);
        if n > 0 && !self.deliver(&points, end, stop).await? {
            return Ok(Some(pos)); // Stopping: the batch is resent after a restart.
        }
        self.save(end).await;
        self.lag.passed(end);
        self.show_lag();
        self.stats(|e| e.pending = 0);
        Ok(Some(end))
    }

    /// Puts the endpoint's lag as of now on `/metrics`.
    fn show_lag(&self) {
        let lag = self.lag.seconds(now());
        self.stats(|e| e.lag = lag);
    }

    /// Updates this endpoint's counters on `/metrics`.
    fn stats(&self, update: impl FnOnce(&mut EndpointStats)) {
        update(self.metrics.lock().remote_write().endpoint(&self.url));
    }

    /// Samples of a chunk, consecutive records of one timestamp rendered
    /// together.
    fn derive(&mut self, chunk: &[Logged]) -> Vec<Point> {
        let mut points = Vec::new();
        self.deriver.begin();
        let mut group: Vec<boltwatch_proto::v1::Record> = Vec::new();
        for r in chunk.iter().filter_map(|l| l.record.as_ref()) {
            if group.first().is_some_and(|g| g.unix_ns != r.unix_ns) {
                self.deriver.apply_group(&group, &mut points);
                group.clear();
            }
            group.push(r.clone());
        }
        self.deriver.apply_group(&group, &mut points);
        points
    }

    /// Applies records in (pos, to] without sending; returns their samples.
    async fn drop_until(&mut self, mut pos: i64, to: i64) -> Result<u64, StoreError> {
        let mut dropped = 0u64;
        while pos < to {
            let Some((next, keep)) = self.chunk_until(pos, to).await? else {
                break;
            };
            pos = next;
            dropped += self.derive(&keep).len() as u64;
        }
        self.stats(|e| e.dropped += dropped);
        Ok(dropped)
    }

    /// Posts `points` until delivered, refused, or dropped for the backlog
    /// bound; false when asked to stop first.
    async fn deliver(
        &mut self,
        points: &[Point],
        end: i64,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<bool, StoreError> {
        let n = points.len() as u64;
        let body = wire::encode(&request(points));
        let mut delay = BACKOFF_MIN;
        loop {
            let outcome = match &body {
                Ok(b) => self.post(b.clone()).await,
                Err(e) => Outcome::Refused(format!("encoding: {e}")),
            };
            match outcome {
                Outcome::Delivered => {
                    self.stats(|e| {
                        e.sent += n;
                        e.last_success = now();
                    });
                    return Ok(true);
                }
                Outcome::Refused(why) => {
                    tracing::error!(endpoint = %self.url, samples = n, "remote_write: refused, not retried: {why}");
                    self.stats(|e| e.failed += n);
                    return Ok(true);
                }
                Outcome::Retry(why) => {
                    let newest = self.store.read(|db| db.log_newest()).await?;
                    if newest - end > self.max_backlog {
                        tracing::warn!(endpoint = %self.url, samples = n, "remote_write: dropping a batch for the backlog bound: {why}");
                        self.stats(|e| e.dropped += n);
                        return Ok(true);
                    }
                    // While retrying, the lag keeps growing on /metrics.
                    self.show_lag();
                    let wait = jitter(delay);
                    tracing::warn!(endpoint = %self.url, retry_in = ?wait, "remote_write: {why}");
                    if pause(stop, wait).await {
                        return Ok(false);
                    }
                    delay = (delay * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    async fn post(&self, body: Vec<u8>) -> Outcome {
        let mut req = self.client.post(&self.url).body(body);
        req = match &self.auth {
            Auth::None => req,
            Auth::Bearer(t) => req.bearer_auth(t),
            Auth::Basic(u, p) => req.basic_auth(u, Some(p)),
        };
        match req.send().await {
            Err(e) => Outcome::Retry(format!("sending: {e}")),
            Ok(resp) => {
                let status = resp.status();
                if status.is_success() {
                    return Outcome::Delivered;
                }
                let text = head_of(resp).await;
                let why = format!("{status}: {}", text.trim());
                if status.is_server_error() || status.as_u16() == 429 {
                    Outcome::Retry(why)
                } else {
                    Outcome::Refused(why)
                }
            }
        }
    }

    async fn save(&self, pos: i64) {
        let (db, url) = (self.db.clone(), self.url.clone());
        let now = boltwatch_common::clock::now_unix_ns();
        let r = tokio::task::spawn_blocking(move || {
            Db::open_existing(&db)?.save_position(&url, pos, now)
        })
        .await;
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(endpoint = %self.url, "remote_write: saving the position: {e}")
            }
            Err(e) => {
                tracing::warn!(endpoint = %self.url, "remote_write: saving the position: {e}")
            }
        }
    }
}

/// Bytes of a refusal's body read at most: a receiver's error text is a
/// line or two, and a hostile or broken one may send gigabytes.
const ERROR_BODY_BYTES: usize = 4096;

/// The first 300 characters of a refusal's body, reading at most
/// [`ERROR_BODY_BYTES`] of it (the connection is dropped with the rest).
async fn head_of(mut resp: reqwest::Response) -> String {
    let mut buf = Vec::new();
    while buf.len() < ERROR_BODY_BYTES {
        match resp.chunk().await {
            Ok(Some(c)) => buf.extend_from_slice(&c[..c.len().min(ERROR_BODY_BYTES - buf.len())]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&buf).chars().take(300).collect()
}

/// Groups points by series (points of one series share their labels'
/// `Arc`), samples in time order.
pub fn request(points: &[Point]) -> WriteRequest {
    let mut index: HashMap<*const LabelPairs, usize> = HashMap::new();
    let mut timeseries: Vec<TimeSeries> = Vec::new();
    for p in points {
        let i = *index.entry(Arc::as_ptr(&p.labels)).or_insert_with(|| {
            timeseries.push(TimeSeries {
                labels: p
                    .labels
                    .iter()
                    .map(|(name, value)| Label {
                        name: name.clone(),
                        value: value.clone(),
                    })
                    .collect(),
                samples: Vec::new(),
            });
            timeseries.len() - 1
        });
        timeseries[i].samples.push(Sample {
            value: p.value,
            timestamp: p.ts_ms,
        });
    }
    for t in &mut timeseries {
        t.samples.sort_by_key(|s| s.timestamp);
    }
    WriteRequest { timeseries }
}

/// A delay in [d/2, d].
fn jitter(d: Duration) -> Duration {
    let half = d / 2;
    half + Duration::from_millis(rand::rng().random_range(0..=half.as_millis() as u64))
}

/// Waits `d`; true when `stop` turned true (or its sender is gone).
async fn pause(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::time::timeout(d, stop.wait_for(|s| *s)).await.is_ok()
}

fn io_err(what: String, msg: &str) -> crate::Error {
    crate::Error::Io {
        what,
        source: std::io::Error::other(msg.to_string()),
    }
}

/// Unix seconds now.
fn now() -> f64 {
    boltwatch_common::clock::now_unix_ns() as f64 / 1e9
}
