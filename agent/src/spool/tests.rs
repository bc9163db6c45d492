//! Spool tests on real files in a temporary directory.

use super::*;
use boltwatch_proto::v1::{record::Payload, AgentStats};
use std::path::Path;

fn em(n: u64) -> Emitted {
    Emitted {
        unix_ns: n,
        payload: Payload::AgentStats(AgentStats {
            reflected_packets: n,
            ..Default::default()
        }),
    }
}

fn opts(dir: &Path, max_bytes: u64) -> SpoolOptions {
    SpoolOptions {
        dir: dir.to_path_buf(),
        max_bytes,
    }
}

fn seqs(v: &[Record]) -> Vec<(String, u64)> {
    v.iter().map(|r| (r.boot_id.clone(), r.seq)).collect()
}

fn seg_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    v.sort();
    v
}

#[test]
fn append_send_ack_and_rewind() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Spool::open(opts(d.path(), 1 << 30), "n", "b1").unwrap();
    s.append((1..=5).map(em)).unwrap();
    assert_eq!(s.unacked(), 5);
    let first = s.next_batch(3).unwrap();
    assert_eq!(
        seqs(&first),
        (1..=3).map(|i| ("b1".to_string(), i)).collect::<Vec<_>>()
    );
    assert!(first.iter().all(|r| r.node == "n"));
    assert_eq!(s.next_batch(10).unwrap().len(), 2);
    assert!(!s.has_unsent());
    s.ack("b1", 2);
    assert_eq!(s.unacked(), 3);
    s.rewind();
    let again = s.next_batch(10).unwrap();
    assert_eq!(
        again.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![3, 4, 5]
    );
    // Records appended later show up on the same cursor.
    s.append([em(6)]).unwrap();
    assert!(s.has_unsent());
    assert_eq!(s.next_batch(10).unwrap()[0].seq, 6);
    s.ack("b1", 6);
    assert!(s.is_empty());
}

#[test]
fn a_new_boot_replays_the_old_boots_unacked_records() {
    let d = tempfile::tempdir().unwrap();
    {
        let mut s = Spool::open(opts(d.path(), 1 << 30), "n", "old").unwrap();
        s.append((1..=4).map(em)).unwrap();
        s.ack("old", 1);
        // No clean shutdown: dropped as after kill -9 (data is in the file).
    }
    let mut s = Spool::open(opts(d.path(), 1 << 30), "n", "new").unwrap();
    s.append([em(9)]).unwrap();
    // The collector's Welcome says it holds old up to 2.
    s.ack("old", 2);
    s.rewind();
    let out = s.next_batch(100).unwrap();
    assert_eq!(
        seqs(&out),
        vec![
            ("old".to_string(), 3),
            ("old".to_string(), 4),
            ("new".to_string(), 1)
        ]
    );
    s.ack("old", 4);
    s.ack("new", 1);
    assert_eq!(
        seg_files(d.path()).len(),
        1,
        "only the active segment stays"
    );
}

/// Records 1 to 3 written by an earlier boot (`old`) into `dir`, and the
/// segment file that holds them.
fn earlier_boot_of_three(dir: &Path) -> PathBuf {
    let mut s = Spool::open(opts(dir, 1 << 30), "n", "old").unwrap();
    s.append((1..=3).map(em)).unwrap();
    drop(s);
    seg_files(dir).pop().unwrap()
}

#[test]
fn torn_tail_is_truncated_not_fatal() {
    let d = tempfile::tempdir().unwrap();
    let seg = earlier_boot_of_three(d.path());
    let good = fs::metadata(&seg).unwrap().len();
    // A torn write: half a frame of garbage at the end.
    let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&[40, 0, 0, 0, 1, 2, 3, 4, 5, 6]).unwrap();
    drop(f);
    let mut s = Spool::open(opts(d.path(), 1 << 30), "n", "new").unwrap();
    assert_eq!(fs::metadata(&seg).unwrap().len(), good);
    assert_eq!(s.unacked(), 3);
    assert_eq!(s.next_batch(10).unwrap().len(), 3);
    // The frame being written when the agent died is lost: at least one.
    assert_eq!(s.dropped(), 1);
    assert!(damaged_files(d.path()).is_empty());
}

fn damaged_files(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "damaged"))
        .collect()
}

