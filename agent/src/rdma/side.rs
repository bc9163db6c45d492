//! The dead-peer side channel: each agent answers beats on
//! `rdma.side_port` (TCP) and beats each RDMA peer's agent once per
//! `rdma.interval`. A peer whose agent stops answering is an RDMA outage
//! with cause (`Outcome::PeerDead`), not a probe waiting on a completion
//! that never comes.
//!
//! A connection carries one beat each way ([`super::beat`], 16 bytes), or
//! one hello each way ([`super::hello`], 32 bytes): the queue-pair
//! exchange before RTR. A hello is answered only when it comes from a
//! peer's address this agent has a local hello for (its own QP towards
//! that peer), and the peer's is kept for the probe of that link.
//! Anything else (a port scan, an HTTP request, a slow sender) is read at
//! most 16 bytes for at most [`READ_TIMEOUT`], counted in `refused` and
//! closed with nothing written: the answer is always this agent's own
//! beat, never bytes it received. At most [`MAX_CONNECTIONS`] are served
//! at once; more are closed at accept, counted too. The count is logged at
//! its 1st, 2nd, 4th, 8th... refusal (not a metric yet).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::timeout;
use tracing::warn;

use super::beat;
use super::hello::{self, Hello};

/// Longest a connection may take to deliver its 16 bytes.
pub const READ_TIMEOUT: Duration = Duration::from_millis(500);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 8;

/// What the side channel knows, shared by the server, the beaters and the
/// probes.
#[derive(Debug, Default)]
pub struct Side {
    heard: Mutex<HashMap<String, Instant>>,
    beats: AtomicU64,
    refused: AtomicU64,
    answered: AtomicU64,
    /// Our hello towards each peer address (set once our QP exists).
    locals: Mutex<HashMap<IpAddr, Hello>>,
    /// Each peer address's hello, as received.
    remotes: Mutex<HashMap<IpAddr, Hello>>,
}

impl Side {
    /// When `peer`'s agent last answered a beat.
    pub fn heard(&self, peer: &str) -> Option<Instant> {
        self.heard.lock().expect("side lock").get(peer).copied()
    }

    /// Connections refused (not a beat, too slow, over the limit).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Beats answered to peers.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// Offers `local` (our QP towards the peer at `ip`) on the exchange.
    pub fn offer(&self, ip: IpAddr, local: Hello) {
        self.locals.lock().expect("side lock").insert(ip, local);
    }

    /// Our hello towards the peer at `ip`, once offered.
    pub fn local(&self, ip: IpAddr) -> Option<Hello> {
        self.locals.lock().expect("side lock").get(&ip).copied()
    }

    /// The hello the peer at `ip` sent, once it did.
    pub fn remote(&self, ip: IpAddr) -> Option<Hello> {
        self.remotes.lock().expect("side lock").get(&ip).copied()
    }

    fn keep(&self, ip: IpAddr, h: Hello) {
        self.remotes.lock().expect("side lock").insert(ip, h);
    }

