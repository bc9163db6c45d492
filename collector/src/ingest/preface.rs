//! The gRPC port's front door: accepts TCP connections, reads the HTTP/2
//! client preface with a timeout and hands good connections to tonic with
//! the preface replayed. Anything else (port scanners, a browser, a
//! misconfigured agent speaking HTTP/1) is counted in
//! `boltwatch_ingest_malformed_connections_total` and closed, instead of
//! costing hyper a connection task and an error log line.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::export::SharedMetrics;

/// The HTTP/2 client connection preface (RFC 9113 section 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Connections allowed to be mid-preface at once; beyond this, new ones wait
/// in the kernel backlog.
const PENDING_LIMIT: usize = 256;

/// Whether the bytes read so far can still be the start of the preface.
pub fn preface_prefix_ok(read: &[u8]) -> bool {
    read.len() <= PREFACE.len() && PREFACE.starts_with(read)
}

/// A TCP connection whose first 24 bytes (the preface) were already read;
/// they are replayed before the rest of the stream.
#[derive(Debug)]
pub struct PrefacedStream {
    replay: [u8; 24],
    pos: usize,
    inner: TcpStream,
}

impl AsyncRead for PrefacedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pos < self.replay.len() {
            let n = (self.replay.len() - self.pos).min(buf.remaining());
            let pos = self.pos;
            buf.put_slice(&self.replay[pos..pos + n]);
            self.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for PrefacedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl Connected for PrefacedStream {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.inner.connect_info()
    }
}

/// Reads the preface; `Ok(None)` when the peer sent something else or
/// closed early.
async fn read_preface(mut s: TcpStream) -> io::Result<Option<PrefacedStream>> {
    let mut buf = [0u8; 24];
    let mut n = 0;
    while n < buf.len() {
        let got = s.read(&mut buf[n..]).await?;
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
    }))
}

/// Accepts connections until `shutdown` turns true, sending the good ones
/// to `out` (tonic's incoming stream).
pub async fn accept_loop(
    listener: TcpListener,
    timeout: Duration,
    metrics: SharedMetrics,
    out: mpsc::Sender<io::Result<PrefacedStream>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let pending = Arc::new(Semaphore::new(PENDING_LIMIT));
    loop {
        let permit = tokio::select! {
            _ = super::stopped(&mut shutdown) => return,
            p = pending.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = super::stopped(&mut shutdown) => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "gRPC accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let metrics = metrics.clone();
        let out = out.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(timeout, read_preface(stream)).await {
                Ok(Ok(Some(s))) => {
                    let _ = out.send(Ok(s)).await;
                }
                outcome => {
                    let why = match outcome {
                        Err(_) => "timeout".to_string(),
                        Ok(Err(e)) => e.to_string(),
                        _ => "not an HTTP/2 preface".to_string(),
                    };
                    metrics.lock().on_malformed_connection();
                    tracing::info!(%peer, why, "closed malformed gRPC connection");
                }
            }
        });
    }
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
        let mut p = read_preface(s).await.unwrap().expect("valid preface");
        let mut got = vec![0u8; 28];
        p.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..24], PREFACE);
        assert_eq!(&got[24..], b"rest");

        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        assert!(read_preface(s).await.unwrap().is_none());
    }
}
