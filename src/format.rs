//! The on-disk format, version 3: byte-compatible with loaderx 0.7.3.
//!
//! Every on-disk struct is defined here once. The byte tables, the limits and
//! the version history are in `docs/format.md`; comments below point there
//! instead of repeating the layout.
//!
//! All integers are little-endian on disk. The structs are `#[repr(C)]` and
//! [`bytemuck::Pod`], so they are read and written as plain bytes; the field
//! accessors convert from little-endian, which makes the code correct on any
//! host even though every supported host is little-endian.

use bytemuck::{Pod, Zeroable};

/// `meta.zr`: the header and the record table.
pub const META_FILE: &str = "meta.zr";
/// `dict.zr`: the raw zstd dictionary, when one was trained.
pub const DICT_FILE: &str = "dict.zr";
/// The name a new `meta.zr` is built under before it is renamed into place.
pub const META_TMP_FILE: &str = "meta.zr.tmp";
/// The name a new `dict.zr` is written under before it is renamed into place.
pub const DICT_TMP_FILE: &str = "dict.zr.tmp";
/// `readers.lock`: an empty file whose `flock` is the readers' lock (shared
/// by read-only opens, exclusive for a delete or compaction). Not part of
/// the reference's format, which neither reads nor removes it.
pub const READERS_LOCK_FILE: &str = "readers.lock";
/// `sums.zr`: the per-record checksums (a CRC-32C of each record's stored
/// bytes, bound to its table entry) and the seal that says the table is the
/// one they were kept with. This crate's only; the reference neither reads
/// nor removes it. Layout: `docs/format.md`, "Checksums".
pub const SUMS_FILE: &str = "sums.zr";
/// The name a new `sums.zr` is built under before it is renamed into place.
pub const SUMS_TMP_FILE: &str = "sums.zr.tmp";
/// The magic of `sums.zr`'s header.
pub const SUMS_MAGIC: [u8; 4] = *b"ZSUM";
/// The version of `sums.zr`'s layout: 2, with the covered word. Version 1
/// (no covered word: every slot below the length was durable before its
/// commit) is read as covering every slot, and a writer's open rewrites it
/// as version 2.
pub const SUMS_VERSION: u32 = 2;
/// `sums.zr`'s header: magic, version, the seal's word at
/// [`SUMS_SEAL_OFFSET`], the covered word at [`SUMS_COVERED_OFFSET`], zeros
/// to the end (`docs/format.md`,
/// "Checksums").
pub const SUMS_HEADER_BYTES: u64 = 64;
/// The seal's word in `sums.zr`'s header.
pub const SUMS_SEAL_OFFSET: u64 = 8;
/// The covered word in `sums.zr`'s header (version 2).
pub const SUMS_COVERED_OFFSET: u64 = 16;
/// One slot of `sums.zr`: the record's sum, then its entry's tag (0: the
/// slot covers no record), both little-endian `u32`s: one 8-byte word.
pub const SUM_BYTES: u64 = 8;
/// The size of a whole `sums.zr` (sparse: slots never written are holes).
pub const SUMS_BYTES: u64 = SUMS_HEADER_BYTES + RECORDS_MAX as u64 * SUM_BYTES;

