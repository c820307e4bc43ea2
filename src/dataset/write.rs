//! Writing datasets: [`write_dataset`] (from a slice, an iterator or a
//! `.npy` file) and [`write_ragged`], each a store plus its `schema.json`,
//! streamed to the store in bounded calls, as the reference's
//! `write_dataset` / `write_ragged` do.
//!
//! Appending to an existing dataset of the same dtype and shape (or ragged
//! item shape) adds records; anything else is [`DatasetError::Incompatible`].
//! An existing dataset keeps its own codec (the one its schema names), as
//! in the reference.

use std::path::Path;
use std::sync::Arc;

use super::appender::DatasetAppender;
use super::dtype::{DType, Element};
use super::error::DatasetError;
use super::mode::{WriteMode, check_in, write_with_mode};
use super::npy::NpyFile;
use super::schema::Schema;
use crate::format::Codec;
use crate::io::Vfs;
use crate::io::real::RealFs;
use crate::{Options, Zrecord, default_dict_size};

/// Bytes submitted per append call by default (the reference's `chunk_bytes`).
pub const WRITE_CHUNK_BYTES_DEFAULT: usize = 64 << 20;
/// The dictionary is trained on at most this many records...
pub const DICT_SAMPLES_MAX: usize = 8192;
/// ...and at most this many bytes of them.
pub const DICT_SAMPLE_BYTES_MAX: usize = 256 << 20;

/// How to write a dataset.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// Codec of a new dataset (an existing one keeps its own).
    pub codec: Codec,
    /// Upper bound on the bytes submitted per append call (at least one record).
    pub chunk_bytes: usize,
    /// Cap on the `zstd_dict` dictionary size; `None` adapts it to the
    /// sample ([`default_dict_size`]).
    pub dict_size: Option<usize>,
    /// How the store is opened (compression levels, ...). `read_only` is ignored.
    pub store: Options,
    /// Records per shard: a new shard starts when the last one holds this
    /// many (`None`: when a store is full, at 2^24 records or its chunk
    /// files' capacity). Applies to this write; an existing dataset's shards
    /// keep their counts.
    pub shard_records: Option<u64>,
    /// What to do with a dataset that already holds records (default: append).
    pub mode: WriteMode,
}

impl Default for WriteOptions {
    fn default() -> WriteOptions {
        WriteOptions {
            codec: Codec::Zstd,
            chunk_bytes: WRITE_CHUNK_BYTES_DEFAULT,
            dict_size: None,
            store: Options::default(),
            shard_records: None,
            mode: WriteMode::Append,
        }
    }
}

impl WriteOptions {
    /// The defaults with `codec`.
    pub fn codec(codec: Codec) -> WriteOptions {
        WriteOptions { codec, ..WriteOptions::default() }
    }

    /// These options with `mode`.
    pub fn with_mode(&self, mode: WriteMode) -> WriteOptions {
        WriteOptions { mode, ..self.clone() }
    }
}

/// Trains a dictionary on `samples` (concatenated, of `sizes`) for the
/// dataset at `path`; zero-length samples are left out (they teach nothing).
pub(crate) fn train(
    path: &Path,
    samples: &[u8],
    sizes: &[usize],
    opts: &WriteOptions,
) -> Result<Vec<u8>, DatasetError> {
    let sizes: Vec<usize> = sizes.iter().copied().filter(|&s| s > 0).collect();
    let target = opts.dict_size.unwrap_or_else(|| default_dict_size(samples.len()));
    Zrecord::train_dict_bytes(samples, &sizes, target).map_err(|e| match e {
        crate::Error::DictionaryTraining { reason } => DatasetError::DictionaryTraining {
            path: path.to_path_buf(),
            records: sizes.len(),
            bytes: samples.len(),
            reason,
        },
        e => e.into(),
    })
}

