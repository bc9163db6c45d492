//! The probe against the fake provider: every failure issue 28 lists.

use std::time::Duration;

use super::fake::{self, FakePort, Shared};
use super::frame::{self, FrameError, Kind, PAGE, SMALL};
use super::port::Port;
use super::probe::{Context, ErrorClass, Outcome, Phase, Probe, Settings, Skip};

/// The legacy harness's tick. The spin outlasts it, as the agent's 2 ms
/// spin outlasts its 1 ms tick, so a peer's warm-up echo lands inside it.
const TICK: Duration = Duration::from_millis(50);

fn settings() -> Settings {
    Settings {
        interval: Duration::from_millis(500),
        watchdog: Duration::from_secs(2),
        pong_timeout: Duration::from_secs(1),
        peer_dead_after: Duration::from_secs(3),
        qp_cap: fake::QP_CAP,
        qp_headroom: 1,
        spin: 2 * TICK,
        burst_interval: None,
        burst_frames: 0,
    }
}

/// Both ends of a link, simulated event by event: each side ticks every
/// `tick`, and while its probe asks to spin it also polls at the instant
/// each completion becomes visible (continuous polling, without the
/// steps), so the fake's latency comes out exactly.
struct Pair {
    w: Shared,
    ports: (FakePort, FakePort),
    probes: (Probe, Probe),
    now: Duration,
    tick: Duration,
    next_tick: Duration,
    /// The TCP side channel: each side's view of when the other last spoke.
    heard: [Option<Duration>; 2],
    peer_silent: [bool; 2],
    job: [bool; 2],
    /// Time each side spent spinning, and its longest unbroken spin.
    spun: [Duration; 2],
    longest_spin: [Duration; 2],
    spin_run: [Duration; 2],
    /// Each side's last tick and the spin it asked for then.
    last: [Option<(Duration, Duration)>; 2],
}

impl Pair {
    fn new(w: Shared) -> Self {
        Self::with(w, settings(), TICK)
    }

    fn with(w: Shared, s: Settings, tick: Duration) -> Self {
        Self {
            ports: FakePort::pair(&w),
            w,
            probes: (Probe::new(s.clone()), Probe::new(s)),
            now: Duration::ZERO,
            tick,
            next_tick: tick,
            heard: [None; 2],
            peer_silent: [false; 2],
            job: [false; 2],
            spun: [Duration::ZERO; 2],
            longest_spin: [Duration::ZERO; 2],
            spin_run: [Duration::ZERO; 2],
            last: [None; 2],
        }
    }

    fn probe(&mut self, side: usize) -> (&mut Probe, &mut FakePort) {
        match side {
            0 => (&mut self.probes.0, &mut self.ports.0),
            _ => (&mut self.probes.1, &mut self.ports.1),
        }
    }

    /// When `side` next ticks: the next tick, or while it spins the next
    /// completion it will see (or the spin's end).
    fn wake(&mut self, side: usize) -> Duration {
        let until = self.probe(side).0.spin_until();
        if until <= self.now {
            return self.next_tick;
        }
        let next = self.w.borrow().next_completion(side);
        let at = next.map_or(until, |c| c.max(self.now).min(until));
        at.min(self.next_tick)
    }

    /// Runs `n` ticks; returns each side's outcomes.
    fn run(&mut self, n: u32) -> [Vec<Outcome>; 2] {
        let end = self.now + self.tick * n;
        let mut out = [Vec::new(), Vec::new()];
        for _ in 0..10_000_000 {
            let wake = [self.wake(0), self.wake(1)];
            let t = wake[0].min(wake[1]);
            if t > end {
                return out;
            }
            self.now = t;
            self.w.borrow_mut().now = t;
            for side in 0..2 {
                if !self.peer_silent[1 - side] {
                    self.heard[side] = Some(t);
                }
            }
            for side in (0..2).filter(|&s| wake[s] == t) {
                out[side].extend(self.step(side, t));
            }
            if t == self.next_tick {
                self.next_tick += self.tick;
            }
        }
        panic!("the simulation did not advance");
    }