/// `schema.json`: a dataset's schema, beside its store.
pub const SCHEMA_FILE: &str = "schema.json";
/// The name a new `schema.json` is written under before it is renamed into place.
pub const SCHEMA_TMP_FILE: &str = "schema.json.tmp";
/// `shards.json`: a sharded dataset's shard table, beside its shard 0.
/// This crate's only; `docs/format.md`, "Sharded datasets".
pub const SHARDS_FILE: &str = "shards.json";
/// The name a new `shards.json` is written under before it is renamed into place.
pub const SHARDS_TMP_FILE: &str = "shards.json.tmp";
/// `manifest.json`: the list of a published store's objects, the last
/// object a push writes (`docs/remote.md`). Never in a local directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Largest `dict.zr` read (the reference caps training at 1 MiB).
pub const DICT_BYTES_MAX: u64 = 64 << 20;
/// Largest `schema.json` read.
pub const SCHEMA_BYTES_MAX: u64 = 1 << 20;
/// `table.json`: a table's commit file (its committed row count and its
/// columns), beside the columns' directories.
pub const TABLE_FILE: &str = "table.json";
/// The name a new `table.json` is written under before it is renamed into place.
pub const TABLE_TMP_FILE: &str = "table.json.tmp";
/// `table.lock`: an empty file whose exclusive `flock` is a table's writer lock.
pub const TABLE_LOCK_FILE: &str = "table.lock";
/// `.staging`: the directory, inside a table, of the tables a parallel
/// write's tasks stage until its commit adopts them (`table::adopt_tables`);
/// write `w`'s in `.staging/w/`, held by the exclusive `flock` of
/// `.staging/w.lock` while the write runs (`docs/ray.md`).
pub const STAGING_DIR: &str = ".staging";
/// `classes.json`: an image-folder import's class names beside its table
/// (a JSON array; label `k` is its `k`-th name), outside the commit point.
pub const CLASSES_FILE: &str = "classes.json";
/// The name a new `classes.json` is written under before it is renamed into place.
pub const CLASSES_TMP_FILE: &str = "classes.json.tmp";
/// Largest `table.json` read (about 300 bytes a column at the longest names).
pub const TABLE_FILE_BYTES_MAX: u64 = 4 << 20;
/// Most columns a table has.
pub const COLUMNS_MAX: usize = 4096;
/// Most rows a table holds: a column is a sharded dataset of at most
/// [`SHARDS_MAX`] shards of [`RECORDS_MAX`] records (2^44).
pub const TABLE_ROWS_MAX: u64 = SHARDS_MAX as u64 * RECORDS_MAX as u64;
/// Longest column name, in bytes of UTF-8.
pub const COLUMN_NAME_BYTES_MAX: usize = 255;

/// The most bytes of a table commit's mark (`table.json`'s `"mark"`: what
/// an import records of its progress with the rows it commits).
pub const TABLE_MARK_BYTES_MAX: usize = 64 << 10;
/// Largest `shards.json` read (about 40 bytes a shard).
pub const SHARDS_FILE_BYTES_MAX: u64 = 64 << 20;
/// Largest `manifest.json` read (a store of 65,536 chunks fits in a few MiB).
pub const MANIFEST_BYTES_MAX: u64 = 16 << 20;
/// Most shards a sharded dataset has (2^44 records at full shards).
pub const SHARDS_MAX: usize = 1 << 20;

/// The four magic bytes at the start of `meta.zr`.
pub const MAGIC: [u8; 4] = *b"ZREC";
/// The one format version this crate reads and writes (loaderx 0.7.3's).
pub const VERSION: u16 = 3;

/// Largest logical (uncompressed) record: 1 MiB.
pub const RECORD_BYTES_MAX: u32 = 1 << 20;
/// Most records a store holds: the table is sized statically for this many.
pub const RECORDS_MAX: u32 = 1 << 24;
/// Most chunk files a store has (`0.zr` ..= `4095.zr`).
pub const CHUNKS_MAX: u32 = 1 << 12;
/// Largest chunk file: 4 GiB, the reach of a `u32` offset.
pub const CHUNK_BYTES_MAX: u64 = 1 << 32;

/// Size of the header at offset 0 of `meta.zr`.
pub const HEADER_BYTES: u64 = 16;
/// Size of one record table entry.
pub const ENTRY_BYTES: u64 = 16;
/// Exact size of `meta.zr`: the header plus the full table (256 MiB + 16).
pub const META_BYTES: u64 = HEADER_BYTES + RECORDS_MAX as u64 * ENTRY_BYTES;

