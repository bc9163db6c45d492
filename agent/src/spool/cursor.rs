//! Where sending has got to in the spool: the [`Cursor`] that appending
//! moves past dropped segments and reading back advances. Apart from both
//! so each takes it from here.

use std::fs::File;
use std::io::BufReader;

/// Where sending has got to: a segment and a byte offset in it.
pub(super) struct Cursor {
    pub seg: u64,
    pub offset: u64,
    /// Open at `offset`; readable up to `limit` (the end of an intact run
    /// of a damaged file, else unbounded).
    pub reader: Option<(BufReader<File>, u64)>,
}

impl Cursor {
    pub fn at(seg: u64) -> Cursor {
        Cursor {
            seg,
            offset: 0,
            reader: None,
        }
    }
}
