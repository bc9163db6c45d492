//! The spool under damage and pressure: a flipped byte costs one record
//! (a gap and a counted drop); a crafted damaged segment neither silences
//! the reflector nor costs the records around it; a cap hit while the
//! collector is away drops the oldest, counts them, and keeps the agent's
//! memory flat.

use std::path::Path;
use std::time::{Duration, Instant};

use boltwatch_agent::sink::Emitted;
use boltwatch_agent::spool::{segment, Spool, SpoolOptions};
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{HistogramBucket, Record, RttSummary};
use boltwatch_tests::procs::{agent, free_udp_port, sample, wait_for};
use prost::Message;

use crate::support::{agent_args, boot_held, plain, rss_kib, spooled, start_pair, Held, Home};

#[test]
fn a_flipped_byte_in_the_spool_costs_one_record_shown_as_a_gap_and_a_drop() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    // No collector yet: a spools everything.
    let (mut a, _b, a_args) = start_pair(dir.path(), &home);
    let spool_dir = dir.path().join("spool-a");
    let frames_in = |p: &Path| -> Vec<(usize, usize)> {
        let bytes = std::fs::read(p).unwrap();
        let mut at = 0;
        segment::scan(&bytes)
            .0
            .iter()
            .map(|f| {
                let o = (at, segment::HEADER + f.len());
                at += o.1;
                o
            })
            .collect()
    };
    // The first segment; the spool directory exists a moment before it.
    let first_seg = || -> Option<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(&spool_dir)
            .ok()?
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "seg"))
            .collect();
        v.sort();
        v.into_iter().next()
    };
    let seg = || first_seg().expect("a segment");
    wait_for("a spooled 20 records", Duration::from_secs(60), || {
        first_seg().is_some_and(|p| frames_in(&p).len() >= 20)
    });
    a.kill9();
    let held = spooled(&spool_dir);
    let (old_boot, old_last) = held.into_iter().next().unwrap();
    let path = seg();
    let frames = frames_in(&path);
    let (at, len) = frames[frames.len() / 2];
    let mut bytes = std::fs::read(&path).unwrap();
    let hit = Record::decode(&bytes[at + segment::HEADER..at + len])
        .unwrap()
        .seq;
    bytes[at + len / 2] ^= 0x04;
    std::fs::write(&path, &bytes).unwrap();

    let c = home.start();
    let mut a = agent(dir.path(), "a", &a_args);
    // Everything but the damaged record arrives; the collector sees the
    // hole as a gap, and the agent counts it as dropped.
    wait_for(
        "the old boot's intact records arrive",
        Duration::from_secs(60),
        || {
            boot_held(&c, "a", &old_boot)
                == Some(Held {
                    records: old_last - 1,
                    highest_seq: old_last,
                    gaps: 1,
                })
        },
    );
    wait_for("the drop reported", Duration::from_secs(40), || {
        sample(
            &c.metrics(),
            "boltwatch_agent_dropped_records_total",
            &[("node", "a")],
        ) == Some(1.0)
    });
    eprintln!(
        "corrupt spool frame: boot {old_boot} wrote {old_last}, record {hit} damaged, \
         {} stored, 1 gap, 1 counted dropped",
        old_last - 1
    );
    assert_eq!(a.terminate(), Some(0));
}

/// An RTT summary like the sender's (histogram and all), for prefilling.
fn rtt_payload(i: u64) -> Payload {
    Payload::Rtt(RttSummary {
        peer: "b".into(),
        interface: "lo".into(),
        peer_address: "127.0.0.1:862".into(),
        window_start_unix_ns: 1_700_000_000_000_000_000 + i * 1_000_000_000,
        window_ns: 1_000_000_000,
        sent: 100,
        received: 100,
        min_ns: 40_000,
        mean_ns: 50_000,
        max_ns: 90_000,
        p50_ns: 50_000,
        p99_ns: 88_000,
        sum_ns: 5_000_000,
        buckets: (0..12)
            .map(|k| HistogramBucket {
                index: 100 + k,
                count: 8,
            })
            .collect(),
        ..Default::default()
    })
}

