//! The kernel's store contract on SQLite, and the SQLite store matching the in-memory reference outcome for outcome.

use std::sync::Arc;

use futures::executor::block_on;
use noeta_builtin_storage::SqliteStore;
use noeta_core::store::{
    ContentStore, EventLog, ManualClock, MemoryContentStore, MemoryEventLog, Record, Snapshot,
    content_ref, contract,
};
use serde_json::{Value, json};

use crate::common::{Dir, TTL, claimed, id, rec};

#[test]
fn a_fresh_file_store_honours_the_contract() {
    let dir = Dir::new();
    let clock = ManualClock::at(1_000);
    let store = dir.open(&clock);
    let failures = block_on(contract::run(&store, &store, &clock, "t"));
    assert!(failures.is_empty(), "{failures:#?}");
    let failures = block_on(contract::run_queue(&store, &store, &clock, "t"));
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn two_handles_on_one_file_never_take_one_task_twice() {
    use noeta_core::store::TaskQueue;
    let dir = Dir::new();
    let clock = ManualClock::at(1_000);
    let a = dir.open(&clock);
    let b = dir.open(&clock);
    for n in 0..40 {
        let task = id(&format!("q{n}"));
        block_on(a.create_task(&task, None)).unwrap();
        block_on(a.enqueue(&task, 0)).unwrap();
    }
    let handles = [&a, &b];
    let mut taken = Vec::new();
    std::thread::scope(|scope| {
        let runs: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(n, store)| {
                scope.spawn(move || {
                    let mut mine = Vec::new();
                    while let Some(q) = block_on(store.take(&format!("w{n}"), TTL)).unwrap() {
                        mine.push(q.lease.task.to_string());
                        block_on(store.finish(&q)).unwrap();
                    }
                    mine
                })
            })
            .collect();
        for run in runs {
            taken.extend(run.join().unwrap());
        }
    });
    taken.sort();
    let before = taken.len();
    taken.dedup();
    assert_eq!((before, taken.len()), (40, 40), "each task taken once");
}

