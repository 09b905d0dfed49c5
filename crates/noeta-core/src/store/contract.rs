//! The backend-neutral store contract: every event-log and content-store backend must pass [`run`].
//!
//! Each check uses its own task ids under `prefix`, so one backend instance
//! (a fresh SQLite file, a PostgreSQL schema) can run the whole suite. The
//! clock must be the one the event log reads, so lease expiry can be tested.

use serde_json::json;

pub use super::queue_contract::run_queue;

use super::{ContentStore, EventLog, ManualClock, Record, Snapshot, StoreError, TaskId};

/// A contract check that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The check's name.
    pub check: &'static str,
    /// What was wrong.
    pub message: String,
}

type Outcome = Result<(), String>;

fn id(prefix: &str, name: &str) -> Result<TaskId, String> {
    TaskId::new(format!("{prefix}-{name}")).map_err(|e| e.to_string())
}

fn rec(n: u64) -> Record {
    Record::new("core", "note", json!({ "n": n }))
}

fn expect(ok: bool, message: impl FnOnce() -> String) -> Outcome {
    if ok { Ok(()) } else { Err(message()) }
}

fn e(err: StoreError) -> String {
    err.to_string()
}

const TTL: u64 = 10_000;

/// Runs every check; an empty result means the backend honours the contract.
pub async fn run(
    log: &dyn EventLog,
    content: &dyn ContentStore,
    clock: &ManualClock,
    prefix: &str,
) -> Vec<Failure> {
    let mut failures = Vec::new();
    macro_rules! check {
        ($name:literal, $body:expr) => {
            if let Err(message) = $body.await {
                failures.push(Failure {
                    check: $name,
                    message,
                });
            }
        };
    }
    check!("create", create(log, prefix));
    check!("append_and_read", append_and_read(log, prefix));
    check!("live_lease_refuses_other_claims", live_lease(log, prefix));
    check!("take_over_from_a_named_holder", take_over(log, prefix));
    check!(
        "stale_lease_writes_nothing",
        stale_lease(log, clock, prefix)
    );
    check!("renew_and_release", renew_and_release(log, clock, prefix));
    check!("batches_are_atomic", atomic_batch(log, prefix));
    check!("snapshots", snapshots(log, prefix));
    check!("listing", listing(log, prefix));
    check!("content", content_checks(content));
    failures
}

async fn create(log: &dyn EventLog, prefix: &str) -> Outcome {
    let task = id(prefix, "create")?;
    log.create_task(&task, None).await.map_err(e)?;
    let again = log.create_task(&task, None).await;
    expect(matches!(again, Err(StoreError::TaskExists { .. })), || {
        format!("creating a task twice must fail with TaskExists, got {again:?}")
    })?;
    let orphan = id(prefix, "orphan")?;
    let missing = id(prefix, "no-such-parent")?;
    let res = log.create_task(&orphan, Some(&missing)).await;
    expect(matches!(res, Err(StoreError::UnknownTask { .. })), || {
        format!("a child of a missing parent must fail with UnknownTask, got {res:?}")
    })?;
    let read = log.read(&missing, 0).await;
    expect(matches!(read, Err(StoreError::UnknownTask { .. })), || {
        format!("reading a missing task must fail with UnknownTask, got {read:?}")
    })?;
    let info = log.info(&task).await.map_err(e)?;
    expect(info.head == 0 && info.parent.is_none(), || {
        format!("a new task has head 0 and no parent, got {info:?}")
    })
}

async fn append_and_read(log: &dyn EventLog, prefix: &str) -> Outcome {
    let task = id(prefix, "append")?;
    log.create_task(&task, None).await.map_err(e)?;
    let lease = log.claim(&task, "w1", TTL).await.map_err(e)?;
    let last = log
        .append(&lease, &[rec(1), rec(2), rec(3)])
        .await
        .map_err(e)?;
    expect(last == 3, || {
        format!("three appends end at seq 3, got {last}")
    })?;
    let last = log.append(&lease, &[rec(4)]).await.map_err(e)?;
    expect(last == 4, || {
        format!("the next append ends at seq 4, got {last}")
    })?;
    let all = log.read(&task, 0).await.map_err(e)?;
    let seqs: Vec<u64> = all.iter().map(|ev| ev.seq).collect();
    expect(seqs == [1, 2, 3, 4], || {
        format!("sequence numbers are gapless from 1, got {seqs:?}")
    })?;
    expect(*all[2].record == rec(3), || {
        format!("records read back unchanged, got {:?}", all[2].record)
    })?;
    let tail = log.read(&task, 2).await.map_err(e)?;
    let seqs: Vec<u64> = tail.iter().map(|ev| ev.seq).collect();
    expect(seqs == [3, 4], || {
        format!("read after 2 gives 3 and 4, got {seqs:?}")
    })?;
    let past = log.read(&task, 9).await.map_err(e)?;
    expect(past.is_empty(), || "read past the head is empty".to_owned())?;
    let empty = log.append(&lease, &[]).await.map_err(e)?;
    expect(empty == 4, || {
        format!("an empty batch returns the head, got {empty}")
    })?;
    let with_message = rec(5).with_message("hello");
    log.append(&lease, std::slice::from_ref(&with_message))
        .await
        .map_err(e)?;
    let back = log.read(&task, 4).await.map_err(e)?;
    expect(
        back.first().map(|ev| ev.record.as_ref()) == Some(&with_message),
        || "a record's message is stored".to_owned(),
    )
}