/// The reference's dictionary sample: `k = min(count, 8192, max(1, 256 MiB
/// / row_bytes))` record indices evenly spaced over `0..count` (NumPy's
/// `unique(linspace(0, count - 1, k).astype(int64))`).
pub(crate) fn dict_sample_indices(count: u64, row_bytes: usize) -> Vec<u64> {
    if count == 0 {
        return Vec::new();
    }
    let k = count.min(DICT_SAMPLES_MAX as u64).min((DICT_SAMPLE_BYTES_MAX / row_bytes.max(1)).max(1) as u64);
    let stop = (count - 1) as f64;
    let mut out: Vec<u64> = if k == 1 {
        vec![0]
    } else {
        let step = stop / (k - 1) as f64;
        (0..k).map(|i| if i == k - 1 { count - 1 } else { (i as f64 * step) as u64 }).collect()
    };
    out.dedup();
    out
}

/// Records in a full dictionary sample of `row_bytes` records.
fn dict_sample_records(row_bytes: usize) -> usize {
    DICT_SAMPLES_MAX.min((DICT_SAMPLE_BYTES_MAX / row_bytes.max(1)).max(1))
}

/// Writes `data`, records of `shape` elements of `T` back to back, as a
/// fixed-shape dataset at `path` (created, or appended to). Returns the
/// number of records written.
pub fn write_dataset<T: Element>(
    path: impl AsRef<Path>,
    data: &[T],
    shape: &[usize],
    opts: &WriteOptions,
) -> Result<u64, DatasetError> {
    write_dataset_bytes(path, T::DTYPE, shape, bytemuck::cast_slice(data), opts)
}

/// [`write_dataset`] from raw bytes of any dtype.
pub fn write_dataset_bytes(
    path: impl AsRef<Path>,
    dtype: DType,
    shape: &[usize],
    data: &[u8],
    opts: &WriteOptions,
) -> Result<u64, DatasetError> {
    write_with_mode(path.as_ref(), opts.mode, |at| {
        write_dataset_bytes_in(Arc::new(RealFs), at, dtype, shape, data, &opts.with_mode(WriteMode::Append))
    })
}

/// [`write_dataset_bytes`] on any filesystem implementation.
pub fn write_dataset_bytes_in(
    vfs: Arc<dyn Vfs>,
    path: &Path,
    dtype: DType,
    shape: &[usize],
    data: &[u8],
    opts: &WriteOptions,
) -> Result<u64, DatasetError> {
    check_in(&vfs, path, opts.mode)?;
    let mut appender = DatasetAppender::fixed_in(vfs, path, dtype, shape, opts)?;
    let count = appender.append_fixed(data)?;
    appender.finish()?;
    Ok(count)
}

/// Writes the `.npy` file at `npy` as a fixed-shape dataset at `path`: one
/// record per slice along axis 0 (a 1-D array becomes a dataset of
/// scalars), dtype and shape from the file's header. The file is mapped and
/// streamed in calls of at most `opts.chunk_bytes`, so a file larger than
/// memory converts.
pub fn write_dataset_npy(
    path: impl AsRef<Path>,
    npy: impl AsRef<Path>,
    opts: &WriteOptions,
) -> Result<u64, DatasetError> {
    write_with_mode(path.as_ref(), opts.mode, |at| {
        write_dataset_npy_in(Arc::new(RealFs), at, npy.as_ref(), &opts.with_mode(WriteMode::Append))
    })
}

/// [`write_dataset_npy`] on any filesystem implementation (the `.npy` file
/// and the dataset both on `vfs`).
pub fn write_dataset_npy_in(
    vfs: Arc<dyn Vfs>,
    path: &Path,
    npy: &Path,
    opts: &WriteOptions,
) -> Result<u64, DatasetError> {
    let file = NpyFile::open(&*vfs, npy)?;
    Schema::fixed(file.dtype, file.record_shape.clone(), opts.codec).map_err(|e| e.at(npy))?;
    check_in(&vfs, path, opts.mode)?;
    let mut appender = DatasetAppender::fixed_in(vfs, path, file.dtype, &file.record_shape, opts)?;
    let count = appender.append_source(file.count, &file)?;
    appender.finish()?;
    Ok(count)
}

/// Writes fixed-shape records from an iterator, each item one record of
/// `shape` elements of `T`; streamed in calls of at most `opts.chunk_bytes`.
/// A `zstd_dict` dictionary is trained on an evenly spaced sample of the
/// first records (up to 8192 of them, or 256 MiB, are taken before the
/// first call: an iterator cannot be sampled ahead).
pub fn write_dataset_iter<T, R, I>(
    path: impl AsRef<Path>,
    shape: &[usize],
    records: I,
    opts: &WriteOptions,
) -> Result<u64, DatasetError>
where
    T: Element,
    R: AsRef<[T]>,
    I: IntoIterator<Item = R>,
{
    write_with_mode(path.as_ref(), opts.mode, |at| write_dataset_iter_at(at, shape, records, opts))
}

