//! Dictionary training and installation (`docs/crash-safety.md`,
//! "Dictionary install"): `dict.zr` appears whole, by rename, and is durable
//! before any record that needs it can be committed.

use super::Zrecord;
use super::codec::{self, Dictionary};
use crate::error::{Error, Result};
use crate::format::{DICT_FILE, DICT_TMP_FILE};
use crate::io::{OpenMode, SyncKind, write_all_at};

/// Smallest dictionary the default sizing picks.
pub const DICT_BYTES_DEFAULT_MIN: usize = 8 << 10;
/// Largest dictionary the default sizing picks.
pub const DICT_BYTES_DEFAULT_MAX: usize = 1 << 20;

/// The reference's default dictionary size for `sample_bytes` of samples:
/// 1/100 of them, clamped to 8 KiB ..= 1 MiB.
pub fn default_dict_size(sample_bytes: usize) -> usize {
    (sample_bytes / 100).clamp(DICT_BYTES_DEFAULT_MIN, DICT_BYTES_DEFAULT_MAX)
}

impl Zrecord {
    /// Trains a zstd dictionary of at most `max_bytes` (see
    /// [`default_dict_size`]) on `samples`, the concatenation of samples of
    /// the given `sizes`, stores it as `dict.zr` and installs it. Returns its
    /// size. A store has at most one dictionary: replacing it would make
    /// every `zstd_dict` record unreadable.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use loaderx::{Codec, Zrecord, default_dict_size};
    /// let store = Zrecord::open(dir.path())?;
    /// let tiles: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8 ^ (i / 997) as u8).collect();
    /// let sizes = vec![1000; 100];
    /// store.train_dict(&tiles, &sizes, default_dict_size(tiles.len()))?;
    /// store.append(&tiles, 100, 1000, Codec::ZstdDict)?;
    /// assert_eq!(store.get(42)?, &tiles[42_000..43_000]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn train_dict(&self, samples: &[u8], sizes: &[usize], max_bytes: usize) -> Result<usize> {
        self.check_writable()?;
        if self.has_dict() {
            return Err(Error::DictionaryExists { path: self.path().to_path_buf() });
        }
        let bytes = Zrecord::train_dict_bytes(samples, sizes, max_bytes)?;
        self.install_dict(bytes)
    }

    /// The dictionary [`Zrecord::train_dict`] would install, trained in
    /// memory and not installed (see [`Zrecord::install_dict`]): a writer
    /// can train it before it creates anything on disk.
    pub fn train_dict_bytes(samples: &[u8], sizes: &[usize], max_bytes: usize) -> Result<Vec<u8>> {
        codec::train(samples, sizes, max_bytes).map_err(|reason| Error::DictionaryTraining { reason })
    }

    /// Installs `bytes` (a zstd dictionary) as the store's dictionary.
    pub fn install_dict(&self, bytes: Vec<u8>) -> Result<usize> {
        self.check_writable()?;
        let _writer = self.meta.lock_appends();
        if self.has_dict() {
            return Err(Error::DictionaryExists { path: self.path().to_path_buf() });
        }
        let prepared = Dictionary::new(bytes).map_err(|what| Error::Corrupt {
            path: self.path().to_path_buf(),
            index: None,
            what,
        })?;
        let tmp = self.path().join(DICT_TMP_FILE);
        let vfs = self.filesystem();
        let file = vfs.open(&tmp, OpenMode::Create).map_err(|e| self.io("create dict.zr", e))?;
        file.set_len(0).map_err(|e| self.io("truncate dict.zr.tmp", e))?;
        write_all_at(&*file, prepared.bytes(), 0).map_err(|e| self.io("write dict.zr", e))?;
        file.sync(SyncKind::All).map_err(|e| self.sync_failed(e))?; // SYNC T1
        vfs.rename(&tmp, &self.path().join(DICT_FILE)).map_err(|e| self.io("rename dict.zr", e))?;
        vfs.sync_dir(self.path()).map_err(|e| self.sync_failed(e))?; // SYNC T2
        let size = prepared.bytes().len();
        let _ = self.dict.set(prepared);
        Ok(size)
    }
}
