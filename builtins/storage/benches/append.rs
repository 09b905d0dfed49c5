//! The SQLite store benchmark, printed as `name: value unit`: a 4-record batch append (one
//! `BEGIN IMMEDIATE` transaction, WAL, `synchronous=FULL`) on a file in a temporary directory,
//! and reading back a 10,000-event log, as loading a task does before folding it.

use std::hint::black_box;
use std::time::Instant;

use futures::executor::block_on;
use noeta_builtin_storage::SqliteStore;
use noeta_core::store::{EventLog, Lease, ManualClock, Record, TaskId};
use noeta_testkit::bench;
use serde_json::json;

const BATCHES_PER_ROUND: u64 = 200;
const ROUNDS: usize = 7;
const LOG_EVENTS: u64 = 10_000;

fn fail(message: &str) -> ! {
    eprintln!("bench failed: {message}");
    std::process::exit(1)
}

fn record(n: u64) -> Record {
    Record::new(
        "core",
        "note",
        json!({ "n": n, "text": "a short note of the kind a step records", "ok": true }),
    )
}

fn task(store: &SqliteStore, name: &str) -> Lease {
    let task = TaskId::new(name).unwrap_or_else(|e| fail(&e.to_string()));
    block_on(store.create_task(&task, None)).unwrap_or_else(|e| fail(&e.to_string()));
    block_on(store.claim(&task, "bench", u64::MAX / 4)).unwrap_or_else(|e| fail(&e.to_string()))
}

fn main() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&e.to_string()));
    let store = SqliteStore::open(dir.path().join("bench.db"), ManualClock::at(0))
        .unwrap_or_else(|e| fail(&e.to_string()));

    let lease = task(&store, "append");
    let batch: Vec<Record> = (0..4).map(record).collect();
    // Warm up the statement cache and the page cache.
    for _ in 0..20 {
        block_on(store.append(&lease, &batch)).unwrap_or_else(|e| fail(&e.to_string()));
    }
    let per_batch: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..BATCHES_PER_ROUND {
                black_box(block_on(store.append(&lease, &batch)))
                    .unwrap_or_else(|e| fail(&e.to_string()));
            }
            start.elapsed().as_secs_f64() * 1e6 / BATCHES_PER_ROUND as f64
        })
        .collect();
    bench::report("sqlite_append_batch_us", "us", 1, &per_batch);

    let lease = task(&store, "fold");
    let hundred: Vec<Record> = (0..100).map(record).collect();
    for _ in 0..LOG_EVENTS / 100 {
        block_on(store.append(&lease, &hundred)).unwrap_or_else(|e| fail(&e.to_string()));
    }
    let reads = bench::sampled(ROUNDS, || {
        let start = Instant::now();
        let events = block_on(store.read(&lease.task, 0)).unwrap_or_else(|e| fail(&e.to_string()));
        let elapsed = start.elapsed().as_secs_f64() * 1e3;
        if events.len() as u64 != LOG_EVENTS {
            fail(&format!(
                "read {} events, expected {LOG_EVENTS}",
                events.len()
            ));
        }
        black_box(events);
        elapsed
    });
    bench::report("sqlite_fold_read_10k_ms", "ms", 2, &reads);
}