// The reference's argument for sizing the table statically: the chunks can hold
// at least as many maximum-size records as the table has slots, so a store
// always runs out of slots before it runs out of chunks.
const _: () = assert!(CHUNKS_MAX as u64 * CHUNK_BYTES_MAX / RECORD_BYTES_MAX as u64 >= RECORDS_MAX as u64);
// A chunk id fits the u16 field, an offset and a length the u32 fields.
const _: () = assert!(CHUNKS_MAX <= u16::MAX as u32 + 1);
const _: () = assert!(CHUNK_BYTES_MAX <= u32::MAX as u64 + 1);
// A record always fits in a chunk, compressed or not.
const _: () = assert!((RECORD_BYTES_MAX as u64) * 2 < CHUNK_BYTES_MAX);

/// Byte offset of the header's `length` field: written alone, as one aligned
/// 4-byte store, when an append or a delete commits (see `docs/crash-safety.md`).
pub const HEADER_LENGTH_OFFSET: u64 = 12;
/// Byte offset of the header's second 8-byte word (`tail_offset`, `length`).
pub const HEADER_WORD1_OFFSET: u64 = 8;

/// The 16-byte header of `meta.zr`. Layout: `docs/format.md`, "Header".
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct Header {
    /// `ZREC`.
    pub magic: [u8; 4],
    version: [u8; 2],
    tail_chunk: [u8; 2],
    tail_offset: [u8; 4],
    length: [u8; 4],
}

const _: () = assert!(size_of::<Header>() == HEADER_BYTES as usize);
const _: () = assert!(std::mem::offset_of!(Header, version) == 4);
const _: () = assert!(std::mem::offset_of!(Header, tail_chunk) == 6);
const _: () = assert!(std::mem::offset_of!(Header, tail_offset) == 8);
const _: () = assert!(std::mem::offset_of!(Header, length) == HEADER_LENGTH_OFFSET as usize);

impl Header {
    /// A header for `length` records with the write frontier at `frontier`.
    pub fn new(frontier: Frontier, length: u32) -> Header {
        Header {
            magic: MAGIC,
            version: VERSION.to_le_bytes(),
            tail_chunk: frontier.chunk.to_le_bytes(),
            tail_offset: frontier.offset.to_le_bytes(),
            length: length.to_le_bytes(),
        }
    }
    /// The format version field.
    pub fn version(&self) -> u16 {
        u16::from_le_bytes(self.version)
    }
    /// The write frontier: where the next record goes (the fields the
    /// reference names `tail_chunk` and `tail_offset`).
    pub fn frontier(&self) -> Frontier {
        Frontier { chunk: u16::from_le_bytes(self.tail_chunk), offset: u32::from_le_bytes(self.tail_offset) }
    }
    /// Number of live records.
    pub fn length(&self) -> u32 {
        u32::from_le_bytes(self.length)
    }
}

/// The write frontier: the chunk new records go to and the first free byte
/// in it. On disk it is the header's `tail_chunk` and `tail_offset` (the
/// reference's names); everywhere else it is the frontier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Frontier {
    /// The last chunk; chunks `0..=chunk` exist.
    pub chunk: u16,
    /// First free byte of that chunk.
    pub offset: u32,
}

impl Frontier {
    /// The frontier as one address, `chunk * 4 GiB + offset`.
    pub fn address(self) -> u64 {
        u64::from(self.chunk) * CHUNK_BYTES_MAX + u64::from(self.offset)
    }
}

/// Per-record compression tag. See `docs/format.md`, "Codecs".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Codec {
    /// Stored as is.
    Raw = 0,
    /// One zstd frame, level 3 by default, with zstd's content checksum.
    Zstd = 1,
    /// One zstd frame compressed against the store's dictionary (`dict.zr`).
    ZstdDict = 2,
}