/// [`write_dataset_iter`] appending at `path`.
fn write_dataset_iter_at<T, R, I>(
    path: &Path,
    shape: &[usize],
    records: I,
    opts: &WriteOptions,
) -> Result<u64, DatasetError>
where
    T: Element,
    R: AsRef<[T]>,
    I: IntoIterator<Item = R>,
{
    let mut appender = DatasetAppender::fixed_in(Arc::new(RealFs), path, T::DTYPE, shape, opts)?;
    let row_bytes = appender.row_bytes();
    let step = (opts.chunk_bytes / row_bytes.max(1)).max(1);
    let mut block: Vec<u8> = Vec::with_capacity(step * row_bytes);
    let mut written = 0u64;
    let mut records = records.into_iter().peekable();
    while records.peek().is_some() {
        block.clear();
        let mut n = 0usize;
        // While the dictionary is still to be trained, the first call takes
        // a whole dictionary sample's worth of records.
        let take = if appender.needs_dict() { step.max(dict_sample_records(row_bytes)) } else { step };
        for record in records.by_ref().take(take) {
            let bytes: &[u8] = bytemuck::cast_slice(record.as_ref());
            if bytes.len() != row_bytes {
                return Err(DatasetError::ShapeMismatch(format!(
                    "record {} has {} bytes, records of {}{shape:?} have {row_bytes}",
                    written + n as u64,
                    bytes.len(),
                    T::DTYPE
                )));
            }
            block.extend_from_slice(bytes);
            n += 1;
        }
        written += appender.append_source(n as u64, &SliceSource { data: &block, row_bytes })?;
    }
    appender.finish()?;
    Ok(written)
}

/// Fixed-size records readable by position.
pub(crate) trait FixedSource {
    /// The bytes of records `start..start + n`, borrowed where possible,
    /// otherwise copied into `scratch`.
    fn records<'a>(&'a self, start: u64, n: usize, scratch: &'a mut Vec<u8>) -> Result<&'a [u8], DatasetError>;
}

/// Records back to back in memory.
pub(crate) struct SliceSource<'d> {
    pub(crate) data: &'d [u8],
    pub(crate) row_bytes: usize,
}

impl FixedSource for SliceSource<'_> {
    fn records<'a>(&'a self, start: u64, n: usize, _: &'a mut Vec<u8>) -> Result<&'a [u8], DatasetError> {
        Ok(&self.data[start as usize * self.row_bytes..][..n * self.row_bytes])
    }
}

impl FixedSource for NpyFile {
    fn records<'a>(&'a self, start: u64, n: usize, scratch: &'a mut Vec<u8>) -> Result<&'a [u8], DatasetError> {
        NpyFile::records(self, start, n, scratch)
    }
}

/// Writes variable-length records as a ragged dataset at `path` (created, or
/// appended to): each item any number of rows of `item_shape` elements of
/// `T` (its length a multiple of the row's element count; a plain sequence
/// of scalars for `item_shape = []`). Empty records are records. Streamed
/// in calls of at most `opts.chunk_bytes`; a `zstd_dict` dictionary is
/// trained on the first records (at most 8192 or 256 MiB), as the
/// reference does (which takes its first call's records: with a small
/// `chunk_bytes` it trains on too few).
pub fn write_ragged<T, R, I>(
    path: impl AsRef<Path>,
    item_shape: &[usize],
    records: I,
    opts: &WriteOptions,
) -> Result<u64, DatasetError>
where
    T: Element,
    R: AsRef<[T]>,
    I: IntoIterator<Item = R>,
{
    write_ragged_bytes(
        path,
        T::DTYPE,
        item_shape,
        records.into_iter().map(|r| RecordBytes(r, std::marker::PhantomData)),
        opts,
    )
}

/// A typed record seen as bytes.
struct RecordBytes<T, R>(R, std::marker::PhantomData<T>);

