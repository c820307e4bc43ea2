//! The dm-log-writes log: its on-disk format, parsed from untrusted bytes.
//!
//! The kernel documents the format in
//! `Documentation/admin-guide/device-mapper/log-writes.rst` and writes it in
//! `drivers/md/dm-log-writes.c`. All integers are little-endian. The log
//! device is a sequence of blocks of the target device's logical sector
//! size (`sector_bytes`, 512 on virtio by default):
//!
//! | block | what |
//! |---|---|
//! | 0 | super: `magic` u64, `version` u64, `nr_entries` u64, `sectorsize` u32 |
//! | 1.. | entries, back to back |
//!
//! An entry is one header block (`sector` u64, `nr_sectors` u64, `flags`
//! u64, `data_len` u64; a mark's name follows in the same block, `data_len`
//! bytes), then `nr_sectors` blocks of data, except for a discard, which
//! carries none. `sector` and `nr_sectors` count blocks of `sector_bytes`.
//! The super's `nr_entries` is rewritten after every FUA write and every
//! mark, and when the target is removed.
//!
//! Every length read here is checked against the log's own length and
//! against [`ENTRY_DATA_BYTES_MAX`] before anything is allocated or read.

use std::fmt;
use std::io::{self, Read, Seek, SeekFrom};

/// The super block's magic (`WRITE_LOG_MAGIC`).
pub const MAGIC: u64 = 0x006A_7366_7773_6872;
/// The one version of the format (`WRITE_LOG_VERSION`).
pub const VERSION: u64 = 1;
/// Bytes of the super block's fields.
pub const SUPER_BYTES: usize = 28;
/// Bytes of an entry header's fields.
pub const ENTRY_HEADER_BYTES: usize = 32;
/// Smallest logical sector size a log may declare.
pub const SECTOR_BYTES_MIN: u32 = 512;
/// Largest logical sector size a log may declare.
pub const SECTOR_BYTES_MAX: u32 = 4096;
/// Largest data one entry may carry (one bio; the kernel's are far smaller).
pub const ENTRY_DATA_BYTES_MAX: u64 = 64 << 20;

/// The flags of an entry (`LOG_*_FLAG`).
pub mod flag {
    /// A cache flush (`REQ_PREFLUSH`): every write logged before it is durable.
    pub const FLUSH: u64 = 1;
    /// A write with forced unit access (`REQ_FUA`): durable on completion.
    pub const FUA: u64 = 2;
    /// A discard: the range's contents are undefined afterwards.
    pub const DISCARD: u64 = 4;
    /// A mark written by `dmsetup message DEV 0 mark NAME`.
    pub const MARK: u64 = 8;
    /// A write of filesystem metadata (`REQ_META`).
    pub const METADATA: u64 = 16;
    /// Every flag this parser knows.
    pub const KNOWN: u64 = FLUSH | FUA | DISCARD | MARK | METADATA;
}

/// Why bytes are not a log.
#[derive(Debug)]
pub enum LogError {
    /// Reading the log failed.
    Io(io::Error),
    /// The super block is not a dm-log-writes super block.
    BadSuper(String),
    /// Entry `index` is malformed.
    BadEntry {
        /// Its position in the log.
        index: u64,
        /// What is wrong.
        what: String,
    },
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogError::Io(e) => write!(f, "reading the log: {e}"),
            LogError::BadSuper(what) => write!(f, "log super block: {what}"),
            LogError::BadEntry { index, what } => write!(f, "log entry {index}: {what}"),
        }
    }
}

impl std::error::Error for LogError {}

impl From<io::Error> for LogError {
    fn from(e: io::Error) -> LogError {
        LogError::Io(e)
    }
}

/// The super block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Super {
    /// Entries the log holds.
    pub nr_entries: u64,
    /// The logical sector size: the unit of every sector count.
    pub sector_bytes: u32,
}

/// One entry, its data left in the log (at `data_offset`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The first sector written (in `sector_bytes`).
    pub sector: u64,
    /// Sectors written or discarded.
    pub nr_sectors: u64,
    /// `flag::*` bits.
    pub flags: u64,
    /// Byte offset of the data in the log (meaningless without data).
    pub data_offset: u64,
    /// A mark's name.
    pub mark: Option<String>,
}

