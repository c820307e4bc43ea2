//! The loader's trace: one span per stage per step, written as a Chrome
//! Trace Event Format file (`{"traceEvents": [...]}`) that Perfetto and
//! `chrome://tracing` open.
//!
//! Off (no [`LoaderBuilder::trace_path`](super::LoaderBuilder::trace_path)),
//! there is no [`Trace`] at all: the workers and the consumer test an
//! `Option` and do nothing else. On, each track (the consumer, each
//! worker) appends its spans to a vector of its own behind a mutex that
//! only its thread and a writer take; the spans reuse the clock reads of
//! the statistics. At most `max` spans are kept over all tracks (the first
//! ones, [`TRACE_EVENTS_MAX`] by default); the rest are counted as dropped
//! and the count is written into the file (`otherData.dropped_events`).
//!
//! The file is replaced whole: written to `PATH.tmp` in pieces, synced,
//! renamed over `PATH`, the directory synced.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use super::tune::{Decision, Setting};
use crate::io::real::RealFs;
use crate::io::{OpenMode, SyncKind, Vfs, VfsFile, write_all_at};

/// The spans a trace keeps by default (40 bytes each); later ones are
/// counted as dropped.
pub const TRACE_EVENTS_MAX: usize = 1_000_000;

/// Span names of the loader's own stages.
pub(super) const SAMPLE: &str = "sample";
pub(super) const GATHER: &str = "gather";
pub(super) const TRANSFORM: &str = "transform";
pub(super) const WAIT: &str = "wait";

/// Bytes of JSON gathered before each write to the file.
const WRITE_PIECE: usize = 1 << 20;

/// One span: `name` of `step`, from `start_ns` (since the trace's origin)
/// for `dur_ns`.
#[derive(Clone, Copy, Debug)]
struct Span {
    name: &'static str,
    step: u64,
    start_ns: u64,
    dur_ns: u64,
}

/// A track added from above the loader ([`Trace::extra_span`]).
#[derive(Debug)]
struct Extra {
    name: String,
    spans: Vec<Span>,
}

/// A running loader's trace.
#[derive(Debug)]
pub(super) struct Trace {
    path: PathBuf,
    origin: Instant,
    /// Spans kept at most, over all tracks.
    max: u64,
    /// Spans offered so far: the first `max` are kept, the rest dropped.
    offered: AtomicU64,
    /// Track 0: the consumer; track `k + 1`: worker `k`.
    tracks: Vec<Mutex<Vec<Span>>>,
    /// Tracks after the workers', in the order they were first used.
    extras: Mutex<Vec<Extra>>,
    /// The tuner's decisions, instant events on the consumer's track.
    decisions: Mutex<Vec<Mark>>,
}

/// A tuner's decision at `at_ns`: the step, the setting and why.
#[derive(Clone, Debug)]
struct Mark {
    at_ns: u64,
    step: u64,
    workers: usize,
    window: usize,
    reason: String,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A push cannot leave a vector half-changed; a panic elsewhere while
    // holding the lock leaves the spans as they were.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn nanos(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_nanos()).unwrap_or(u64::MAX)
}

impl Trace {
    pub(super) fn new(path: PathBuf, workers: usize, max: usize) -> Trace {
        Trace {
            path,
            origin: Instant::now(),
            max: max as u64,
            offered: AtomicU64::new(0),
            tracks: (0..=workers).map(|_| Mutex::new(Vec::new())).collect(),
            extras: Mutex::new(Vec::new()),
            decisions: Mutex::new(Vec::new()),
        }
    }

    /// The tuner decided `decision` at `at`.
    pub(super) fn decision(&self, at: Instant, decision: &Decision) {
        if self.admit(1) == 1 {
            let Setting { workers, window } = decision.setting;
            let (step, reason) = (decision.step, decision.reason.clone());
            lock(&self.decisions).push(Mark { at_ns: nanos(self.origin, at), step, workers, window, reason });
        }
    }

    fn span(&self, name: &'static str, step: u64, start: Instant, end: Instant) -> Span {
        Span { name, step, start_ns: nanos(self.origin, start), dur_ns: nanos(start, end) }
    }

