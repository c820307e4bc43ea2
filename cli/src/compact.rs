//! `compact`: the store's in-place compaction, with a progress bar on a
//! terminal and a summary of what it reclaimed. Interrupting it is safe: the
//! store's compaction is crash-ordered and resumable
//! (`docs/crash-safety.md`), so the next run (or any open for writing)
//! picks up from what is on disk. Refused while the store is open for
//! reading elsewhere, unless `--wait`.

use std::path::Path;
use std::time::Instant;

use loaderx::dataset::{ShardedMutation, Shards};
use loaderx::{CompactOptions, Zrecord};

use crate::CliResult;
use crate::out::{CliError, Json, human, json_array, print, progress_bar, table};

/// `--max-bytes`: a number of bytes, with an optional K, M, G or T suffix
/// (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.trim().char_indices().last() {
        Some((at, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("`{s}`: the suffix must be K, M, G or T")),
            };
            (&s.trim()[..at], shift)
        }
        _ => (s.trim(), 0),
    };
    let n: u64 = digits.parse().map_err(|_| format!("`{s}` is not a number of bytes"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("`{s}` is too large"))
}

/// `--dry-run`: the plan, nothing changed.
pub fn plan(path: &Path, options: CompactOptions, shard: Option<usize>, json: bool) -> CliResult<()> {
    if crate::records::is_sharded(path) {
        return plan_sharded(path, options, shard, json);
    }
    not_sharded(path, shard)?;
    crate::out::require_store(path, false)?;
    let plan = Zrecord::open_read_only(path)?.compact_plan(options)?;
    let freed = plan.bytes_before.saturating_sub(plan.bytes_after);
    let text = if json {
        let mut text = Json::object()
            .field("store", path.to_string_lossy().as_ref())
            .field("dry_run", true)
            .field("repack", options.repack)
            .field("move_records", plan.move_records)
            .field("move_bytes", plan.move_bytes)
            .field("bytes_before", plan.bytes_before)
            .field("bytes_after", plan.bytes_after)
            .field("freed_bytes", freed)
            .field("removed_chunks", plan.removed_chunks)
            .field("remaining_bytes", plan.remaining_bytes)
            .finish();
        text.push('\n');
        text
    } else {
        table(&[
            ("store", path.display().to_string()),
            ("plan", if options.repack { "repack (dry run)" } else { "fill (dry run)" }.to_string()),
            ("would move", format!("{} records, {}", plan.move_records, human(plan.move_bytes))),
            ("would free", human(freed)),
            ("chunk bytes", format!("{} -> {}", human(plan.bytes_before), human(plan.bytes_after))),
            ("removed chunks", plan.removed_chunks.to_string()),
            ("left for later", human(plan.remaining_bytes)),
        ])
    };
    print(&text)?;
    Ok(())
}

/// `--shard K` of a store that is not sharded: only 0, the store itself.
fn not_sharded(path: &Path, shard: Option<usize>) -> CliResult<()> {
    match shard {
        Some(k) if k != 0 => {
            Err(CliError::new(format!("{}: not a sharded dataset, so no shard {k}", path.display())).into())
        }
        _ => Ok(()),
    }
}

/// The shards `--shard` names: one, or all.
fn shards_named(path: &Path, count: usize, shard: Option<usize>) -> CliResult<Vec<usize>> {
    match shard {
        Some(k) if k >= count => Err(CliError::new(format!("{}: shard {k} of {count} shards", path.display())).into()),
        Some(k) => Ok(vec![k]),
        None => Ok((0..count).collect()),
    }
}

/// The plan of each shard named, read-only.
fn plan_sharded(path: &Path, options: CompactOptions, shard: Option<usize>, json: bool) -> CliResult<()> {
    let shards = Shards::open(path, loaderx::ReadMode::Auto)?;
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut items = Vec::new();
    let (mut moved, mut freed) = (0u64, 0u64);
    for k in shards_named(path, shards.count(), shard)? {
        let plan = shards.shard(k)?.compact_plan(options)?;
        let f = plan.bytes_before.saturating_sub(plan.bytes_after);
        (moved, freed) = (moved + plan.move_bytes, freed + f);
        items.push(
            Json::object()
                .field("shard", k as u64)
                .field("move_records", plan.move_records)
                .field("move_bytes", plan.move_bytes)
                .field("freed_bytes", f)
                .field("remaining_bytes", plan.remaining_bytes)
                .finish(),
        );
        rows.push((
            format!("shard {k}"),
            format!("would move {} records, {}; free {}", plan.move_records, human(plan.move_bytes), human(f)),
        ));
    }
    let text = if json {
        let mut text = Json::object()
            .field("store", path.to_string_lossy().as_ref())
            .field("dry_run", true)
            .field("repack", options.repack)
            .field("move_bytes", moved)
            .field("freed_bytes", freed)
            .raw("shards", &json_array(items))
            .finish();
        text.push('\n');
        text
    } else {
        let mut head = vec![
            ("dataset".to_string(), format!("{} ({} shards)", path.display(), shards.count())),
            (
                "plan".to_string(),
                format!(
                    "{} (dry run): move {}, free {}",
                    if options.repack { "repack" } else { "fill" },
                    human(moved),
                    human(freed)
                ),
            ),
        ];
        head.extend(rows);
        let rows: Vec<(&str, String)> = head.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        table(&rows)
    };
    print(&text)?;
    Ok(())
}

