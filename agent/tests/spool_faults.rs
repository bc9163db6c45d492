//! The spool under faults, on real filesystems: a tmpfs that fills up and
//! is freed again, and a byte flipped in a segment file between two boots.
//! Nothing that reached the spool may be lost silently: it is delivered,
//! or counted in `dropped()` (what the agent reports as `dropped_records`).
//!
//! Only the public API is used, so these run against any version of the
//! spool. The tmpfs test needs root (mount); it fails, never skips,
//! without it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use boltwatch_agent::sink::Emitted;
use boltwatch_agent::spool::{segment, Spool, SpoolOptions};
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{AgentStats, Record};

/// A record whose payload carries `n`, so a replay can be checked against
/// what was appended.
fn em(n: u64) -> Emitted {
    Emitted {
        unix_ns: 1_700_000_000_000_000_000 + n,
        payload: Payload::AgentStats(AgentStats {
            reflected_packets: n,
            ..Default::default()
        }),
    }
}

fn mark(r: &Record) -> u64 {
    match &r.payload {
        Some(Payload::AgentStats(s)) => s.reflected_packets,
        other => panic!("unexpected payload {other:?}"),
    }
}

fn open(dir: &Path, max_bytes: u64, boot: &str) -> Spool {
    Spool::open(
        SpoolOptions {
            dir: dir.to_path_buf(),
            max_bytes,
        },
        "n",
        boot,
    )
    .unwrap()
}

/// Every record the cursor yields, without acknowledging any.
fn drain(s: &mut Spool) -> Vec<Record> {
    s.read_to_end(1000).unwrap()
}

fn effective_uid() -> u32 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
        .expect("Uid line in /proc/self/status")
}

/// A tmpfs of a given size, unmounted when dropped (also when the test
/// fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        assert_eq!(
            effective_uid(),
            0,
            "this test mounts a tmpfs to fill it: run it as root"
        );
        fs::create_dir_all(at).unwrap();
        let st = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .status()
            .expect("running mount");
        assert!(st.success(), "mount tmpfs on {}: {st}", at.display());
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Still busy (a file left open by a failing test): detach it.
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Appends batches of 20 records, `offered` onwards, until the spool
/// refuses three times; returns how many were offered before the first
/// refusal (all of those reached the spool).
fn append_until_refused(s: &mut Spool, offered: &mut u64) -> u64 {
    let mut ok_before_failure = None;
    let mut failures = 0;
    for _ in 0..100_000 {
        let batch: Vec<Emitted> = (*offered..*offered + 20).map(em).collect();
        *offered += 20;
        match s.append(batch) {
            Ok(()) => {}
            Err(e) => {
                eprintln!("append failed: {e}");
                ok_before_failure.get_or_insert(*offered - 20);
                failures += 1;
                if failures == 3 {
                    break;
                }
            }
        }
    }
    ok_before_failure.expect("the filesystem never filled up")
}

/// `got` (`what`, for the messages) has contiguous seqs from 1, in append
/// order, nothing twice; every record appended before the first refusal;
/// and the last record offered.
fn assert_delivered(got: &[Record], what: &str, ok_before_failure: u64, offered: u64) {
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.seq, i as u64 + 1, "{what}: seqs contiguous");
    }
    let marks: Vec<u64> = got.iter().map(mark).collect();
    assert!(marks.windows(2).all(|w| w[0] < w[1]), "{what}: in order");
    for n in 0..ok_before_failure {
        assert!(
            marks.binary_search(&n).is_ok(),
            "{what}: record {n}, spooled before the disk filled, not delivered"
        );
    }
    // The last batch, after space came back, too.
    assert_eq!(marks.last(), Some(&(offered - 1)), "{what}");
}