    /// How many of `n` spans offered now are kept (the first ones).
    fn admit(&self, n: u64) -> usize {
        let before = self.offered.fetch_add(n, Relaxed);
        self.max.saturating_sub(before).min(n) as usize
    }

    /// The consumer waited for the batch of `step` from `start` to `end`.
    pub(super) fn wait(&self, step: u64, start: Instant, end: Instant) {
        if self.admit(1) == 1 {
            lock(&self.tracks[0]).push(self.span(WAIT, step, start, end));
        }
    }

    /// Worker `k` produced `step`: sampled from `t[0]` to `t[1]`, gathered
    /// to `t[2]`, transformed to `t[3]`.
    pub(super) fn stages(&self, k: usize, step: u64, t: [Instant; 4]) {
        let Some(track) = self.tracks.get(k + 1) else { return };
        let spans = [
            self.span(SAMPLE, step, t[0], t[1]),
            self.span(GATHER, step, t[1], t[2]),
            self.span(TRANSFORM, step, t[2], t[3]),
        ];
        let kept = self.admit(3);
        if kept > 0 {
            lock(track).extend_from_slice(&spans[..kept]);
        }
    }

    /// A span on the track named `track`, after the workers' (made at its first span).
    pub(super) fn extra_span(&self, track: &str, name: &'static str, step: u64, start: Instant, end: Instant) {
        if self.admit(1) == 0 {
            return;
        }
        let span = self.span(name, step, start, end);
        let mut extras = lock(&self.extras);
        match extras.iter_mut().find(|e| e.name == track) {
            Some(extra) => extra.spans.push(span),
            None => extras.push(Extra { name: track.to_string(), spans: vec![span] }),
        }
    }

    /// Spans offered past the cap.
    pub(super) fn dropped(&self) -> u64 {
        self.offered.load(Relaxed).saturating_sub(self.max)
    }

    /// Spans offered so far (kept or not): unchanged means nothing new to write.
    pub(super) fn offered(&self) -> u64 {
        self.offered.load(Relaxed)
    }

    /// Every track's name and a copy of its spans, in track order.
    fn snapshot(&self) -> Vec<(String, Vec<Span>)> {
        let mut out = Vec::with_capacity(self.tracks.len());
        for (k, track) in self.tracks.iter().enumerate() {
            let name = if k == 0 { "consumer".to_string() } else { format!("worker {}", k - 1) };
            out.push((name, lock(track).clone()));
        }
        out.extend(lock(&self.extras).iter().map(|e| (e.name.clone(), e.spans.clone())));
        out
    }

    /// Writes the trace file (replacing it whole), with what was recorded so far.
    pub(super) fn write(&self) -> io::Result<()> {
        write_replacing(&RealFs, &self.path, |out| self.write_json(out))
    }

    fn write_json(&self, out: &mut Pieces<'_>) -> io::Result<()> {
        let dropped = self.dropped();
        let tracks = self.snapshot();
        out.push("{\"traceEvents\":[\n");
        out.push("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"loaderx loader\"}}");
        for (tid, (name, _)) in tracks.iter().enumerate() {
            out.push(&format!(
                ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\"args\":{{\"name\":"
            ));
            out.push_json_string(name);
            out.push(&format!("}}}},\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\"args\":{{\"sort_index\":{tid}}}}}"));
        }
        for (tid, (_, spans)) in tracks.iter().enumerate() {
            for s in spans {
                out.push(",\n{\"name\":");
                out.push_json_string(s.name);
                let (ts, dur) = (micros(s.start_ns), micros(s.dur_ns));
                out.push(&format!(
                    ",\"cat\":\"loader\",\"ph\":\"X\",\"ts\":{ts},\"dur\":{dur},\"pid\":1,\"tid\":{tid},\"args\":{{\"step\":{}}}}}",
                    s.step
                ));
                out.flush_if_full()?;
            }
        }
        self.write_decisions(out)?;
        out.push(&format!(
            "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{{\"dropped_events\":{dropped},\"events_max\":{}}}}}\n",
            self.max
        ));
        Ok(())
    }
}

