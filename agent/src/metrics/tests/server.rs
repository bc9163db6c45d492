//! The `/metrics` port on a real loopback socket: gzip when asked, only
//! `GET /metrics`, oversized headers refused, and no more connections at
//! once than its limit.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::hello;
use crate::metrics::server::{serve, Limits, MAX_HEADER_BYTES};
use crate::metrics::NodeMetrics;

async fn start(limits: Limits) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(serve(l, NodeMetrics::new(&hello()), limits));
    addr
}

/// Sends `request` on a new connection, returns all it got back.
async fn exchange(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    // A refused request may be cut off mid-write, or reset.
    let _ = s.write_all(request).await;
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    buf
}

fn head(response: &[u8]) -> String {
    let end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(response.len());
    String::from_utf8_lossy(&response[..end]).to_ascii_lowercase()
}

#[tokio::test]
async fn gzip_when_asked_and_only_get_metrics() {
    let addr = start(Limits::default()).await;
    let plain = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(head(&plain).starts_with("http/1.1 200"), "{}", head(&plain));
    assert!(head(&plain).contains("content-type: text/plain; version=0.0.4"));
    let text = String::from_utf8_lossy(&plain);
    assert!(text.contains("boltwatch_agent_info{node=\"n1\""), "{text}");

    let gz = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n";
    let gz = exchange(addr, gz).await;
    let h = head(&gz);
    assert!(
        h.starts_with("http/1.1 200") && h.contains("content-encoding: gzip"),
        "{h}"
    );
    let body = &gz[h.len() + 4..];
    assert_eq!(&body[..2], &[0x1f, 0x8b], "gzip magic");

    let other = exchange(addr, b"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(head(&other).starts_with("http/1.1 404"), "{}", head(&other));
    let post = b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    let post = exchange(addr, post).await;
    assert!(head(&post).starts_with("http/1.1 405"), "{}", head(&post));

    let filler = "y".repeat(8 * MAX_HEADER_BYTES);
    let huge = format!("GET /metrics HTTP/1.1\r\nHost: x\r\nX: {filler}\r\n\r\n");
    let refused = exchange(addr, huge.as_bytes()).await;
    // 431, or a reset that lost it: never the exposition.
    assert!(
        refused.is_empty() || head(&refused).starts_with("http/1.1 431"),
        "{}",
        head(&refused)
    );
}

#[tokio::test]
async fn no_more_connections_at_once_than_the_limit() {
    let limits = Limits {
        connections: 3,
        // Idle connections hold their slots for the whole test.
        header_timeout: Duration::from_secs(3600),
        connection_timeout: Duration::from_secs(3600),
    };
    let addr = start(limits).await;
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    // Accepted after the three (one accept loop, in order): closed unanswered.
    let refused = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(refused.is_empty(), "{}", head(&refused));
    // Closing them frees the slots (once the server has seen them close).
    drop(idle);
    let mut answered = false;
    for _ in 0..600 {
        let r = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        if head(&r).starts_with("http/1.1 200") {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        answered,
        "no slot came free after the idle connections closed"
    );
}