impl Codec {
    /// The codec of an on-disk tag, `None` for an unknown tag.
    pub fn from_tag(tag: u8) -> Option<Codec> {
        match tag {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            2 => Some(Codec::ZstdDict),
            _ => None,
        }
    }
    /// The name the reference's Python API uses: `raw`, `zstd`, `zstd_dict`.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Zstd => "zstd",
            Codec::ZstdDict => "zstd_dict",
        }
    }
    /// The codec named `name` (`raw`, `zstd`, `zstd_dict`).
    pub fn from_name(name: &str) -> Option<Codec> {
        [Codec::Raw, Codec::Zstd, Codec::ZstdDict].into_iter().find(|c| c.name() == name)
    }
}

/// One 16-byte record table entry. Layout: `docs/format.md`, "Record table".
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct Entry {
    offset: [u8; 4],
    phys_length: [u8; 4],
    logic_length: [u8; 4],
    chunk_id: [u8; 2],
    /// The codec tag; see [`Codec::from_tag`].
    pub codec: u8,
    /// 0, except 1 on an empty raw record at chunk 0, offset 0 (see
    /// `docs/format.md`); ignored on read.
    pub reserved: u8,
}

const _: () = assert!(size_of::<Entry>() == ENTRY_BYTES as usize);
const _: () = assert!(std::mem::offset_of!(Entry, phys_length) == 4);
const _: () = assert!(std::mem::offset_of!(Entry, logic_length) == 8);
const _: () = assert!(std::mem::offset_of!(Entry, chunk_id) == 12);
const _: () = assert!(std::mem::offset_of!(Entry, codec) == 14);
const _: () = assert!(std::mem::offset_of!(Entry, reserved) == 15);

impl Entry {
    /// An entry for a record stored at `loc`.
    pub fn new(loc: Loc, phys_length: u32, logic_length: u32, codec: Codec) -> Entry {
        Entry {
            offset: loc.offset.to_le_bytes(),
            phys_length: phys_length.to_le_bytes(),
            logic_length: logic_length.to_le_bytes(),
            chunk_id: loc.chunk.to_le_bytes(),
            codec: codec as u8,
            reserved: 0,
        }
        .marked()
    }

    /// Sets `reserved` to 1 on the one entry that would otherwise be all
    /// zero (an empty raw record at chunk 0, offset 0), so that an all-zero
    /// entry always means "never written". The reference ignores `reserved`.
    fn marked(mut self) -> Entry {
        self.reserved = 0;
        if self.is_unwritten() {
            self.reserved = 1;
        }
        self
    }
    /// Where the stored bytes start.
    pub fn loc(&self) -> Loc {
        Loc { chunk: u16::from_le_bytes(self.chunk_id), offset: u32::from_le_bytes(self.offset) }
    }
    /// The stored (possibly compressed) size.
    pub fn phys_length(&self) -> u32 {
        u32::from_le_bytes(self.phys_length)
    }
    /// The original size.
    pub fn logic_length(&self) -> u32 {
        u32::from_le_bytes(self.logic_length)
    }
    /// This entry moved to `loc`, everything else unchanged.
    pub fn moved_to(mut self, loc: Loc) -> Entry {
        self.offset = loc.offset.to_le_bytes();
        self.chunk_id = loc.chunk.to_le_bytes();
        self.marked()
    }
    /// True for an all-zero entry: a slot that was never written. Neither this
    /// crate nor the reference writes one (see `docs/format.md`).
    pub fn is_unwritten(&self) -> bool {
        *self == Entry::zeroed()
    }
}

/// A position in the chunk files: chunk id and byte offset in that chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    /// Chunk id: the file `{chunk}.zr`.
    pub chunk: u16,
    /// Byte offset within the chunk.
    pub offset: u32,
}

impl Loc {
    /// The position as one address, `chunk * 4 GiB + offset`.
    pub fn address(self) -> u64 {
        u64::from(self.chunk) * CHUNK_BYTES_MAX + u64::from(self.offset)
    }
}

