//! The gRPC port's front door: accepts TCP connections, reads the HTTP/2
//! client preface with a timeout and hands good connections to tonic with
//! the preface replayed. Anything else (port scanners, a browser, a
//! misconfigured agent speaking HTTP/1) is counted in
//! `boltwatch_ingest_malformed_connections_total` and closed, instead of
//! costing hyper a connection task and an error log line.
//!
//! It also enforces the connection caps ([`super::conn`]): a connection over
//! `max_connections` or `max_connections_per_address` is closed at once, and
//! one that has not opened a stream with an accepted Hello within
//! `hello_timeout` is closed by its own read side, so a connection that
//! only sent the preface cannot sit there forever. Until its Hello is
//! accepted a connection holds a place in the pending gate
//! ([`super::pending`]): one over `max_pending_per_address` is closed at
//! once, and one evicted for a newcomer is closed (or, when the gate is
//! full and the newcomer's own address holds the most, the newcomer). All
//! are counted in `boltwatch_ingest_errors_total` (`connection_limit`,
//! `hello_timeout`, `pending_per_address`, `pending_evicted`,
//! `pending_full`).
//!
//! With TLS ([`crate::tls`]) the handshake comes first, inside the same
//! preface timeout; a failed handshake (a plaintext agent, a wrong CA, an
//! expired certificate) is a malformed connection too, logged with
//! rustls's reason.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Sleep;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

use super::conn::{ConnLimits, HelloSeen, Slot};
use super::pending::{Admitted, PendingGate, Refused};
use crate::export::SharedMetrics;
use crate::tls::Tls;

/// The HTTP/2 client connection preface (RFC 9113 section 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether the bytes read so far can still be the start of the preface.
pub fn preface_prefix_ok(read: &[u8]) -> bool {
    read.len() <= PREFACE.len() && PREFACE.starts_with(read)
}

/// A TCP connection whose first 24 bytes (the preface) were already read;
/// they are replayed before the rest of the stream. It holds its
/// connection slot, and ends itself (a read error) when no stream on it
/// sent an accepted Hello before its deadline.
#[derive(Debug)]
pub struct PrefacedStream {
    replay: [u8; 24],
    pos: usize,
    inner: Wire,
    watch: Option<HelloWatch>,
}

/// The bytes under HTTP/2: plain TCP, or TLS over it.
#[derive(Debug)]
enum Wire {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Wire {
    fn tcp(&self) -> &TcpStream {
        match self {
            Wire::Plain(s) => s,
            Wire::Tls(s) => s.get_ref().0,
        }
    }

    /// The client's end-entity certificate, verified by the handshake
    /// (mutual TLS only).
    fn peer_cert(&self) -> Option<CertificateDer<'static>> {
        match self {
            Wire::Plain(_) => None,
            Wire::Tls(s) => s.get_ref().1.peer_certificates()?.first().cloned(),
        }
    }
}

/// Forwards an I/O call to whichever stream the wire is.
macro_rules! on_wire {
    ($self:ident, $s:ident => $call:expr) => {
        match &mut $self.inner {
            Wire::Plain($s) => $call,
            Wire::Tls($s) => $call,
        }
    };
}

/// What a connection needs to close itself without an accepted Hello.
#[derive(Debug)]
struct HelloWatch {
    seen: HelloSeen,
    deadline: Pin<Box<Sleep>>,
    /// Completes once the pending gate gave this connection's place away.
    evicted: oneshot::Receiver<()>,
    metrics: SharedMetrics,
    _slot: Slot,
}

impl Drop for HelloWatch {
    fn drop(&mut self) {
        // The connection ended: its place in the pending gate, if it still
        // holds one, goes back now rather than with the last clone of
        // `seen`.
        self.seen.release();
    }
}

/// The connect info tonic puts in every request's extensions: the TCP
/// addresses and the flag the ingest service sets on an accepted Hello.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// Local and remote address.
    pub tcp: TcpConnectInfo,
    /// Set by the service once a stream on this connection is accepted.
    pub hello: HelloSeen,
    /// The client certificate the TLS handshake verified (mutual TLS).
    pub peer_cert: Option<CertificateDer<'static>>,
}