async fn live_lease(log: &dyn EventLog, prefix: &str) -> Outcome {
    let task = id(prefix, "lease")?;
    log.create_task(&task, None).await.map_err(e)?;
    let first = log.claim(&task, "w1", TTL).await.map_err(e)?;
    let other = log.claim(&task, "w2", TTL).await;
    expect(matches!(other, Err(StoreError::Leased { .. })), || {
        format!("a live lease refuses another worker's claim, got {other:?}")
    })?;
    let again = log.claim(&task, "w1", TTL).await.map_err(e)?;
    expect(again.epoch > first.epoch, || {
        "a new claim by the same worker starts a new epoch".to_owned()
    })?;
    let res = log.append(&first, &[rec(1)]).await;
    expect(matches!(res, Err(StoreError::StaleLease { .. })), || {
        format!("the superseded lease may not append, got {res:?}")
    })?;
    log.append(&again, &[rec(1)]).await.map_err(e)?;
    Ok(())
}

async fn take_over(log: &dyn EventLog, prefix: &str) -> Outcome {
    let task = id(prefix, "takeover")?;
    log.create_task(&task, None).await.map_err(e)?;
    let gone = log.claim(&task, "w1", TTL).await.map_err(e)?;
    let refused = log.take_over(&task, "w3", TTL, "w2").await;
    expect(
        matches!(&refused, Err(StoreError::Leased { holder, .. }) if holder == "w1"),
        || {
            format!(
                "a take-over from a worker that does not hold the lease is refused, got {refused:?}"
            )
        },
    )?;
    let taken = log.take_over(&task, "w2", TTL, "w1").await.map_err(e)?;
    expect(taken.epoch > gone.epoch, || {
        "a take-over starts a new epoch".to_owned()
    })?;
    let res = log.append(&gone, &[rec(1)]).await;
    expect(
        matches!(&res, Err(StoreError::StaleLease { holder: Some(h), .. }) if h == "w2"),
        || format!("the old holder's append is refused naming the new one, got {res:?}"),
    )?;
    log.append(&taken, &[rec(1)]).await.map_err(e)?;
    Ok(())
}

async fn stale_lease(log: &dyn EventLog, clock: &ManualClock, prefix: &str) -> Outcome {
    let task = id(prefix, "stale")?;
    log.create_task(&task, None).await.map_err(e)?;
    let first = log.claim(&task, "w1", TTL).await.map_err(e)?;
    log.append(&first, &[rec(1)]).await.map_err(e)?;
    clock.advance(TTL + 1);
    let lapsed = log.append(&first, &[rec(2)]).await;
    expect(matches!(lapsed, Err(StoreError::StaleLease { .. })), || {
        format!("a lapsed lease may not append, got {lapsed:?}")
    })?;
    expect(
        matches!(&lapsed, Err(StoreError::StaleLease { holder: None, .. })),
        || format!("nobody claimed the task after a lapse, got {lapsed:?}"),
    )?;
    let second = log.claim(&task, "w2", TTL).await.map_err(e)?;
    let res = log.append(&first, &[rec(2), rec(3)]).await;
    expect(
        matches!(&res, Err(StoreError::StaleLease { holder: Some(h), .. }) if h == "w2"),
        || {
            format!(
                "the old worker's append is refused after a new claim, naming `w2`, got {res:?}"
            )
        },
    )?;
    let head = log.info(&task).await.map_err(e)?.head;
    expect(head == 1, || {
        format!("a refused append writes nothing (head 1), got {head}")
    })?;
    let last = log.append(&second, &[rec(2)]).await.map_err(e)?;
    expect(last == 2, || {
        format!("the new worker continues at seq 2, got {last}")
    })
}

