//! Append: encode in parallel, place serially, write, sync, commit.
//! The ordered steps are `docs/crash-safety.md`, "Append".

use crate::sync::Ordering;
use std::borrow::Cow;
// Not the loom facade's: a scratch pool, no part of the protocol the
// models check (under loom `join` runs its halves one after the other).
use std::sync::Mutex;

use super::codec::{Encoded, Encoding, block_bytes_max, encode_block};
use super::{Writer, Zrecord};
use crate::error::{Error, Result};
use crate::format::{CHUNK_BYTES_MAX, CHUNKS_MAX, Codec, Entry, Loc, RECORD_BYTES_MAX, RECORDS_MAX, Tail};

/// Encoded records of one append, packed back to back.
struct Packed<'a> {
    data: Cow<'a, [u8]>,
    records: Vec<Encoded>,
}

/// Takes the spare-block pool's lock (a panic elsewhere leaves the pool a
/// plain list of buffers).
fn lock(spare: &Mutex<Vec<Vec<u8>>>) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
    spare.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes of input a parallel encoding task takes at least.
const TASK_BYTES_MIN: usize = 256 << 10;

/// An append under way: where its records went, before the commit.
struct Staged {
    /// The frontier before the append.
    start: Tail,
    /// The frontier after the records staged so far.
    cursor: Tail,
    entries: Vec<Entry>,
    /// A chunk file was created (the directory needs a sync).
    created: bool,
}

/// Where a record of `len` stored bytes goes when the frontier is `cursor`,
/// and the frontier after it; `None` when the chunks are exhausted. A record
/// never straddles two chunks.
pub(crate) fn place(cursor: Tail, len: u32) -> Option<(Loc, Tail)> {
    let mut at = cursor;
    // `>=`: the frontier must stay representable, so the last byte of a
    // chunk is never used.
    if u64::from(at.offset) + u64::from(len) >= CHUNK_BYTES_MAX {
        at = Tail { chunk: at.chunk.checked_add(1).filter(|c| u32::from(*c) < CHUNKS_MAX)?, offset: 0 };
    }
    let next = Tail { chunk: at.chunk, offset: at.offset + len };
    Some((Loc { chunk: at.chunk, offset: at.offset }, next))
}

/// Records `0..n` cut into consecutive ranges of about `segment_bytes`
/// each (at least one record per range).
fn segments<'a>(n: usize, record: &impl Fn(usize) -> &'a [u8], segment_bytes: usize) -> Vec<std::ops::Range<usize>> {
    let mut segments = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for k in 0..n {
        bytes += record(k).len();
        if bytes >= segment_bytes || k + 1 == n {
            segments.push(start..k + 1);
            (start, bytes) = (k + 1, 0);
        }
    }
    segments
}

impl Zrecord {
    /// Appends `n` records of `item_len` bytes each, taken back to back from
    /// the start of `src`, compressed with `codec`. Returns the index of the
    /// first. Atomic and durable when it returns: after a crash the store
    /// holds none or all of them.
    pub fn append(&self, src: &[u8], n: usize, item_len: usize, codec: Codec) -> Result<u64> {
        let total = n.checked_mul(item_len).filter(|&t| t <= src.len()).ok_or_else(|| {
            Error::InvalidArgument(format!("{n} records of {item_len} bytes do not fit a {}-byte buffer", src.len()))
        })?;
        if item_len > RECORD_BYTES_MAX as usize {
            return Err(Error::RecordTooLarge { position: 0, len: item_len as u64 });
        }
        let record = |k: usize| &src[k * item_len..(k + 1) * item_len];
        self.append_records(n, record, (codec == Codec::Raw).then(|| &src[..total]), codec)
    }

