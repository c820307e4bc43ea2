//! Across processes: a second writer is refused, a reader process sees a
//! writer process's appends after `refresh`, a writer killed with SIGKILL
//! mid-append leaves every committed record intact and its lock released,
//! and readers that never refresh read every record intact while another
//! process tries to delete and compact (refused while they are open, or,
//! waiting, run once they have closed). The child processes are this test
//! binary run again with a role in `LOADERX_CHILD_ROLE` (see
//! `child_process_entry_point`).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use common::{described, identify};
use loaderx::{Codec, Error, Options, Zrecord};

/// Record `i` of a store written by one writer in order.
fn record(i: u64) -> Vec<u8> {
    let len = 16 + (i * 37 % 500) as usize;
    (0..len).map(|k| (i as usize * 31 + k / 5) as u8).collect()
}

fn append_next(store: &Zrecord, n: u64) -> u64 {
    let first = u64::from(store.len());
    let records: Vec<Vec<u8>> = (first..first + n).map(record).collect();
    let lens: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
    let mut offsets = Vec::new();
    let mut at = 0;
    for &l in &lens {
        offsets.push(at);
        at += u64::from(l);
    }
    store.append_var(&records.concat(), &offsets, &lens, Codec::Zstd).unwrap();
    first + n
}

fn check_all(store: &Zrecord) {
    for i in 0..u64::from(store.len()) {
        assert_eq!(store.get(i).unwrap(), record(i), "record {i}");
    }
}

/// The value after `key` in a line the child printed (libtest may have
/// printed the test's name before it on the same line).
fn after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.find(key).map(|at| line[at + key.len()..].trim())
}