impl Trace {
    /// The tuner's decisions: instant events (`"ph": "i"`) named `tune` on
    /// the consumer's track, the setting and the reason in `args`.
    fn write_decisions(&self, out: &mut Pieces<'_>) -> io::Result<()> {
        for d in lock(&self.decisions).iter() {
            out.push(&format!(
                ",\n{{\"name\":\"tune\",\"cat\":\"tuner\",\"ph\":\"i\",\"s\":\"t\",\"ts\":{},\"pid\":1,\"tid\":0,\
                 \"args\":{{\"step\":{},\"workers\":{},\"window\":{},\"reason\":",
                micros(d.at_ns),
                d.step,
                d.workers,
                d.window
            ));
            out.push_json_string(&d.reason);
            out.push("}}");
            out.flush_if_full()?;
        }
        Ok(())
    }
}

/// `ns` nanoseconds as microseconds with three decimals (exact).
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// A file written in pieces of about [`WRITE_PIECE`] bytes.
struct Pieces<'a> {
    file: &'a dyn VfsFile,
    at: u64,
    buf: String,
}

impl Pieces<'_> {
    fn push(&mut self, s: &str) {
        self.buf.push_str(s);
    }

    /// `s` as a JSON string, quoted and escaped.
    fn push_json_string(&mut self, s: &str) {
        self.buf.push('"');
        for c in s.chars() {
            match c {
                '"' => self.buf.push_str("\\\""),
                '\\' => self.buf.push_str("\\\\"),
                c if (c as u32) < 0x20 => self.buf.push_str(&format!("\\u{:04x}", c as u32)),
                c => self.buf.push(c),
            }
        }
        self.buf.push('"');
    }

    fn flush_if_full(&mut self) -> io::Result<()> {
        if self.buf.len() >= WRITE_PIECE { self.flush() } else { Ok(()) }
    }

    fn flush(&mut self) -> io::Result<()> {
        write_all_at(self.file, self.buf.as_bytes(), self.at)?;
        self.at += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

/// `path` with `.tmp` appended to its file name.
fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Replaces the file at `path` whole with what `fill` writes: into
/// `PATH.tmp`, synced, renamed over `path`, the directory synced. On a
/// failure the temporary file is removed (if it can be) and `path` is as it was.
fn write_replacing(vfs: &dyn Vfs, path: &Path, fill: impl FnOnce(&mut Pieces<'_>) -> io::Result<()>) -> io::Result<()> {
    let tmp = tmp_path(path);
    let written = (|| {
        let file = vfs.open(&tmp, OpenMode::Create)?;
        file.set_len(0)?;
        let mut out = Pieces { file: &*file, at: 0, buf: String::with_capacity(WRITE_PIECE + 4096) };
        fill(&mut out)?;
        out.flush()?;
        file.sync(SyncKind::All)
    })();
    if let Err(e) = written {
        let _ = vfs.remove_file(&tmp);
        return Err(e);
    }
    vfs.rename(&tmp, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    vfs.sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_keeps_the_first_spans_and_counts_the_rest() {
        let t = Trace::new(PathBuf::from("unused"), 1, 4);
        let now = Instant::now();
        t.wait(0, now, now);
        t.stages(0, 0, [now; 4]);
        t.stages(0, 1, [now; 4]);
        t.extra_span("x", "y", 0, now, now);
        assert_eq!(t.dropped(), 4);
        let tracks = t.snapshot();
        assert_eq!(tracks.iter().map(|(_, s)| s.len()).sum::<usize>(), 4);
        assert_eq!(tracks[1].1.iter().map(|s| s.name).collect::<Vec<_>>(), [SAMPLE, GATHER, TRANSFORM]);
    }

    #[test]
    fn micros_are_exact() {
        assert_eq!(micros(0), "0.000");
        assert_eq!(micros(1_234_567), "1234.567");
    }

    #[test]
    fn the_tmp_path_is_beside_the_file() {
        assert_eq!(tmp_path(Path::new("/a/b.json")), PathBuf::from("/a/b.json.tmp"));
    }
}
