//! TCP connect checks of peer services (SSH by default): up or down, and how
//! long the connection took. A soak's "SSH availability 100%" comes from
//! these records and the service outages they open in the outage tracker.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use boltwatch_proto::v1::{record::Payload, ServiceCheck};

use crate::sink::{Observer, Sink};

/// What to check.
#[derive(Debug, Clone)]
pub struct ServiceTarget {
    /// Peer node name.
    pub peer: String,
    /// Service name.
    pub service: String,
    /// Address to connect to.
    pub addr: SocketAddr,
}

/// One check: connect with a timeout and close at once.
pub async fn check(target: &ServiceTarget, timeout: Duration) -> ServiceCheck {
    let start = Instant::now();
    let result = tokio::time::timeout(timeout, tokio::net::TcpStream::connect(target.addr)).await;
    let (up, connect_ns, error) = match result {
        Ok(Ok(_stream)) => (true, start.elapsed().as_nanos() as u64, String::new()),
        Ok(Err(e)) => (false, 0, e.to_string()),
        Err(_) => (false, 0, format!("no answer within {timeout:?}")),
    };
    ServiceCheck {
        peer: target.peer.clone(),
        service: target.service.clone(),
        address: target.addr.to_string(),
        up,
        connect_ns,
        error,
    }
}

/// The service address of a peer: its probe IP with the service port.
pub fn service_addr(peer_ip: IpAddr, port: u16) -> SocketAddr {
    SocketAddr::new(peer_ip, port)
}

/// A service found up or down, at the first check or the other way than
/// at the check before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceChange {
    /// Service name.
    pub service: String,
    /// Up now.
    pub up: bool,
    /// When checked, on the agent's timeline ([`crate::clock`]).
    pub at_unix_ns: u64,
}

/// Checks `target` every `every` until the task is dropped, emitting each
/// result and telling `observer` of every change.
pub async fn watch(
    target: ServiceTarget,
    every: Duration,
    sink: Sink,
    observer: Observer<ServiceChange>,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<bool> = None;
    loop {
        tick.tick().await;
        let at = crate::clock::now_ns();
        let r = check(&target, every.min(Duration::from_secs(3))).await;
        if last != Some(r.up) {
            observer.observe(ServiceChange {
                service: r.service.clone(),
                up: r.up,
                at_unix_ns: at,
            });
            last = Some(r.up);
        }
        sink.emit_at(crate::clock::read().to_unix(at), Payload::Service(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn up_when_listening_down_when_not() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let t = ServiceTarget {
            peer: "b".into(),
            service: "ssh".into(),
            addr,
        };
        let up = check(&t, Duration::from_secs(5)).await;
        assert!(up.up, "{up:?}");
        assert!(up.connect_ns > 0);
        drop(l);
        let down = check(&t, Duration::from_secs(5)).await;
        assert!(!down.up);
        assert!(!down.error.is_empty());
    }
}
