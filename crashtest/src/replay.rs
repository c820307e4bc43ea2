//! Replaying a log onto a device, and the crash states worth checking.
//!
//! A crash state is what the device holds after a prefix of the log (every
//! write logged before a flush point is durable at it), or, between two
//! flushes, the state at the earlier flush plus a seeded subset of the
//! writes logged after it (the volatile cache may have persisted any of
//! them; FUA writes it must have).

use crate::log::{ENTRY_DATA_BYTES_MAX, Entry, Log, flag};
use loaderx_sim::rng::Rng;
use std::io::{self, Read, Seek, SeekFrom, Write};

/// Bytes a discard's zeros are written in at a time.
const ZERO_BYTES: usize = 1 << 20;

/// Writes entry data from a log onto a target device, in log order.
pub struct Replayer<L, T> {
    log: L,
    target: T,
    sector_bytes: u64,
    target_bytes: u64,
    /// Entries already applied to `target` (a prefix of the log).
    applied: usize,
}

impl<L: Read + Seek, T: Write + Seek> Replayer<L, T> {
    /// A replayer of `log` onto `target`, `target_bytes` long, which holds
    /// the device as it was when logging began.
    pub fn new(log: L, target: T, sector_bytes: u32, target_bytes: u64) -> Self {
        Replayer { log, target, sector_bytes: u64::from(sector_bytes), target_bytes, applied: 0 }
    }

    /// Entries applied so far.
    pub fn applied(&self) -> usize {
        self.applied
    }

    /// The target, to sync or reopen.
    pub fn target(&mut self) -> &mut T {
        &mut self.target
    }

    /// Applies entries `applied..end` to the target.
    pub fn advance(&mut self, entries: &[Entry], end: usize) -> io::Result<()> {
        assert!(end >= self.applied && end <= entries.len(), "replay moves forward only");
        for entry in &entries[self.applied..end] {
            apply(&mut self.log, &mut self.target, entry, self.sector_bytes, self.target_bytes)?;
        }
        self.applied = end;
        Ok(())
    }

    /// Applies `chosen` entries to `other` (a copy of the target's state
    /// over which a crash state is built), leaving the target as it is.
    pub fn apply_to<O: Write + Seek>(&mut self, entries: &[&Entry], other: &mut O) -> io::Result<()> {
        for entry in entries {
            apply(&mut self.log, other, entry, self.sector_bytes, self.target_bytes)?;
        }
        Ok(())
    }
}

/// Applies one entry: its data written, a discard's range zeroed, a flush
/// or mark nothing. A range past the target's end is an error.
fn apply<L: Read + Seek, T: Write + Seek>(
    log: &mut L,
    target: &mut T,
    entry: &Entry,
    sector_bytes: u64,
    target_bytes: u64,
) -> io::Result<()> {
    let zeroing = entry.flags & flag::DISCARD != 0;
    if !(entry.has_data() || zeroing && entry.nr_sectors > 0) {
        return Ok(());
    }
    let at = entry.sector.checked_mul(sector_bytes);
    let len = entry.nr_sectors.checked_mul(sector_bytes);
    let (Some(at), Some(len)) = (at, len) else {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "entry's range overflows"));
    };
    if at.checked_add(len).is_none_or(|end| end > target_bytes) {
        let what = format!("entry writes {len} bytes at {at}, past the target's {target_bytes}");
        return Err(io::Error::new(io::ErrorKind::InvalidData, what));
    }
    target.seek(SeekFrom::Start(at))?;
    if zeroing {
        let zeros = vec![0u8; ZERO_BYTES.min(len as usize)];
        let mut left = len as usize;
        while left > 0 {
            let n = left.min(zeros.len());
            target.write_all(&zeros[..n])?;
            left -= n;
        }
        return Ok(());
    }
    if len > ENTRY_DATA_BYTES_MAX {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("entry of {len} bytes")));
    }
    let mut data = vec![0u8; len as usize];
    log.seek(SeekFrom::Start(entry.data_offset))?;
    log.read_exact(&mut data)?;
    target.write_all(&data)
}