impl Entry {
    /// True when this entry carries data to write.
    pub fn has_data(&self) -> bool {
        self.nr_sectors > 0 && self.flags & (flag::DISCARD | flag::MARK) == 0
    }

    /// True for a flush or a FUA write.
    pub fn is_flush_point(&self) -> bool {
        self.flags & (flag::FLUSH | flag::FUA) != 0
    }
}

/// A parsed log.
#[derive(Clone, Debug)]
pub struct Log {
    /// The super block.
    pub header: Super,
    /// The entries, in the order the kernel logged them.
    pub entries: Vec<Entry>,
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes the super block from the log's first bytes.
pub fn parse_super(bytes: &[u8]) -> Result<Super, LogError> {
    if bytes.len() < SUPER_BYTES {
        return Err(LogError::BadSuper(format!("{} bytes, need {SUPER_BYTES}", bytes.len())));
    }
    let (magic, version) = (le64(bytes, 0), le64(bytes, 8));
    if magic != MAGIC {
        return Err(LogError::BadSuper(format!("magic {magic:#x}, want {MAGIC:#x}")));
    }
    if version != VERSION {
        return Err(LogError::BadSuper(format!("version {version}, want {VERSION}")));
    }
    let sector_bytes = u32::from_le_bytes(bytes[24..28].try_into().expect("4 bytes"));
    if !sector_bytes.is_power_of_two() || !(SECTOR_BYTES_MIN..=SECTOR_BYTES_MAX).contains(&sector_bytes) {
        return Err(LogError::BadSuper(format!("sector size {sector_bytes}")));
    }
    Ok(Super { nr_entries: le64(bytes, 16), sector_bytes })
}

/// Decodes entry `index`'s header block, found at byte `at` of a log of
/// `log_bytes` bytes; its data would start at `at + sector_bytes`.
pub fn parse_entry(block: &[u8], index: u64, at: u64, sector_bytes: u32, log_bytes: u64) -> Result<Entry, LogError> {
    let bad = |what: String| LogError::BadEntry { index, what };
    if block.len() != sector_bytes as usize {
        return Err(bad(format!("header block of {} bytes", block.len())));
    }
    let (sector, nr_sectors, flags, data_len) = (le64(block, 0), le64(block, 8), le64(block, 16), le64(block, 24));
    if flags & !flag::KNOWN != 0 {
        return Err(bad(format!("unknown flags {flags:#x}")));
    }
    let mark = if flags & flag::MARK != 0 {
        let room = (sector_bytes as usize - ENTRY_HEADER_BYTES) as u64;
        if data_len >= room || nr_sectors != 0 {
            return Err(bad(format!("mark of {data_len} bytes and {nr_sectors} sectors")));
        }
        let name = &block[ENTRY_HEADER_BYTES..ENTRY_HEADER_BYTES + data_len as usize];
        Some(String::from_utf8_lossy(name).into_owned())
    } else if data_len != 0 {
        return Err(bad(format!("inline data of {data_len} bytes outside a mark")));
    } else {
        None
    };
    let data_bytes = nr_sectors.checked_mul(u64::from(sector_bytes)).filter(|&b| b <= ENTRY_DATA_BYTES_MAX);
    let Some(data_bytes) = data_bytes else {
        return Err(bad(format!("{nr_sectors} sectors, more than {ENTRY_DATA_BYTES_MAX} bytes")));
    };
    sector
        .checked_add(nr_sectors)
        .and_then(|end| end.checked_mul(u64::from(sector_bytes)))
        .ok_or_else(|| bad(format!("sector {sector} + {nr_sectors} overflows")))?;
    let Some(data_offset) = at.checked_add(u64::from(sector_bytes)) else {
        return Err(bad(format!("header at {at} overflows")));
    };
    let entry = Entry { sector, nr_sectors, flags, data_offset, mark };
    if entry.has_data() && data_offset.checked_add(data_bytes).is_none_or(|end| end > log_bytes) {
        return Err(bad(format!("{data_bytes} bytes of data at {data_offset} pass the log's end {log_bytes}")));
    }
    Ok(entry)
}

/// Bytes entry `entry` takes in the log, its header block included.
pub fn entry_span(entry: &Entry, sector_bytes: u32) -> u64 {
    let data = if entry.flags & flag::DISCARD != 0 { 0 } else { entry.nr_sectors };
    (1 + data) * u64::from(sector_bytes)
}

/// Reads a whole log of `log_bytes` bytes (a device's or a file's length):
/// the super block, then as many entries as it says.
pub fn read_log<R: Read + Seek>(log: &mut R, log_bytes: u64) -> Result<Log, LogError> {
    let mut first = [0u8; SUPER_BYTES];
    log.seek(SeekFrom::Start(0))?;
    log.read_exact(&mut first).map_err(|e| LogError::BadSuper(format!("unreadable: {e}")))?;
    let header = parse_super(&first)?;
    let sector_bytes = header.sector_bytes;
    // Each entry takes at least one block: a count past that is damage.
    if header.nr_entries > log_bytes / u64::from(sector_bytes) {
        return Err(LogError::BadSuper(format!("{} entries in {log_bytes} bytes", header.nr_entries)));
    }
    let mut block = vec![0u8; sector_bytes as usize];
    let mut entries = Vec::new();
    let mut at = u64::from(sector_bytes);
    for index in 0..header.nr_entries {
        let end = at.checked_add(u64::from(sector_bytes)).filter(|&end| end <= log_bytes);
        if end.is_none() {
            return Err(LogError::BadEntry { index, what: format!("header at {at} past the log's end") });
        }
        log.seek(SeekFrom::Start(at))?;
        log.read_exact(&mut block)?;
        let entry = parse_entry(&block, index, at, sector_bytes, log_bytes)?;
        at += entry_span(&entry, sector_bytes);
        entries.push(entry);
    }
    Ok(Log { header, entries })
}

/// Writes logs in the kernel's format, for tests: what dm-log-writes
/// would write for a sequence of writes, flushes, discards and marks.
#[derive(Clone, Debug)]
pub struct LogWriter {
    sector_bytes: u32,
    entries: u64,
    body: Vec<u8>,
}

impl LogWriter {
    /// An empty log with this logical sector size.
    pub fn new(sector_bytes: u32) -> LogWriter {
        LogWriter { sector_bytes, entries: 0, body: Vec::new() }
    }

