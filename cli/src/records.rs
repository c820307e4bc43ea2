//! [`Records`]: what `cat` and `bench` read, one store or a sharded
//! dataset's shards (a directory with `shards.json`), by global index.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use loaderx::dataset::{Dataset, DatasetError, RaggedDataset, SHARDS_FILE, Schema, ShardTable, Shards, shard_dir};
use loaderx::io::Vfs;
use loaderx::io::real::RealFs;
use loaderx::loader::Stream;
use loaderx::{Error, ReadMode, Zrecord};

use crate::CliResult;
use crate::out::{is_remote, open_read_only};

/// One store (in a directory, or published at a URL: the filesystem it is
/// on), or the shards of a sharded dataset.
pub enum Records {
    Store(Zrecord, Arc<dyn Vfs>),
    Sharded(Shards),
}

/// True if `path` is a local sharded dataset (it has a shard table).
pub fn is_sharded(path: &Path) -> bool {
    !is_remote(path) && is_sharded_in(&RealFs, path)
}

/// True if `root` on `vfs` (a published dataset's too) has a shard table.
pub fn is_sharded_in(vfs: &dyn Vfs, root: &Path) -> bool {
    matches!(vfs.kind(&root.join(SHARDS_FILE)), Ok(Some(loaderx::io::FileKind::File)))
}

/// The shard directories of the sharded dataset at `path`, in order.
pub fn shard_dirs(path: &Path) -> Result<Vec<PathBuf>, DatasetError> {
    let shard_table = ShardTable::read(&RealFs, path)?
        .ok_or_else(|| DatasetError::ShardTable { path: path.join(SHARDS_FILE), reason: "missing".into() })?;
    Ok((0..shard_table.shards()).map(|k| shard_dir(path, k)).collect())
}

impl Records {
    /// Opens `path` read-only: a sharded dataset through its shard table,
    /// anything else (a directory, a published store's URL) as a store.
    pub fn open(path: &Path, read_mode: ReadMode) -> CliResult<Records> {
        if is_sharded(path) {
            return Ok(Records::Sharded(Shards::open(path, read_mode)?));
        }
        let (store, vfs, at) = open_read_only(path, read_mode)?;
        if is_sharded_in(&*vfs, &at) {
            // A published sharded dataset: its root store is shard 0 only.
            return Ok(Records::Sharded(Shards::open_in(vfs, &at, read_mode)?));
        }
        Ok(Records::Store(store, vfs))
    }

    /// The dataset schema: `Ok(None)` for a plain store (no `schema.json`),
    /// `Err` with the reason when it is there but unusable.
    pub fn schema(&self) -> Result<Option<Schema>, DatasetError> {
        match self {
            Records::Store(s, _) => crate::stats::store_schema(s),
            Records::Sharded(s) => Ok(Some(s.schema().clone())),
        }
    }

    /// The dataset as a loader stream, of the kind `schema` says.
    pub fn stream(&self, schema: &Schema, read_mode: ReadMode) -> CliResult<Stream> {
        let (vfs, at): (Arc<dyn Vfs>, &Path) = match self {
            Records::Store(s, vfs) => (vfs.clone(), s.path()),
            Records::Sharded(s) => (s.filesystem(), s.path()),
        };
        Ok(if schema.is_ragged() {
            RaggedDataset::open_in_with(vfs, at, read_mode)?.into()
        } else {
            Dataset::open_in_with(vfs, at, read_mode)?.into()
        })
    }

    pub fn path(&self) -> &Path {
        match self {
            Records::Store(s, _) => s.path(),
            Records::Sharded(s) => s.path(),
        }
    }

    pub fn len(&self) -> u64 {
        match self {
            Records::Store(s, _) => u64::from(s.len()),
            Records::Sharded(s) => s.len(),
        }
    }

    /// Picks up records appended since open (and new shards); the new length.
    pub fn refresh(&self) -> CliResult<u64> {
        Ok(match self {
            Records::Store(s, _) => u64::from(s.refresh()?),
            Records::Sharded(s) => s.refresh()?,
        })
    }

    /// Shards read (1 for a store).
    pub fn shards(&self) -> usize {
        match self {
            Records::Store(..) => 1,
            Records::Sharded(s) => s.count(),
        }
    }

    pub fn read_engine(&self) -> loaderx::io::ReadEngine {
        match self {
            Records::Store(s, _) => s.read_engine(),
            Records::Sharded(s) => s.shard(s.count() - 1).map_or(loaderx::io::ReadEngine::Threads, |z| z.read_engine()),
        }
    }

    pub fn lengths(&self, indices: &[u64], out: &mut [u32]) -> CliResult<()> {
        match self {
            Records::Store(s, _) => s.lengths(indices, out)?,
            Records::Sharded(s) => s.lengths(indices, out)?,
        }
        Ok(())
    }

    pub fn gather_var(&self, indices: &[u64], dst: &mut [u8], offsets: &[u64], lens: &[u32]) -> CliResult<()> {
        match self {
            Records::Store(s, _) => s.gather_var(indices, dst, offsets, lens)?,
            Records::Sharded(s) => s.gather_var(indices, dst, offsets, lens)?,
        }
        Ok(())
    }

    /// The error for `index`, at or past the end.
    pub fn out_of_range(&self, index: u64) -> Box<dyn std::error::Error> {
        match self {
            Records::Store(s, _) => {
                Box::new(Error::IndexOutOfRange { path: s.path().to_path_buf(), index, len: s.len() })
            }
            Records::Sharded(s) => {
                Box::new(DatasetError::IndexOutOfRange { path: s.path().to_path_buf(), index, len: s.len() })
            }
        }
    }
}

/// A store's [`loaderx::Stats`], or their sums over a sharded dataset's shards.
#[derive(Default)]
pub struct Totals {
    pub records: u64,
    pub live_bytes: u64,
    pub logical_bytes: u64,
    pub chunk_file_bytes: u64,
    pub reclaimable: u64,
    pub chunks: u64,
    pub codec_records: [u64; 3],
    /// The dictionaries' bytes (one per shard), if any shard has one.
    pub dict_bytes: Option<u64>,
    /// Records per shard (one entry for a store).
    pub shard_records: Vec<u64>,
}

impl Totals {
    fn add(&mut self, s: &loaderx::Stats) {
        self.records += u64::from(s.records);
        self.live_bytes += s.live_bytes;
        self.logical_bytes += s.logical_bytes;
        self.chunk_file_bytes += s.chunk_file_bytes;
        self.reclaimable += s.reclaimable;
        self.chunks += u64::from(s.chunks);
        for (t, &n) in self.codec_records.iter_mut().zip(&s.codec_records) {
            *t += u64::from(n);
        }
        if let Some(d) = s.dict_bytes {
            *self.dict_bytes.get_or_insert(0) += d;
        }
        self.shard_records.push(u64::from(s.records));
    }

    /// The totals of the store or sharded dataset at `path` (every shard
    /// opened and checked against the shard table).
    pub fn of(records: &Records) -> CliResult<Totals> {
        let mut totals = Totals::default();
        match records {
            Records::Store(s, _) => totals.add(&s.stats()?),
            Records::Sharded(s) => {
                for k in 0..s.count() {
                    totals.add(&s.shard(k)?.stats()?);
                }
            }
        }
        Ok(totals)
    }
}
