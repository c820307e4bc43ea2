//! [`PositionalMap`]: a read-only "mapping" made of positional reads of a
//! [`VfsFile`], for files that cannot or should not be mapped: a remote
//! chunk (each read one GET) and, on Windows, a local chunk (a section
//! cannot reach past its file's end, nor may a mapped file shrink).

use std::io;

use super::{Map, Residency, VfsFile, read_exact_at};

/// Reads of `file` below `len`, each one positional read into the caller's
/// scratch; its residency is always the device, so gathers batch them.
#[derive(Debug)]
pub(crate) struct PositionalMap<F> {
    file: F,
    len: usize,
}

impl<F: VfsFile> PositionalMap<F> {
    /// The "mapping" of `file`'s first `len` bytes.
    pub(crate) fn new(file: F, len: usize) -> PositionalMap<F> {
        PositionalMap { file, len }
    }

    /// `dst.len()` bytes at `offset`, which must lie below `len`.
    fn read_into(&self, offset: u64, dst: &mut [u8]) -> io::Result<()> {
        if offset.checked_add(dst.len() as u64).is_none_or(|end| end > self.len as u64) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "read past the mapping"));
        }
        read_exact_at(&self.file, dst, offset)
    }
}

impl<F: VfsFile> Map for PositionalMap<F> {
    /// A positional read; panics if it fails (a chunk is read through
    /// `bytes`, which returns the error).
    unsafe fn read(&self, offset: usize, dst: &mut [u8]) {
        self.read_into(offset as u64, dst).expect("a positional read");
    }
    fn bytes<'a>(&'a self, offset: u64, len: usize, scratch: &'a mut Vec<u8>) -> io::Result<&'a [u8]> {
        // Checked before the allocation it sizes (`read_into` checks again).
        if len > self.len {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "read past the mapping"));
        }
        scratch.resize(len, 0);
        self.read_into(offset, scratch)?;
        Ok(&scratch[..])
    }
    unsafe fn write(&self, _: usize, _: &[u8]) {
        panic!("a write into a read-only mapping");
    }
    unsafe fn store_word(&self, _: usize, _: u64) {
        panic!("a store into a read-only mapping");
    }
    fn load_word(&self, offset: usize) -> u64 {
        let mut word = [0; 8];
        self.read_into(offset as u64, &mut word).expect("a positional read");
        u64::from_ne_bytes(word)
    }
    fn flush_range(&self, _: usize, _: usize) -> io::Result<()> {
        Ok(())
    }
    fn residency(&self, _: u64, _: usize) -> Residency {
        Residency::Device
    }
}
