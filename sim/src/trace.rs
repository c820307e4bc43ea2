//! The simulated filesystem's operation trace: one line per I/O operation,
//! crash, fault and workload step, printed when a run finds a violation
//! and hashed to check that a seed replays alike.
//!
//! Whole by default (the campaigns hash every line). A caller that runs
//! long workloads and only prints a violation's last lines, the fuzz
//! harness, keeps a bounded tail instead ([`Trace::keep_last`]): a store of
//! 2^24 records opened for writing makes tens of millions of operations,
//! and their lines, kept whole, outgrow libFuzzer's memory limit.

use std::collections::VecDeque;

/// The lines so far, or the last `keep` of them.
#[derive(Default)]
pub(crate) struct Trace {
    lines: VecDeque<String>,
    /// At most this many lines are kept; `None`: all.
    keep: Option<usize>,
    /// Lines dropped from the front to stay within `keep`.
    dropped: u64,
}

impl Trace {
    /// Keeps only the last `keep` lines from now on (at least one).
    pub(crate) fn keep_last(&mut self, keep: usize) {
        let keep = keep.max(1);
        self.keep = Some(keep);
        self.trim(keep);
    }

    pub(crate) fn push(&mut self, line: String) {
        self.lines.push_back(line);
        if let Some(keep) = self.keep {
            self.trim(keep);
        }
    }

    fn trim(&mut self, keep: usize) {
        while self.lines.len() > keep {
            self.lines.pop_front();
            self.dropped += 1;
        }
    }

    /// The lines kept, after a first line that counts those dropped, if any.
    pub(crate) fn lines(&self) -> Vec<String> {
        let head = (self.dropped > 0).then(|| format!("({} earlier lines not kept)", self.dropped));
        head.into_iter().chain(self.lines.iter().cloned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Trace;

    #[test]
    fn a_whole_trace_keeps_every_line() {
        let mut t = Trace::default();
        (0..1000).for_each(|i| t.push(i.to_string()));
        let lines = t.lines();
        assert_eq!(lines.len(), 1000);
        assert_eq!((lines[0].as_str(), lines[999].as_str()), ("0", "999"));
    }

    #[test]
    fn a_bounded_trace_keeps_the_last_lines_and_counts_the_rest() {
        let mut t = Trace::default();
        t.push("a".into());
        t.push("b".into());
        t.keep_last(3);
        (0..10).for_each(|i| t.push(i.to_string()));
        assert_eq!(t.lines(), ["(9 earlier lines not kept)", "7", "8", "9"]);
    }
}
