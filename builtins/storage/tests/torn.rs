//! A torn last write never blocks loading: a writer killed mid-transaction leaves only committed events.
//!
//! This binary has its own `main` (no test harness): run by `cargo test`, it is the test; run
//! again by itself as a child process with [`CHILD_ENV`] naming the store file, it is the
//! crashing writer, so no part of it is a test that passes by doing nothing. The writer opens
//! the file with plain SQLite, begins a batch, writes enough uncommitted rows that SQLite
//! spills them into the write-ahead log, and aborts without committing. The parent then tears
//! the log's tail with bytes of a half-written frame and opens the store.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "a test binary: failing loudly is the point, and it reports as the harness would"
)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use futures::executor::block_on;
use noeta_core::store::{ContentStore, EventLog, ManualClock, Snapshot};
use serde_json::json;

#[path = "all/common.rs"]
mod common;

use common::{Dir, claimed, raw, rec, seqs};

const CHILD_ENV: &str = "NOETA_STORAGE_TEST_CRASHING_WRITER_DB";
const MARKER: &str = "crashing writer: uncommitted rows written";

fn wal(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

fn wal_len(db: &Path) -> u64 {
    std::fs::metadata(wal(db)).map_or(0, |m| m.len())
}

fn main() {
    match std::env::var_os(CHILD_ENV) {
        Some(path) => crashing_writer(Path::new(&path)),
        None => {
            a_writer_killed_mid_transaction_leaves_the_committed_events_only();
            println!(
                "torn: a writer killed mid-transaction leaves the committed events only ... ok"
            );
        }
    }
}

/// The child's side: begins a batch, writes past SQLite's cache into the log, and dies.
fn crashing_writer(path: &Path) -> ! {
    let conn = raw(path);
    conn.execute_batch("PRAGMA cache_size = 8; BEGIN IMMEDIATE;")
        .unwrap();
    let task_no: i64 = conn
        .query_row("SELECT task_no FROM tasks WHERE id = 'torn'", [], |row| {
            row.get(0)
        })
        .unwrap();
    let data = json!({ "filler": "y".repeat(3000) }).to_string();
    for seq in 4..400_i64 {
        conn.execute(
            "INSERT INTO events (task_no, seq, extension, kind, data) VALUES (?1, ?2, 'core', 'note', ?3)",
            rusqlite::params![task_no, seq, data],
        )
        .unwrap();
    }
    conn.execute("UPDATE tasks SET epoch = 99 WHERE task_no = ?1", [task_no])
        .unwrap();
    eprintln!("{MARKER}");
    std::io::stderr().flush().unwrap();
    std::process::abort();
}

fn a_writer_killed_mid_transaction_leaves_the_committed_events_only() {
    let dir = Dir::new();
    let db = dir.db();
    let clock = ManualClock::at(1_000);
    let store = dir.open(&clock);
    let lease = claimed(&store, "torn", "w1");
    block_on(store.append(&lease, &[rec(1), rec(2), rec(3)])).unwrap();
    let snap = Snapshot {
        seq: 3,
        plugin_set: "p".to_owned(),
        state: json!({ "n": 3 }).to_string(),
    };
    block_on(store.put_snapshot(&lease.task, &snap)).unwrap();
    let body = block_on(store.put("text/plain", b"kept")).unwrap();
    let committed = block_on(store.read(&lease.task, 0)).unwrap();
    let before = wal_len(&db);

    let child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, &db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(!child.status.success(), "the writer must die: {stderr}");
    assert!(
        stderr.contains(MARKER),
        "the writer must get mid-transaction: {stderr}"
    );
    assert!(
        wal_len(&db) > before,
        "the uncommitted rows reached the write-ahead log"
    );
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(wal(&db))
        .unwrap();
    log.write_all(&[0xA5; 1500]).unwrap();
    drop(log);

    // The handle that stayed open sees the committed events only.
    assert_eq!(block_on(store.read(&lease.task, 0)).unwrap(), committed);
    drop(store);

    let store = dir.open(&clock);
    assert_eq!(block_on(store.read(&lease.task, 0)).unwrap(), committed);
    assert_eq!(block_on(store.info(&lease.task)).unwrap().head, 3);
    assert_eq!(block_on(store.snapshot(&lease.task)).unwrap(), Some(snap));
    assert_eq!(block_on(store.get(&body)).unwrap(), b"kept");
    // The lease the crashed writer tried to bump is untouched, so its holder carries on.
    assert_eq!(block_on(store.append(&lease, &[rec(4)])).unwrap(), 4);
    assert_eq!(seqs(&store, &lease.task), [1, 2, 3, 4]);
}
