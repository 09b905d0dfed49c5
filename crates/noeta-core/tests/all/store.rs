//! The store contract, run against the in-memory backend, and proof that the contract catches a broken one.

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::store::{
    Event, EventLog, Lease, ManualClock, MemoryContentStore, MemoryEventLog, QueueDepth, Queued,
    Record, Snapshot, StoreError, TaskId, TaskInfo, TaskQueue, WorkerSeen, contract,
};

#[test]
fn the_memory_store_honours_the_contract() {
    let clock = ManualClock::at(1_000);
    let log = MemoryEventLog::new(clock.clone());
    let content = MemoryContentStore::new();
    let failures = block_on(contract::run(&log, &content, &clock, "t"));
    assert!(failures.is_empty(), "{failures:#?}");
    let failures = block_on(contract::run_queue(&log, &log, &clock, "t"));
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A queue that hands one task to every worker that asks.
struct Lax(MemoryEventLog);

#[async_trait]
impl TaskQueue for Lax {
    async fn enqueue(&self, task: &TaskId, ready_ms: u64) -> Result<(), StoreError> {
        self.0.enqueue(task, ready_ms).await
    }
    async fn take(&self, worker: &str, ttl_ms: u64) -> Result<Option<Queued>, StoreError> {
        let Some(first) = self.0.take(worker, ttl_ms).await? else {
            return Ok(None);
        };
        // Forgets that it handed the task out.
        self.0.finish(&first).await?;
        self.0.enqueue(&first.lease.task, 0).await?;
        Ok(Some(first))
    }
    async fn finish(&self, queued: &Queued) -> Result<(), StoreError> {
        self.0.finish(queued).await
    }
    async fn depth(&self) -> Result<QueueDepth, StoreError> {
        self.0.depth().await
    }
    async fn holders(&self) -> Result<Vec<(TaskId, String)>, StoreError> {
        self.0.holders().await
    }
    async fn beat(&self, worker: &str, about: &str) -> Result<(), StoreError> {
        self.0.beat(worker, about).await
    }
    async fn gone(&self, worker: &str) -> Result<(), StoreError> {
        self.0.gone(worker).await
    }
    async fn workers(&self, within_ms: u64) -> Result<Vec<WorkerSeen>, StoreError> {
        self.0.workers(within_ms).await
    }
}

#[test]
fn the_queue_contract_catches_a_queue_that_forgets_what_it_handed_out() {
    let clock = ManualClock::at(1_000);
    let queue = Lax(MemoryEventLog::new(clock.clone()));
    let failures = block_on(contract::run_queue(&queue, &queue.0, &clock, "t"));
    let checks: Vec<&str> = failures.iter().map(|f| f.check).collect();
    assert!(checks.contains(&"queue_generations"), "{failures:#?}");
}

/// A log that forgets to fence appends by the lease.
struct Unfenced(MemoryEventLog);

#[async_trait]
impl EventLog for Unfenced {
    async fn create_task(&self, task: &TaskId, parent: Option<&TaskId>) -> Result<(), StoreError> {
        self.0.create_task(task, parent).await
    }
    async fn claim(&self, task: &TaskId, worker: &str, ttl_ms: u64) -> Result<Lease, StoreError> {
        self.0.claim(task, worker, ttl_ms).await
    }
    async fn renew(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StoreError> {
        self.0.renew(lease, ttl_ms).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.0.release(lease).await
    }
    async fn append(&self, lease: &Lease, batch: &[Record]) -> Result<u64, StoreError> {
        let fresh = self.0.claim(&lease.task, "intruder", 1_000_000).await?;
        self.0.append(&fresh, batch).await
    }
    async fn read(&self, task: &TaskId, after: u64) -> Result<Vec<Event>, StoreError> {
        self.0.read(task, after).await
    }
    async fn info(&self, task: &TaskId) -> Result<TaskInfo, StoreError> {
        self.0.info(task).await
    }
    async fn tasks(&self) -> Result<Vec<TaskInfo>, StoreError> {
        self.0.tasks().await
    }
    async fn put_snapshot(&self, task: &TaskId, snapshot: &Snapshot) -> Result<(), StoreError> {
        self.0.put_snapshot(task, snapshot).await
    }
    async fn snapshot(&self, task: &TaskId) -> Result<Option<Snapshot>, StoreError> {
        self.0.snapshot(task).await
    }
}

#[test]
fn the_contract_catches_a_log_that_does_not_fence_appends() {
    let clock = ManualClock::at(1_000);
    let log = Unfenced(MemoryEventLog::new(clock.clone()));
    let failures = block_on(contract::run(&log, &MemoryContentStore::new(), &clock, "t"));
    let checks: Vec<&str> = failures.iter().map(|f| f.check).collect();
    assert!(
        checks.contains(&"stale_lease_writes_nothing"),
        "{failures:#?}"
    );
}

#[test]
fn store_errors_name_the_task_and_the_limit() {
    let clock = ManualClock::at(0);
    let log = MemoryEventLog::new(clock.clone());
    let task = TaskId::new("demo").unwrap();
    block_on(log.create_task(&task, None)).unwrap();
    let lease = block_on(log.claim(&task, "w", 10)).unwrap();
    let big = Record::new(
        "notes",
        "long",
        serde_json::json!({"text": "x".repeat(5000)}),
    );
    let err = block_on(log.append(&lease, &[big])).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("record `notes`/`long` has a 5011-byte payload, over the 4096-byte limit"),
        "{err}"
    );
    clock.advance(11);
    let err = block_on(log.append(&lease, &[])).unwrap_err();
    assert!(
        err.to_string()
            .contains("lease epoch 1 on task `demo` is stale"),
        "{err}"
    );
    let err = TaskId::new("bad id").unwrap_err();
    assert!(
        err.to_string().contains("task id `bad id` is not valid"),
        "{err}"
    );
}