impl PrefacedStream {
    /// Fails the read side once the Hello deadline passed without an
    /// accepted stream; hyper then closes the connection.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let w = self.watch.as_mut()?;
        if w.seen.get() {
            // Accepted: the slot stays held for the connection's life.
            return None;
        }
        if Pin::new(&mut w.evicted).poll(cx).is_ready() {
            // Counted when it was evicted.
            return Some(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "evicted from the pending gate before its Hello",
            ));
        }
        if w.deadline.as_mut().poll(cx).is_pending() {
            return None;
        }
        w.metrics.lock().on_ingest_error("hello_timeout");
        tracing::info!(peer = ?self.inner.tcp().peer_addr().ok(), "closed gRPC connection without an accepted Hello");
        Some(io::Error::new(
            io::ErrorKind::TimedOut,
            "no accepted Hello on this connection in time",
        ))
    }
}

impl AsyncRead for PrefacedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(e) = self.poll_deadline(cx) {
            return Poll::Ready(Err(e));
        }
        if self.pos < self.replay.len() {
            let n = (self.replay.len() - self.pos).min(buf.remaining());
            let pos = self.pos;
            buf.put_slice(&self.replay[pos..pos + n]);
            self.pos += n;
            return Poll::Ready(Ok(()));
        }
        on_wire!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for PrefacedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        on_wire!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        on_wire!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        on_wire!(self, s => Pin::new(s).poll_shutdown(cx))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        on_wire!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match &self.inner {
            Wire::Plain(s) => s.is_write_vectored(),
            Wire::Tls(s) => s.is_write_vectored(),
        }
    }
}

impl Connected for PrefacedStream {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        ConnInfo {
            tcp: self.inner.tcp().connect_info(),
            hello: self
                .watch
                .as_ref()
                .map(|w| w.seen.clone())
                .unwrap_or_default(),
            peer_cert: self.inner.peer_cert(),
        }
    }
}

/// Reads the preface; `Ok(None)` when the peer sent something else or
/// closed early.
async fn read_preface(mut s: Wire) -> io::Result<Option<PrefacedStream>> {
    let mut buf = [0u8; 24];
    let mut n = 0;
    while n < buf.len() {
        let got = match &mut s {
            Wire::Plain(t) => t.read(&mut buf[n..]).await?,
            Wire::Tls(t) => t.read(&mut buf[n..]).await?,
        };
        if got == 0 {
            return Ok(None);
        }
        n += got;
        // Reject at the first wrong byte rather than waiting for 24.
        if !preface_prefix_ok(&buf[..n]) {
            return Ok(None);
        }
    }
    Ok(Some(PrefacedStream {
        replay: buf,
        pos: 0,
        inner: s,
        watch: None,
    }))
}

/// The acceptor's settings.
#[derive(Debug, Clone)]
pub struct AcceptPolicy {
    /// Time to send the HTTP/2 preface.
    pub preface_timeout: Duration,
    /// Time to open a stream with an accepted Hello.
    pub hello_timeout: Duration,
    /// Connection caps.
    pub limits: Arc<ConnLimits>,
    /// Places of the connections without an accepted Hello.
    pub pending: Arc<PendingGate>,
    /// TLS, when configured: every connection must complete a handshake.
    pub tls: Option<Arc<Tls>>,
}

/// The handshake (with TLS) and the preface, in one timeout.
async fn open(
    stream: TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> io::Result<Option<PrefacedStream>> {
    let wire = match tls {
        None => Wire::Plain(stream),
        Some(acceptor) => match acceptor.accept(stream).await {
            Ok(s) => Wire::Tls(Box::new(s)),
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "TLS handshake failed ({e}); a plaintext agent needs https:// and --tls-ca"
                    ),
                ))
            }
        },
    };
    read_preface(wire).await
}

