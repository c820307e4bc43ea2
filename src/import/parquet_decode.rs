//! [`Decoding`]: a [`ParquetSource`](super::ParquetSource)'s row groups
//! decoded on several threads and delivered in their order.
//!
//! The work is a list of [`Unit`]s, one per row group (the first one past a
//! resumed import's skipped rows). Decoder `w` of `T` decodes units `w`,
//! `w + T`, `w + 2T`, ... in turn into its own bounded channel; the reader
//! takes unit `k`'s batches from channel `k mod T` until its end. So the
//! batches come in the files' order whatever the threads do, and memory is
//! bounded by `T` channels of `depth` batches.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::error::{ImportError, Position};
use super::parquet::{ParquetFile, bad, batch_rows};

/// One row group to decode, from a row within it on.
#[derive(Clone, Copy, Debug)]
pub(super) struct Unit {
    /// The file's index.
    pub(super) file: usize,
    /// The row group's index in the file.
    group: usize,
    /// Rows of the group skipped (a resumed import's), then decoded.
    skip: u64,
    /// The file's row of the unit's first decoded row.
    pub(super) row: u64,
    /// Rows it gives, by the footer.
    rows: u64,
}

/// The row groups of `files` past their first `skip` rows, in order.
pub(super) fn units(files: &[ParquetFile], mut skip: u64) -> Vec<Unit> {
    let mut units = Vec::new();
    for (file, f) in files.iter().enumerate() {
        let mut row = 0u64;
        for (group, g) in f.metadata.metadata().row_groups().iter().enumerate() {
            let n = g.num_rows().max(0) as u64;
            let skipped = skip.min(n);
            skip -= skipped;
            if skipped < n {
                units.push(Unit { file, group, skip: skipped, row: row + skipped, rows: n - skipped });
            }
            row = row.saturating_add(n);
        }
    }
    units
}

/// What a decoder sends its reader.
enum Message {
    Batch(RecordBatch),
    /// The unit's rows are all sent.
    End,
    Failed(ImportError),
}

/// The decoders and where the reader is.
pub(super) struct Decoding {
    channels: Vec<Receiver<Message>>,
    workers: Vec<JoinHandle<()>>,
    units: Arc<Vec<Unit>>,
    files: Arc<Vec<ParquetFile>>,
    /// The unit being delivered.
    next: usize,
}

impl Decoding {
    /// `threads` decoders over `units`, each holding at most `depth`
    /// batches ready.
    pub(super) fn start(
        files: Arc<Vec<ParquetFile>>,
        units: Vec<Unit>,
        batch_rows: usize,
        threads: usize,
        depth: usize,
    ) -> Decoding {
        assert!(threads >= 1 && depth >= 1);
        let units = Arc::new(units);
        let threads = threads.min(units.len()).max(1);
        let (mut channels, mut workers) = (Vec::with_capacity(threads), Vec::with_capacity(threads));
        for w in 0..threads {
            let (tx, rx) = sync_channel(depth);
            let (files, units) = (files.clone(), units.clone());
            let worker = std::thread::Builder::new()
                .name(format!("parquet-decode-{w}"))
                .spawn(move || decode(&files, &units, w, threads, batch_rows, &tx));
            // No thread: the closure and its sender are dropped, so this
            // decoder's units fail in turn in `next`.
            if let Ok(handle) = worker {
                workers.push(handle);
            }
            channels.push(rx);
        }
        Decoding { channels, workers, units, files, next: 0 }
    }

    /// The next batch and its unit, or `None` after the last unit.
    pub(super) fn next(&mut self) -> Result<Option<(Unit, RecordBatch)>, ImportError> {
        while let Some(&unit) = self.units.get(self.next) {
            let channel = &self.channels[self.next % self.channels.len()];
            match channel.recv() {
                Ok(Message::Batch(batch)) => return Ok(Some((unit, batch))),
                Ok(Message::End) => self.next += 1,
                Ok(Message::Failed(e)) => return Err(e),
                Err(_) => {
                    let reason = "the Parquet decoder stopped without an error (a panic, or no thread)";
                    return Err(bad(&self.files[unit.file].input.path, Position::Row(unit.row), reason));
                }
            }
        }
        Ok(None)
    }
}

impl Drop for Decoding {
    /// Drops the channels, so a decoder's next send fails and it returns,
    /// then waits for the decoders.
    fn drop(&mut self) {
        self.channels.clear();
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

/// Decoder `w` of `threads`: its units in turn, until the reader is gone.
fn decode(files: &[ParquetFile], units: &[Unit], w: usize, threads: usize, rows: usize, tx: &SyncSender<Message>) {
    for unit in units.iter().skip(w).step_by(threads) {
        let message = match decode_unit(&files[unit.file], unit, rows, tx) {
            Ok(true) => Message::End,
            Ok(false) => return,
            Err(e) => Message::Failed(e),
        };
        let failed = matches!(message, Message::Failed(_));
        if tx.send(message).is_err() || failed {
            return;
        }
    }
}

/// Sends `unit`'s batches; `false` if the reader is gone.
fn decode_unit(file: &ParquetFile, unit: &Unit, rows: usize, tx: &SyncSender<Message>) -> Result<bool, ImportError> {
    let path = &file.input.path;
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file.input.clone(), file.metadata.clone())
        .with_batch_size(batch_rows(file, rows))
        .with_row_groups(vec![unit.group])
        .with_offset(usize::try_from(unit.skip).unwrap_or(usize::MAX))
        .build()
        .map_err(|e| bad(path, Position::File, e))?;
    let mut done = 0u64;
    for batch in reader {
        let batch = batch.map_err(|e| bad(path, Position::Row(unit.row + done), e))?;
        done += batch.num_rows() as u64;
        if tx.send(Message::Batch(batch)).is_err() {
            return Ok(false);
        }
    }
    if done != unit.rows {
        let reason = format!("row group {} counts {} rows in the footer, its pages gave {done}", unit.group, unit.rows);
        return Err(bad(path, Position::File, reason));
    }
    Ok(true)
}