fn child(role: &str, dir: &Path) -> Command {
    let mut command = common::this_test_binary();
    command
        .args(["--exact", "child_process_entry_point", "--nocapture", "--test-threads=1"])
        .env("LOADERX_CHILD_ROLE", role)
        .env("LOADERX_CHILD_DIR", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    command
}

/// Not a test of its own: the body of the child processes the tests below
/// start. Run directly, without `LOADERX_CHILD_ROLE`, it does nothing.
#[test]
fn child_process_entry_point() {
    let Ok(role) = std::env::var("LOADERX_CHILD_ROLE") else { return };
    let dir = std::env::var("LOADERX_CHILD_DIR").unwrap();
    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    match role.as_str() {
        "try-writer" => match Zrecord::open(&dir) {
            Err(e @ Error::Locked { .. }) => println!("refused: {e}"),
            Ok(_) => println!("opened"),
            Err(e) => println!("other error: {e}"),
        },
        "reader" => {
            let store = Zrecord::open_read_only(&dir).unwrap();
            check_all(&store);
            println!("@len {}", store.len());
            stdin.read_line(&mut line).unwrap();
            let len = store.refresh().unwrap();
            check_all(&store);
            println!("@refreshed {len}");
        }
        "verify-reader" => verify_reader(&dir),
        "mutator" => mutate(&dir, std::env::var("LOADERX_CHILD_WAIT").is_ok()),
        "append-forever" => {
            let store = Zrecord::open(&dir).unwrap();
            loop {
                let committed = append_next(&store, 4);
                println!("@committed {committed}");
                std::io::stdout().flush().unwrap();
            }
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn a_second_writer_process_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    let out = child("try-writer", dir.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("refused:") && text.contains("another writer"), "{text}");
    drop(store);
    // Released on close, once no other descriptor of it is left: a child
    // that another test of this process forks at that moment holds a copy
    // until it execs (flock and fork), so a refusal is retried briefly.
    let opened = (0..50).any(|attempt| {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child("try-writer", dir.path()).output().unwrap();
        String::from_utf8_lossy(&out.stdout).contains("opened")
    });
    assert!(opened, "the lock is released on close");
}

#[test]
fn a_reader_process_sees_appends_after_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    append_next(&store, 10);
    let mut reader = child("reader", dir.path()).spawn().unwrap();
    let mut lines = BufReader::new(reader.stdout.take().unwrap()).lines();
    let first = lines.find_map(|l| after(&l.unwrap(), "@len ").map(str::to_owned)).unwrap();
    assert_eq!(first, "10");
    append_next(&store, 5);
    writeln!(reader.stdin.take().unwrap(), "go").unwrap();
    let second = lines.find_map(|l| after(&l.unwrap(), "@refreshed ").map(str::to_owned)).unwrap();
    assert_eq!(second, "15");
    assert!(reader.wait().unwrap().success());
}

#[test]
fn a_killed_writer_loses_nothing_it_committed() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = child("append-forever", dir.path()).spawn().unwrap();
    let mut committed = 0;
    for line in BufReader::new(writer.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(n) = after(&line, "@committed ") {
            committed = n.parse().unwrap();
            if committed >= 200 {
                break;
            }
        }
    }
    writer.kill().unwrap(); // SIGKILL, most likely in the middle of an append
    writer.wait().unwrap();
    let store = Zrecord::open(dir.path()).expect("the killed writer's flock is released");
    assert!(u64::from(store.len()) >= committed, "{} < {committed}", store.len());
    check_all(&store);
    assert!(store.verify().unwrap().is_ok());
}

/// Records of the stores the delete and compaction tests use: [`described`].
const DESCRIBED: u64 = 3000;

/// Every 10th record, the delete's indices.
fn doomed() -> Vec<u64> {
    (0..DESCRIBED).step_by(10).collect()
}

/// A reader that never refreshes: it opens the store, then checks every
/// record (in gathers of 100, mapped or batched as `Auto` picks) pass after
/// pass until a line arrives on stdin, printing `@pass N` after each pass,
/// then `@done passes foreign errors`: records that were not the one their
/// index names, and failed gathers.
fn verify_reader(dir: &str) {
    let store = Zrecord::open_read_only(dir).unwrap();
    println!("@open {} {}", store.len(), store.holds_readers_lock());
    let stop = AtomicBool::new(false);
    let (mut passes, mut foreign, mut errors) = (0u64, 0u64, 0u64);
    std::thread::scope(|s| {
        s.spawn(|| {
            let _ = std::io::stdin().read_line(&mut String::new());
            stop.store(true, Ordering::Relaxed);
        });
        while !stop.load(Ordering::Relaxed) {
            for first in (0..u64::from(store.len())).step_by(100) {
                let indices: Vec<u64> = (first..(first + 100).min(u64::from(store.len()))).collect();
                let lens: Vec<u32> = indices.iter().map(|&i| described(i).len() as u32).collect();
                let offsets: Vec<u64> =
                    lens.iter().scan(0u64, |at, &l| Some(std::mem::replace(at, *at + u64::from(l)))).collect();
                let mut out = vec![0u8; lens.iter().map(|&l| l as usize).sum()];
                match store.gather_var(&indices, &mut out, &offsets, &lens) {
                    Ok(()) => {
                        for (k, &i) in indices.iter().enumerate() {
                            let bytes = &out[offsets[k] as usize..][..lens[k] as usize];
                            foreign += u64::from(identify(bytes) != Some(i));
                        }
                    }
                    Err(e) => {
                        errors += 1;
                        println!("@error {e}");
                    }
                }
            }
            passes += 1;
            println!("@pass {passes}");
        }
    });
    println!("@done {passes} {foreign} {errors}");
}

/// A writer that deletes [`doomed`] and compacts, waiting for readers if
/// `wait`; prints `@opened`, then `@delete ok` or `@delete refused: why`
/// (`ReadersOpen`) or `@delete error: why`, and the same for `@compact`.
fn mutate(dir: &str, wait: bool) {
    // A child another test of the parent forks holds a copy of the parent's
    // descriptors until it execs, the writer flock of a store it just
    // closed among them (see `a_second_writer_process_is_refused`).
    let options = Options { wait, ..Options::default() };
    let mut opened = Zrecord::open_with(dir, options.clone());
    for _ in 0..50 {
        if !matches!(opened, Err(Error::Locked { .. })) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        opened = Zrecord::open_with(dir, options.clone());
    }
    let mut store = opened.unwrap();
    println!("@opened");
    let say = |what: &str, result: loaderx::Result<()>| match result {
        Ok(()) => println!("@{what} ok"),
        Err(e @ Error::ReadersOpen { .. }) => println!("@{what} refused: {e}"),
        Err(e) => println!("@{what} error: {e}"),
    };
    say("delete", store.delete(&doomed()));
    say("compact", store.compact().map(|_| ()));
}

/// A child, with its stdout lines sent to a channel as they come (so that
/// a chatty child never fills its pipe).
fn start(role: &str, dir: &Path, wait: bool) -> (Child, mpsc::Receiver<String>) {
    let mut command = child(role, dir);
    if wait {
        command.env("LOADERX_CHILD_WAIT", "1");
    }
    let mut process = command.spawn().unwrap();
    let stdout = BufReader::new(process.stdout.take().unwrap());
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    (process, lines)
}

/// The next line that holds `key`, with what follows it.
fn next(lines: &mpsc::Receiver<String>, key: &str) -> String {
    loop {
        let line = lines.recv().unwrap_or_else(|_| panic!("the child ended before printing {key}"));
        if let Some(rest) = after(&line, key) {
            return rest.to_owned();
        }
    }
}

fn described_store(dir: &Path) {
    let store = Zrecord::open(dir).unwrap();
    let records: Vec<Vec<u8>> = (0..DESCRIBED).map(described).collect();
    let half = records.len() / 2;
    for (part, codec) in [(&records[..half], Codec::Raw), (&records[half..], Codec::Zstd)] {
        common_append(&store, part, codec);
    }
}

fn common_append(store: &Zrecord, records: &[Vec<u8>], codec: Codec) {
    let lens: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
    let offsets: Vec<u64> = lens.iter().scan(0u64, |at, &l| Some(std::mem::replace(at, *at + u64::from(l)))).collect();
    store.append_var(&records.concat(), &offsets, &lens, codec).unwrap();
}

/// Two readers, open and past their first pass.
fn start_readers(dir: &Path) -> Vec<(Child, mpsc::Receiver<String>)> {
    let readers: Vec<_> = (0..2).map(|_| start("verify-reader", dir, false)).collect();
    for (_, lines) in &readers {
        assert_eq!(next(lines, "@open "), format!("{DESCRIBED} true"));
        next(lines, "@pass ");
    }
    readers
}

/// Stops the readers; each exited normally (no signal) having read every
/// record intact, with no error, on every pass.
fn stop_readers(readers: Vec<(Child, mpsc::Receiver<String>)>) {
    for (mut reader, lines) in readers {
        writeln!(reader.stdin.take().unwrap(), "stop").unwrap();
        let status = reader.wait().unwrap();
        let done = next(&lines, "@done ");
        assert!(status.success(), "reader: {status:?}");
        let [passes, foreign, errors]: [u64; 3] =
            done.split(' ').map(|n| n.parse().unwrap()).collect::<Vec<_>>().try_into().unwrap();
        assert!(passes >= 1 && foreign == 0 && errors == 0, "passes {passes}, foreign {foreign}, errors {errors}");
    }
}

/// The store after the delete of [`doomed`] and a compaction (the fill):
/// every survivor once, intact, and nothing the fill would still move.
fn check_mutated(dir: &Path) {
    let store = Zrecord::open_read_only(dir).unwrap();
    let doomed = doomed();
    assert_eq!(u64::from(store.len()), DESCRIBED - doomed.len() as u64);
    let mut seen = vec![false; DESCRIBED as usize];
    for i in 0..u64::from(store.len()) {
        let id = identify(&store.get(i).unwrap()).unwrap_or_else(|| panic!("record {i} is not a record"));
        assert!(!doomed.contains(&id) && !seen[id as usize], "record {i} is {id}");
        seen[id as usize] = true;
    }
    assert!(store.verify().unwrap().is_ok());
    assert_eq!(store.compact_plan(loaderx::CompactOptions::default()).unwrap().move_bytes, 0);
}

#[test]
fn a_delete_and_compaction_are_refused_while_readers_in_other_processes_read() {
    let dir = tempfile::tempdir().unwrap();
    described_store(dir.path());
    let readers = start_readers(dir.path());
    let (mutator, lines) = start("mutator", dir.path(), false);
    next(&lines, "@opened");
    for what in ["@delete ", "@compact "] {
        let said = next(&lines, what);
        assert!(said.starts_with("refused:") && said.contains("open for reading elsewhere"), "{said}");
    }
    assert!(mutator.wait_with_output().unwrap().status.success());
    // The readers go on reading what they opened on.
    for (_, lines) in &readers {
        next(lines, "@pass ");
    }
    stop_readers(readers);
    // Once they have closed, the same run goes through.
    let (mutator, lines) = start("mutator", dir.path(), false);
    assert_eq!(next(&lines, "@delete "), "ok");
    assert_eq!(next(&lines, "@compact "), "ok");
    assert!(mutator.wait_with_output().unwrap().status.success());
    check_mutated(dir.path());
}

#[test]
#[cfg(target_os = "linux")]
fn a_waiting_delete_and_compaction_run_after_the_readers_in_other_processes_close() {
    let dir = tempfile::tempdir().unwrap();
    described_store(dir.path());
    let readers = start_readers(dir.path());
    let (mut mutator, lines) = start("mutator", dir.path(), true);
    next(&lines, "@opened");
    let lock_file = dir.path().join("readers.lock");
    let waiting =
        common::until_blocked(|| common::lock_waiters(&lock_file) > 0, || mutator.try_wait().unwrap().is_some());
    assert!(waiting, "the mutator did not wait for the readers");
    // Two more whole passes of each reader while the mutator waits: had it
    // run, they would have read moved or truncated records.
    for (_, lines) in &readers {
        next(lines, "@pass ");
        next(lines, "@pass ");
    }
    stop_readers(readers);
    assert_eq!(next(&lines, "@delete "), "ok");
    assert_eq!(next(&lines, "@compact "), "ok");
    assert!(mutator.wait().unwrap().success());
    check_mutated(dir.path());
}