    fn header(&mut self, sector: u64, nr_sectors: u64, flags: u64, name: &[u8]) {
        let mut block = vec![0u8; self.sector_bytes as usize];
        for (k, v) in [sector, nr_sectors, flags, name.len() as u64].into_iter().enumerate() {
            block[k * 8..k * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        block[ENTRY_HEADER_BYTES..ENTRY_HEADER_BYTES + name.len()].copy_from_slice(name);
        self.body.extend_from_slice(&block);
        self.entries += 1;
    }

    /// A write of `data` (whole sectors) at `sector`, with extra `flags`.
    pub fn write(&mut self, sector: u64, data: &[u8], flags: u64) -> &mut Self {
        assert_eq!(data.len() % self.sector_bytes as usize, 0, "whole sectors");
        self.header(sector, (data.len() / self.sector_bytes as usize) as u64, flags, b"");
        self.body.extend_from_slice(data);
        self
    }

    /// A flush without data.
    pub fn flush(&mut self) -> &mut Self {
        self.header(0, 0, flag::FLUSH, b"");
        self
    }

    /// A discard of `nr_sectors` at `sector`.
    pub fn discard(&mut self, sector: u64, nr_sectors: u64) -> &mut Self {
        self.header(sector, nr_sectors, flag::DISCARD, b"");
        self
    }

    /// A mark.
    pub fn mark(&mut self, name: &str) -> &mut Self {
        self.header(0, 0, flag::MARK, name.as_bytes());
        self
    }

    /// The log's bytes: the super block, then the entries.
    pub fn finish(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.sector_bytes as usize];
        out[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        out[8..16].copy_from_slice(&VERSION.to_le_bytes());
        out[16..24].copy_from_slice(&self.entries.to_le_bytes());
        out[24..28].copy_from_slice(&self.sector_bytes.to_le_bytes());
        out.extend_from_slice(&self.body);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loaderx_sim::rng::Rng;
    use std::io::Cursor;

    fn parse(bytes: &[u8]) -> Result<Log, LogError> {
        read_log(&mut Cursor::new(bytes), bytes.len() as u64)
    }

    #[test]
    fn a_written_log_parses_back() {
        let data: Vec<u8> = (0..1024u32).map(|i| i as u8).collect();
        let bytes = LogWriter::new(512)
            .write(8, &data, 0)
            .flush()
            .discard(100, 16)
            .mark("op-1")
            .write(3, &data[..512], flag::FUA)
            .finish();
        let log = parse(&bytes).expect("parses");
        assert_eq!(log.header, Super { nr_entries: 5, sector_bytes: 512 });
        let flags: Vec<u64> = log.entries.iter().map(|e| e.flags).collect();
        assert_eq!(flags, [0, flag::FLUSH, flag::DISCARD, flag::MARK, flag::FUA]);
        assert_eq!(log.entries[3].mark.as_deref(), Some("op-1"));
        let e = &log.entries[0];
        assert_eq!((e.sector, e.nr_sectors), (8, 2));
        assert_eq!(&bytes[e.data_offset as usize..][..1024], &data[..]);
        // The discard carries no data: the mark's header follows its own.
        assert_eq!(log.entries[4].data_offset, log.entries[3].data_offset + 512);
        assert_eq!(&bytes[log.entries[4].data_offset as usize..][..512], &data[..512]);
    }

    #[test]
    fn a_4k_sector_log_parses_back() {
        let data = vec![7u8; 8192];
        let bytes = LogWriter::new(4096).write(1, &data, flag::METADATA).mark("x").finish();
        let log = parse(&bytes).expect("parses");
        assert_eq!(log.entries[0].nr_sectors, 2);
        assert_eq!(log.entries[0].data_offset, 8192);
        assert_eq!(log.entries[1].mark.as_deref(), Some("x"));
    }

    #[test]
    fn bad_supers_are_refused() {
        let good = LogWriter::new(512).flush().finish();
        for (at, byte) in [(0usize, 0u8), (8, 2), (25, 3), (24, 1)] {
            let mut bad = good.clone();
            bad[at] = byte;
            assert!(matches!(parse(&bad), Err(LogError::BadSuper(_))), "byte {at} = {byte}");
        }
        let mut huge = good.clone();
        huge[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(parse(&huge), Err(LogError::BadSuper(_))));
        assert!(parse(&good[..20]).is_err());
    }

    #[test]
    fn entries_past_the_end_or_oversized_are_refused() {
        let bytes = LogWriter::new(512).write(0, &[1u8; 2048], 0).finish();
        assert!(matches!(parse(&bytes[..bytes.len() - 512]), Err(LogError::BadEntry { index: 0, .. })));
        for (field, value) in [(8usize, u64::MAX), (8, ENTRY_DATA_BYTES_MAX / 512 + 1), (16, 1 << 40), (0, u64::MAX)] {
            let mut bad = bytes.clone();
            bad[512 + field..512 + field + 8].copy_from_slice(&value.to_le_bytes());
            assert!(matches!(parse(&bad), Err(LogError::BadEntry { index: 0, .. })), "field {field} = {value}");
        }
        let mut long_mark = LogWriter::new(512).mark("m").finish();
        long_mark[512 + 24..512 + 32].copy_from_slice(&600u64.to_le_bytes());
        assert!(parse(&long_mark).is_err());
    }

    #[test]
    fn random_damage_never_panics() {
        let mut w = LogWriter::new(512);
        w.write(4, &[9u8; 1536], 0).flush().mark("op-1").discard(1, 1).write(0, &[1u8; 512], flag::FUA | flag::FLUSH);
        let good = w.finish();
        let mut rng = Rng::new(33);
        for _ in 0..5000 {
            let mut bad = good.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bad.len() as u64) as usize;
                bad[at] = rng.next_u64() as u8;
            }
            let cut = bad.len() - rng.below(bad.len() as u64 / 4) as usize;
            if let Ok(log) = parse(&bad[..cut]) {
                for e in log.entries.iter().filter(|e| e.has_data()) {
                    assert!(e.data_offset + e.nr_sectors * 512 <= cut as u64);
                }
            }
        }
    }
}