/// Byte offsets of the frames of a segment file.
fn frame_offsets(path: &Path) -> Vec<usize> {
    let bytes = fs::read(path).unwrap();
    let mut at = 0;
    segment::scan(&bytes)
        .0
        .iter()
        .map(|p| {
            let o = at;
            at += segment::HEADER + p.len();
            o
        })
        .collect()
}

fn flip(path: &Path, at: usize) {
    let mut bytes = fs::read(path).unwrap();
    bytes[at] ^= 0x08;
    fs::write(path, &bytes).unwrap();
}

#[test]
fn bad_crc_on_the_last_frame_is_damage_not_a_torn_tail() {
    let d = tempfile::tempdir().unwrap();
    let seg = earlier_boot_of_three(d.path());
    let n = fs::metadata(&seg).unwrap().len() as usize;
    flip(&seg, n - 2);
    let mut s = Spool::open(opts(d.path(), 1 << 30), "n", "new").unwrap();
    assert_eq!(s.unacked(), 2);
    assert_eq!(
        s.next_batch(10)
            .unwrap()
            .iter()
            .map(|r| r.seq)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(s.dropped(), 1);
    assert_eq!(
        damaged_files(d.path()).len(),
        1,
        "moved aside, not truncated"
    );
    assert_eq!(
        fs::metadata(&damaged_files(d.path())[0]).unwrap().len(),
        n as u64
    );
}

#[test]
fn damage_at_a_segment_end_is_counted_from_the_next_segment() {
    let d = tempfile::tempdir().unwrap();
    // 64 KiB segments: 6000 records of ~35 bytes span several.
    let o = opts(d.path(), 1 << 20);
    {
        let mut s = Spool::open(o.clone(), "n", "old").unwrap();
        for i in 0..600 {
            s.append((i * 10 + 1..=i * 10 + 10).map(em)).unwrap();
        }
    }
    let segs = seg_files(d.path());
    assert!(segs.len() >= 3, "{segs:?}");
    // The last three frames of the first segment, and one in the middle of
    // the second.
    let first = frame_offsets(&segs[0]);
    let len = fs::metadata(&segs[0]).unwrap().len() as usize;
    let mut bytes = fs::read(&segs[0]).unwrap();
    for &at in &first[first.len() - 3..] {
        bytes[at + segment::HEADER + 2] ^= 0x01;
    }
    assert_eq!(bytes.len(), len);
    fs::write(&segs[0], &bytes).unwrap();
    let second = frame_offsets(&segs[1]);
    flip(&segs[1], second[second.len() / 2] + segment::HEADER + 1);

    let mut s = Spool::open(o, "n", "new").unwrap();
    assert_eq!(s.dropped(), 4);
    assert_eq!(s.unacked(), 5996);
    assert_eq!(damaged_files(d.path()).len(), 2);
    let got: Vec<u64> = s.read_to_end(64).unwrap().iter().map(|r| r.seq).collect();
    assert_eq!(got.len(), 5996);
    assert!(got.windows(2).all(|w| w[0] < w[1]));
    // A partial ack then a new stream: the cursor skips the damage again.
    s.ack("old", got[got.len() / 2]);
    s.rewind();
    let rest = s.next_batch(10_000).unwrap();
    assert_eq!(rest.len(), 5996 - got.len() / 2 - 1);
    s.ack("old", 6000);
    assert!(damaged_files(d.path()).is_empty(), "acked, so removed");
}

#[test]
fn a_segment_with_nothing_intact_is_removed_and_counted() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join(format!("{:020}.seg", 1)), vec![0xee; 500]).unwrap();
    let s = Spool::open(opts(d.path(), 1 << 20), "n", "b").unwrap();
    assert_eq!(s.dropped(), 1, "at least one record was there");
    assert_eq!(s.unacked(), 0);
    assert!(damaged_files(d.path()).is_empty());
    assert_eq!(seg_files(d.path()).len(), 1, "only the new active segment");
}