    fn step(&mut self, side: usize, t: Duration) -> Vec<Outcome> {
        // The spin the last tick left running, up to now or its end.
        if let Some((prev, until)) = self.last[side] {
            if until > prev {
                let d = t.min(until) - prev;
                self.spun[side] += d;
                self.spin_run[side] += d;
                self.longest_spin[side] = self.longest_spin[side].max(self.spin_run[side]);
            }
        }
        let cx = Context {
            peer_heard: self.heard[side],
            job_owns_link: self.job[side],
        };
        let (probe, port) = self.probe(side);
        let out = probe.tick(port, t, cx);
        let until = probe.spin_until();
        if until <= t {
            self.spin_run[side] = Duration::ZERO;
        }
        self.last[side] = Some((t, until));
        out
    }
}

fn rtts(o: &[Outcome]) -> Vec<usize> {
    o.iter()
        .filter_map(|x| match x {
            Outcome::Rtt { size, .. } => Some(*size),
            _ => None,
        })
        .collect()
}

fn errors(o: &[Outcome]) -> Vec<ErrorClass> {
    o.iter()
        .filter_map(|x| match x {
            Outcome::Error(c) => Some(*c),
            _ => None,
        })
        .collect()
}

#[test]
fn frame_round_trips_both_sizes_and_a_flipped_bit_is_a_crc_mismatch() {
    for (seq, size) in [(1, SMALL), (u64::MAX, PAGE)] {
        let f = frame::encode(Kind::Pong, seq, size);
        assert_eq!(f.len(), size);
        let d = frame::decode(&f).unwrap();
        assert_eq!((d.kind, d.seq, d.size), (Kind::Pong, seq, size));
        let mut bad = f.clone();
        bad[size - 10] ^= 1;
        assert_eq!(frame::decode(&bad), Err(FrameError::Crc));
    }
    assert_eq!(frame::decode(&[0; 8]), Err(FrameError::Short(8)));
    use Kind::*;
    for kind in [Ping, Pong, Warm, Ask, Go, Data, Done, Tally] {
        let n = frame::control(0x1234, 4096);
        let d = frame::decode(&frame::encode(kind, n, SMALL)).unwrap();
        assert_eq!((d.kind, frame::split(d.seq)), (kind, (0x1234, 4096)));
    }
    let mut unknown = frame::encode(Ping, 1, SMALL);
    unknown[0] = 9;
    let crc = crc32fast::hash(&unknown[..SMALL - 4]);
    unknown[SMALL - 4..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(frame::decode(&unknown), Err(FrameError::Kind(9)));
}

#[test]
fn healthy_link_sets_up_once_measures_both_sizes_with_equal_frames() {
    let mut p = Pair::new(fake::wire());
    let out = p.run(100);
    assert_eq!(p.probes.0.phase(), Phase::Ready);
    let sizes = rtts(&out[0]);
    assert!(sizes.len() >= 8, "{out:?}");
    assert!(sizes.contains(&SMALL) && sizes.contains(&PAGE));
    assert!(
        errors(&out[0]).is_empty() && errors(&out[1]).is_empty(),
        "{out:?}"
    );
    let w = p.w.borrow();
    // One QP per link, set up once; every frame sent landed in a posted one.
    assert_eq!((w.ends[0].setups, w.ends[1].setups), (1, 1));
    assert_eq!(w.ends[0].sent, w.ends[1].delivered);
    assert_eq!(w.ends[1].sent, w.ends[0].delivered);
    assert_eq!(p.probes.0.frames(), (w.ends[0].sent, w.ends[0].delivered));
}

#[test]
fn rc_queue_pairs_fail_and_the_probe_only_asks_for_uc() {
    let w = fake::wire();
    let (mut a, _) = FakePort::pair(&w);
    assert!(a.create_rc_qp().is_err());
    assert!(a.create_uc_qp().is_ok());
}

#[test]
fn full_qp_budget_fails_set_up_and_near_full_skips_pings() {
    let w = fake::wire();
    w.borrow_mut().ends[0].app_qps = fake::QP_CAP;
    let mut p = Pair::new(w.clone());
    let out = p.run(5);
    assert_eq!(p.probes.0.phase(), Phase::Failed(ErrorClass::PdAlloc));
    assert_eq!(errors(&out[0]), [ErrorClass::PdAlloc]);

    let w = fake::wire();
    let mut p = Pair::new(w.clone());
    p.run(10);
    w.borrow_mut().ends[0].app_qps = fake::QP_CAP - 2; // 1 left with ours
    let out = p.run(40);
    assert!(out[0].contains(&Outcome::Skipped(Skip::QpBudget)));
    assert!(rtts(&out[0]).is_empty());
}

#[test]
fn job_window_skips_and_probing_resumes_after() {
    let mut p = Pair::new(fake::wire());
    p.run(10);
    p.job[0] = true;
    let out = p.run(40);
    assert!(out[0].contains(&Outcome::Skipped(Skip::JobWindow)));
    assert!(rtts(&out[0]).is_empty());
    p.job[0] = false;
    assert!(!rtts(&p.run(40)[0]).is_empty());
}

#[test]
fn port_that_wedges_after_n_set_ups_is_marked_and_never_touched_again() {
    let w = fake::wire();
    w.borrow_mut().ends[0].wedge_after = Some(0);
    let mut p = Pair::new(w.clone());
    let out = p.run(100);
    assert_eq!(p.probes.0.phase(), Phase::Wedged);
    assert_eq!(errors(&out[0]), [ErrorClass::WatchdogTimeout]);
    assert_eq!(out[0].iter().filter(|o| **o == Outcome::Wedged).count(), 1);
    assert_eq!(w.borrow().ends[0].setups, 1, "set up once, never retried");
    assert_eq!(w.borrow().ends[0].sent, 0);
}

#[test]
fn rtr_errnos_classify_and_set_up_is_not_retried() {
    for (errno, class) in [
        (22, ErrorClass::RtrBridgeOn),
        (60, ErrorClass::RtrGidUnreachable),
        (16, ErrorClass::RtrStale),
    ] {
        let w = fake::wire();
        w.borrow_mut().ends[0].rtr_errno = Some(errno);
        let mut p = Pair::new(w.clone());
        let out = p.run(50);
        assert_eq!(errors(&out[0]), [class], "errno {errno}");
        assert_eq!(p.probes.0.phase(), Phase::Failed(class));
        assert_eq!(w.borrow().ends[0].setups, 1);
    }
}

#[test]
fn port_down_and_pd_failure_are_classified() {
    let w = fake::wire();
    w.borrow_mut().ends[0].active = false;
    let mut p = Pair::new(w.clone());
    let out = p.run(3);
    assert_eq!(errors(&out[0]), [ErrorClass::PortDown; 3]);
    assert_eq!(w.borrow().ends[0].setups, 0);
    w.borrow_mut().ends[0].active = true;
    p.run(10);
    assert_eq!(p.probes.0.phase(), Phase::Ready);

    let w = fake::wire();
    w.borrow_mut().ends[1].pd_fails = true;
    let mut p = Pair::new(w);
    assert_eq!(errors(&p.run(3)[1]), [ErrorClass::PdAlloc]);
}

#[test]
fn corrupted_payload_is_a_crc_mismatch_not_an_rtt() {
    let w = fake::wire();
    let mut p = Pair::new(w.clone());
    p.run(20);
    w.borrow_mut().corrupt_next = true;
    let out = p.run(30);
    let all: Vec<_> = errors(&out[0]).into_iter().chain(errors(&out[1])).collect();
    let crc = all
        .iter()
        .filter(|c| **c == ErrorClass::CrcMismatch)
        .count();
    assert_eq!(crc, 1, "{out:?}");
    // The refused frame is never answered: its ping is lost, not measured.
    let lost = out
        .iter()
        .flatten()
        .filter(|o| matches!(o, Outcome::Lost { .. }));
    assert_eq!(lost.count(), 1, "{out:?}");
}

#[test]
fn completion_without_delivery_is_a_loss_and_the_peer_sees_a_gap() {
    let w = fake::wire();
    let mut p = Pair::new(w.clone());
    p.run(20);
    // Drop side 0's next ping on the wire; its send completion still says ok.
    w.borrow_mut().drop_next = true;
    let mut lost = Vec::new();
    let mut gap = Vec::new();
    for _ in 0..20 {
        let out = p.run(5);
        lost.extend(
            out[0]
                .iter()
                .filter(|o| matches!(o, Outcome::Lost { .. }))
                .cloned(),
        );
        lost.extend(
            out[1]
                .iter()
                .filter(|o| matches!(o, Outcome::Lost { .. }))
                .cloned(),
        );
        gap.extend(errors(&out[0]).into_iter().chain(errors(&out[1])));
    }
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert!(gap.contains(&ErrorClass::SequenceGap), "{gap:?}");
}

#[test]
fn vanished_peer_is_an_outage_with_cause_and_the_probe_goes_quiet() {
    let w = fake::wire();
    let mut p = Pair::new(w.clone());
    p.run(20);
    w.borrow_mut().cut = true;
    p.peer_silent[1] = true;
    let out = p.run(100);
    assert_eq!(
        out[0].iter().filter(|o| **o == Outcome::PeerDead).count(),
        1
    );
    let sent = w.borrow().ends[0].sent;
    p.run(100);
    assert_eq!(w.borrow().ends[0].sent, sent, "no sends to a dead peer");
    w.borrow_mut().cut = false;
    p.peer_silent[1] = false;
    let out = p.run(40);
    assert!(out[0].contains(&Outcome::PeerBack));
    assert!(!rtts(&out[0]).is_empty());
}

#[test]
fn ticks_are_bounded_at_most_one_ping_per_interval() {
    let w = fake::wire();
    let mut p = Pair::new(w.clone());
    p.run(200); // 10 s of ticks at 500 ms interval
    let sent = w.borrow().ends[0].sent;
    // per probe a warm-up and a measured ping (≤ 2 × 21) plus pongs for
    // the peer's (≤ 2 × 21)
    assert!(sent <= 84, "{sent}");
}

#[test]
fn a_window_folds_rtts_losses_and_errors_into_one_rdma_probe_record() {
    use super::window::{LinkId, Window};
    use boltwatch_proto::v1::RdmaErrorClass;
    let w = fake::wire();
    let mut p = Pair::new(w.clone());
    let mut win = Window::new(1_000);
    let mut pings = 0;
    for round in 0..40 {
        if round == 20 {
            w.borrow_mut().corrupt_next = true;
        }
        let out = p.run(5);
        win.add(&out[0]);
        win.sent(p.probes.0.pings() - pings);
        pings = p.probes.0.pings();
    }
    let link = LinkId {
        peer: "b".into(),
        interface: "en2".into(),
        device: "rdma_en2".into(),
    };
    let r = win.finish(&link, 11_000).expect("a window with pings");
    let s = r.rtt.as_ref().unwrap();
    assert_eq!((s.peer.as_str(), r.device.as_str()), ("b", "rdma_en2"));
    assert_eq!(s.window_ns, 10_000);
    assert!(s.received >= 10, "{s:?}");
    assert!(
        s.sent >= s.received + s.lost && s.sent <= s.received + s.lost + 1,
        "{s:?}"
    );
    assert_eq!(s.buckets.iter().map(|b| b.count).sum::<u64>(), s.received);
    // Side 0's errors only: a corrupted frame is refused by whichever side
    // received it, so side 0 sees either the CRC mismatch or the loss.
    let classes: Vec<i32> = r.errors.iter().map(|e| e.class).collect();
    let crc = classes.contains(&(RdmaErrorClass::CrcMismatch as i32));
    assert!(crc || s.lost == 1, "{r:?}");
    assert_eq!(ErrorClass::RtrBridgeOn.label(), "rtr_bridge_on");
    assert!(Window::new(0).finish(&link, 5).is_none());
}

#[test]
fn drivers_close_windows_into_records_and_a_wedged_link_goes_quiet() {
    use super::driver::{Driver, WINDOW};
    use super::window::LinkId;
    let link = |p: &str| LinkId {
        peer: p.into(),
        interface: "en2".into(),
        device: "rdma_en2".into(),
    };
    let w = fake::wire();
    w.borrow_mut().ends[1].wedge_after = Some(0);
    let (mut a, mut b) = FakePort::pair(&w);
    let mut da = Driver::new(link("b"), settings(), Duration::ZERO, 0);
    let mut db = Driver::new(link("a"), settings(), Duration::ZERO, 0);
    let cx = |now| Context {
        peer_heard: Some(now),
        job_owns_link: false,
    };
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    let mut now = Duration::ZERO;
    while now < 3 * WINDOW + TICK {
        now += TICK;
        let unix = now.as_nanos() as u64;
        ra.extend(da.step(&mut a, now, unix, cx(now)).1);
        rb.extend(db.step(&mut b, now, unix, cx(now)).1);
    }
    // a's QP never meets a peer (b wedged): pings go out, no pong comes.
    assert_eq!(ra.len(), 3, "{ra:?}");
    let s = ra[1].rtt.as_ref().unwrap();
    assert_eq!((s.received, s.window_ns), (0, WINDOW.as_nanos() as u64));
    assert!(s.lost >= 5, "{s:?}");
    // b said once that it is wedged, then nothing.
    assert_eq!(db.phase(), Phase::Wedged);
    assert_eq!(rb.len(), 1, "{rb:?}");
    assert_eq!(rb[0].errors.len(), 1);
    assert_eq!(
        rb[0].errors[0].class,
        boltwatch_proto::v1::RdmaErrorClass::WatchdogTimeout as i32
    );
}

/// The agent's pace: 1 ms ticks, a 2 ms spin, one probe a second; the
/// fake delivers each frame `latency` after its send.
fn agent_pair(latency: Duration, s: Settings) -> (Shared, Pair) {
    let w = fake::wire();
    w.borrow_mut().latency = latency;
    (w.clone(), Pair::with(w, s, Duration::from_millis(1)))
}

fn agent_settings() -> Settings {
    Settings {
        interval: Duration::from_secs(1),
        spin: Duration::from_millis(2),
        ..settings()
    }
}

fn burst_settings(frames: u64) -> Settings {
    Settings {
        burst_interval: Some(Duration::from_secs(2)),
        burst_frames: frames,
        ..agent_settings()
    }
}

fn bursts(o: &[Outcome]) -> Vec<super::burst::BurstResult> {
    o.iter()
        .filter_map(|x| match x {
            Outcome::Burst(b) => Some(*b),
            _ => None,
        })
        .collect()
}

fn link() -> super::window::LinkId {
    super::window::LinkId {
        peer: "b".into(),
        interface: "en2".into(),
        device: "rdma_en2".into(),
    }
}

/// Ten seconds of side 0's outcomes folded into one window's record.
fn ten_second_window(p: &mut Pair) -> boltwatch_proto::v1::RdmaProbe {
    let mut win = super::window::Window::new(0);
    let mut pings = p.probes.0.pings();
    for _ in 0..10 {
        win.add(&p.run(1000)[0]);
        win.sent(p.probes.0.pings() - pings);
        pings = p.probes.0.pings();
    }
    win.finish(&link(), 10_000_000_000)
        .expect("a window with pings")
}

#[test]
fn a_5_us_link_measures_10_us_round_trips_not_the_1_ms_tick() {
    let (_, mut p) = agent_pair(Duration::from_micros(5), agent_settings());
    // The peer only echoes (its own pings would keep it polling anyway):
    // its warm-up echo alone must make it answer the measured ping at once.
    p.probes.1 = Probe::new(Settings {
        interval: Duration::from_secs(3600),
        ..agent_settings()
    });
    let r = ten_second_window(&mut p);
    let s = r.rtt.unwrap();
    assert!(s.received >= 9, "{s:?}");
    // Ping out, 5 µs, echo, 5 µs, pong polled: exactly the fabric's.
    assert_eq!((s.min_ns, s.p50_ns, s.max_ns), (10_000, 10_000, 10_000));
    // Each side spun at most two spins per own probe plus one per echo.
    let bound = Duration::from_millis(2) * 3 * 11;
    assert!(p.spun[0] <= bound && p.spun[1] <= bound, "{:?}", p.spun);
    assert!(
        p.longest_spin[0] <= Duration::from_millis(4),
        "{:?}",
        p.longest_spin
    );

    // Without the spin the same link reads as the tick: the test can tell.
    let no_spin = Settings {
        spin: Duration::ZERO,
        ..agent_settings()
    };
    let (_, mut p) = agent_pair(Duration::from_micros(5), no_spin);
    let s = ten_second_window(&mut p).rtt.unwrap();
    assert!(s.p50_ns >= 1_000_000, "{s:?}");
    assert_eq!(p.spun, [Duration::ZERO; 2]);
}

#[test]
fn a_peer_that_never_answers_costs_one_bounded_spin_per_probe() {
    let (w, mut p) = agent_pair(Duration::from_micros(5), agent_settings());
    p.run(100);
    assert_eq!(p.probes.0.phase(), Phase::Ready);
    // The fabric goes silent; the side channel still answers.
    w.borrow_mut().cut = true;
    let (spun, probes) = (p.spun[0], p.probes.0.pings());
    p.longest_spin = [Duration::ZERO; 2];
    let out = p.run(10_000);
    let probes = p.probes.0.pings() - probes;
    assert!((9..=11).contains(&probes), "{probes}");
    let spin = Duration::from_millis(2);
    let spent = p.spun[0] - spun;
    assert!(spent <= spin * probes as u32, "{spent:?} for {probes}");
    assert!(
        spent >= spin * (probes as u32 - 1),
        "it does poll: {spent:?}"
    );
    assert!(p.longest_spin[0] <= spin, "{:?}", p.longest_spin);
    assert!(out[0].iter().any(|o| matches!(o, Outcome::Lost { .. })));
}

#[test]
fn a_burst_sends_only_granted_frames_and_reports_what_the_peer_confirmed() {
    let (w, mut p) = agent_pair(Duration::from_micros(5), burst_settings(100));
    p.probes.1 = Probe::new(agent_settings());
    let r = ten_second_window(&mut p);
    assert_eq!(r.burst_sent_bytes, 100 * 4096);
    assert_eq!(r.burst_confirmed_bytes, 100 * 4096);
    // 17 rounds of 10 µs each, and the tally's.
    assert!(r.burst_ns > 0 && r.burst_ns < 1_000_000, "{r:?}");
    let w = w.borrow();
    let made = w.ends[0].data_sent;
    assert!(made >= 400 && made % 100 == 0, "{made} data frames");
    // Every frame had a receive frame posted for it; pings went on.
    assert_eq!((w.ends[0].overrun, w.ends[1].overrun), (0, 0));
    assert_eq!(w.ends[1].data_sent, 0);
    assert!(r.rtt.unwrap().received >= 9);
}

#[test]
fn a_peer_that_confirms_fewer_frames_lowers_the_figure() {
    let (w, mut p) = agent_pair(Duration::from_micros(5), burst_settings(100));
    p.probes.1 = Probe::new(agent_settings());
    p.run(100);
    w.borrow_mut().drop_data = 3;
    let out = p.run(3000);
    let b = bursts(&out[0]);
    assert_eq!(b.len(), 1, "{b:?}");
    assert_eq!(b[0].sent_bytes, 100 * 4096);
    assert_eq!(b[0].confirmed_bytes, 97 * 4096);
    // The frames completed at the sender all the same.
    assert_eq!(w.borrow().ends[0].overrun, 0);
}

#[test]
fn a_burst_never_exceeds_its_bound() {
    use super::burst::{CREDITS, MAX_BYTES, MAX_TIME};
    let frames = MAX_BYTES / 4096;
    // A slow link (4 ms round trips): the burst stops asking after 50 ms.
    let (w, mut p) = agent_pair(Duration::from_millis(2), burst_settings(frames));
    p.probes.1 = Probe::new(agent_settings());
    let out = p.run(3000);
    let b = bursts(&out[0]);
    assert_eq!(b.len(), 1, "{b:?}");
    let rounds = (MAX_TIME.as_millis() / 4 + 2) as u64;
    let sent = w.borrow().ends[0].data_sent;
    assert!(sent <= rounds * CREDITS, "{sent} frames");
    assert_eq!(b[0].sent_bytes, sent * 4096);
    assert_eq!(b[0].confirmed_bytes, b[0].sent_bytes);
    assert_eq!(w.borrow().ends[0].overrun, 0);
}

#[test]
fn bursts_are_off_by_default_and_skipped_in_job_windows() {
    let (w, mut p) = agent_pair(Duration::from_micros(5), agent_settings());
    let out = p.run(5000);
    assert!(bursts(&out[0]).is_empty() && bursts(&out[1]).is_empty());
    assert_eq!(
        (w.borrow().ends[0].data_sent, w.borrow().ends[1].data_sent),
        (0, 0)
    );
    assert!(!rtts(&out[0]).is_empty());

    let (w, mut p) = agent_pair(Duration::from_micros(5), burst_settings(100));
    p.job[0] = true;
    let out = p.run(5000);
    assert!(bursts(&out[0]).is_empty());
    assert_eq!(w.borrow().ends[0].data_sent, 0);
    assert!(out[0].contains(&Outcome::Skipped(Skip::JobWindow)));
    // The peer, outside any window, bursts as configured.
    assert!(!bursts(&out[1]).is_empty());
}
