//! Datasets: typed NumPy-shaped records over a [`Zrecord`](crate::Zrecord)
//! store, byte-compatible with the reference package loaderx 0.7.3.
//!
//! A dataset is a store directory plus one `schema.json` ([`Schema`]) naming
//! the element type (a NumPy dtype string, [`DType`]), the shape of a record
//! (fixed) or of a row (ragged) and the codec. Two kinds:
//!
//! - [`Dataset`]: every record one sample of a fixed shape. Gather a batch
//!   into your buffer ([`Dataset::gather_into`], typed and checked against
//!   the schema, or [`Dataset::gather_bytes`]) or into an owned [`Tensor`]
//!   that carries its shape ([`Dataset::gather`]). Written by
//!   [`write_dataset`] (a slice), [`write_dataset_iter`] (an iterator) or
//!   [`write_dataset_npy`] (a `.npy` file, streamed).
//! - [`RaggedDataset`]: each record any number of rows. A batch comes back
//!   packed ([`Ragged`]: values plus `row_splits`), or padded in the same
//!   pass ([`RaggedDataset::gather_padded`]); [`pad`] turns packed into
//!   dense. Written by [`write_ragged`].
//!
//! Both are one core, [`DatasetOf`], generic over a [`ColumnKind`] that
//! says how a record's bytes map to rows (`column.rs`): a new kind of column
//! adds a kind, not a third copy. A row is the unit of a batch's leading
//! axis: a fixed record is one row, a ragged record any number of them;
//! [`DatasetOf::row_bytes`] is its size.
//!
//! Datasets open read-only; the reference package opens what
//! [`write_dataset`] and [`write_ragged`] write and the other way round
//! (`tests/interop/`). `docs/loader.md` has the formats and the design.
//!
//! Past a store's 2^24 records (or [`WriteOptions::shard_records`]) a
//! dataset is **sharded**: complete stores in the root and `shard-*/`, and
//! a `shards.json` [`ShardTable`] written last. Both kinds open the same way,
//! with u64 indices mapped to (shard, local) by a [`ShardIndex`]; shards
//! open on first use ([`Shards`]). [`ShardedMutation`] deletes from and
//! compacts the shards.

mod appender;
mod column;
mod dtype;
mod error;
mod fixed;
mod mode;
mod mutate;
mod npy;
mod npy_header;
mod ragged;
mod schema;
mod shard_index;
mod shard_table;
mod shards;
mod target;
mod tensor;
mod write;

pub use appender::DatasetAppender;
pub(crate) use appender::packed_items;
pub use column::{ColumnKind, DatasetOf};
pub use dtype::{ByteOrder, DType, Element, Kind};
pub use error::DatasetError;
pub use fixed::{Dataset, FixedKind};
pub use mode::{WriteMode, existing_records, existing_records_in, recover_overwrite};
pub use mutate::{ShardDelete, ShardedMutation};
pub use npy::{NpyHeader, read_npy_header, read_npy_header_in};
pub use ragged::{Padded, Ragged, RaggedDataset, RaggedKind, pad, pad_bytes, pad_truncated, pad_truncated_bytes};
pub use schema::{Layout, SCHEMA_FILE, SCHEMA_FORMAT, SCHEMA_VERSION, Schema, parse_codec};
pub use shard_index::ShardIndex;
pub use shard_table::{Pending, SHARDS_FILE, SHARDS_FORMAT, SHARDS_MAX, SHARDS_VERSION, ShardTable, shard_dir};
pub use shards::{ShardRef, Shards};
pub(crate) use tensor::Pool;
pub use tensor::Tensor;

/// The remote filesystem of the store published at `url`, and the path to
/// open it at.
#[cfg(feature = "remote")]
fn remote_vfs(url: &str) -> Result<(std::sync::Arc<dyn crate::io::Vfs>, std::path::PathBuf), DatasetError> {
    use crate::io::remote::{RemoteFs, RemoteOptions};
    let fs = RemoteFs::connect(url, RemoteOptions::from_env()).map_err(|source| crate::Error::Io {
        path: url.into(),
        op: "read manifest.json",
        source,
    })?;
    let root = std::path::PathBuf::from(fs.root());
    Ok((std::sync::Arc::new(fs), root))
}
pub use write::{
    DICT_SAMPLE_BYTES_MAX, DICT_SAMPLES_MAX, WRITE_CHUNK_BYTES_DEFAULT, WriteOptions, write_dataset,
    write_dataset_bytes, write_dataset_bytes_in, write_dataset_iter, write_dataset_npy, write_dataset_npy_in,
    write_ragged, write_ragged_bytes, write_ragged_results, write_ragged_results_in,
};
