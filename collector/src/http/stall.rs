//! An HTTP connection's socket with a write deadline: a write that has
//! waited `http_idle_timeout` without the client taking a byte fails, so
//! hyper ends the connection, counted as
//! `boltwatch_http_refused_total{kind="idle_timeout"}`. It also notes
//! whether the client sent anything since the last answer ([`Activity`]),
//! so a header timeout on a keep-alive connection that merely went quiet
//! is not counted as a refusal.
//!
//! Why only writes: reads are bounded elsewhere (the header read timeout
//! for heads, the body timeout for bodies), and a handler that works for
//! a while without I/O (a long report) must not be cut off. A write only
//! waits when the client stops reading its answer, which otherwise holds
//! the connection and its slot forever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::export::SharedMetrics;

/// What a connection has done, as its server task sees it.
#[derive(Debug, Default)]
pub struct Activity {
    answered: AtomicBool,
    read_since_answer: AtomicBool,
}

impl Activity {
    /// Whether the connection is between requests after an answer, with
    /// not a byte of the next one received: an idle keep-alive.
    pub fn idle_after_answer(&self) -> bool {
        self.answered.load(Ordering::Relaxed) && !self.read_since_answer.load(Ordering::Relaxed)
    }
}

/// A TCP stream whose writes may wait at most `limit` for the peer.
#[derive(Debug)]
pub struct StallGuard {
    inner: TcpStream,
    limit: Duration,
    /// Armed by the first write that has to wait, disarmed by progress.
    deadline: Option<Pin<Box<Sleep>>>,
    metrics: SharedMetrics,
    activity: Arc<Activity>,
}

impl StallGuard {
    /// Wraps `inner`; a stall is counted in `metrics`, reads and writes
    /// noted in `activity`.
    pub fn new(
        inner: TcpStream,
        limit: Duration,
        metrics: SharedMetrics,
        activity: Arc<Activity>,
    ) -> StallGuard {
        StallGuard {
            inner,
            limit,
            deadline: None,
            metrics,
            activity,
        }
    }

    /// After a write attempt: disarm on progress, arm or check the
    /// deadline while it waits.
    fn after_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.deadline = None;
            self.activity.answered.store(true, Ordering::Relaxed);
            self.activity
                .read_since_answer
                .store(false, Ordering::Relaxed);
            return r;
        }
        let limit = self.limit;
        let d = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if d.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.metrics.lock().on_http_refused("idle_timeout");
        tracing::info!(peer = ?self.inner.peer_addr().ok(), "HTTP client stopped reading its answer; connection closed");
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client took no byte of its answer in http_idle_timeout",
        )))
    }
}

impl AsyncRead for StallGuard {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity
                .read_since_answer
                .store(true, Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for StallGuard {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.after_write(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.after_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