#[test]
fn spool_full_then_freed_delivers_everything_written_and_counts_the_rest() {
    let base = tempfile::tempdir().unwrap();
    let mnt = base.path().join("fs");
    let _fs = Tmpfs::mount(&mnt, "256k");
    // Ballast to free later: half the filesystem.
    let ballast = mnt.join("ballast");
    fs::write(&ballast, vec![0x5a; 128 * 1024]).unwrap();
    let dir = mnt.join("spool");
    // A 1 MiB cap (never reached here): 64 KiB segments, so the spool
    // rolls a few times before the filesystem is full.
    let mut s = open(&dir, 1 << 20, "b");

    // Append until the spool refuses three times. Record `n` carries `n`.
    let mut offered = 0u64;
    let ok_before_failure = append_until_refused(&mut s, &mut offered);
    let dropped_while_full = s.dropped();
    assert!(dropped_while_full > 0, "refusals are counted");

    // Space comes back: the next sync writes what waited.
    fs::remove_file(&ballast).unwrap();
    s.sync().unwrap();
    let after: Vec<Emitted> = (offered..offered + 20).map(em).collect();
    offered += 20;
    s.append(after).unwrap();
    s.sync().unwrap();

    let live = drain(&mut s);
    assert_delivered(&live, "live", ok_before_failure, offered);
    assert_eq!(
        live.len() as u64 + s.dropped(),
        offered,
        "delivered + counted dropped = appended"
    );
    assert_eq!(s.dropped(), dropped_while_full);
    eprintln!(
        "spool full: {offered} appended, {ok_before_failure} before the first refusal, \
         {} delivered, {} counted dropped",
        live.len(),
        s.dropped()
    );

    // And it is all on disk: a new boot replays the same records.
    drop(s);
    let mut again = open(&dir, 1 << 20, "b2");
    let replayed = drain(&mut again);
    assert_delivered(
        &replayed,
        "replayed after restart",
        ok_before_failure,
        offered,
    );
    assert_eq!(replayed, live);
    assert_eq!(again.dropped(), 0, "nothing on disk was damaged");
}

/// `(offset, len)` of each frame in a segment file.
fn frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let (payloads, end, err) = segment::scan(bytes);
    assert_eq!((end, err), (bytes.len(), None), "an intact file");
    let mut at = 0;
    payloads
        .iter()
        .map(|p| {
            let f = (at, segment::HEADER + p.len());
            at += f.1;
            f
        })
        .collect()
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "lock")
        .collect();
    v.sort();
    v
}

#[test]
fn spool_corrupt_middle_frame_costs_only_that_record() {
    let d = tempfile::tempdir().unwrap();
    {
        let mut s = open(d.path(), 1 << 30, "old");
        s.append((1..=145).map(em)).unwrap();
        s.sync().unwrap();
        // Not acknowledged, then the agent is gone (as after kill -9).
    }
    let seg = d.path().join(&files(d.path())[0]);
    let mut bytes = fs::read(&seg).unwrap();
    let fr = frames(&bytes);
    assert_eq!(fr.len(), 145);
    let (at, len) = fr[36]; // record 37
    bytes[at + len / 2] ^= 0x10;
    fs::write(&seg, &bytes).unwrap();

    let mut s = open(d.path(), 1 << 30, "new");
    let got = drain(&mut s);
    let seqs: Vec<u64> = got.iter().map(|r| r.seq).collect();
    let want: Vec<u64> = (1..=145).filter(|&i| i != 37).collect();
    assert_eq!(seqs, want, "every other record is replayed");
    assert!(got.iter().all(|r| r.boot_id == "old" && mark(r) == r.seq));
    assert_eq!(s.dropped(), 1, "exactly the damaged record is counted");
    assert_eq!(s.unacked(), 144);
    eprintln!(
        "corrupt frame: 145 written, {} delivered, {} counted dropped",
        got.len(),
        s.dropped()
    );
    // The damaged file is kept aside (not truncated) until its records are
    // acknowledged.
    let names = files(d.path());
    assert!(
        names.iter().any(|n| n.ends_with(".damaged")),
        "moved aside: {names:?}"
    );
    assert_eq!(
        fs::metadata(
            d.path()
                .join(names.iter().find(|n| n.ends_with(".damaged")).unwrap())
        )
        .unwrap()
        .len(),
        bytes.len() as u64,
        "not truncated"
    );

    // Restarting again finds the same records and does not count the
    // damage twice.
    drop(s);
    let mut s = open(d.path(), 1 << 30, "newer");
    assert_eq!(
        drain(&mut s).iter().map(|r| r.seq).collect::<Vec<_>>(),
        want
    );
    assert_eq!(s.dropped(), 0, "counted once, when found");
    s.ack("old", 145);
    assert!(s.is_empty());
    assert!(
        files(d.path()).iter().all(|n| !n.ends_with(".damaged")),
        "gone once acknowledged: {:?}",
        files(d.path())
    );
}
