//! Runs taken from the task queue and cancels (`runner/queue.rs`): a refused take through the
//! queue, a cancel fencing out the worker that holds the task.

use std::sync::Arc;

use futures::executor::block_on;
use noeta_core::runner::{RunError, RunOutcome};
use noeta_core::session::{Session, bare_session};
use noeta_core::store::{EventLog, Record, StoreError};
use noeta_testkit::harness::Harness;
use serde_json::json;

use super::support::task;

/// One session for every agent.
struct Only(Arc<Session>);

impl noeta_core::runner::Sessions for Only {
    fn session(&self, _agent: &str) -> Option<Arc<Session>> {
        Some(self.0.clone())
    }
}

#[test]
fn through_the_queue_the_third_refused_take_fails_the_task_and_ends_its_entry() {
    use noeta_core::store::{QueueDepth, TaskQueue};
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }]));
    let mut pinned = bare_session("main", "");
    pinned.pins = vec![noeta_core::records::PluginPin {
        name: "house".into(),
        source: "file".into(),
        version: "1.0.0".into(),
        params: "p".into(),
    }];
    let t = task("queued-pool");
    block_on(rt.create(&pinned, &t, "go")).unwrap();
    block_on(h.log.enqueue(&t, 0)).unwrap();
    let worker = h
        .runtime(json!([{ "text": "ok" }]))
        .with_worker("lacking")
        .as_pool_worker();
    let lacking = Only(Arc::new(bare_session("main", "")));
    for round in 1..=2 {
        let taken = block_on(h.log.take("lacking", 1_000)).unwrap().unwrap();
        let err = block_on(worker.run_queued(&lacking, h.log.as_ref(), &taken)).unwrap_err();
        assert!(
            matches!(err, RunError::PluginMissing { .. }),
            "round {round}: {err}"
        );
        // The entry stays and the lease is left to lapse for a worker that has the plugin.
        assert!(block_on(h.log.take("other", 1_000)).unwrap().is_none());
        h.clock.advance(2_000);
    }
    let taken = block_on(h.log.take("lacking", 1_000)).unwrap().unwrap();
    let ran = block_on(worker.run_queued(&lacking, h.log.as_ref(), &taken)).unwrap();
    assert!(
        matches!(&ran.outcome, RunOutcome::TaskFailed { reason } if reason.starts_with("plugin_missing: ")),
        "{ran:?}"
    );
    assert!(ran.woke.is_empty(), "a root task wakes nobody: {ran:?}");
    assert_eq!(block_on(h.log.depth()).unwrap(), QueueDepth::default());
    assert_eq!(
        h.core_kinds(&t)
            .iter()
            .filter(|k| *k == "claim_refused")
            .count(),
        3
    );
}

#[test]
fn a_cancel_fences_out_the_holder_and_fails_the_task_once() {
    let h = Harness::new();
    let s = bare_session("main", "");
    let t = task("cancelled");
    let rt = h.runtime(json!([{ "text": "never" }]));
    block_on(rt.create(&s, &t, "go")).unwrap();
    // A worker holds the task when the cancel comes.
    let held = block_on(h.log.claim(&t, "busy-worker", 60_000)).unwrap();
    let canceller = h.runtime(json!([])).with_worker("api");
    assert!(block_on(canceller.cancel(&t, "by a test")).unwrap());
    let late = block_on(
        h.log
            .append(&held, &[Record::new("core", "note", json!({}))]),
    );
    assert!(
        matches!(late, Err(StoreError::StaleLease { .. })),
        "{late:?}"
    );
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(
        state.core.task_failed.as_deref(),
        Some("cancelled: by a test")
    );
    assert!(!block_on(canceller.cancel(&t, "again")).unwrap());
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(
        matches!(outcome, RunOutcome::TaskFailed { .. }),
        "{outcome:?}"
    );
}