/// File name of chunk `id`.
pub fn chunk_file_name(id: u16) -> String {
    format!("{id}.zr")
}

/// The chunk id a file name names, exactly as [`chunk_file_name`] spells
/// it (`"7.zr"`, not `"07.zr"` or `"+7.zr"`); `None` for any other name.
pub fn chunk_id_of(name: &str) -> Option<u16> {
    let id: u16 = name.strip_suffix(".zr")?.parse().ok()?;
    (name == chunk_file_name(id)).then_some(id)
}

/// The directory of shard `k` of a sharded dataset, relative to its root:
/// `.` for shard 0 (the root), `shard-{k:06}` for the others
/// (`shard-000001`, ..., `shard-999999`, `shard-1000000`, ...).
pub fn shard_dir_name(k: usize) -> String {
    if k == 0 { ".".to_string() } else { format!("shard-{k:06}") }
}

/// The shard a directory name names, exactly as [`shard_dir_name`] spells
/// it (`"shard-1000000"`, not `"shard-0000001"`, `"shard-01000000"` or
/// `"shard-+00001"`); `None` for any other name, and for shards past
/// [`SHARDS_MAX`].
pub fn shard_of_dir_name(name: &str) -> Option<usize> {
    let k = if name == "." { 0 } else { name.strip_prefix("shard-")?.parse().ok().filter(|&k| k >= 1)? };
    (k < SHARDS_MAX && name == shard_dir_name(k)).then_some(k)
}

/// The directory of column `k` of a table, relative to its root:
/// `col-{k:04}` (`col-0000`, ..., `col-4095`). Columns are named by their
/// position, never by their (untrusted) names, which live in `table.json`.
pub fn column_dir_name(k: usize) -> String {
    format!("col-{k:04}")
}

/// The column a directory name names, exactly as [`column_dir_name`]
/// spells it (`"col-0007"`, not `"col-7"`, `"col-00007"` or `"col-+007"`);
/// `None` for any other name, and for columns past [`COLUMNS_MAX`].
pub fn column_of_dir_name(name: &str) -> Option<usize> {
    let k: usize = name.strip_prefix("col-")?.parse().ok()?;
    (k < COLUMNS_MAX && name == column_dir_name(k)).then_some(k)
}

/// A file of a store's directory that a push publishes, as its name says.
/// Temporary names, `readers.lock` and `manifest.json` are none of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreFile {
    /// `meta.zr`.
    Meta,
    /// `dict.zr`.
    Dict,
    /// `schema.json`.
    Schema,
    /// `shards.json` (shard 0 of a sharded dataset).
    Shards,
    /// `sums.zr`, published cut to the slots of the published records.
    Sums,
    /// A chunk file, below [`CHUNKS_MAX`].
    Chunk(u16),
}

impl StoreFile {
    /// The file `name` names, exactly as [`StoreFile::name`] spells it;
    /// `None` for any other name.
    pub fn of(name: &str) -> Option<StoreFile> {
        match name {
            META_FILE => Some(StoreFile::Meta),
            DICT_FILE => Some(StoreFile::Dict),
            SCHEMA_FILE => Some(StoreFile::Schema),
            SHARDS_FILE => Some(StoreFile::Shards),
            SUMS_FILE => Some(StoreFile::Sums),
            _ => chunk_id_of(name).filter(|&id| u32::from(id) < CHUNKS_MAX).map(StoreFile::Chunk),
        }
    }
    /// The file's name.
    pub fn name(self) -> String {
        match self {
            StoreFile::Meta => META_FILE.into(),
            StoreFile::Dict => DICT_FILE.into(),
            StoreFile::Schema => SCHEMA_FILE.into(),
            StoreFile::Shards => SHARDS_FILE.into(),
            StoreFile::Sums => SUMS_FILE.into(),
            StoreFile::Chunk(id) => chunk_file_name(id),
        }
    }
    /// The largest the file may be.
    pub fn bytes_max(self) -> u64 {
        match self {
            StoreFile::Meta => META_BYTES,
            StoreFile::Dict => DICT_BYTES_MAX,
            StoreFile::Schema => SCHEMA_BYTES_MAX,
            StoreFile::Shards => SHARDS_FILE_BYTES_MAX,
            StoreFile::Sums => SUMS_BYTES,
            StoreFile::Chunk(_) => CHUNK_BYTES_MAX,
        }
    }
}