#[test]
fn spool_cap_while_collector_is_down_counts_drops_and_rss_stays_flat() {
    let dir = tempfile::tempdir().unwrap();
    let spool_dir = dir.path().join("spool-a");
    // A previous boot (cap 4 MiB, so 256 KiB segments) left 3.5 MiB the
    // collector never saw.
    let prefilled = {
        let mut s = Spool::open(
            SpoolOptions {
                dir: spool_dir.clone(),
                max_bytes: 4 << 20,
            },
            "a",
            "prefill",
        )
        .unwrap();
        let mut n = 0u64;
        while s.bytes() < 7 << 19 {
            s.append((0..500).map(|i| Emitted {
                unix_ns: 1_700_000_000_000_000_000 + (n + i) * 1_000_000,
                payload: rtt_payload(n + i),
            }))
            .unwrap();
            n += 500;
        }
        s.sync().unwrap();
        assert_eq!(s.dropped(), 0);
        n
    };

    let cap = 2u64 << 20;
    let home = Home::new(dir.path());
    let pa = free_udp_port();
    let mut args = agent_args(&home.url(), pa, &[("b", pa)], "10ms");
    args.extend(["--spool-max-bytes".into(), cap.to_string()]);
    let mut a = agent(dir.path(), "a", &args);

    // Collector down: sample RSS for a while after warm-up.
    let on_disk = || -> u64 {
        std::fs::read_dir(&spool_dir)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum()
    };
    std::thread::sleep(Duration::from_secs(3));
    let warm = rss_kib(a.pid());
    let mut peak = warm;
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        assert!(a.alive());
        peak = peak.max(rss_kib(a.pid()));
        assert!(
            on_disk() <= cap + cap / 16 + 4096,
            "spool {} bytes over its cap",
            on_disk()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        peak * 10 <= warm * 13,
        "agent RSS grew from {warm} KiB to {peak} KiB with the collector down"
    );

    // The collector comes up: what survived the cap is replayed from disk.
    let c = home.start();
    let mut replay_peak = 0;
    wait_for(
        "the surviving prefill replayed",
        Duration::from_secs(120),
        || {
            replay_peak = replay_peak.max(rss_kib(a.pid()));
            boot_held(&c, "a", "prefill")
                .is_some_and(|h| h.highest_seq == prefilled && h.records > 0)
        },
    );
    assert!(
        replay_peak * 10 <= warm * 13,
        "agent RSS grew from {warm} KiB to {replay_peak} KiB replaying"
    );
    let Held {
        records: stored,
        highest_seq: highest,
        gaps,
    } = boot_held(&c, "a", "prefill").unwrap();
    eprintln!(
        "spool cap: prefilled {prefilled}, stored {stored}, dropped {}; RSS warm {warm} KiB, \
         peak down {peak} KiB, peak replaying {replay_peak} KiB",
        prefilled - stored
    );
    assert_eq!(highest, prefilled);
    assert!(stored < prefilled, "the cap must have dropped some");
    // The oldest went: one gap run at the start, none elsewhere.
    assert_eq!(gaps, prefilled - stored);
    // Drops are counted and reported: exactly the missing records.
    wait_for("drops reported", Duration::from_secs(40), || {
        let m = c.metrics();
        let dropped = sample(
            &m,
            "boltwatch_agent_dropped_records_total",
            &[("node", "a")],
        );
        dropped == Some((prefilled - stored) as f64)
    });
    assert_eq!(a.terminate(), Some(0));
}