/// Compacts each shard named in turn (each compaction the store's own,
/// resumable), a line per shard; a failure part-way reports the shards done.
fn run_sharded(path: &Path, options: CompactOptions, shard: Option<usize>, wait: bool, json: bool) -> CliResult<()> {
    let started = Instant::now();
    let mut dataset = ShardedMutation::open(path, wait)?;
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut items = Vec::new();
    let (mut reclaimed, mut moved) = (0u64, 0u64);
    for k in shards_named(path, dataset.shards(), shard)? {
        let bar = progress_bar(0, &format!("compact shard {k}"), true);
        let report = dataset.compact(k, options, |done, total| {
            if let Some(bar) = &bar {
                bar.set_length(total);
                bar.set_position(done);
            }
        });
        if let Some(bar) = &bar {
            bar.finish_and_clear();
        }
        let report = report.map_err(|e| {
            let finished = if rows.is_empty() {
                "none".to_string()
            } else {
                rows.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ")
            };
            CliError::with_source(
                format!("{}: compacting shard {k} failed (compacted before it: {finished})", path.display()),
                e,
            )
        })?;
        let r = report.bytes_before.saturating_sub(report.bytes_after);
        (reclaimed, moved) = (reclaimed + r, moved + report.moved_bytes);
        items.push(
            Json::object()
                .field("shard", k as u64)
                .field("bytes_before", report.bytes_before)
                .field("bytes_after", report.bytes_after)
                .field("reclaimed_bytes", r)
                .field("moved_records", report.moved_records)
                .field("moved_bytes", report.moved_bytes)
                .field("remaining_bytes", report.remaining_bytes)
                .finish(),
        );
        rows.push((
            format!("shard {k}"),
            format!("reclaimed {}, moved {} records ({})", human(r), report.moved_records, human(report.moved_bytes)),
        ));
    }
    let seconds = started.elapsed().as_secs_f64();
    let text = if json {
        let mut text = Json::object()
            .field("store", path.to_string_lossy().as_ref())
            .field("reclaimed_bytes", reclaimed)
            .field("moved_bytes", moved)
            .raw("shards", &json_array(items))
            .field("seconds", seconds)
            .finish();
        text.push('\n');
        text
    } else {
        let mut head = vec![
            ("dataset".to_string(), format!("{} ({} shards)", path.display(), dataset.shards())),
            ("reclaimed".to_string(), human(reclaimed)),
        ];
        head.extend(rows);
        head.push(("time".to_string(), format!("{seconds:.3} s")));
        let rows: Vec<(&str, String)> = head.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        table(&rows)
    };
    print(&text)?;
    Ok(())
}

pub fn run(path: &Path, options: CompactOptions, shard: Option<usize>, wait: bool, json: bool) -> CliResult<()> {
    if crate::records::is_sharded(path) {
        return run_sharded(path, options, shard, wait, json);
    }
    not_sharded(path, shard)?;
    let started = Instant::now();
    let mut store = crate::out::open_to_mutate(path, wait)?;
    let bar = progress_bar(0, "compact", true);
    let report = store.compact_with(options, |done, total| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
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
            .field("remaining_bytes", report.remaining_bytes)
            .field("reclaimable_bytes", store.stats()?.reclaimable)
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
            ("left", left_line(&report, store.stats()?.reclaimable)),
            ("time", format!("{seconds:.3} s")),
        ])
    };
    print(&text)?;
    Ok(())
}

/// What a run left: bytes `--max-bytes` held back, and space no hole fill
/// can take back (a `--repack` can).
fn left_line(report: &loaderx::CompactReport, reclaimable: u64) -> String {
    let mut line = format!("{} reclaimable", human(reclaimable));
    if report.remaining_bytes > 0 {
        line.push_str(&format!(", {} to move in a later run", human(report.remaining_bytes)));
    } else if reclaimable > 0 {
        line.push_str(" (holes smaller than the records after them; --repack takes them back)");
    }
    line
}