/// Byte offset of table entry `index` in `meta.zr`.
pub fn entry_offset(index: u32) -> u64 {
    HEADER_BYTES + u64::from(index) * ENTRY_BYTES
}

/// Byte offset of record `index`'s slot in `sums.zr`.
pub fn sum_offset(index: u32) -> u64 {
    SUMS_HEADER_BYTES + u64::from(index) * SUM_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_id_of_reads_back_exactly_the_names_chunk_file_name_writes() {
        for id in [0, 1, 9, 10, 4095, u16::MAX] {
            assert_eq!(chunk_id_of(&chunk_file_name(id)), Some(id));
        }
        for name in ["07.zr", "+7.zr", "-0.zr", "7", "7.zr.tmp", ".zr", "65536.zr", "meta.zr", " 7.zr"] {
            assert_eq!(chunk_id_of(name), None, "{name}");
        }
    }

    #[test]
    fn shard_of_dir_name_reads_back_exactly_the_names_shard_dir_name_writes() {
        for k in [0, 1, 9, 999_999, 1_000_000, SHARDS_MAX - 1] {
            assert_eq!(shard_of_dir_name(&shard_dir_name(k)), Some(k), "{k}");
        }
        assert_eq!(shard_dir_name(999_999), "shard-999999");
        assert_eq!(shard_dir_name(1_000_000), "shard-1000000");
        for name in [
            "shard-0000001",
            "shard-01000000",
            "shard-000000",
            "shard-00001",
            "shard-+00001",
            "shard--00001",
            "shard-1048576",
            "shard-",
            "shard-00000a",
            "Shard-000001",
            "shard-000001/",
            "..",
            "",
        ] {
            assert_eq!(shard_of_dir_name(name), None, "{name}");
        }
    }

    #[test]
    fn column_of_dir_name_reads_back_exactly_the_names_column_dir_name_writes() {
        for k in [0, 1, 9, 999, 1000, COLUMNS_MAX - 1] {
            assert_eq!(column_of_dir_name(&column_dir_name(k)), Some(k), "{k}");
        }
        assert_eq!(column_dir_name(7), "col-0007");
        for name in
            ["col-7", "col-00007", "col-+007", "col--007", "col-4096", "col-", "Col-0001", "col-0001/", "..", ""]
        {
            assert_eq!(column_of_dir_name(name), None, "{name}");
        }
    }

    #[test]
    fn store_file_reads_back_exactly_the_names_it_writes() {
        let files = [
            StoreFile::Meta,
            StoreFile::Dict,
            StoreFile::Schema,
            StoreFile::Shards,
            StoreFile::Sums,
            StoreFile::Chunk(0),
        ];
        for file in files.into_iter().chain([StoreFile::Chunk(4095)]) {
            assert_eq!(StoreFile::of(&file.name()), Some(file));
        }
        for name in [
            MANIFEST_FILE,
            READERS_LOCK_FILE,
            META_TMP_FILE,
            DICT_TMP_FILE,
            SCHEMA_TMP_FILE,
            SHARDS_TMP_FILE,
            SUMS_TMP_FILE,
        ] {
            assert_eq!(StoreFile::of(name), None, "{name}");
        }
        for name in ["07.zr", "4096.zr", "../0.zr", "shard-000001"] {
            assert_eq!(StoreFile::of(name), None, "{name}");
        }
    }
}