/// What kind of crash state a point is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointKind {
    /// The log up to a flush or FUA write.
    Flush,
    /// The log up to a mark (an acknowledged operation).
    Mark,
    /// The state at a flush, plus a seeded subset of the writes logged
    /// after it, up to a later entry before the next flush.
    Between {
        /// The subset's seed.
        seed: u64,
    },
}

/// One crash state to check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Point {
    /// Entries `..prefix` are applied whole.
    pub prefix: usize,
    /// For `Between`: entries `prefix..end` of which a subset is kept.
    pub end: usize,
    /// How the state is built.
    pub kind: PointKind,
    /// Operations acknowledged in the state: the marks `op-K` among the
    /// entries `..end`, the largest K.
    pub acked: usize,
    /// True when an operation was running: writes follow the last mark.
    pub in_flight: bool,
}

impl Point {
    /// A label for reports: `flush@E`, `mark@E` or `between@P..E#seed`.
    pub fn label(&self) -> String {
        match self.kind {
            PointKind::Flush => format!("flush@{}", self.prefix),
            PointKind::Mark => format!("mark@{}", self.prefix),
            PointKind::Between { seed } => format!("between@{}..{}#{seed:x}", self.prefix, self.end),
        }
    }
}

/// The operation number of a mark named `op-K`.
pub fn op_of_mark(entry: &Entry) -> Option<usize> {
    entry.mark.as_deref()?.strip_prefix("op-")?.parse().ok()
}

/// `acked` and `in_flight` for a state made of entries `..end`.
fn progress(entries: &[Entry], end: usize) -> (usize, bool) {
    let mut acked = 0;
    let mut in_flight = false;
    for entry in &entries[..end] {
        if let Some(op) = op_of_mark(entry) {
            acked = acked.max(op);
            in_flight = false;
        } else if entry.mark.is_none() {
            in_flight = true;
        }
    }
    (acked, in_flight)
}

/// Every flush point and every mark, in log order: the log up to and
/// including each.
pub fn prefix_points(log: &Log) -> Vec<Point> {
    let mut points = Vec::new();
    for (k, entry) in log.entries.iter().enumerate() {
        let kind = if entry.is_flush_point() {
            PointKind::Flush
        } else if entry.flags & flag::MARK != 0 {
            PointKind::Mark
        } else {
            continue;
        };
        let (acked, in_flight) = progress(&log.entries, k + 1);
        points.push(Point { prefix: k + 1, end: k + 1, kind, acked, in_flight });
    }
    points
}

/// `per_gap` seeded states in each gap between two flush points that holds
/// writes: the earlier flush's state plus a subset of the writes up to a
/// random later entry of the gap.
pub fn between_points(log: &Log, per_gap: usize, seed: u64) -> Vec<Point> {
    let mut rng = Rng::new(seed);
    let mut points = Vec::new();
    let mut start = 0; // the entry after the last flush
    for (k, entry) in log.entries.iter().enumerate() {
        if !entry.is_flush_point() && k + 1 < log.entries.len() {
            continue;
        }
        // The last gap may end without a flush: its last entry is in it.
        let stop = if entry.is_flush_point() { k } else { k + 1 };
        let gap = &log.entries[start..stop];
        if gap.iter().any(Entry::has_data) {
            for _ in 0..per_gap {
                let end = start + 1 + rng.below(gap.len() as u64) as usize;
                let (acked, in_flight) = progress(&log.entries, end);
                let kind = PointKind::Between { seed: rng.next_u64() };
                points.push(Point { prefix: start, end, kind, acked, in_flight });
            }
        }
        start = k + 1;
    }
    points
}

