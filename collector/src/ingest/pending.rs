//! The pending gate of the gRPC port: connections that have not yet had a
//! stream's Hello accepted (TLS handshake, HTTP/2 preface, Hello) hold a
//! place in it. Pure bookkeeping; the acceptor ([`super::preface`]) asks
//! for a [`Ticket`] per new connection, and a connection ends itself when
//! its ticket is evicted.
//!
//! Why per address and with eviction: 40 addresses x 32 connections that
//! sent only `PRI` filled a gate of 256 places, and real agents waited
//! behind them in the kernel backlog until the preface deadline freed
//! places. Now one address holds at most `max_pending_per_address` places
//! (a newcomer beyond that is refused at once), so a few sources cannot
//! fill the gate; and when many sources fill it anyway, a newcomer takes
//! the place of the oldest connection of the source holding the most,
//! instead of waiting. A newcomer whose own source holds as many as any
//! is refused instead: evicting for it would gain no fairness, and in a
//! burst of agents behind one address would only cut handshakes nearly
//! done. A legitimate agent holds one place for the
//! milliseconds before its Hello, so its own source is the smallest and
//! its connection the newest: it is evicted only when every pending source
//! holds a single place and [`PENDING_LIMIT`] newer connections arrived
//! before its Hello did.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// Places in the gate: connections without an accepted Hello at once.
pub const PENDING_LIMIT: usize = 256;

/// The places and who holds them.
#[derive(Debug)]
pub struct PendingGate {
    max_total: usize,
    max_per_address: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Hands out ticket ids in arrival order, so the smallest is oldest.
    next_id: u64,
    total: usize,
    /// Per address, its pending connections by id, each with the sender
    /// whose drop tells the connection it was evicted.
    by_address: HashMap<IpAddr, BTreeMap<u64, oneshot::Sender<()>>>,
}

/// Why a connection got no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its address holds `max_pending_per_address` places already.
    Address,
    /// The gate is full and no source holds more places than its own.
    Full,
}

/// A place granted: the ticket, the signal of its eviction, and whether
/// another connection was evicted to make room.
#[derive(Debug)]
pub struct Admitted {
    /// Held until the connection's Hello is accepted or it ends.
    pub ticket: Ticket,
    /// Completes (with an error) once this connection was evicted.
    pub evicted: oneshot::Receiver<()>,
    /// Whether another pending connection lost its place to this one.
    pub displaced: bool,
}

impl PendingGate {
    /// At most `max_total` places, `max_per_address` for one address.
    pub fn new(max_total: usize, max_per_address: usize) -> Arc<PendingGate> {
        Arc::new(PendingGate {
            max_total: max_total.max(1),
            max_per_address,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a new connection from `ip`, evicting the oldest
    /// connection of the source holding the most places when the gate is
    /// full.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refused> {
        let mut s = self.state();
        let held = s.by_address.get(&ip).map_or(0, BTreeMap::len);
        if held >= self.max_per_address {
            return Err(Refused::Address);
        }
        let displaced = s.total >= self.max_total;
        if displaced && !s.evict_one(held) {
            return Err(Refused::Full);
        }
        let id = s.next_id;
        s.next_id += 1;
        let (tx, rx) = oneshot::channel();
        s.by_address.entry(ip).or_default().insert(id, tx);
        s.total += 1;
        Ok(Admitted {
            ticket: Ticket {
                gate: Arc::clone(self),
                ip,
                id,
            },
            evicted: rx,
            displaced,
        })
    }

    /// Connections holding a place now.
    pub fn pending(&self) -> usize {
        self.state().total
    }
}

impl State {
    /// Evicts the oldest connection of the source holding the most places
    /// (of those, the one whose oldest is oldest), if it holds more than
    /// `newcomer_holds`; whether one was.
    fn evict_one(&mut self, newcomer_holds: usize) -> bool {
        let victim = self
            .by_address
            .iter()
            .filter_map(|(ip, held)| Some((held.len(), *held.keys().next()?, *ip)))
            .max_by_key(|(n, oldest, _)| (*n, std::cmp::Reverse(*oldest)));
        let Some((n, id, ip)) = victim.filter(|(n, ..)| *n > newcomer_holds) else {
            return false;
        };
        debug_assert!(n > 0);
        // Dropping the sender is the signal.
        self.remove(ip, id).is_some()
    }

    fn remove(&mut self, ip: IpAddr, id: u64) -> Option<oneshot::Sender<()>> {
        let held = self.by_address.get_mut(&ip)?;
        let tx = held.remove(&id)?;
        if held.is_empty() {
            self.by_address.remove(&ip);
        }
        self.total -= 1;
        Some(tx)
    }
}

/// One pending connection's place, given back when dropped (a no-op when
/// the connection was evicted).
#[derive(Debug)]
pub struct Ticket {
    gate: Arc<PendingGate>,
    ip: IpAddr,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.gate.state().remove(self.ip, self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn evicted(a: &mut Admitted) -> bool {
        a.evicted.try_recv() == Err(oneshot::error::TryRecvError::Closed)
    }

    #[test]
    fn one_address_holds_at_most_its_share_and_gets_it_back() {
        let g = PendingGate::new(10, 2);
        let a1 = g.admit(ip("127.0.0.2")).unwrap();
        let _a2 = g.admit(ip("127.0.0.2")).unwrap();
        assert_eq!(g.admit(ip("127.0.0.2")).unwrap_err(), Refused::Address);
        assert!(g.admit(ip("127.0.0.3")).is_ok());
        drop(a1);
        assert!(g.admit(ip("127.0.0.2")).is_ok());
    }

    #[test]
    fn a_full_gate_refuses_a_newcomer_of_the_largest_source() {
        let g = PendingGate::new(3, 5);
        let mut a: Vec<_> = (0..2).map(|_| g.admit(ip("127.0.0.2")).unwrap()).collect();
        let _b = g.admit(ip("127.0.0.3")).unwrap();
        assert_eq!(g.admit(ip("127.0.0.2")).unwrap_err(), Refused::Full);
        assert!(!evicted(&mut a[0]));
        // b's second connection does evict: a holds more.
        assert!(g.admit(ip("127.0.0.3")).unwrap().displaced);
        assert!(evicted(&mut a[0]));
    }

    #[test]
    fn a_full_gate_evicts_the_oldest_of_the_largest_source() {
        let g = PendingGate::new(4, 3);
        let mut a = Vec::new();
        for _ in 0..3 {
            a.push(g.admit(ip("127.0.0.2")).unwrap());
        }
        let mut b = g.admit(ip("127.0.0.3")).unwrap();
        assert!(!b.displaced);
        // Full: the agent's newcomer takes the place of a's oldest.
        let mut agent = g.admit(ip("127.0.0.9")).unwrap();
        assert!(agent.displaced);
        assert_eq!(g.pending(), 4);
        assert!(evicted(&mut a[0]), "a's oldest evicted");
        assert!(!evicted(&mut a[1]));
        // Next the largest are a (2), b (1), agent (1): a again, then
        // b, whose only connection is older than the agent's.
        let _n1 = g.admit(ip("127.0.0.4")).unwrap();
        assert!(evicted(&mut a[1]));
        let _n2 = g.admit(ip("127.0.0.5")).unwrap();
        let _n3 = g.admit(ip("127.0.0.6")).unwrap();
        assert!(evicted(&mut a[2]));
        assert!(evicted(&mut b));
        assert!(!evicted(&mut agent));
        // Tickets of evicted connections give back nothing twice.
        drop(a);
        assert_eq!(g.pending(), 4);
        drop(agent);
        assert_eq!(g.pending(), 3);
    }
}