    /// Appends variable-size records: record `k` is
    /// `src[offsets[k]..offsets[k] + lens[k]]`. Returns the index of the first.
    /// Atomic and durable as [`Zrecord::append`]. Empty records are records.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use loaderx::{Codec, Zrecord};
    /// let store = Zrecord::open(dir.path())?;
    /// let tokens = b"the catsat";
    /// store.append_var(tokens, &[0, 3, 7, 10], &[3, 4, 3, 0], Codec::Zstd)?;
    /// assert_eq!(store.get(1)?, b" cat");
    /// assert_eq!(store.get(3)?, b"");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_var(&self, src: &[u8], offsets: &[u64], lens: &[u32], codec: Codec) -> Result<u64> {
        if offsets.len() != lens.len() {
            return Err(Error::InvalidArgument(format!("{} offsets but {} lengths", offsets.len(), lens.len())));
        }
        let mut contiguous = true;
        let mut expected = offsets.first().copied().unwrap_or(0);
        for (position, (&offset, &len)) in offsets.iter().zip(lens).enumerate() {
            if len > RECORD_BYTES_MAX {
                return Err(Error::RecordTooLarge { position, len: u64::from(len) });
            }
            if offset.checked_add(u64::from(len)).is_none_or(|end| end > src.len() as u64) {
                return Err(Error::InvalidArgument(format!(
                    "record {position} ({len} bytes at offset {offset}) runs past the {}-byte buffer",
                    src.len()
                )));
            }
            contiguous &= offset == expected;
            expected = offset + u64::from(len);
        }
        let record = |k: usize| &src[offsets[k] as usize..][..lens[k] as usize];
        let whole = (codec == Codec::Raw && contiguous && !offsets.is_empty())
            .then(|| &src[offsets[0] as usize..expected as usize]);
        self.append_records(offsets.len(), record, whole, codec)
    }

    /// `raw_whole`: for codec raw, all the records back to back in one slice
    /// (written as is, no copy).
    fn append_records<'a>(
        &self,
        n: usize,
        record: impl Fn(usize) -> &'a [u8] + Sync,
        raw_whole: Option<&'a [u8]>,
        codec: Codec,
    ) -> Result<u64> {
        self.check_writable()?;
        if n > RECORDS_MAX as usize {
            return Err(Error::StoreFull { path: self.path.clone() });
        }
        let dict = self.dict.get();
        if codec == Codec::ZstdDict && dict.is_none() {
            return Err(Error::NoDictionary { path: self.path.clone(), index: None });
        }
        if n == 0 {
            return Ok(u64::from(self.len()));
        }
        let level = if codec == Codec::ZstdDict { self.options.dict_level } else { self.options.zstd_level };
        let encoding = Encoding { codec, level, dict, min_saving: self.options.min_saving };
        let Some(data) = raw_whole else {
            return self.append_pipelined(n, &record, encoding);
        };
        let mut writer = self.lock_writer();
        let (first, mut staged) = self.stage_begin(&writer, n)?;
        // Written a segment at a time (see `stage_write`).
        let mut at = 0usize;
        for range in segments(n, &record, self.options.append_segment_bytes) {
            let records: Vec<Encoded> = range
                .map(|k| {
                    let len = record(k).len() as u32;
                    Encoded { phys: len, logic: len, codec: Codec::Raw }
                })
                .collect();
            let bytes: usize = records.iter().map(|r| r.phys as usize).sum();
            let packed = [Packed { data: Cow::Borrowed(&data[at..at + bytes]), records }];
            at += bytes;
            self.stage_write(&mut staged, &packed)?;
        }
        self.commit_staged(&mut writer, staged, first)
    }

    /// Encodes and writes in segments of about
    /// [`Options::append_segment_bytes`](super::Options::append_segment_bytes) of input,
    /// each segment's write overlapping the next one's encoding, then
    /// commits them all at once. Holds the writer lock throughout: a
    /// segment's place depends on the ones before it.
    fn append_pipelined<'a>(
        &self,
        n: usize,
        record: &(impl Fn(usize) -> &'a [u8] + Sync),
        encoding: Encoding<'_>,
    ) -> Result<u64> {
        let segments = segments(n, record, self.options.append_segment_bytes);
        let mut writer = self.lock_writer();
        let (first, mut staged) = self.stage_begin(&writer, n)?;
        // The blocks of a written segment, for the segment after next to
        // encode into: no fresh pages to fault in and zero per segment. Freed
        // when the call returns.
        let spare = Mutex::new(Vec::new());
        let mut encoded = self.encode(segments[0].clone(), record, encoding, &spare)?;
        for next in segments.iter().skip(1).map(Some).chain([None]) {
            let (next_encoded, written) = crate::sync::join(
                || next.map(|range| self.encode(range.clone(), record, encoding, &spare)).transpose(),
                || self.stage_write(&mut staged, &encoded),
            );
            written?;
            let done = std::mem::take(&mut encoded);
            lock(&spare).extend(done.into_iter().filter_map(|p| match p.data {
                Cow::Owned(buf) => Some(buf),
                Cow::Borrowed(_) => None,
            }));
            match next_encoded? {
                Some(packed) => encoded = packed,
                None => break,
            }
        }
        self.commit_staged(&mut writer, staged, first)
    }

    fn encode<'a>(
        &self,
        range: std::ops::Range<usize>,
        record: &(impl Fn(usize) -> &'a [u8] + Sync),
        encoding: Encoding<'_>,
        spare: &Mutex<Vec<Vec<u8>>>,
    ) -> Result<Vec<Packed<'static>>> {
        let n = range.len();
        let bytes: usize = range.clone().map(record).map(<[u8]>::len).sum();
        let tasks = (rayon::current_num_threads() * 4).min(bytes / TASK_BYTES_MIN).clamp(1, n);
        let per_task = n.div_ceil(tasks);
        crate::sync::map_collect(n.div_ceil(per_task), |t| {
            let task = range.start + t * per_task..(range.start + (t + 1) * per_task).min(range.end);
            let mut buf = lock(spare).pop().unwrap_or_default();
            buf.reserve(block_bytes_max(task.clone().map(|k| record(k).len())));
            let block = encode_block(task.map(record), encoding, buf)
                .map_err(|reason| Error::InvalidArgument(format!("zstd failed to compress: {reason}")))?;
            Ok(Packed { data: Cow::Owned(block.data), records: block.records })
        })
    }

    /// Starts an append of `n` records under the writer lock: the index of
    /// the first, and nothing staged yet.
    fn stage_begin(&self, writer: &Writer, n: usize) -> Result<(u32, Staged)> {
        self.check_writable()?;
        let first = self.len();
        if u64::from(first) + n as u64 > u64::from(RECORDS_MAX) {
            return Err(Error::StoreFull { path: self.path.clone() });
        }
        let staged = Staged { start: writer.tail, cursor: writer.tail, entries: Vec::with_capacity(n), created: false };
        Ok((first, staged))
    }

    /// Places encoded records after those already staged, writes them and
    /// starts their writeback (not durable yet:
    /// [`commit_staged`](Self::commit_staged) syncs).
    fn stage_write(&self, staged: &mut Staged, packed: &[Packed<'_>]) -> Result<()> {
        // Place every record; coalesce what lands contiguously into runs.
        let from = staged.cursor;
        let mut cursor = staged.cursor;
        let entries = &mut staged.entries;
        // (where, block, byte range in the block)
        let mut spans: Vec<(Loc, usize, std::ops::Range<usize>)> = Vec::new();
        for (b, block) in packed.iter().enumerate() {
            let mut at = 0usize;
            for rec in &block.records {
                let (loc, next) =
                    place(cursor, rec.phys).ok_or_else(|| Error::StoreFull { path: self.path.clone() })?;
                let range = at..at + rec.phys as usize;
                match spans.last_mut() {
                    Some((run, run_block, run_range))
                        if *run_block == b
                            && run.chunk == loc.chunk
                            && run_range.end == range.start
                            && u64::from(run.offset) + run_range.len() as u64 == u64::from(loc.offset) =>
                    {
                        run_range.end = range.end;
                    }
                    _ if !range.is_empty() => spans.push((loc, b, range)),
                    _ => {}
                }
                entries.push(Entry::new(loc, rec.phys, rec.logic, rec.codec));
                at += rec.phys as usize;
                cursor = next;
            }
        }
        let runs: Vec<(Loc, &[u8])> = spans.into_iter().map(|(loc, b, range)| (loc, &packed[b].data[range])).collect();

        // Write the data, creating chunk files as the frontier reaches them.
        for id in staged.cursor.chunk..=cursor.chunk {
            let (_, new) = self.chunks.get_or_create(&*self.vfs, id).map_err(|e| self.io("create chunk", e))?;
            staged.created |= new;
        }
        staged.cursor = cursor;
        crate::sync::try_for_each(&runs, |(loc, data)| {
            let chunk = self.chunks.get(&*self.vfs, loc.chunk)?.expect("opened above");
            crate::io::write_all_at(&*chunk.file, data, u64::from(loc.offset))
        })
        .map_err(|e| self.io("write chunk", e))?;
        self.start_writeback(from, cursor);
        Ok(())
    }

    /// Asks the kernel to start writing bytes `from..to` of the chunks back,
    /// so that the commit's data sync finds less to wait for. A hint only:
    /// a failure is ignored (the sync that follows reports real errors).
    fn start_writeback(&self, from: Tail, to: Tail) {
        for id in from.chunk..=to.chunk {
            let start = if id == from.chunk { u64::from(from.offset) } else { 0 };
            let end = if id == to.chunk { u64::from(to.offset) } else { CHUNK_BYTES_MAX };
            if let Ok(Some(chunk)) = self.chunks.get(&*self.vfs, id)
                && end > start
            {
                let _ = chunk.file.start_writeback(start, end - start);
            }
        }
    }

    /// Makes a staged append durable and visible: chunk lengths, data sync,
    /// table entries, header (`docs/crash-safety.md`, "Append").
    fn commit_staged(&self, writer: &mut Writer, staged: Staged, first: u32) -> Result<u64> {
        let Staged { start, cursor, entries, created } = staged;
        let n = entries.len();
        // How far each chunk must reach: the end of its last record, empty
        // ones included (they sit at the frontier, and a chunk file may be
        // shorter than the frontier the header records).
        let mut reach: Vec<(u16, u64)> = Vec::new();
        for entry in &entries {
            let (loc, end) = (entry.loc(), u64::from(entry.loc().offset) + u64::from(entry.phys_length()));
            match reach.last_mut() {
                Some((chunk, far)) if *chunk == loc.chunk => *far = (*far).max(end),
                _ => reach.push((loc.chunk, end)),
            }
        }
        for &(id, end) in &reach {
            let chunk = self.chunks.get(&*self.vfs, id).map_err(|e| self.io("open chunk", e))?.expect("opened above");
            if chunk.file.len().map_err(|e| self.io("stat chunk", e))? < end {
                chunk.file.set_len(end).map_err(|e| self.io("extend chunk", e))?;
            }
        }
        if created {
            self.vfs.sync_dir(&self.path).map_err(|e| self.sync_failed(e))?; // SYNC A0
        }
        for id in start.chunk..=cursor.chunk {
            let chunk = self.chunks.get(&*self.vfs, id).map_err(|e| self.io("open chunk", e))?.expect("opened above");
            chunk.file.sync_data().map_err(|e| self.sync_failed(e))?; // SYNC A1
        }

        // The table, then the header; each durable before the next.
        for (k, entry) in entries.iter().enumerate() {
            // SAFETY: slots at and past the published length; readers never
            // read them and the writer lock excludes other appenders.
            unsafe { self.table.set_entry(first + k as u32, entry) };
        }
        let end = first + n as u32;
        self.table.flush_entries(first, end).map_err(|e| self.sync_failed(e))?; // SYNC A2
        if cursor.chunk != start.chunk {
            // SAFETY: the writer lock is held.
            unsafe { self.table.set_header_word0(cursor.chunk) };
            self.table.flush_header().map_err(|e| self.sync_failed(e))?; // SYNC A3a
        }
        // SAFETY: the writer lock is held.
        unsafe { self.table.set_header_word1(cursor.offset, end) };
        self.table.flush_header().map_err(|e| self.sync_failed(e))?; // SYNC A3b

        // Publish: chunk lengths first, then the length readers go by.
        for &(id, end) in &reach {
            self.chunks.get(&*self.vfs, id).map_err(|e| self.io("open chunk", e))?.expect("opened").grew_to(end);
        }
        self.tail_chunk.store(u32::from(cursor.chunk), Ordering::Release);
        self.len.store(end, Ordering::Release);
        writer.tail = cursor;
        Ok(u64::from(first))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn place_rolls_over_and_never_straddles() {
        let at = |chunk, offset| Tail { chunk, offset };
        assert_eq!(place(at(0, 10), 5), Some((Loc { chunk: 0, offset: 10 }, at(0, 15))));
        let near_end = (CHUNK_BYTES_MAX - 4) as u32;
        assert_eq!(place(at(0, near_end), 4), Some((Loc { chunk: 1, offset: 0 }, at(1, 4))));
        assert_eq!(place(at(0, near_end), 3), Some((Loc { chunk: 0, offset: near_end }, at(0, u32::MAX))));
        assert_eq!(place(at(0, near_end), 0), Some((Loc { chunk: 0, offset: near_end }, at(0, near_end))));
        assert_eq!(place(at(4095, near_end), 4), None);
    }
}