/// The writes a `Between` point keeps of entries `prefix..end`: each with
/// probability one half, FUA writes always (durable on completion).
pub fn kept_writes<'a>(log: &'a Log, point: &Point) -> Vec<&'a Entry> {
    let PointKind::Between { seed } = point.kind else {
        return Vec::new();
    };
    let mut rng = Rng::new(seed);
    let gap = &log.entries[point.prefix..point.end];
    gap.iter()
        .filter(|e| e.has_data() || e.flags & flag::DISCARD != 0)
        .filter(|e| e.flags & flag::FUA != 0 || rng.chance(0.5))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{LogWriter, read_log};
    use std::io::Cursor;

    fn parsed(w: &LogWriter) -> (Vec<u8>, Log) {
        let bytes = w.finish();
        let log = read_log(&mut Cursor::new(&bytes), bytes.len() as u64).expect("parses");
        (bytes, log)
    }

    #[test]
    fn replay_writes_discards_and_stops_where_told() {
        let mut w = LogWriter::new(512);
        w.write(0, &[1u8; 1024], 0).flush().write(1, &[2u8; 512], 0).discard(0, 1).mark("op-1");
        let (bytes, log) = parsed(&w);
        let mut r = Replayer::new(Cursor::new(bytes), Cursor::new(vec![9u8; 2048]), 512, 2048);
        r.advance(&log.entries, 2).expect("replays");
        let dev = r.target().get_ref().clone();
        assert_eq!(&dev[..1024], &[1u8; 1024][..]);
        assert_eq!(&dev[1024..], &[9u8; 1024][..]);
        r.advance(&log.entries, 5).expect("replays");
        let dev = r.target().get_ref();
        assert_eq!((&dev[..512], &dev[512..1024]), (&[0u8; 512][..], &[2u8; 512][..]));
    }

    #[test]
    fn a_write_past_the_target_is_refused() {
        let (bytes, log) = parsed(LogWriter::new(512).write(3, &[1u8; 512], 0));
        let mut r = Replayer::new(Cursor::new(bytes), Cursor::new(vec![0u8; 1024]), 512, 1024);
        assert!(r.advance(&log.entries, 1).is_err());
    }

    #[test]
    fn points_count_acknowledged_operations() {
        let mut w = LogWriter::new(512);
        w.write(0, &[1u8; 512], 0).flush().mark("op-1").write(1, &[1u8; 512], flag::FUA).mark("op-2");
        w.write(2, &[3u8; 512], 0).write(3, &[3u8; 512], 0).flush();
        let (_, log) = parsed(&w);
        let got: Vec<(usize, PointKind, usize, bool)> =
            prefix_points(&log).iter().map(|p| (p.prefix, p.kind, p.acked, p.in_flight)).collect();
        use PointKind::{Flush, Mark};
        assert_eq!(
            got,
            [(2, Flush, 0, true), (3, Mark, 1, false), (4, Flush, 1, true), (5, Mark, 2, false), (8, Flush, 2, true)]
        );
        let between = between_points(&log, 3, 1);
        // Gaps with writes: before the first flush, and the last one.
        assert_eq!(between.len(), 6);
        for p in &between {
            // After the FUA write (entry 3), the gap is the mark op-2 and two writes.
            assert!(p.prefix == 0 || p.prefix == 4, "{p:?}");
            assert!(p.end > p.prefix && p.end <= 7);
            assert_eq!(p.in_flight, p.end != 5, "{p:?}");
            assert_eq!(p.acked, if p.prefix == 0 { 0 } else { 2 });
        }
        assert_eq!(between, between_points(&log, 3, 1), "seeded");
    }

    #[test]
    fn subsets_keep_fua_writes_and_vary_by_seed() {
        let mut w = LogWriter::new(512);
        w.flush();
        for k in 0..40 {
            w.write(k, &[k as u8; 512], if k == 7 { flag::FUA } else { 0 });
        }
        w.flush();
        let (_, log) = parsed(&w);
        let sizes: Vec<usize> = (0..20)
            .map(|seed| {
                let p = Point { prefix: 1, end: 41, kind: PointKind::Between { seed }, acked: 0, in_flight: true };
                let kept = kept_writes(&log, &p);
                assert!(kept.iter().any(|e| e.sector == 7), "the FUA write is kept");
                kept.len()
            })
            .collect();
        assert!(sizes.iter().any(|&n| n != sizes[0]) && sizes.iter().all(|&n| n < 40));
    }
}