/// A segment an earlier boot `boot` of node `a` left: records 1, then
/// `junk` bytes of crafted frame headers, each naming a payload of 64 KiB
/// to 1 MiB that is there but fails its CRC, then records 2 and 3. Every
/// fourth offset of the junk is a plausible header, so a resync that hashes
/// each candidate's payload does terabytes of work.
fn crafted_segment(boot: &str, junk: usize) -> Vec<u8> {
    let record = |seq: u64| {
        Record {
            node: "a".into(),
            boot_id: boot.into(),
            seq,
            unix_ns: 1_700_000_000_000_000_000 + seq * 1_000_000_000,
            payload: Some(rtt_payload(seq)),
        }
        .encode_to_vec()
    };
    let mut seg = Vec::new();
    segment::encode(&record(1), &mut seg);
    for k in 0..junk / 4 {
        // Little-endian length below 4 MiB (high byte 0), varying.
        let len = (64 << 10) + (k * 7919) % (960 << 10);
        seg.extend_from_slice(&(len as u32).to_le_bytes()[..3]);
        seg.push(0);
    }
    segment::encode(&record(2), &mut seg);
    segment::encode(&record(3), &mut seg);
    seg
}

/// Sends STAMP test packets to `port` (one at a time, each given 200 ms)
/// until one is reflected; false after `tries`.
fn stamp_answers(port: u16, tries: u32) -> bool {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 128];
    for seq in 1..=tries {
        let mut probe = [0u8; 44];
        probe[..4].copy_from_slice(&seq.to_be_bytes());
        s.send_to(&probe, ("127.0.0.1", port)).unwrap();
        // A reflected packet carries the sender's seq at octets 24..28.
        if let Ok(n) = s.recv(&mut buf) {
            if n >= 44 && buf[24..28] == seq.to_be_bytes() {
                return true;
            }
        }
    }
    false
}

/// Issue 24 item 17: a crafted damaged segment kept the agent from
/// answering STAMP while it resynchronised (the reflector started after
/// the spool's recovery, and the resync hashed every candidate's payload).
/// Here the recovery is held open for as long as the test likes: a second,
/// empty segment is a FIFO, whose opening blocks until the test opens its
/// other end. The reflector must answer while the recovery is stuck there,
/// and once released, the recovery must get through the crafted segment
/// and deliver the intact records around the damage.
#[test]
fn stamp_is_answered_while_a_crafted_damaged_spool_recovers_and_its_records_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let spool_dir = dir.path().join("spool-a");
    std::fs::create_dir_all(&spool_dir).unwrap();
    let boot = "crafted-earlier-boot";
    let junk = 16 << 20;
    std::fs::write(
        spool_dir.join(format!("{:020}.seg", 1)),
        crafted_segment(boot, junk),
    )
    .unwrap();
    let fifo = spool_dir.join(format!("{:020}.seg", 2));
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());

    let home = Home::new(dir.path());
    let c = home.start();
    let port = free_udp_port();
    let mut args = agent_args(&home.url(), port, &[], "100ms");
    args.extend(["--spool-max-bytes".into(), (1u64 << 30).to_string()]);
    let mut a = agent(dir.path(), "a", &args);

    // The recovery cannot end before the FIFO's writer comes and goes.
    assert!(
        stamp_answers(port, 300),
        "no STAMP reply while the spool recovers"
    );
    assert!(!plain(&a.log_text()).contains("spool recovered"));
    // Let the recovery through the FIFO: it opens for writing once the
    // recovery holds its reading end, and closing it is an empty segment.
    wait_for(
        "the recovery to reach the FIFO",
        Duration::from_secs(120),
        || {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(nix::libc::O_NONBLOCK)
                .open(&fifo)
                .is_ok()
        },
    );
    wait_for(
        "the records around the damage",
        Duration::from_secs(120),
        || boot_held(&c, "a", boot) == Some(Held::complete(3)),
    );
    let log = plain(&a.log_text());
    let recovered = log
        .lines()
        .find(|l| l.contains("spool recovered"))
        .expect("a `spool recovered` line");
    eprintln!("{junk} crafted bytes: STAMP answered during recovery; {recovered}");
    assert_eq!(a.terminate(), Some(0));
}
