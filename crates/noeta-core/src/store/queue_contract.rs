//! The queue half of the store contract: every [`TaskQueue`] must pass [`run_queue`].
//!
//! The checks leave the queue as they found it (every entry they add is finished), so a backend
//! shared by several runs of the suite sees only its own entries; they assume no other entry is
//! queued while they run.

use serde_json::json;

use super::contract::Failure;
use super::{Clock, EventLog, ManualClock, Record, StoreError, TaskId, TaskQueue};

type Outcome = Result<(), String>;

const TTL: u64 = 10_000;

fn id(prefix: &str, name: &str) -> Result<TaskId, String> {
    TaskId::new(format!("{prefix}-q-{name}")).map_err(|e| e.to_string())
}

fn e(err: StoreError) -> String {
    err.to_string()
}

fn expect(ok: bool, message: impl FnOnce() -> String) -> Outcome {
    if ok { Ok(()) } else { Err(message()) }
}

async fn new_task(log: &dyn EventLog, prefix: &str, name: &str) -> Result<TaskId, String> {
    let task = id(prefix, name)?;
    log.create_task(&task, None).await.map_err(e)?;
    Ok(task)
}

/// Runs every queue check on a queue over `log`; an empty result means it honours the contract.
pub async fn run_queue(
    queue: &dyn TaskQueue,
    log: &dyn EventLog,
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
    check!("queue_in_order_once", in_order(queue, log, prefix));
    check!("queue_skips_held_tasks", skips_held(queue, log, prefix));
    check!(
        "queue_requeues_lapsed_leases",
        requeues_lapsed(queue, log, clock, prefix)
    );
    check!("queue_generations", generations(queue, log, prefix));
    check!("queue_later", later(queue, log, clock, prefix));
    check!("queue_unknown_task", unknown(queue, prefix));
    check!("queue_workers", workers(queue, clock));
    failures
}

async fn in_order(queue: &dyn TaskQueue, log: &dyn EventLog, prefix: &str) -> Outcome {
    let a = new_task(log, prefix, "a").await?;
    let b = new_task(log, prefix, "b").await?;
    queue.enqueue(&a, 0).await.map_err(e)?;
    queue.enqueue(&b, 0).await.map_err(e)?;
    let depth = queue.depth().await.map_err(e)?;
    expect(depth.ready == 2, || {
        format!("two enqueued tasks are ready, got {depth:?}")
    })?;
    let first = queue.take("w1", TTL).await.map_err(e)?;
    let second = queue.take("w2", TTL).await.map_err(e)?;
    let none = queue.take("w3", TTL).await.map_err(e)?;
    let got = |q: &Option<super::Queued>| q.as_ref().map(|q| q.lease.task.clone());
    expect(
        got(&first) == Some(a.clone()) && got(&second) == Some(b.clone()),
        || {
            format!(
                "tasks are taken oldest first, got {:?} then {:?}",
                got(&first),
                got(&second)
            )
        },
    )?;
    expect(none.is_none(), || {
        format!("a task held by a live lease is not taken again, got {none:?}")
    })?;
    let (Some(first), Some(second)) = (first, second) else {
        return Err("two enqueued tasks are both taken".to_owned());
    };
    expect(first.lease.worker == "w1", || {
        format!("the lease is the taker's, got {:?}", first.lease)
    })?;
    log.append(&first.lease, &[Record::new("core", "note", json!({}))])
        .await
        .map_err(e)?;
    let depth = queue.depth().await.map_err(e)?;
    expect(depth.running == 2 && depth.ready == 0, || {
        format!("two taken tasks are running, got {depth:?}")
    })?;
    queue.finish(&first).await.map_err(e)?;
    queue.finish(&second).await.map_err(e)?;
    log.release(&first.lease).await.map_err(e)?;
    log.release(&second.lease).await.map_err(e)?;
    let depth = queue.depth().await.map_err(e)?;
    expect(depth == super::QueueDepth::default(), || {
        format!("finished entries leave the queue, got {depth:?}")
    })?;
    let none = queue.take("w1", TTL).await.map_err(e)?;
    expect(none.is_none(), || {
        format!("a finished task is not taken again, got {none:?}")
    })
}

async fn skips_held(queue: &dyn TaskQueue, log: &dyn EventLog, prefix: &str) -> Outcome {
    let task = new_task(log, prefix, "held").await?;
    let lease = log.claim(&task, "other", TTL).await.map_err(e)?;
    queue.enqueue(&task, 0).await.map_err(e)?;
    let none = queue.take("w1", TTL).await.map_err(e)?;
    expect(none.is_none(), || {
        format!("a task another worker holds is not taken, got {none:?}")
    })?;
    let held = queue.holders().await.map_err(e)?;
    expect(held.contains(&(task.clone(), "other".to_owned())), || {
        format!("the holder of a live lease is listed, got {held:?}")
    })?;
    log.release(&lease).await.map_err(e)?;
    let taken = queue.take("w1", TTL).await.map_err(e)?;
    let Some(taken) = taken else {
        return Err("a released task is taken".to_owned());
    };
    expect(taken.lease.epoch > lease.epoch, || {
        "taking a task starts a new epoch".to_owned()
    })?;
    queue.finish(&taken).await.map_err(e)?;
    log.release(&taken.lease).await.map_err(e)
}

