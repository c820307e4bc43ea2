//! [`Tensor`]: an owned, shaped, aligned block of elements (a gathered
//! batch, a padded batch, a record), and the buffer pool batches recycle
//! their memory through.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::dtype::{DType, Element};
use super::error::DatasetError;

/// Free buffers, recycled: a gathered batch writes every byte of its
/// buffer, so a reused buffer needs neither zeroing nor fresh pages.
#[derive(Debug)]
pub(crate) struct Pool {
    free: Mutex<Vec<Words>>,
    /// At most this many free buffers are kept.
    keep: AtomicUsize,
}

impl Pool {
    /// A pool keeping at most `keep` free buffers.
    pub(crate) fn new(keep: usize) -> Arc<Pool> {
        Arc::new(Pool { free: Mutex::new(Vec::new()), keep: AtomicUsize::new(keep) })
    }

    /// Keeps at most `keep` free buffers from now on (the loader's tuner
    /// sizes it to its budget); buffers over it are freed.
    pub(crate) fn set_keep(&self, keep: usize) {
        self.keep.store(keep, Relaxed);
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        free.truncate(keep);
    }

    fn take(&self) -> Option<Words> {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    fn give(&self, words: Words) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < self.keep.load(Relaxed) {
            free.push(words);
        }
    }
}

/// Buffers of at least this many bytes start on a page boundary.
const PAGE_ALIGNED_MIN: usize = 64 << 10;

/// The alignment of a large buffer.
const PAGE: usize = 4096;

/// A page of a large buffer: its alignment puts the buffer's first byte on
/// a page boundary.
#[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C, align(4096))]
struct Page([u8; PAGE]);

/// A buffer's memory. Where a large block starts is this type's choice,
/// not the allocator's: malloc puts one 16 bytes past a page when it maps
/// it fresh, and anywhere on its heap once freeing a mapped block has
/// raised its threshold, which any earlier gather in the process does. A
/// gather copies records from page-aligned file offsets, and the CPU's
/// string copy runs at its fastest when source and destination share their
/// offset within a page; at 16 bytes apart it ran at a third of that speed
/// on some machines, so a loader was fast or slow by what ran before it
/// (`docs/benchmarks.md`, "Python loader, fresh processes").
enum Words {
    /// Below [`PAGE_ALIGNED_MIN`] bytes: 8-byte words.
    Small(Vec<u64>),
    /// From [`PAGE_ALIGNED_MIN`] bytes: whole pages.
    Pages(Vec<Page>),
}

impl Words {
    /// Room for at least `len` bytes, reusing `old`'s memory if it is of
    /// the kind `len` needs (new memory is zeroed; reused keeps its bytes).
    fn with_len(len: usize, old: Option<Words>) -> Words {
        if len < PAGE_ALIGNED_MIN {
            let mut words = match old {
                Some(Words::Small(words)) => words,
                _ => Vec::new(),
            };
            words.resize(words.len().max(len.div_ceil(8)), 0);
            return Words::Small(words);
        }
        let mut pages = match old {
            Some(Words::Pages(pages)) => pages,
            _ => Vec::new(),
        };
        pages.resize(pages.len().max(len.div_ceil(PAGE)), Page([0; PAGE]));
        Words::Pages(pages)
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Words::Small(words) => bytemuck::cast_slice(words),
            Words::Pages(pages) => bytemuck::cast_slice(pages),
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Words::Small(words) => bytemuck::cast_slice_mut(words),
            Words::Pages(pages) => bytemuck::cast_slice_mut(pages),
        }
    }
}

impl fmt::Debug for Words {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Words({} bytes)", self.bytes().len())
    }
}

/// Bytes stored in `u64` words (every element type up to 8 bytes is
/// aligned), or in whole pages when large ([`Words`]); returns its memory
/// to its pool when dropped.
pub(crate) struct Buffer {
    words: Words,
    len: usize,
    pool: Option<Arc<Pool>>,
}

impl Buffer {
    /// A buffer of `len` bytes: zeroed if new, holding old bytes if taken
    /// from `pool` (the caller overwrites them all).
    pub(crate) fn with_len(len: usize, pool: Option<&Arc<Pool>>) -> Buffer {
        let words = Words::with_len(len, pool.and_then(|p| p.take()));
        Buffer { words, len, pool: pool.cloned() }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.words.bytes()[..self.len]
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.words.bytes_mut()[..self.len]
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.give(std::mem::replace(&mut self.words, Words::Small(Vec::new())));
        }
    }
}

/// An owned n-dimensional array of one [`DType`], C order: a gathered batch
/// (`[batch, *shape]`), a padded batch (`[batch, max_len, *item_shape]`), a
/// record, or anything a transform builds.
///
/// ```
/// use loaderx::dataset::Tensor;
/// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// assert_eq!(t.shape(), &[2, 3]);
/// assert_eq!(t.as_slice::<f32>()?[4], 5.0);
/// assert_eq!(t.record(1), Some(&t.as_bytes()[12..]));
/// assert_eq!(t.record(2), None);
/// assert!(t.as_slice::<i32>().is_err());
/// # Ok::<(), loaderx::dataset::DatasetError>(())
/// ```
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    data: Buffer,
}