#[test]
fn an_in_memory_store_honours_the_contract() {
    let clock = ManualClock::at(1_000);
    let store = SqliteStore::in_memory(clock.clone()).unwrap();
    let failures = block_on(contract::run(&store, &store, &clock, "t"));
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_contract_holds_again_on_a_reopened_file() {
    let dir = Dir::new();
    let clock = ManualClock::at(1_000);
    let first = dir.open(&clock);
    assert!(block_on(contract::run(&first, &first, &clock, "a")).is_empty());
    drop(first);
    let again = dir.open(&clock);
    let failures = block_on(contract::run(&again, &again, &clock, "b"));
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A script of store calls; every outcome, as text, in order.
fn outcomes(log: &dyn EventLog, content: &dyn ContentStore, clock: &ManualClock) -> Vec<String> {
    let mut out = Vec::new();
    let a = id("a");
    let child = id("child");
    let missing = id("missing");
    let big = Record::new("notes", "long", json!({ "text": "x".repeat(5000) }));
    out.push(format!("{:?}", block_on(log.create_task(&a, None))));
    out.push(format!("{:?}", block_on(log.create_task(&a, None))));
    out.push(format!(
        "{:?}",
        block_on(log.create_task(&child, Some(&missing)))
    ));
    out.push(format!("{:?}", block_on(log.create_task(&child, Some(&a)))));
    out.push(format!("{:?}", block_on(log.read(&missing, 0))));
    out.push(format!("{:?}", block_on(log.info(&missing))));
    out.push(format!("{:?}", block_on(log.claim(&missing, "w1", TTL))));
    out.push(format!("{:?}", block_on(log.snapshot(&missing))));
    let first = block_on(log.claim(&a, "w1", TTL)).unwrap();
    out.push(format!("{first:?}"));
    out.push(format!("{:?}", block_on(log.claim(&a, "w2", TTL))));
    out.push(format!("{:?}", block_on(log.append(&first, &[big]))));
    out.push(format!(
        "{:?}",
        block_on(log.append(&first, &[rec(1), rec(2)]))
    ));
    out.push(format!("{:?}", block_on(log.append(&first, &[]))));
    let second = block_on(log.claim(&a, "w1", TTL)).unwrap();
    out.push(format!("{second:?}"));
    out.push(format!("{:?}", block_on(log.append(&first, &[rec(3)]))));
    out.push(format!("{:?}", block_on(log.renew(&first, TTL))));
    out.push(format!("{:?}", block_on(log.release(&first))));
    clock.advance(TTL / 2);
    let renewed = block_on(log.renew(&second, TTL)).unwrap();
    out.push(format!("{renewed:?}"));
    clock.advance(TTL + 1);
    out.push(format!("{:?}", block_on(log.append(&renewed, &[rec(3)]))));
    out.push(format!("{:?}", block_on(log.renew(&renewed, TTL))));
    out.push(format!("{:?}", block_on(log.claim(&a, "w2", TTL))));
    out.push(format!("{:?}", block_on(log.release(&first))));
    out.push(format!("{:?}", block_on(log.read(&a, 0))));
    out.push(format!("{:?}", block_on(log.read(&a, 1))));
    out.push(format!("{:?}", block_on(log.read(&a, u64::MAX))));
    out.push(format!("{:?}", block_on(log.info(&a))));
    out.push(format!("{:?}", block_on(log.info(&child))));
    out.push(format!("{:?}", block_on(log.tasks())));
    let snap = Snapshot {
        seq: 2,
        plugin_set: "p".to_owned(),
        state: json!({ "x": [1, 2.5, "three"] }).to_string(),
    };
    out.push(format!("{:?}", block_on(log.put_snapshot(&a, &snap))));
    out.push(format!("{:?}", block_on(log.put_snapshot(&missing, &snap))));
    out.push(format!("{:?}", block_on(log.snapshot(&a))));
    let body = b"body".as_slice();
    out.push(format!("{:?}", block_on(content.put("text/plain", body))));
    out.push(format!(
        "{:?}",
        block_on(content.put("text/markdown", body))
    ));
    out.push(format!(
        "{:?}",
        block_on(content.get(&content_ref("x/y", body)))
    ));
    let never = content_ref("text/plain", b"never");
    let err = block_on(content.get(&never)).unwrap_err();
    out.push(format!("{err:?} / {err}"));
    out
}

fn show(outcomes: &[String]) -> Vec<String> {
    outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| format!("{i}: {o}"))
        .collect()
}

#[test]
fn every_outcome_and_error_matches_the_memory_store() {
    let clock = ManualClock::at(5_000);
    let memory = outcomes(
        &MemoryEventLog::new(clock.clone()),
        &MemoryContentStore::new(),
        &clock,
    );
    let dir = Dir::new();
    let clock = ManualClock::at(5_000);
    let store = dir.open(&clock);
    let sqlite = outcomes(&store, &store, &clock);
    assert_eq!(show(&sqlite), show(&memory));
}

#[test]
fn error_messages_name_the_task_and_the_epochs() {
    let clock = ManualClock::at(0);
    let store = SqliteStore::in_memory(clock.clone()).unwrap();
    let lease = claimed(&store, "demo", "w");
    clock.advance(TTL + 1);
    let err = block_on(store.append(&lease, &[rec(1)])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "lease epoch 1 on task `demo` is stale (live epoch 1, or lapsed) — nothing was written"
    );
    let fresh = block_on(store.claim(&lease.task, "other", TTL)).unwrap();
    let err = block_on(store.claim(&lease.task, "w", TTL)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "task `demo` is leased by `other` until {}",
            fresh.expires_ms
        )
    );
}

