//! `compact`: the store's in-place compaction, with a progress bar on a
//! terminal and a summary of what it reclaimed. Interrupting it is safe: the
//! store's compaction is crash-ordered and resumable
//! (`docs/crash-safety.md`), so the next run (or any open for writing)
//! picks up from what is on disk. Refused while the store is open for
//! reading elsewhere, unless `--wait`.

use std::path::Path;
use std::time::Instant;

use crate::CliResult;
use crate::out::{Json, human, print, progress_bar, table};

pub fn run(path: &Path, wait: bool, json: bool) -> CliResult<()> {
    let started = Instant::now();
    let mut store = crate::out::open_to_mutate(path, wait)?;
    let bar = progress_bar(0, "compact", true);
    let report = store.compact_with_progress(|settled, live| {
        if let Some(bar) = &bar {
            bar.set_length(live);
            bar.set_position(settled);
        }
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let report = report?;
    let seconds = started.elapsed().as_secs_f64();
    let reclaimed = report.bytes_before.saturating_sub(report.bytes_after);
    let text = if json {
        let mut text = Json::object()
            .field("store", path.to_string_lossy().as_ref())
            .field("records", store.len())
            .field("bytes_before", report.bytes_before)
            .field("bytes_after", report.bytes_after)
            .field("reclaimed_bytes", reclaimed)
            .field("moved_records", report.moved_records)
            .field("moved_bytes", report.moved_bytes)
            .field("rounds", report.rounds)
            .field("removed_chunks", report.removed_chunks)
            .field("seconds", seconds)
            .finish();
        text.push('\n');
        text
    } else {
        table(&[
            ("store", path.display().to_string()),
            ("records", store.len().to_string()),
            ("reclaimed", human(reclaimed)),
            ("chunk bytes", format!("{} -> {}", human(report.bytes_before), human(report.bytes_after))),
            ("moved", format!("{} records, {}", report.moved_records, human(report.moved_bytes))),
            ("rounds", report.rounds.to_string()),
            ("removed chunks", report.removed_chunks.to_string()),
            ("time", format!("{seconds:.3} s")),
        ])
    };
    print(&text)?;
    Ok(())
}