async fn renew_and_release(log: &dyn EventLog, clock: &ManualClock, prefix: &str) -> Outcome {
    let task = id(prefix, "renew")?;
    log.create_task(&task, None).await.map_err(e)?;
    let lease = log.claim(&task, "w1", TTL).await.map_err(e)?;
    clock.advance(TTL / 2);
    let renewed = log.renew(&lease, TTL).await.map_err(e)?;
    expect(renewed.expires_ms > lease.expires_ms, || {
        "renewing extends the lease".to_owned()
    })?;
    clock.advance(TTL / 2 + 1);
    log.append(&renewed, &[rec(1)]).await.map_err(e)?;
    log.release(&renewed).await.map_err(e)?;
    let after = log.append(&renewed, &[rec(2)]).await;
    expect(matches!(after, Err(StoreError::StaleLease { .. })), || {
        format!("a released lease may not append, got {after:?}")
    })?;
    let other = log.claim(&task, "w2", TTL).await.map_err(e)?;
    let res = log.renew(&renewed, TTL).await;
    expect(matches!(res, Err(StoreError::StaleLease { .. })), || {
        format!("a superseded lease cannot be renewed, got {res:?}")
    })?;
    log.release(&renewed).await.map_err(e)?;
    log.append(&other, &[rec(2)]).await.map_err(e)?;
    Ok(())
}

async fn atomic_batch(log: &dyn EventLog, prefix: &str) -> Outcome {
    let task = id(prefix, "atomic")?;
    log.create_task(&task, None).await.map_err(e)?;
    let lease = log.claim(&task, "w1", TTL).await.map_err(e)?;
    let big = Record::new(
        "core",
        "big",
        json!({ "text": "x".repeat(super::MAX_RECORD_BYTES + 1) }),
    );
    let res = log.append(&lease, &[rec(1), big]).await;
    expect(
        matches!(res, Err(StoreError::RecordTooLarge { .. })),
        || format!("an oversized record is refused, got {res:?}"),
    )?;
    let head = log.info(&task).await.map_err(e)?.head;
    expect(head == 0, || {
        format!("a refused batch writes none of its records, head is {head}")
    })
}

async fn snapshots(log: &dyn EventLog, prefix: &str) -> Outcome {
    let task = id(prefix, "snap")?;
    log.create_task(&task, None).await.map_err(e)?;
    let none = log.snapshot(&task).await.map_err(e)?;
    expect(none.is_none(), || "a new task has no snapshot".to_owned())?;
    let newer = Snapshot {
        seq: 7,
        plugin_set: "p".to_owned(),
        state: json!({"a": 1}).to_string(),
    };
    let older = Snapshot {
        seq: 3,
        ..newer.clone()
    };
    log.put_snapshot(&task, &newer).await.map_err(e)?;
    log.put_snapshot(&task, &older).await.map_err(e)?;
    let got = log.snapshot(&task).await.map_err(e)?;
    expect(got.as_ref() == Some(&newer), || {
        format!("an older snapshot never replaces a newer one, got {got:?}")
    })
}

async fn listing(log: &dyn EventLog, prefix: &str) -> Outcome {
    let parent = id(prefix, "parent")?;
    let child = id(prefix, "child")?;
    log.create_task(&parent, None).await.map_err(e)?;
    log.create_task(&child, Some(&parent)).await.map_err(e)?;
    let all = log.tasks().await.map_err(e)?;
    let found = all.iter().find(|t| t.id == child);
    expect(
        found.is_some_and(|t| t.parent.as_ref() == Some(&parent)),
        || format!("the listing has the child with its parent, got {found:?}"),
    )?;
    let pos = |t: &TaskId| all.iter().position(|i| &i.id == t);
    expect(pos(&parent) < pos(&child), || {
        "tasks are listed in creation order".to_owned()
    })
}

async fn content_checks(content: &dyn ContentStore) -> Outcome {
    let body = b"the quick brown fox";
    let a = content.put("text/plain", body).await.map_err(e)?;
    let b = content.put("text/plain", body).await.map_err(e)?;
    expect(a == b, || {
        "putting a body twice gives the same ref".to_owned()
    })?;
    expect(
        a.sha256 == crate::canonical::sha256_hex(body) && a.len == 19,
        || format!("the ref is the body's sha256 and length, got {a:?}"),
    )?;
    let back = content.get(&a).await.map_err(e)?;
    expect(back == body, || "the body reads back unchanged".to_owned())?;
    let missing = super::content_ref("text/plain", b"never stored");
    let res = content.get(&missing).await;
    expect(
        matches!(res, Err(StoreError::MissingContent { .. })),
        || format!("a missing body fails with MissingContent, got {res:?}"),
    )
}
