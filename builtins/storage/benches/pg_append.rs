//! The PostgreSQL store benchmark, printed as `name: value unit`: one durable step (a 4-record
//! batch append: the task row locked, the lease checked on the database's clock, the rows
//! inserted, committed with `fsync` and `synchronous_commit` on) against a local server the
//! benchmark starts, and reading back a 10,000-event log.

use std::hint::black_box;
use std::time::Instant;

use futures::executor::block_on;
use noeta_builtin_storage::PgStore;
use noeta_core::store::{EventLog, Record, TaskId};
use noeta_testkit::bench;
use noeta_testkit::pg::PgServer;
use serde_json::json;

const STEPS_PER_ROUND: u64 = 200;
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

fn main() {
    let pg = PgServer::start(true).unwrap_or_else(|e| fail(&e));
    let url = pg.database().unwrap_or_else(|e| fail(&e));
    let store = PgStore::connect(&url, None).unwrap_or_else(|e| fail(&e.to_string()));
    let task = TaskId::new("append").unwrap_or_else(|e| fail(&e.to_string()));
    block_on(store.create_task(&task, None)).unwrap_or_else(|e| fail(&e.to_string()));
    let lease =
        block_on(store.claim(&task, "bench", 3_600_000)).unwrap_or_else(|e| fail(&e.to_string()));
    let batch: Vec<Record> = (0..4).map(record).collect();
    for _ in 0..20 {
        block_on(store.append(&lease, &batch)).unwrap_or_else(|e| fail(&e.to_string()));
    }
    let per_step: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..STEPS_PER_ROUND {
                black_box(block_on(store.append(&lease, &batch)))
                    .unwrap_or_else(|e| fail(&e.to_string()));
            }
            start.elapsed().as_secs_f64() * 1e6 / STEPS_PER_ROUND as f64
        })
        .collect();

    let long = TaskId::new("long").unwrap_or_else(|e| fail(&e.to_string()));
    block_on(store.create_task(&long, None)).unwrap_or_else(|e| fail(&e.to_string()));
    let lease =
        block_on(store.claim(&long, "bench", 3_600_000)).unwrap_or_else(|e| fail(&e.to_string()));
    let chunk: Vec<Record> = (0..100).map(record).collect();
    for _ in 0..LOG_EVENTS / 100 {
        block_on(store.append(&lease, &chunk)).unwrap_or_else(|e| fail(&e.to_string()));
    }
    let reads = bench::sampled(5, || {
        let start = Instant::now();
        let events = block_on(store.read(&long, 0)).unwrap_or_else(|e| fail(&e.to_string()));
        if events.len() as u64 != LOG_EVENTS {
            fail("the log did not read back whole");
        }
        start.elapsed().as_secs_f64() * 1e3
    });
    bench::report("pg_append_step_us", "us", 0, &per_step);
    bench::report("pg_read_10k_ms", "ms", 2, &reads);
}