async fn requeues_lapsed(
    queue: &dyn TaskQueue,
    log: &dyn EventLog,
    clock: &ManualClock,
    prefix: &str,
) -> Outcome {
    let task = new_task(log, prefix, "lapsed").await?;
    queue.enqueue(&task, 0).await.map_err(e)?;
    let Some(dead) = queue.take("w1", TTL).await.map_err(e)? else {
        return Err("an enqueued task is taken".to_owned());
    };
    clock.advance(TTL + 1);
    let Some(again) = queue.take("w2", TTL).await.map_err(e)? else {
        return Err("a task whose taker's lease lapsed is taken again".to_owned());
    };
    expect(again.lease.epoch > dead.lease.epoch, || {
        "the second taker has a newer epoch".to_owned()
    })?;
    let res = log
        .append(&dead.lease, &[Record::new("core", "note", json!({}))])
        .await;
    expect(matches!(res, Err(StoreError::StaleLease { .. })), || {
        format!("the first taker may no longer append, got {res:?}")
    })?;
    queue.finish(&again).await.map_err(e)?;
    log.release(&again.lease).await.map_err(e)
}

async fn generations(queue: &dyn TaskQueue, log: &dyn EventLog, prefix: &str) -> Outcome {
    let task = new_task(log, prefix, "again").await?;
    queue.enqueue(&task, 0).await.map_err(e)?;
    let Some(first) = queue.take("w1", TTL).await.map_err(e)? else {
        return Err("an enqueued task is taken".to_owned());
    };
    // Woken again while it runs: the run's finish must not drop the new wake.
    queue.enqueue(&task, 0).await.map_err(e)?;
    queue.finish(&first).await.map_err(e)?;
    log.release(&first.lease).await.map_err(e)?;
    let Some(second) = queue.take("w1", TTL).await.map_err(e)? else {
        return Err("a task enqueued again while it ran is taken again".to_owned());
    };
    expect(second.generation > first.generation, || {
        "the second take has a newer generation".to_owned()
    })?;
    queue.finish(&second).await.map_err(e)?;
    log.release(&second.lease).await.map_err(e)?;
    let none = queue.take("w1", TTL).await.map_err(e)?;
    expect(none.is_none(), || {
        format!("nothing is left after the second finish, got {none:?}")
    })
}

async fn later(
    queue: &dyn TaskQueue,
    log: &dyn EventLog,
    clock: &ManualClock,
    prefix: &str,
) -> Outcome {
    let task = new_task(log, prefix, "later").await?;
    let now = clock.now_ms();
    queue.enqueue(&task, now + 5_000).await.map_err(e)?;
    let none = queue.take("w1", TTL).await.map_err(e)?;
    expect(none.is_none(), || {
        format!("a task runnable later is not taken now, got {none:?}")
    })?;
    let depth = queue.depth().await.map_err(e)?;
    expect(depth.later == 1 && depth.ready == 0, || {
        format!("it counts as later, got {depth:?}")
    })?;
    clock.advance(5_000);
    let Some(taken) = queue.take("w1", TTL).await.map_err(e)? else {
        return Err("a task is taken once its time came".to_owned());
    };
    queue.finish(&taken).await.map_err(e)?;
    log.release(&taken.lease).await.map_err(e)
}

async fn unknown(queue: &dyn TaskQueue, prefix: &str) -> Outcome {
    let missing = id(prefix, "missing")?;
    let res = queue.enqueue(&missing, 0).await;
    expect(matches!(res, Err(StoreError::UnknownTask { .. })), || {
        format!("enqueuing a task that does not exist fails with UnknownTask, got {res:?}")
    })
}

async fn workers(queue: &dyn TaskQueue, clock: &ManualClock) -> Outcome {
    queue.beat("w-seen", "host a, pid 1").await.map_err(e)?;
    let seen = queue.workers(60_000).await.map_err(e)?;
    expect(
        seen.iter()
            .any(|w| w.worker == "w-seen" && w.about == "host a, pid 1"),
        || format!("a worker that beat is seen, got {seen:?}"),
    )?;
    clock.advance(120_000);
    let seen = queue.workers(60_000).await.map_err(e)?;
    expect(!seen.iter().any(|w| w.worker == "w-seen"), || {
        format!("a worker not seen for longer is not listed, got {seen:?}")
    })?;
    queue.beat("w-seen", "host a, pid 1").await.map_err(e)?;
    queue.gone("w-seen").await.map_err(e)?;
    let seen = queue.workers(60_000).await.map_err(e)?;
    expect(!seen.iter().any(|w| w.worker == "w-seen"), || {
        format!("a worker that said it is gone is not listed, got {seen:?}")
    })
}