    /// Counts a refused connection; says so at the 1st, 2nd, 4th, 8th..., so
    /// a scan is visible in the log without flooding it.
    fn refuse(&self, why: &str) {
        let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            warn!(
                refused = n,
                why, "RDMA side channel refused a connection (not a beat or an expected hello)"
            );
        }
    }

    fn next_beat(&self) -> [u8; beat::LEN] {
        beat::encode(self.beats.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

/// Answers beats on `listener` until dropped.
pub async fn serve(listener: TcpListener, side: Arc<Side>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((conn, from)) = listener.accept().await else {
            // Out of descriptors and the like: do not spin on it.
            tokio::time::sleep(READ_TIMEOUT).await;
            continue;
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            side.refuse("over the connection limit");
            continue;
        };
        let side = Arc::clone(&side);
        tokio::spawn(async move {
            answer(conn, from.ip(), &side).await;
            drop(slot);
        });
    }
}

async fn answer(mut conn: TcpStream, from: IpAddr, side: &Side) {
    let mut buf = [0u8; beat::LEN];
    let got = timeout(READ_TIMEOUT, conn.read_exact(&mut buf)).await;
    match got {
        Ok(Ok(_)) if beat::decode(&buf).is_some() => {}
        Ok(Ok(_)) if hello::starts(&buf) => return answer_hello(conn, from, buf, side).await,
        Ok(Ok(_)) => return side.refuse("not a beat"),
        Ok(Err(_)) => return side.refuse("closed before 16 bytes"),
        Err(_) => return side.refuse("too slow"),
    }
    if conn.write_all(&side.next_beat()).await.is_ok() {
        side.answered.fetch_add(1, Ordering::Relaxed);
    }
}

/// The rest of a hello whose head is `head`: kept and answered with ours
/// when it is valid and we have one for `from`; refused otherwise.
async fn answer_hello(mut conn: TcpStream, from: IpAddr, head: [u8; hello::HEAD], side: &Side) {
    let mut buf = [0u8; hello::LEN];
    buf[..hello::HEAD].copy_from_slice(&head);
    let rest = timeout(READ_TIMEOUT, conn.read_exact(&mut buf[hello::HEAD..])).await;
    if !matches!(rest, Ok(Ok(_))) {
        return side.refuse("hello cut short");
    }
    let Ok(theirs) = hello::decode(&buf) else {
        return side.refuse("invalid hello");
    };
    let ours = side.locals.lock().expect("side lock").get(&from).copied();
    let Some(ours) = ours.and_then(|h| hello::encode(&h).ok()) else {
        return side.refuse("hello from an address with no queue pair of ours");
    };
    side.keep(from, theirs);
    if conn.write_all(&ours).await.is_ok() {
        side.answered.fetch_add(1, Ordering::Relaxed);
    }
}

/// Sends our hello to the peer's agent at `addr` once and keeps its
/// answer: true when a valid hello came back within `limit`.
pub async fn exchange_once(addr: SocketAddr, ours: &Hello, side: &Side, limit: Duration) -> bool {
    let Ok(bytes) = hello::encode(ours) else {
        return false;
    };
    let exchange = async {
        let mut conn = TcpStream::connect(addr).await?;
        conn.write_all(&bytes).await?;
        let mut buf = [0u8; hello::LEN];
        conn.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(hello::decode(&buf).ok())
    };
    match timeout(limit, exchange).await {
        Ok(Ok(Some(theirs))) => {
            side.keep(addr.ip(), theirs);
            true
        }
        _ => false,
    }
}

/// Beats `peer`'s agent at `addr` once: true when it answered with a beat
/// within `limit`.
pub async fn beat_once(addr: SocketAddr, side: &Side, limit: Duration) -> bool {
    let exchange = async {
        let mut conn = TcpStream::connect(addr).await?;
        conn.write_all(&side.next_beat()).await?;
        let mut buf = [0u8; beat::LEN];
        conn.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(beat::decode(&buf).is_some())
    };
    matches!(timeout(limit, exchange).await, Ok(Ok(true)))
}

/// Beats `peer` at `addr` every `every`, recording each answer.
pub async fn watch(peer: String, addr: SocketAddr, every: Duration, side: Arc<Side>) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if beat_once(addr, &side, every.min(Duration::from_secs(2))).await {
            let mut h = side.heard.lock().expect("side lock");
            h.insert(peer.clone(), Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn server() -> (SocketAddr, Arc<Side>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let side = Arc::new(Side::default());
        tokio::spawn(serve(l, Arc::clone(&side)));
        (addr, side)
    }

    #[tokio::test]
    async fn a_peer_answers_beats_and_a_stranger_is_counted_never_reflected() {
        let (addr, far) = server().await;
        let near = Side::default();
        assert!(beat_once(addr, &near, Duration::from_secs(2)).await);
        assert!(beat_once(addr, &near, Duration::from_secs(2)).await);
        assert_eq!(far.answered(), 2);

        // A stranger's 16 bytes: closed with nothing written back.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut back = Vec::new();
        let n = timeout(Duration::from_secs(2), s.read_to_end(&mut back)).await;
        assert!(matches!(n, Ok(Ok(0)) | Ok(Err(_))), "{n:?} {back:?}");
        // A silent one: refused after the read timeout, nothing written.
        let mut quiet = TcpStream::connect(addr).await.unwrap();
        let n = timeout(Duration::from_secs(2), quiet.read_to_end(&mut back)).await;
        assert!(matches!(n, Ok(Ok(0)) | Ok(Err(_))), "{n:?}");
        assert!(back.is_empty());
        assert_eq!(far.refused(), 2);
        assert_eq!(far.answered(), 2);
    }

    fn hello(qpn: u32) -> Hello {
        let mut gid = [0u8; 16];
        gid[15] = qpn as u8;
        Hello { qpn, psn: 7, gid }
    }

    #[tokio::test]
    async fn hellos_are_exchanged_only_with_an_address_we_have_a_qp_for() {
        let (addr, far) = server().await;
        let near = Side::default();
        let lo = addr.ip();
        // The far side has no QP towards us yet: refused, nothing kept.
        assert!(!exchange_once(addr, &hello(5), &near, Duration::from_secs(2)).await);
        assert_eq!((far.remote(lo), near.remote(lo)), (None, None));
        assert_eq!(far.refused(), 1);
        far.offer(lo, hello(9));
        assert!(exchange_once(addr, &hello(5), &near, Duration::from_secs(2)).await);
        assert_eq!(far.remote(lo), Some(hello(5)));
        assert_eq!(near.remote(lo), Some(hello(9)));
        // A hello's head then garbage: refused, the kept one unchanged.
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut bad = hello::encode(&hello(6)).unwrap();
        bad[8..12].copy_from_slice(&[0, 0, 0, 0]);
        s.write_all(&bad).await.unwrap();
        let mut back = Vec::new();
        let n = timeout(Duration::from_secs(2), s.read_to_end(&mut back)).await;
        assert!(matches!(n, Ok(Ok(0)) | Ok(Err(_))), "{n:?} {back:?}");
        assert_eq!(far.remote(lo), Some(hello(5)));
        assert_eq!(far.refused(), 2);
        // A head alone: cut short after the read timeout.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&bad[..hello::HEAD]).await.unwrap();
        let n = timeout(Duration::from_secs(2), s.read_to_end(&mut back)).await;
        assert!(matches!(n, Ok(Ok(0)) | Ok(Err(_))), "{n:?}");
        assert_eq!(far.refused(), 3);
    }

    #[tokio::test]
    async fn a_dead_peer_is_not_heard() {
        // A port nobody listens on: bind, note, close.
        let addr = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let side = Arc::new(Side::default());
        assert!(!beat_once(addr, &side, Duration::from_millis(500)).await);
        let w = tokio::spawn(watch(
            "b".into(),
            addr,
            Duration::from_millis(100),
            Arc::clone(&side),
        ));
        tokio::time::sleep(Duration::from_millis(350)).await;
        w.abort();
        assert_eq!(side.heard("b"), None);
    }
}