/// Bytes of an array of `dtype` and `shape`, checked for overflow.
pub(crate) fn array_bytes(dtype: DType, shape: &[usize]) -> Result<usize, DatasetError> {
    // An empty array is 0 bytes however large its other dimensions (the
    // product would overflow before it reached the 0: fuzzing finding F6).
    if shape.contains(&0) {
        return Ok(0);
    }
    shape
        .iter()
        .try_fold(dtype.itemsize(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| DatasetError::ShapeMismatch(format!("{dtype}{shape:?} overflows the address space")))
}

impl Tensor {
    /// A zeroed tensor.
    pub fn zeros(dtype: DType, shape: &[usize]) -> Result<Tensor, DatasetError> {
        let len = array_bytes(dtype, shape)?;
        Ok(Tensor { dtype, shape: shape.to_vec(), data: Buffer::with_len(len, None) })
    }

    /// A tensor whose buffer may come from `pool` (its bytes are garbage:
    /// the caller overwrites all of them).
    pub(crate) fn pooled(dtype: DType, shape: &[usize], pool: Option<&Arc<Pool>>) -> Result<Tensor, DatasetError> {
        let len = array_bytes(dtype, shape)?;
        Ok(Tensor { dtype, shape: shape.to_vec(), data: Buffer::with_len(len, pool) })
    }

    /// A tensor holding a copy of `data`, which must have as many elements as
    /// `shape` says.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Tensor, DatasetError> {
        Tensor::from_bytes(T::DTYPE, shape, bytemuck::cast_slice(data))
    }

    /// A tensor of `dtype` and `shape` holding a copy of `bytes`, which must
    /// be exactly as long as that shape.
    pub fn from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor, DatasetError> {
        let mut t = Tensor::zeros(dtype, shape)?;
        if t.nbytes() != bytes.len() {
            return Err(DatasetError::ShapeMismatch(format!(
                "{} bytes given for {dtype}{shape:?}, which is {} bytes",
                bytes.len(),
                t.nbytes()
            )));
        }
        t.as_bytes_mut().copy_from_slice(bytes);
        Ok(t)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The length of the first axis (1 for a 0-dimensional tensor).
    pub fn len(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }

    /// True if the first axis is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total bytes.
    pub fn nbytes(&self) -> usize {
        self.data.len
    }

    /// The bytes, C order.
    pub fn as_bytes(&self) -> &[u8] {
        self.data.bytes()
    }

    /// The bytes, C order, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.data.bytes_mut()
    }

    /// The elements as `T`; [`DatasetError::DtypeMismatch`] unless `T` reads
    /// this tensor's dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], DatasetError> {
        check_dtype::<T>(self.dtype)?;
        Ok(bytemuck::cast_slice(self.as_bytes()))
    }

    /// The elements as `T`, writable.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T], DatasetError> {
        check_dtype::<T>(self.dtype)?;
        Ok(bytemuck::cast_slice_mut(self.as_bytes_mut()))
    }

    /// The bytes of entry `i` along the first axis (a record of a batch);
    /// `None` if `i >= len()`.
    pub fn record(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len() {
            return None;
        }
        let per = self.nbytes() / self.len();
        self.as_bytes().get(i * per..(i + 1) * per)
    }

    /// Changes the shape to one with the same number of bytes.
    pub fn reshape(&mut self, shape: &[usize]) -> Result<(), DatasetError> {
        if array_bytes(self.dtype, shape)? != self.nbytes() {
            return Err(DatasetError::ShapeMismatch(format!(
                "cannot reshape {}{:?} to {shape:?}",
                self.dtype, self.shape
            )));
        }
        self.shape = shape.to_vec();
        Ok(())
    }
}

/// [`DatasetError::DtypeMismatch`] unless `T` reads `dtype`.
pub(crate) fn check_dtype<T: Element>(dtype: DType) -> Result<(), DatasetError> {
    if T::DTYPE == dtype {
        Ok(())
    } else {
        Err(DatasetError::DtypeMismatch { stored: dtype.to_string(), requested: T::DTYPE.to_string() })
    }
}

impl Clone for Tensor {
    fn clone(&self) -> Tensor {
        let mut data = Buffer::with_len(self.nbytes(), None);
        data.bytes_mut().copy_from_slice(self.as_bytes());
        Tensor { dtype: self.dtype, shape: self.shape.clone(), data }
    }
}

impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.dtype == other.dtype && self.shape == other.shape && self.as_bytes() == other.as_bytes()
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({}{:?}, {} bytes)", self.dtype, self.shape, self.nbytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large buffer starts on a page, new or taken from a pool, whatever
    /// the allocator did before (`Words`); a small one is 8-byte aligned.
    #[test]
    fn large_buffers_start_on_a_page() {
        let pool = Pool::new(2);
        for len in [PAGE_ALIGNED_MIN + 1, 3 << 20, (3 << 20) + 17] {
            // A freed large block first, as a gather in the process leaves.
            drop(vec![0u8; len]);
            let buffer = Buffer::with_len(len, Some(&pool));
            assert_eq!(buffer.bytes().len(), len);
            assert_eq!(buffer.bytes().as_ptr() as usize % PAGE, 0, "{len} bytes, new");
            drop(buffer);
            let reused = Buffer::with_len(len - 1, Some(&pool));
            assert_eq!(reused.bytes().as_ptr() as usize % PAGE, 0, "{len} bytes, reused");
            assert_eq!(reused.bytes().len(), len - 1);
        }
        let small = Buffer::with_len(PAGE_ALIGNED_MIN - 1, Some(&pool));
        assert_eq!(small.bytes().as_ptr() as usize % 8, 0);
        assert_eq!(small.bytes().len(), PAGE_ALIGNED_MIN - 1);
    }

    /// A pooled buffer of the other kind is not reused across the threshold.
    #[test]
    fn a_pool_gives_each_size_its_kind() {
        let pool = Pool::new(1);
        drop(Buffer::with_len(100, Some(&pool)));
        let large = Buffer::with_len(PAGE_ALIGNED_MIN, Some(&pool));
        assert_eq!(large.bytes().as_ptr() as usize % PAGE, 0);
        drop(large);
        let small = Buffer::with_len(100, Some(&pool));
        assert_eq!(small.bytes().len(), 100);
    }
}