#[test]
fn cap_drops_oldest_and_counts() {
    let d = tempfile::tempdir().unwrap();
    let cap = 256 * 1024;
    let mut s = Spool::open(opts(d.path(), cap), "n", "b").unwrap();
    let seg = opts(d.path(), cap).segment_bytes();
    for chunk in 0..200u64 {
        s.append((0..100).map(|i| em(chunk * 100 + i))).unwrap();
        assert!(s.bytes() <= cap + seg, "{} bytes", s.bytes());
    }
    assert!(s.dropped() > 0);
    // Everything is accounted for: kept + dropped = made.
    assert_eq!(s.unacked() + s.dropped(), 20_000);
    let on_disk: u64 = seg_files(d.path())
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .sum();
    assert_eq!(on_disk, s.bytes());
    // What is left is the newest, contiguous up to the last.
    let left = s.read_to_end(1000).unwrap();
    assert!(left.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    assert_eq!(left.last().map(|r| r.seq), Some(20_000));
    assert_eq!(left.len() as u64, s.unacked());
}

#[test]
fn second_agent_on_the_same_dir_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let _a = Spool::open(opts(d.path(), 1 << 20), "n", "a").unwrap();
    let e = Spool::open(opts(d.path(), 1 << 20), "n", "b").unwrap_err();
    assert!(matches!(e, SpoolError::Locked(_)), "{e}");
}

#[test]
fn records_of_another_node_are_dropped_not_sent() {
    let d = tempfile::tempdir().unwrap();
    {
        let mut s = Spool::open(opts(d.path(), 1 << 20), "other", "x").unwrap();
        s.append([em(1)]).unwrap();
    }
    let mut s = Spool::open(opts(d.path(), 1 << 20), "n", "b").unwrap();
    assert!(s.next_batch(10).unwrap().is_empty());
    assert_eq!(s.dropped(), 1);
}

#[test]
fn damage_in_a_segment_larger_than_the_read_window_is_found_everywhere() {
    use boltwatch_proto::v1::RttSummary;
    let d = tempfile::tempdir().unwrap();
    let o = opts(d.path(), 1 << 30); // 64 MiB segments: one file
    let big = |n: u64| Emitted {
        unix_ns: n,
        payload: Payload::Rtt(RttSummary {
            peer: format!("{n:04000}"),
            ..Default::default()
        }),
    };
    let n = 5000; // about 20 MiB: several read windows
    {
        let mut s = Spool::open(o.clone(), "n", "old").unwrap();
        s.append((1..=n).map(big)).unwrap();
    }
    let seg = seg_files(d.path()).pop().unwrap();
    let offsets = frame_offsets(&seg);
    let mut bytes = fs::read(&seg).unwrap();
    assert!(bytes.len() > 2 * (2 * segment::MIN_WINDOW));
    // One frame hit near each window edge, and one in the header.
    let mut hit = Vec::new();
    for edge in [8usize << 20, 16 << 20] {
        let i = offsets.iter().rposition(|&o| o <= edge).unwrap();
        bytes[edge] ^= 0x02;
        hit.push(i as u64 + 1);
    }
    bytes[offsets[100] + 1] ^= 0x40;
    hit.push(101);
    fs::write(&seg, &bytes).unwrap();

    let mut s = Spool::open(o, "n", "new").unwrap();
    assert_eq!(s.dropped(), hit.len() as u64);
    let got: Vec<u64> = s.read_to_end(500).unwrap().iter().map(|r| r.seq).collect();
    let want: Vec<u64> = (1..=n).filter(|i| !hit.contains(i)).collect();
    assert_eq!(got, want);
}

#[test]
fn the_oldest_unacked_record_is_dated_across_acks_and_restarts() {
    const S: u64 = 1_000_000_000;
    let d = tempfile::tempdir().unwrap();
    let mut s = Spool::open(opts(d.path(), 1 << 30), "n", "b1").unwrap();
    assert_eq!(s.oldest_unacked_unix_ns(), None);
    // One record a second from t=1000 s.
    s.append((0..60).map(|i| em((1000 + i) * S))).unwrap();
    assert_eq!(s.oldest_unacked_unix_ns(), Some(1000 * S));
    s.ack("b1", 30);
    let t = s.oldest_unacked_unix_ns().unwrap();
    assert!(t <= 1030 * S && 1030 * S - t < ages::GRAIN_NS, "{t}");
    drop(s);
    // The next boot finds b1's waiting records on disk and dates them.
    let mut s = Spool::open(opts(d.path(), 1 << 30), "n", "b2").unwrap();
    assert_eq!(s.oldest_unacked_unix_ns(), Some(1000 * S));
    s.ack("b1", 60);
    assert_eq!(s.oldest_unacked_unix_ns(), None);
    // The earlier boot's segment went with its ack; the new one is empty.
    assert_eq!(s.bytes(), 0);
}
