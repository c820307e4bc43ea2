//! [`Source`]: what every importer reads from.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use super::error::ImportError;

/// Rows to import: Arrow record batches of one schema, in an order fixed
/// by the input (the same on every run over the same input), so that a
/// resumed import skips exactly the rows the table committed.
///
/// A source reads with bounded memory: a batch at a time, never the whole
/// input. An error names the file and the position in it.
pub trait Source: Send {
    /// The schema every batch has.
    fn schema(&self) -> SchemaRef;

    /// Identifies the input (its files, their sizes and modification
    /// times, and the options that shape the rows), so that a rerun knows
    /// it resumes the same import. The same input gives the same string.
    fn fingerprint(&self) -> String;

    /// Rows in all, if known without reading the input (for progress).
    fn rows_hint(&self) -> Option<u64> {
        None
    }

    /// Bytes of input in all, if known (for progress).
    fn bytes_hint(&self) -> Option<u64> {
        None
    }

    /// Bytes of input consumed so far (for progress).
    fn bytes_read(&self) -> u64 {
        0
    }

    /// The next batch, or `None` at the end of the input.
    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ImportError>;

    /// Skips the next `rows` rows (a resumed import's committed rows).
    /// Sources that can seek (Parquet row groups, counted files) override
    /// this; the default reads and drops.
    fn skip(&mut self, mut rows: u64) -> Result<(), ImportError> {
        while rows > 0 {
            let Some(batch) = self.next_batch()? else {
                return Err(ImportError::InvalidArgument(format!(
                    "the input ended {rows} rows before the rows the table already holds from it: \
                     it changed since the import began"
                )));
            };
            let n = batch.num_rows() as u64;
            if n > rows {
                return Err(ImportError::InvalidArgument(
                    "skip within a batch: a source must override skip to cut a batch".to_string(),
                ));
            }
            rows -= n;
        }
        Ok(())
    }
}
