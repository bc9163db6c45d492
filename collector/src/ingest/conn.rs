//! Connection limits of the gRPC port: how many connections may be open in
//! total and from one address. Pure bookkeeping; the acceptor
//! ([`super::preface`]) holds a [`Slot`] per open connection, released when
//! the connection is dropped however it ends.
//!
//! Why per address as well as in total: 2100 idle connections from one
//! host kept a real agent out. With a per-address cap one host cannot fill
//! the total, and the total bounds memory when many hosts try.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::pending::Ticket;

/// The caps and the current counts.
#[derive(Debug)]
pub struct ConnLimits {
    max_total: usize,
    max_per_address: usize,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// Why a connection was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `max_connections` are open.
    Total,
    /// `max_connections_per_address` are open from this address.
    Address,
}

impl ConnLimits {
    /// At most `max_total` connections, `max_per_address` from one address.
    pub fn new(max_total: usize, max_per_address: usize) -> Arc<ConnLimits> {
        Arc::new(ConnLimits {
            max_total,
            max_per_address,
            open: Mutex::new((0, HashMap::new())),
        })
    }

    /// A slot for a new connection from `ip`, if the caps allow one.
    pub fn acquire(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Refused> {
        let mut g = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let (total, per) = &mut *g;
        if *total >= self.max_total {
            return Err(Refused::Total);
        }
        let n = per.entry(ip).or_default();
        if *n >= self.max_per_address {
            return Err(Refused::Address);
        }
        *n += 1;
        *total += 1;
        Ok(Slot {
            limits: Arc::clone(self),
            ip,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).0
    }
}

/// One open connection's share of the caps.
#[derive(Debug)]
pub struct Slot {
    limits: Arc<ConnLimits>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut g = self.limits.open.lock().unwrap_or_else(|p| p.into_inner());
        let (total, per) = &mut *g;
        *total -= 1;
        if let Some(n) = per.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.ip);
            }
        }
    }
}

/// Set once a stream on the connection sent a valid, authorised Hello;
/// until then the connection is closed after `hello_timeout`, and holds
/// its place in the pending gate ([`super::pending`]), given back here.
/// Reaches the service as the connection's connect info (a request
/// extension).
#[derive(Debug, Clone, Default)]
pub struct HelloSeen(Arc<AtomicBool>, Arc<Mutex<Option<Ticket>>>);

impl HelloSeen {
    /// A connection not yet accepted, holding `ticket` until it is (or
    /// until [`HelloSeen::release`]).
    pub fn pending(ticket: Ticket) -> HelloSeen {
        HelloSeen(Arc::default(), Arc::new(Mutex::new(Some(ticket))))
    }

    /// Marks the connection as carrying an accepted stream, and gives its
    /// place in the pending gate back.
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
        self.release();
    }

    /// Gives the place in the pending gate back (the connection ended).
    pub fn release(&self) {
        let ticket = self.1.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(ticket);
    }

    /// Whether a stream on it was accepted.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_total_and_per_address_and_releases_on_drop() {
        let l = ConnLimits::new(3, 2);
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let a1 = l.acquire(a).unwrap();
        let _a2 = l.acquire(a).unwrap();
        assert_eq!(l.acquire(a).unwrap_err(), Refused::Address);
        let _b1 = l.acquire(b).unwrap();
        assert_eq!(l.acquire(b).unwrap_err(), Refused::Total);
        drop(a1);
        assert_eq!(l.open(), 2);
        let _a3 = l.acquire(a).unwrap();
        assert_eq!(l.open(), 3);
    }
}
