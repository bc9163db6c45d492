//! What the probe does with each completion: the receive side of the
//! ping-pong (check, count, echo) and of a send-bandwidth burst (grant,
//! count, tally), and the receive frames kept posted. Pure, like
//! [`Probe`]'s state machine it belongs to.

use std::time::Duration;

use super::frame::{self, split, Frame, Kind, PAGE, SMALL};
use super::port::{Completion, Port};
use super::probe::{ErrorClass, Outcome, Probe, RECV_DEPTH};

impl Probe {
    pub(super) fn completion(
        &mut self,
        port: &mut dyn Port,
        c: Completion,
        now: Duration,
        out: &mut Vec<Outcome>,
    ) {
        match c {
            // A successful send completion proves nothing: only the peer's
            // answer does.
            Completion::Send { ok: true } => {}
            Completion::Send { ok: false } => {
                out.push(Outcome::Error(ErrorClass::CompletionStatus));
            }
            Completion::Recv { ok: false, .. } => {
                self.posted = self.posted.saturating_sub(1);
                out.push(Outcome::Error(ErrorClass::CompletionStatus));
                self.top_up(port, out);
            }
            Completion::Recv { ok: true, data } => {
                self.recv_frames += 1;
                self.posted = self.posted.saturating_sub(1);
                match frame::decode(&data) {
                    Ok(f) => self.received(port, f, now, out),
                    Err(_) => {
                        self.top_up(port, out);
                        out.push(Outcome::Error(ErrorClass::CrcMismatch));
                    }
                }
            }
        }
    }

    /// Keeps `RECV_DEPTH` receive frames posted plus what a burst granted,
    /// so the peer never sends into an empty receive queue (Apple's
    /// equal-frame rule). Never posts beyond that.
    fn top_up(&mut self, port: &mut dyn Port, out: &mut Vec<Outcome>) {
        let want = RECV_DEPTH + self.rx.credit();
        if self.posted >= want {
            return;
        }
        match port.post_recv(want - self.posted) {
            Ok(()) => self.posted = want,
            Err(e) => out.push(Outcome::Error(ErrorClass::of(&e))),
        }
    }

    /// A frame that passed its CRC. The receive credit changes first and
    /// the frames are posted before any answer leaves, since the answer
    /// lets the peer send.
    fn received(&mut self, port: &mut dyn Port, f: Frame, now: Duration, out: &mut Vec<Outcome>) {
        let grant = match f.kind {
            Kind::Ask => Some(self.rx.ask(split(f.seq).0, split(f.seq).1)),
            Kind::Data => {
                self.rx.data();
                None
            }
            _ => None,
        };
        self.top_up(port, out);
        match f.kind {
            Kind::Warm | Kind::Ping => self.echo(port, &f, now, out),
            Kind::Pong => self.pong(port, f.seq, now, out),
            Kind::Ask => {
                let id = split(f.seq).0;
                let n = frame::control(id, grant.unwrap_or(0));
                // The data and the next ask come right behind.
                if self.send(port, Kind::Go, n, SMALL, out) {
                    self.spin(now);
                }
            }
            Kind::Go => self.go(port, f.seq, now, out),
            Kind::Data => {}
            Kind::Done => {
                let id = split(f.seq).0;
                if let Some(good) = self.rx.done(id) {
                    self.send(port, Kind::Tally, frame::control(id, good), SMALL, out);
                }
            }
            Kind::Tally => self.tally(f.seq, now, out),
        }
    }

    /// Echoes a ping of the peer's; after a warm-up, polls closely for the
    /// measured ping right behind it.
    fn echo(&mut self, port: &mut dyn Port, f: &Frame, now: Duration, out: &mut Vec<Outcome>) {
        self.ping_seen(f.seq, out);
        self.awaiting_ping = f.kind == Kind::Warm;
        if self.send(port, Kind::Pong, f.seq, f.size, out) && self.awaiting_ping {
            self.spin(now);
        }
    }

    fn pong(&mut self, port: &mut dyn Port, seq: u64, now: Duration, out: &mut Vec<Outcome>) {
        // A late pong (its ping already counted lost) is not a measurement.
        let Some(o) = self.outstanding.filter(|o| o.seq == seq) else {
            return;
        };
        self.outstanding = None;
        if o.warm {
            return self.measured(port, now, out);
        }
        out.push(Outcome::Rtt {
            size: o.size,
            rtt: now.saturating_sub(o.sent),
        });
    }

    /// The peer granted receive frames for our burst: send that many data
    /// frames and the next ask (or the end).
    fn go(&mut self, port: &mut dyn Port, number: u64, now: Duration, out: &mut Vec<Outcome>) {
        let (id, count) = split(number);
        let Some(b) = self.burst.as_mut().filter(|b| b.id() == id) else {
            return;
        };
        let (data, (kind, n)) = b.go(count, now);
        for i in data {
            if !self.send(port, Kind::Data, i, PAGE, out) {
                break;
            }
        }
        if self.send(port, kind, n, SMALL, out) {
            self.spin(now);
        }
    }

    fn tally(&mut self, number: u64, now: Duration, out: &mut Vec<Outcome>) {
        let (id, good) = split(number);
        let Some(b) = self.burst.as_ref().filter(|b| b.id() == id) else {
            return;
        };
        out.push(Outcome::Burst(b.tally(good, now)));
        self.end_burst(now);
    }

    /// The peer's pings come one per interval with consecutive numbers: a
    /// jump means frames vanished on the way in with no error anywhere.
    fn ping_seen(&mut self, seq: u64, out: &mut Vec<Outcome>) {
        if seq > self.last_ping + 1 && self.last_ping != 0 {
            out.push(Outcome::Error(ErrorClass::SequenceGap));
        }
        self.last_ping = self.last_ping.max(seq);
    }
}