/// Accepts connections until `shutdown` turns true, sending the good ones
/// to `out` (tonic's incoming stream).
pub async fn accept_loop(
    listener: TcpListener,
    policy: AcceptPolicy,
    metrics: SharedMetrics,
    out: mpsc::Sender<io::Result<PrefacedStream>>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Bounded by the listener: one turn per accepted connection, and a
    // failed accept waits before the next.
    loop {
        let (stream, peer) = tokio::select! {
            _ = crate::accept::stopped(&mut shutdown) => return,
            x = crate::accept::next(&listener, "gRPC") => x,
        };
        if let Some(admitted) = admit(&policy, &metrics, peer) {
            let _ = stream.set_nodelay(true);
            let slot = admitted.0;
            spawn_open(&policy, &metrics, &out, stream, slot, admitted.1);
        }
    }
}

/// The connection's slot and pending place, or `None` (counted and
/// logged) when a cap closes it at once.
fn admit(
    policy: &AcceptPolicy,
    metrics: &SharedMetrics,
    peer: std::net::SocketAddr,
) -> Option<(Slot, Admitted)> {
    let slot = match policy.limits.acquire(peer.ip()) {
        Ok(s) => s,
        Err(why) => {
            metrics.lock().on_ingest_error("connection_limit");
            tracing::info!(%peer, ?why, "gRPC connection over the cap closed");
            return None;
        }
    };
    let admitted = match policy.pending.admit(peer.ip()) {
        Ok(a) => a,
        Err(why) => {
            let kind = match why {
                Refused::Address => "pending_per_address",
                Refused::Full => "pending_full",
            };
            metrics.lock().on_ingest_error(kind);
            tracing::info!(%peer, ?why, "gRPC connection without a pending place closed");
            return None;
        }
    };
    if admitted.displaced {
        metrics.lock().on_ingest_error("pending_evicted");
        tracing::info!(%peer, "pending gate full: the oldest connection of the largest source evicted");
    }
    Some((slot, admitted))
}

/// Reads the connection's handshake and preface in a task of its own,
/// within the preface timeout and until its pending place is evicted,
/// then hands it to `out` watched for its Hello.
fn spawn_open(
    policy: &AcceptPolicy,
    metrics: &SharedMetrics,
    out: &mpsc::Sender<io::Result<PrefacedStream>>,
    stream: TcpStream,
    slot: Slot,
    admitted: Admitted,
) {
    let metrics = metrics.clone();
    let out = out.clone();
    let timeout = policy.preface_timeout;
    let hello_deadline = tokio::time::Instant::now() + policy.hello_timeout;
    let tls = policy.tls.as_ref().map(|t| t.acceptor());
    let peer = stream.peer_addr().ok();
    let Admitted {
        ticket,
        mut evicted,
        ..
    } = admitted;
    tokio::spawn(async move {
        let outcome = tokio::select! {
            r = tokio::time::timeout(timeout, open(stream, tls)) => r,
            // Counted when it was evicted.
            _ = &mut evicted => return,
        };
        match outcome {
            Ok(Ok(Some(mut s))) => {
                s.watch = Some(HelloWatch {
                    seen: HelloSeen::pending(ticket),
                    deadline: Box::pin(tokio::time::sleep_until(hello_deadline)),
                    evicted,
                    metrics,
                    _slot: slot,
                });
                let _ = out.send(Ok(s)).await;
            }
            outcome => {
                let why = match outcome {
                    Err(_) => "timeout".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    _ => "not an HTTP/2 preface".to_string(),
                };
                metrics.lock().on_malformed_connection();
                tracing::info!(?peer, why, "closed malformed gRPC connection");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_check() {
        assert!(preface_prefix_ok(b""));
        assert!(preface_prefix_ok(b"PRI * HT"));
        assert!(preface_prefix_ok(PREFACE));
        assert!(!preface_prefix_ok(b"GET / HTTP/1.1\r\n"));
        assert!(!preface_prefix_ok(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nX"));
    }

    #[tokio::test]
    async fn preface_is_replayed_and_garbage_refused() {
        use tokio::io::AsyncWriteExt;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(PREFACE).await.unwrap();
        c.write_all(b"rest").await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        let mut p = read_preface(Wire::Plain(s))
            .await
            .unwrap()
            .expect("valid preface");
        let mut got = vec![0u8; 28];
        p.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..24], PREFACE);
        assert_eq!(&got[24..], b"rest");

        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        assert!(read_preface(Wire::Plain(s)).await.unwrap().is_none());
    }
}
