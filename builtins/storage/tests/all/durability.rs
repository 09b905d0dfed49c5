//! What a store file keeps across close and reopen: events, tasks, leases, snapshots and content.

use futures::executor::block_on;
use noeta_core::store::{ContentStore, EventLog, ManualClock, Snapshot, StoreError};
use serde_json::json;

use crate::common::{Dir, TTL, claimed, id, rec, seqs};

#[test]
fn everything_written_is_read_back_after_reopening() {
    let dir = Dir::new();
    let clock = ManualClock::at(1_000);
    let store = dir.open(&clock);
    let lease = claimed(&store, "parent", "w1");
    let child = id("child");
    block_on(store.create_task(&child, Some(&lease.task))).unwrap();
    block_on(store.append(&lease, &[rec(1), rec(2).with_message("hi")])).unwrap();
    block_on(store.append(&lease, &[rec(3)])).unwrap();
    let snap = Snapshot {
        seq: 3,
        plugin_set: "set".to_owned(),
        state: json!({ "folded": [1, 2, 3] }).to_string(),
    };
    block_on(store.put_snapshot(&lease.task, &snap)).unwrap();
    let body = block_on(store.put("text/plain", b"a long tool output")).unwrap();
    let events = block_on(store.read(&lease.task, 0)).unwrap();
    let tasks = block_on(store.tasks()).unwrap();
    drop(store);

    let store = dir.open(&clock);
    assert_eq!(block_on(store.read(&lease.task, 0)).unwrap(), events);
    assert_eq!(block_on(store.tasks()).unwrap(), tasks);
    assert_eq!(tasks.iter().map(|t| t.head).collect::<Vec<_>>(), [3, 0]);
    assert_eq!(tasks[1].parent.as_ref(), Some(&lease.task));
    assert_eq!(block_on(store.snapshot(&lease.task)).unwrap(), Some(snap));
    assert_eq!(block_on(store.get(&body)).unwrap(), b"a long tool output");

    // The lease outlives the handle: another worker is still refused, and its holder goes on.
    let other = block_on(store.claim(&lease.task, "w2", TTL));
    assert!(matches!(other, Err(StoreError::Leased { .. })), "{other:?}");
    assert_eq!(block_on(store.append(&lease, &[rec(4)])).unwrap(), 4);
    assert_eq!(seqs(&store, &lease.task), [1, 2, 3, 4]);
}

#[test]
fn the_epoch_keeps_counting_across_reopen() {
    let dir = Dir::new();
    let clock = ManualClock::at(0);
    let store = dir.open(&clock);
    let first = claimed(&store, "t", "w1");
    drop(store);
    let store = dir.open(&clock);
    let second = block_on(store.claim(&first.task, "w1", TTL)).unwrap();
    assert_eq!(second.epoch, first.epoch + 1);
    let res = block_on(store.append(&first, &[rec(1)]));
    assert!(matches!(res, Err(StoreError::StaleLease { .. })), "{res:?}");
    assert_eq!(block_on(store.info(&first.task)).unwrap().head, 0);
}
