//! Append: encode in parallel, place serially, write, sync, commit.
//! The ordered steps are `docs/crash-safety.md`, "Append".

use std::borrow::Cow;
// Not the loom facade's: a scratch pool, no part of the protocol the
// models check (under loom `join` runs its halves one after the other).
use std::sync::Mutex;

use super::Zrecord;
use super::chunks::Chunk;
use super::codec::{Encoded, Encoding, block_bytes_max, encode_block};
use super::entry::assert_committable;
use super::meta::AppendGuard;
use super::sums::{Sum, stored_sum, tag_of};
use crate::error::{Error, Result};
use crate::format::{Codec, Entry, Frontier, Loc, RECORD_BYTES_MAX, RECORDS_MAX};

/// Encoded records of one append, packed back to back.
struct Packed<'a> {
    data: Cow<'a, [u8]>,
    records: Vec<Encoded>,
}

/// The blocks of written segments, for later segments to encode into: no
/// fresh pages to fault in and zero per segment.
#[derive(Default)]
struct SpareBlocks(Mutex<Vec<Vec<u8>>>);

impl SpareBlocks {
    /// An empty block (reused when one is spare).
    fn take(&self) -> Vec<u8> {
        let mut block = self.lock().pop().unwrap_or_default();
        block.clear();
        block
    }
    /// Returns the owned blocks of written segments.
    fn give_back(&self, done: Vec<Packed<'_>>) {
        self.lock().extend(done.into_iter().filter_map(|p| match p.data {
            Cow::Owned(buf) => Some(buf),
            Cow::Borrowed(_) => None,
        }));
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        // A panic elsewhere leaves the pool a plain list of buffers.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Bytes of input a parallel encoding task takes at least.
const TASK_BYTES_MIN: usize = 256 << 10;

/// An append under way: where its records went, before the commit.
struct Staged<'s> {
    /// The index of its first record.
    first: u32,
    /// The frontier after the records staged so far.
    cursor: Frontier,
    entries: Vec<Entry>,
    /// Each entry's slot of `sums.zr`.
    sums: Vec<Sum>,
    /// The chunks the records reach, in placement order, each with the end
    /// of its last record.
    reach: Vec<(u16, &'s Chunk, u64)>,
    /// A chunk file was created (the directory needs a sync).
    created: bool,
}

/// Bytes of raw records an append's summing task takes at least.
const SUM_TASK_BYTES: usize = 1 << 20;

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
            return Err(Error::StoreFull { path: self.path().to_path_buf() });
        }
        let dict = self.dict.get();
        if codec == Codec::ZstdDict && dict.is_none() {
            return Err(Error::NoDictionary { path: self.path().to_path_buf(), index: None });
        }
        if n == 0 {
            return Ok(u64::from(self.len()));
        }
        let level = if codec == Codec::ZstdDict { self.options.dict_level } else { self.options.zstd_level };
        let encoding = Encoding { codec, level, dict, min_saving: self.options.min_saving };
        let Some(data) = raw_whole else {
            return self.append_pipelined(n, &record, encoding);
        };
        let mut writer = self.meta.lock_appends();
        let mut staged = self.stage_begin(&writer, n)?;
        // Written a segment at a time (see `stage_write`), summed at the
        // commit (see `raw_sums`).
        let mut at = 0usize;
        for range in segments(n, &record, self.options.append_segment_bytes) {
            let records: Vec<Encoded> = range.map(|k| Encoded::raw_unsummed(record(k).len() as u32)).collect();
            let bytes: usize = records.iter().map(|r| r.phys as usize).sum();
            let packed = [Packed { data: Cow::Borrowed(&data[at..at + bytes]), records }];
            at += bytes;
            self.stage_write(&mut staged, &packed)?;
        }
        let sum_later = |sums: &mut [Sum]| raw_sums(sums, &record);
        self.commit_staged(&mut writer, staged, Some(&sum_later))
    }

    /// Encodes and writes in segments of about
    /// [`Options::append_segment_bytes`](super::Options::append_segment_bytes) of input,
    /// each segment's write overlapping the next one's encoding, then
    /// commits them all at once. Holds the append mutex throughout: a
    /// segment's place depends on the ones before it.
    fn append_pipelined<'a>(
        &self,
        n: usize,
        record: &(impl Fn(usize) -> &'a [u8] + Sync),
        encoding: Encoding<'_>,
    ) -> Result<u64> {
        let segments = segments(n, record, self.options.append_segment_bytes);
        let mut writer = self.meta.lock_appends();
        let mut staged = self.stage_begin(&writer, n)?;
        // Freed when the call returns.
        let spare = SpareBlocks::default();
        let mut encoded = self.encode(segments[0].clone(), record, encoding, &spare)?;
        for next in segments.iter().skip(1).map(Some).chain([None]) {
            let (next_encoded, written) = crate::sync::join(
                || next.map(|range| self.encode(range.clone(), record, encoding, &spare)).transpose(),
                || self.stage_write(&mut staged, &encoded),
            );
            written?;
            spare.give_back(std::mem::take(&mut encoded));
            match next_encoded? {
                Some(packed) => encoded = packed,
                None => break,
            }
        }
        self.commit_staged(&mut writer, staged, None)
    }

    fn encode<'a>(
        &self,
        range: std::ops::Range<usize>,
        record: &(impl Fn(usize) -> &'a [u8] + Sync),
        encoding: Encoding<'_>,
        spare: &SpareBlocks,
    ) -> Result<Vec<Packed<'static>>> {
        let n = range.len();
        let bytes: usize = range.clone().map(record).map(<[u8]>::len).sum();
        let tasks = (rayon::current_num_threads() * 4).min(bytes / TASK_BYTES_MIN).clamp(1, n);
        let per_task = n.div_ceil(tasks);
        crate::sync::map_collect(n.div_ceil(per_task), |t| {
            let task = range.start + t * per_task..(range.start + (t + 1) * per_task).min(range.end);
            let mut buf = spare.take();
            buf.reserve(block_bytes_max(task.clone().map(|k| record(k).len())));
            let block = encode_block(task.map(record), encoding, buf)
                .map_err(|reason| Error::InvalidArgument(format!("zstd failed to compress: {reason}")))?;
            Ok(Packed { data: Cow::Owned(block.data), records: block.records })
        })
    }

    /// Starts an append of `n` records under the append mutex: nothing
    /// staged yet.
    fn stage_begin(&self, writer: &AppendGuard<'_>, n: usize) -> Result<Staged<'_>> {
        self.check_writable()?;
        let first = self.len();
        if u64::from(first) + n as u64 > u64::from(RECORDS_MAX) {
            return Err(Error::StoreFull { path: self.path().to_path_buf() });
        }
        let start = writer.frontier();
        let (entries, sums) = (Vec::with_capacity(n), Vec::with_capacity(n));
        Ok(Staged { first, cursor: start, entries, sums, reach: Vec::new(), created: false })
    }

    /// Places encoded records after those already staged, writes them and
    /// starts their writeback (not durable yet:
    /// [`commit_staged`](Self::commit_staged) syncs).
    fn stage_write<'s>(&'s self, staged: &mut Staged<'s>, packed: &[Packed<'_>]) -> Result<()> {
        let from = staged.cursor;
        let spans = self.place_all(staged, packed)?;
        let runs: Vec<(&Chunk, u64, &[u8])> =
            spans.into_iter().map(|(chunk, offset, b, range)| (chunk, offset, &packed[b].data[range])).collect();
        crate::sync::try_for_each(&runs, |(chunk, offset, data)| chunk.write(data, *offset))
            .map_err(|e| self.io("write chunk", e))?;
        self.chunks.start_writeback(from, staged.cursor);
        Ok(())
    }

    /// Places the records of `packed` from the staged cursor, adding their
    /// entries and opening (creating) each chunk they reach; returns the
    /// runs of bytes that land contiguously.
    fn place_all<'s>(&'s self, staged: &mut Staged<'s>, packed: &[Packed<'_>]) -> Result<Vec<Span<'s>>> {
        let mut spans: Vec<Span<'s>> = Vec::new();
        for (b, block) in packed.iter().enumerate() {
            let mut at = 0usize;
            for rec in &block.records {
                let (loc, next) = staged
                    .cursor
                    .place(rec.phys)
                    .ok_or_else(|| Error::StoreFull { path: self.path().to_path_buf() })?;
                let chunk = self.reach(staged, loc, rec.phys)?;
                let (offset, range) = (u64::from(loc.offset), at..at + rec.phys as usize);
                match spans.last_mut() {
                    Some((run, run_offset, run_block, run_range))
                        if *run_block == b
                            && std::ptr::eq(*run, chunk)
                            && run_range.end == range.start
                            && *run_offset + run_range.len() as u64 == offset =>
                    {
                        run_range.end = range.end;
                    }
                    _ if !range.is_empty() => spans.push((chunk, offset, b, range)),
                    _ => {}
                }
                let entry = Entry::new(loc, rec.phys, rec.logic, rec.codec);
                staged.sums.push(Sum { sum: rec.sum, tag: tag_of(&entry) });
                staged.entries.push(entry);
                at += rec.phys as usize;
                staged.cursor = next;
            }
        }
        Ok(spans)
    }

    /// The chunk a record placed at `loc` goes to, opened (created) when the
    /// placement first reaches it; notes how far the records reach in it.
    fn reach<'s>(&'s self, staged: &mut Staged<'s>, loc: Loc, phys: u32) -> Result<&'s Chunk> {
        let end = u64::from(loc.offset) + u64::from(phys);
        if let Some((id, chunk, far)) = staged.reach.last_mut()
            && *id == loc.chunk
        {
            *far = (*far).max(end);
            return Ok(*chunk);
        }
        let (chunk, new) = self.chunks.create(loc.chunk).map_err(|e| self.io("create chunk", e))?;
        staged.created |= new;
        staged.reach.push((loc.chunk, chunk, end));
        Ok(chunk)
    }

    /// Makes a staged append durable and visible: chunk lengths, data sync,
    /// table entries, header (`docs/crash-safety.md`, "Append").
    /// `sum_later`: fills in the sums of records staged unsummed, run while
    /// the data syncs (the sums are needed only from step 3 on).
    fn commit_staged(
        &self,
        writer: &mut AppendGuard<'_>,
        staged: Staged<'_>,
        sum_later: Option<&SumLater<'_>>,
    ) -> Result<u64> {
        let Staged { first, cursor, entries, mut sums, reach, created, .. } = staged;
        // Each chunk reaches the end of its last record, empty ones
        // included: they sit at the frontier, which may lie past the end of
        // a chunk file.
        for &(_, chunk, end) in &reach {
            chunk.extend_to(end).map_err(|e| self.io("extend chunk", e))?;
        }
        if created {
            self.chunks.sync_dir().map_err(|e| self.sync_failed(e))?; // SYNC A0
        }
        let (synced, ()) = crate::sync::join_blocking(
            || self.sync_chunks(&reach), // SYNC A1
            || sum_later.map_or((), |sum| sum(&mut sums)),
        );
        synced?;
        let has_dict = self.has_dict();
        for entry in &entries {
            assert_committable(entry, cursor, has_dict);
        }
        writer
            .commit_append(first, &entries, &sums, cursor, self.options.checksum_lag_bytes)
            .map_err(|e| self.sync_failed(e))?; // steps 3, A2, A3, 4 (in Meta)
        self.debug_check_invariants();
        Ok(u64::from(first))
    }

    /// SYNC A1: the data of every chunk an append reached. The
    /// `crash-mutant` feature (test only) drops it, for the kernel crash
    /// test to show that it notices (docs/crash-safety.md).
    fn sync_chunks(&self, reach: &[(u16, &Chunk, u64)]) -> Result<()> {
        if !cfg!(feature = "crash-mutant") {
            for &(_, chunk, _) in reach {
                chunk.sync_data().map_err(|e| self.sync_failed(e))?; // SYNC A1
            }
        }
        Ok(())
    }
}

/// Fills in the sums of raw records `0..sums.len()` (`record(k)` is record
/// `k`'s bytes), in parallel, a task per `SUM_TASK_BYTES` of records.
fn raw_sums<'a>(sums: &mut [Sum], record: &(impl Fn(usize) -> &'a [u8] + Sync)) {
    let tasks = segments(sums.len(), record, SUM_TASK_BYTES);
    let summed: Vec<Vec<u32>> = crate::sync::map_collect(tasks.len(), |t| {
        let task = tasks[t].clone();
        Ok::<_, std::convert::Infallible>(
            task.map(|k| stored_sum(Codec::Raw as u8, record(k).len() as u32, record(k))).collect(),
        )
    })
    .unwrap_or_else(|never| match never {});
    for (slot, sum) in sums.iter_mut().zip(summed.into_iter().flatten()) {
        slot.sum = sum;
    }
}

/// Fills in the sums of an append's records staged unsummed.
type SumLater<'a> = dyn Fn(&mut [Sum]) + Sync + 'a;

/// A run of placed bytes: the chunk and offset it goes to, which block it
/// comes from, and its byte range in that block.
type Span<'s> = (&'s Chunk, u64, usize, std::ops::Range<usize>);
