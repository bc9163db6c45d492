//! Sending reads the spool back from disk: a cursor over the segment files,
//! skipping what is acknowledged and, in a file moved aside as damaged,
//! the stretches that hold no intact record.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};

use boltwatch_proto::v1::Record;
use prost::Message;

use super::cursor::Cursor;
use super::error::{io_err, SpoolError};
use super::{segment, Spool};

/// Reads one frame from `r`. `Ok(None)` at a clean end; `Err` describes a
/// torn or corrupt frame.
fn read_frame(r: &mut impl Read) -> std::io::Result<Result<Option<Vec<u8>>, String>> {
    let mut head = [0u8; segment::HEADER];
    let mut got = 0;
    while got < head.len() {
        let n = r.read(&mut head[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    if got == 0 {
        return Ok(Ok(None));
    }
    let (len, crc) = match segment::header(&head[..got]) {
        Ok(h) => h,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let mut payload = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        let n = r.read(&mut payload[filled..])?;
        if n == 0 {
            return Ok(Err(format!("truncated frame: {filled} of {len} bytes")));
        }
        filled += n;
    }
    if crc32fast::hash(&payload) != crc {
        return Ok(Err("frame checksum mismatch".into()));
    }
    Ok(Ok(Some(payload)))
}

impl Spool {
    /// Where reading segment `id` from `offset` can go: the start and end of
    /// the readable stretch at or after `offset`, or `None` when nothing is
    /// left in the segment.
    fn readable(&self, id: u64, offset: u64) -> Option<(u64, u64)> {
        match self.damaged.get(&id) {
            None => Some((offset, u64::MAX)),
            Some(runs) => runs
                .iter()
                .find(|r| r.1 > offset)
                .map(|r| (r.0.max(offset), r.1)),
        }
    }

    /// Every unacknowledged record after the cursor, read `batch` at a time,
    /// without acknowledging any: the whole spool for a reader that inspects
    /// it (the transport sends one [`Spool::next_batch`] at a time).
    pub fn read_to_end(&mut self, batch: usize) -> Result<Vec<Record>, SpoolError> {
        let mut out = Vec::new();
        loop {
            let b = self.next_batch(batch)?;
            if b.is_empty() {
                return Ok(out);
            }
            out.extend(b);
        }
    }

    /// Reads up to `max` unacknowledged records after the cursor, from disk,
    /// and moves the cursor past them.
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<Record>, SpoolError> {
        let mut out = Vec::new();
        while out.len() < max {
            if self.cursor.reader.is_none() {
                // The cursor's segment, or the next one still on disk.
                let Some(id) = self
                    .book
                    .segments()
                    .map(|s| s.id)
                    .find(|&id| id >= self.cursor.seg)
                else {
                    break;
                };
                if id != self.cursor.seg {
                    self.cursor = Cursor::at(id);
                }
                let Some((from, limit)) = self.readable(id, self.cursor.offset) else {
                    self.cursor = Cursor::at(id + 1);
                    continue;
                };
                self.cursor.offset = from;
                let path = self.path_of(id);
                let mut f = File::open(&path).map_err(io_err(&path))?;
                f.seek(SeekFrom::Start(from)).map_err(io_err(&path))?;
                self.cursor.reader = Some((BufReader::with_capacity(64 * 1024, f), limit));
            }
            let path = self.path_of(self.cursor.seg);
            let (reader, limit) = self.cursor.reader.as_mut().expect("opened above");
            if self.cursor.offset >= *limit {
                // End of an intact stretch: on to the next one.
                self.cursor.reader = None;
                continue;
            }
            match read_frame(reader).map_err(io_err(&path))? {
                Ok(Some(payload)) => {
                    self.cursor.offset += (segment::HEADER + payload.len()) as u64;
                    let Ok(rec) = Record::decode(payload.as_slice()) else {
                        continue;
                    };
                    if self.book.is_acked(&rec.boot_id, rec.seq) {
                        continue;
                    }
                    if rec.node != self.node {
                        // Left by an agent of another name in this
                        // directory; the collector would refuse it.
                        self.dropped += 1;
                        self.book.ack(&rec.boot_id, rec.seq);
                        continue;
                    }
                    out.push(rec);
                }
                end => {
                    // End of what is written. The active segment may grow:
                    // at a clean end the reader waits there; past a partial
                    // frame (a write that failed and was cut back) it
                    // reopens at the cursor. An older segment is finished.
                    if self.cursor.seg >= self.active_id {
                        if end.is_err() {
                            self.cursor.reader = None;
                        }
                        break;
                    }
                    self.cursor = Cursor::at(self.cursor.seg + 1);
                }
            }
        }
        Ok(out)
    }
}