impl<T: Element, R: AsRef<[T]>> AsRef<[u8]> for RecordBytes<T, R> {
    fn as_ref(&self) -> &[u8] {
        bytemuck::cast_slice(self.0.as_ref())
    }
}

/// [`write_ragged`] from raw bytes of any dtype: each item the bytes of a
/// whole number of rows.
pub fn write_ragged_bytes<R, I>(
    path: impl AsRef<Path>,
    dtype: DType,
    item_shape: &[usize],
    records: I,
    opts: &WriteOptions,
) -> Result<u64, DatasetError>
where
    R: AsRef<[u8]>,
    I: IntoIterator<Item = R>,
{
    write_ragged_results(path, dtype, item_shape, records.into_iter().map(Ok), opts)
}

/// [`write_ragged_bytes`] from records that may fail to be produced (a
/// conversion that is refused, a source that fails): the first error ends
/// the write, and the records not yet submitted in a call are dropped, so
/// a new dataset whose first call fails is not created.
pub fn write_ragged_results<R, I>(
    path: impl AsRef<Path>,
    dtype: DType,
    item_shape: &[usize],
    records: I,
    opts: &WriteOptions,
) -> Result<u64, DatasetError>
where
    R: AsRef<[u8]>,
    I: IntoIterator<Item = Result<R, DatasetError>>,
{
    write_with_mode(path.as_ref(), opts.mode, |at| {
        write_ragged_results_in(Arc::new(RealFs), at, dtype, item_shape, records, &opts.with_mode(WriteMode::Append))
    })
}

/// [`write_ragged_results`] on any filesystem implementation.
pub fn write_ragged_results_in<R, I>(
    vfs: Arc<dyn Vfs>,
    path: &Path,
    dtype: DType,
    item_shape: &[usize],
    records: I,
    opts: &WriteOptions,
) -> Result<u64, DatasetError>
where
    R: AsRef<[u8]>,
    I: IntoIterator<Item = Result<R, DatasetError>>,
{
    check_in(&vfs, path, opts.mode)?;
    let mut appender = DatasetAppender::ragged_in(vfs, path, dtype, item_shape, opts)?;
    let mut block: Vec<u8> = Vec::new();
    let mut lens: Vec<u32> = Vec::new();
    let mut written = 0u64;
    for record in records {
        let record = record?;
        let bytes = record.as_ref();
        appender.check_item(written + lens.len() as u64, bytes)?;
        block.extend_from_slice(bytes);
        lens.push(bytes.len() as u32);
        let sampling = appender.needs_dict() && lens.len() < DICT_SAMPLES_MAX && block.len() < DICT_SAMPLE_BYTES_MAX;
        if block.len() >= opts.chunk_bytes && !sampling {
            written += appender.write_packed(&block, &lens)?;
            block.clear();
            lens.clear();
        }
    }
    written += appender.write_packed(&block, &lens)?;
    appender.finish()?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::dict_sample_indices;

    /// Against NumPy: `np.unique(np.linspace(0, count - 1, k).astype(np.int64))`.
    #[test]
    fn dict_sample_matches_numpy() {
        for (count, row_bytes, len, sum, head, tail) in [
            (20_000u64, 12_288usize, 8192usize, 81_911_809u64, vec![0u64, 2, 4, 7, 9], vec![19_994u64, 19_996, 19_999]),
            (10, 4, 10, 45, vec![0, 1, 2, 3, 4], vec![7, 8, 9]),
            (100_000, 4, 8192, 409_591_809, vec![0, 12, 24, 36, 48], vec![99_974, 99_986, 99_999]),
            (7, 80 << 20, 3, 9, vec![0, 3, 6], vec![0, 3, 6]),
        ] {
            let got = dict_sample_indices(count, row_bytes);
            assert_eq!(got.len(), len, "{count}");
            assert_eq!(got.iter().sum::<u64>(), sum, "{count}");
            assert_eq!(got[..head.len()], head[..], "{count}");
            assert_eq!(got[got.len() - tail.len()..], tail[..], "{count}");
        }
        assert_eq!(dict_sample_indices(5, 1 << 30), [0]);
        assert!(dict_sample_indices(0, 4).is_empty());
    }
}
