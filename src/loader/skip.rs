//! Skipping corrupt records ([`LoaderBuilder::skip_corrupt`](super::LoaderBuilder::skip_corrupt)).
//!
//! A batch whose gather fails because a record's bytes are damaged (a
//! failed checksum, a frame that does not decode: [`is_corrupt`]) is
//! gathered again with each damaged record replaced. The batch's records
//! are read one at a time to find them, and each is replaced by the first
//! index after it, wrapping, that every stream reads (at most
//! [`SKIP_TRIES`] tried). The replacement depends on the index and the
//! stores' bytes alone, never on timing, so a resumed loader yields the
//! batches the first run did. Each batch lists its replacements
//! ([`Batch::skipped`](super::Batch::skipped)), and the loader's statistics
//! count them ([`LoaderStats::skipped`](super::LoaderStats::skipped)).
//! Without the option, the error stops the run, naming the stream, the step
//! and the record. This is the failure path only: a clean batch costs
//! nothing more.

use super::error::LoaderError;
use crate::dataset::DatasetError;

/// A record a batch skipped because its bytes are damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skip {
    /// Its position in the batch.
    pub position: usize,
    /// The index the sampler drew.
    pub index: u64,
    /// The index read in its place.
    pub replacement: u64,
}

/// Indices tried after a damaged record before its batch fails.
pub const SKIP_TRIES: u64 = 64;

/// `gather(indices)`; with `on`, a gather that fails on a damaged record
/// is repaired ([`repair`]) and run again. Returns the batch and its
/// replacements. The one place both of a loader's plans (streams, a
/// mixture) skip.
pub(super) fn gather_skipping(
    on: bool,
    indices: &mut [u64],
    gather: impl Fn(&[u64]) -> Result<super::Batch, LoaderError>,
    len_of: impl Fn(usize) -> u64,
    readable: impl Fn(usize, u64) -> Result<bool, LoaderError>,
) -> Result<(super::Batch, Vec<Skip>), LoaderError> {
    let error = match gather(indices) {
        Err(error) if on && is_corrupt(&error) => error,
        other => return other.map(|batch| (batch, Vec::new())),
    };
    let Some(skipped) = repair(indices, len_of, readable)? else { return Err(error) };
    Ok((gather(indices)?, skipped))
}

/// True for an error that says one record's bytes are damaged (what a skip
/// replaces), not that the store cannot be read at all.
fn is_corrupt(error: &LoaderError) -> bool {
    let LoaderError::Gather { source, .. } = error else { return false };
    matches!(
        source,
        DatasetError::Store(crate::Error::Corrupt { index: Some(_), .. }) | DatasetError::PartialRow { .. }
    )
}

/// Replaces in `indices` each record that `readable` finds damaged by the
/// first readable index after it, below `len_of(position)`; returns the
/// replacements, or `None` when a record has none within [`SKIP_TRIES`].
/// `readable(position, index)`: `Ok(false)` for a damaged record, `Err`
/// for any other failure (returned as it is).
fn repair(
    indices: &mut [u64],
    len_of: impl Fn(usize) -> u64,
    readable: impl Fn(usize, u64) -> Result<bool, LoaderError>,
) -> Result<Option<Vec<Skip>>, LoaderError> {
    let mut skipped = Vec::new();
    for (position, slot) in indices.iter_mut().enumerate() {
        let index = *slot;
        if readable(position, index)? {
            continue;
        }
        let len = len_of(position);
        let mut replacement = None;
        for candidate in (1..=SKIP_TRIES.min(len.saturating_sub(1))).map(|d| (index + d) % len) {
            if readable(position, candidate)? {
                replacement = Some(candidate);
                break;
            }
        }
        let Some(replacement) = replacement else { return Ok(None) };
        *slot = replacement;
        skipped.push(Skip { position, index, replacement });
    }
    Ok(Some(skipped))
}

/// `readable`'s answer from one stream's gather of one record.
pub(super) fn judge<T>(result: Result<T, DatasetError>, step: u64, stream: &str) -> Result<bool, LoaderError> {
    match result {
        Ok(_) => Ok(true),
        Err(source) => {
            let error = LoaderError::Gather { step, stream: stream.to_string(), source };
            if is_corrupt(&error) { Ok(false) } else { Err(error) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_record_is_replaced_by_the_next_readable_one_wrapping() {
        let damaged = [3u64, 4, 9];
        let readable = |_: usize, i: u64| Ok(!damaged.contains(&i));
        let mut indices = vec![1, 3, 9, 4, 3];
        let skipped = repair(&mut indices, |_| 10, readable).unwrap().unwrap();
        assert_eq!(indices, [1, 5, 0, 5, 5]);
        let positions: Vec<(usize, u64, u64)> = skipped.iter().map(|s| (s.position, s.index, s.replacement)).collect();
        assert_eq!(positions, [(1, 3, 5), (2, 9, 0), (3, 4, 5), (4, 3, 5)]);
    }

    #[test]
    fn no_readable_record_within_the_tries_is_none_and_other_errors_pass() {
        let mut indices = vec![0, 1];
        assert_eq!(repair(&mut indices, |_| 1000, |_, i| Ok(i == 0 || i > SKIP_TRIES + 1)).unwrap(), None);
        let mut indices = vec![0];
        assert_eq!(repair(&mut indices, |_| 1, |_, _| Ok(false)).unwrap(), None, "a lone damaged record");
        let failed = repair(&mut [0], |_| 5, |_, _| Err(LoaderError::Stopped));
        assert!(matches!(failed, Err(LoaderError::Stopped)));
    }
}
