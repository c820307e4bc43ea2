//! Sequence packing: a batch of ragged sequences (token ids, usually) laid
//! into rows of `seq_len`, several sequences a row, with the two arrays a
//! transformer needs to keep them apart: segment ids (1, 2, ... within a
//! row, 0 for padding) and positions (from 0 in each segment).
//!
//! First fit decreasing: the pieces, longest first (ties in batch order),
//! each into the lowest row with room for it ([`crate::first_fit`]). A
//! sequence longer than `seq_len` is cut into pieces of `seq_len` (the
//! last shorter), none lost, unless truncation is asked for: then only its
//! first `seq_len` elements are kept. The result depends on the batch only,
//! so a packed loader resumes exactly.

use crate::dataset::{Ragged, Tensor};
use crate::first_fit::FirstFit;
use crate::loader::{Batch, Column, TransformError};

/// A packed batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Packed {
    /// `[rows, seq_len, item...]`, the values' dtype; padding is zeros.
    pub tokens: Tensor,
    /// `[rows, seq_len]` int32: 1, 2, ... per segment within a row, 0 for padding.
    pub segment_ids: Tensor,
    /// `[rows, seq_len]` int32: 0, 1, ... within each segment, 0 for padding.
    pub positions: Tensor,
    /// Elements placed (not padding).
    pub placed: usize,
}

impl Packed {
    /// The fraction of the rows' slots that hold an element, not padding
    /// (1.0 for an empty result).
    pub fn efficiency(&self) -> f64 {
        let slots = self.slots();
        if slots == 0 { 1.0 } else { self.placed as f64 / slots as f64 }
    }

    /// Slots of the rows, `rows * seq_len`.
    pub fn slots(&self) -> usize {
        self.segment_ids.shape().iter().product()
    }
}

/// One piece of a sequence: `len` elements from element `start`.
#[derive(Clone, Copy, Debug)]
struct Piece {
    start: usize,
    len: usize,
}

/// Packs the sequences of `ragged` into rows of `seq_len` elements.
pub fn pack(ragged: &Ragged, seq_len: usize, truncate: bool) -> Result<Packed, TransformError> {
    if seq_len == 0 || seq_len > i32::MAX as usize {
        return Err(format!("seq_len must be 1 to {}, not {seq_len}", i32::MAX).into());
    }
    let pieces = pieces(ragged, seq_len, truncate)?;
    let placements = first_fit_decreasing(&pieces, seq_len);
    let rows = placements.iter().map(|&(row, ..)| row + 1).max().unwrap_or(0);
    // First fit decreasing leaves at most one row half empty or emptier, so
    // the rows hold at most twice the elements plus one row.
    if rows.checked_mul(seq_len).is_none_or(|slots| slots > i32::MAX as usize * 2) {
        return Err(format!("{rows} rows of {seq_len} do not fit the arrays").into());
    }
    let item: Vec<usize> = ragged.values.shape().get(1..).unwrap_or(&[]).to_vec();
    let width = ragged.values.nbytes() / ragged.values.shape().first().copied().unwrap_or(0).max(1);
    let mut shape = vec![rows, seq_len];
    shape.extend(&item);
    let mut tokens = Tensor::zeros(ragged.values.dtype(), &shape)?;
    let mut segment_ids = vec![0i32; rows * seq_len];
    let mut positions = vec![0i32; rows * seq_len];
    let (src, dst) = (ragged.values.as_bytes(), tokens.as_bytes_mut());
    for (piece, &(row, offset, segment)) in pieces.iter().zip(&placements) {
        let at = row * seq_len + offset;
        dst[at * width..][..piece.len * width].copy_from_slice(&src[piece.start * width..][..piece.len * width]);
        segment_ids[at..at + piece.len].fill(segment);
        for (k, p) in positions[at..at + piece.len].iter_mut().enumerate() {
            *p = k as i32;
        }
    }
    let placed = pieces.iter().map(|p| p.len).sum();
    let ids = |v: Vec<i32>| Tensor::from_slice(&v, &[rows, seq_len]);
    Ok(Packed { tokens, segment_ids: ids(segment_ids)?, positions: ids(positions)?, placed })
}

/// The pieces of every sequence, in batch order; an error if the row
/// splits do not describe the values.
fn pieces(ragged: &Ragged, seq_len: usize, truncate: bool) -> Result<Vec<Piece>, TransformError> {
    let total = ragged.values.shape().first().copied().unwrap_or(0) as u64;
    let splits = &ragged.row_splits;
    let ordered = splits.first().is_none_or(|&s| s == 0) && splits.windows(2).all(|w| w[0] <= w[1]);
    if !ordered || splits.last().is_some_and(|&end| end != total) {
        return Err(format!("row splits must rise from 0 to the {total} values").into());
    }
    let mut pieces = Vec::new();
    for w in splits.windows(2) {
        let (start, len) = (w[0] as usize, (w[1] - w[0]) as usize);
        let kept = if truncate { len.min(seq_len) } else { len };
        pieces.extend((0..kept).step_by(seq_len).map(|at| Piece { start: start + at, len: (kept - at).min(seq_len) }));
    }
    Ok(pieces)
}

/// Where each piece goes: (row, offset within the row, segment id: 1 for
/// the row's first piece, counting up along the row), pieces longest
/// first, each into the lowest row with room.
fn first_fit_decreasing(pieces: &[Piece], seq_len: usize) -> Vec<(usize, usize, i32)> {
    let mut order: Vec<usize> = (0..pieces.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(pieces[k].len)); // stable: ties in batch order
    // A row per piece at most; rows not yet used have all their room.
    let mut free = FirstFit::new(std::iter::repeat_n(seq_len as u64, pieces.len()));
    let mut segments: Vec<i32> = Vec::new();
    let mut placements = vec![(0, 0, 0); pieces.len()];
    for k in order {
        let len = pieces[k].len as u64;
        let row = free.find(len).expect("an unused row holds any piece");
        if row == segments.len() {
            segments.push(0);
        }
        segments[row] += 1;
        let room = free.value(row);
        placements[k] = (row, seq_len - room as usize, segments[row]);
        free.set(row, room - len);
    }
    placements
}

/// A loader transform that replaces the ragged column `column` by
/// `column` (tokens), `{column}_segment_ids` and `{column}_positions`
/// ([`pack`]); other columns pass through.
pub fn pack_transform(
    column: &str,
    seq_len: usize,
    truncate: bool,
) -> impl Fn(Batch) -> Result<Batch, TransformError> + Send + Sync + 'static {
    let column = column.to_string();
    move |mut batch: Batch| {
        let Some(Column::Ragged(ragged)) = batch.remove(&column) else {
            return Err(format!("packing: the batch has no ragged column {column:?}").into());
        };
        let packed = pack(&ragged, seq_len, truncate)?;
        batch.insert(column.clone(), packed.tokens);
        batch.insert(format!("{column}_segment_ids"), packed.segment_ids);
        batch.insert(format!("{column}_positions"), packed.positions);
        Ok(batch)
    }
}
