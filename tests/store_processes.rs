//! Across processes: a second writer is refused, a reader process sees a
//! writer process's appends after `refresh`, and a writer killed with
//! SIGKILL mid-append leaves every committed record intact and its lock
//! released. The child processes are this test binary run again with a role
//! in `LOADERX_CHILD_ROLE` (see `child_process_entry_point`).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use loaderx::{Codec, Error, Zrecord};

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
    let mut command = Command::new(std::env::current_exe().unwrap());
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
    let store = Zrecord::open(dir.path()).expect("the killed writer's lock is released");
    assert!(u64::from(store.len()) >= committed, "{} < {committed}", store.len());
    check_all(&store);
    assert!(store.verify().unwrap().is_ok());
}