/// A small deterministic generator, so the test needs no randomness crate.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn records_read_back_equal_to_what_was_appended() {
    let dir = Dir::new();
    let clock = ManualClock::at(0);
    let store = dir.open(&clock);
    let lease = claimed(&store, "values", "w");
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    // Ten records of 100 arbitrary finite doubles each, to catch any parse that rounds.
    let mut batch: Vec<Record> = (0..10)
        .map(|_| {
            let floats: Vec<Value> = std::iter::repeat_with(|| f64::from_bits(rng.next()))
                .filter(|f| f.is_finite())
                .take(100)
                .map(|f| json!(f))
                .collect();
            Record::new("core", "floats", Value::Array(floats))
        })
        .collect();
    batch.extend([
        Record::new(
            "ext.with-dots",
            "kind/with/slashes",
            json!({
                "ints": [0, -1, i64::MIN, i64::MAX, u64::MAX],
                "small": [0.1, 1e-300, 5e-324, -0.0, 1.7976931348623157e308],
                "text": "üñîçødé \u{1F600} \"quotes\" \\ \n\t\u{0}",
                "nested": { "z": null, "a": [true, false, {}], "m": [] },
            }),
        ),
        Record::new("core", "empty-message", Value::Null).with_message(""),
        Record::new("core", "message", json!("a string payload"))
            .with_message("line one\nline two"),
        Record::new("core", "no-message", json!({})),
        rec(42),
    ]);
    let last = block_on(store.append(&lease, &batch)).unwrap();
    assert_eq!(last, batch.len() as u64);
    drop(store);
    let store = dir.open(&clock);
    let events = block_on(store.read(&lease.task, 0)).unwrap();
    let back: Vec<Record> = events.iter().map(|ev| (*ev.record).clone()).collect();
    assert_eq!(back, batch);
    for (i, ev) in events.iter().enumerate() {
        assert_eq!(
            serde_json::to_string(&*ev.record).unwrap(),
            serde_json::to_string(&batch[i]).unwrap()
        );
    }
}

#[test]
fn numbers_at_the_edge_of_u64_round_trip() {
    let clock = ManualClock::at(u64::MAX - 5);
    let store = SqliteStore::in_memory(clock.clone()).unwrap();
    let task = id("edge");
    block_on(store.create_task(&task, None)).unwrap();
    let lease = block_on(store.claim(&task, "w", u64::MAX)).unwrap();
    assert_eq!(lease.expires_ms, u64::MAX);
    assert_eq!(block_on(store.append(&lease, &[rec(1)])).unwrap(), 1);
    let renewed = block_on(store.renew(&lease, 3)).unwrap();
    assert_eq!(renewed.expires_ms, u64::MAX - 2);
    assert_eq!(
        block_on(store.info(&task)).unwrap().created_ms,
        u64::MAX - 5
    );
    let top = Snapshot {
        seq: u64::MAX,
        plugin_set: "p".to_owned(),
        state: json!(1).to_string(),
    };
    block_on(store.put_snapshot(&task, &top)).unwrap();
    let lower = Snapshot {
        seq: 1,
        ..top.clone()
    };
    block_on(store.put_snapshot(&task, &lower)).unwrap();
    assert_eq!(block_on(store.snapshot(&task)).unwrap(), Some(top));
    assert!(block_on(store.read(&task, u64::MAX)).unwrap().is_empty());
    assert_eq!(block_on(store.read(&task, 0)).unwrap().len(), 1);
}

#[test]
fn content_is_stored_once_and_read_back_whole() {
    let clock = ManualClock::at(0);
    let store = SqliteStore::in_memory(clock).unwrap();
    let body: Vec<u8> = (0..=255u8).cycle().take(3 * 1024 * 1024).collect();
    let a = block_on(store.put("application/octet-stream", &body)).unwrap();
    let b = block_on(store.put("application/octet-stream", &body)).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len, body.len() as u64);
    assert_eq!(block_on(store.get(&a)).unwrap(), body);
    let empty = block_on(store.put("text/plain", b"")).unwrap();
    assert_eq!(block_on(store.get(&empty)).unwrap(), b"");
    let shared: Arc<dyn ContentStore> = Arc::new(store);
    assert_eq!(block_on(shared.get(&a)).unwrap().len(), body.len());
}
