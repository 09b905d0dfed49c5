//! The task queue: which tasks are runnable, taken by any number of workers, each exactly once
//! at a time.
//!
//! A task is put on the queue whenever something makes it runnable (it was submitted, a person
//! answered it, a child it waits on finished, a background child reported, a time came). A
//! worker [`take`](TaskQueue::take)s the runnable task that has waited longest and, in the
//! same transaction, the task's lease; the entry stays while the lease is live, so a worker
//! that dies leaves an entry whose lease lapses, and the next `take` hands it to another
//! worker (a stale lease is requeued by construction). [`finish`](TaskQueue::finish) removes
//! the entry once the run stopped, unless the task was enqueued again meanwhile.
//!
//! The in-memory reference queue lives with [`MemoryEventLog`](super::MemoryEventLog); the
//! storage built-in's SQLite and PostgreSQL stores keep theirs in the same database as the log.

use std::time::Duration;

use async_trait::async_trait;

use super::{Lease, StoreError, TaskId};

/// A runnable task taken from the queue, with the lease that now holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// The lease taken with the entry (a new epoch of the task).
    pub lease: Lease,
    /// The entry's generation: enqueuing a queued task again raises it, and
    /// [`finish`](TaskQueue::finish) only removes the generation it was given.
    pub generation: u64,
    /// How long the task was runnable before it was taken, in milliseconds.
    pub waited_ms: u64,
}

/// How many tasks the queue holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// Runnable now and not held by a live lease.
    pub ready: u64,
    /// Held by a worker's live lease.
    pub running: u64,
    /// Runnable only later (a time set in the future).
    pub later: u64,
}

/// A worker that said it was alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSeen {
    /// The worker's name (what its leases carry).
    pub worker: String,
    /// What it said about itself (host, process, plugins).
    pub about: String,
    /// When it was last seen, in milliseconds since the Unix epoch (the store's clock).
    pub seen_ms: u64,
}

/// Runnable tasks, taken by workers with their leases.
#[async_trait]
pub trait TaskQueue: Send + Sync {
    /// Makes `task` runnable from `ready_ms` (0: now). Enqueuing a task already queued keeps
    /// the earlier time and raises its generation, so a run in flight does not remove it.
    async fn enqueue(&self, task: &TaskId, ready_ms: u64) -> Result<(), StoreError>;

    /// Takes the runnable task that has waited longest and is not held by a live lease, and
    /// claims its lease for `worker` for `ttl_ms`: both in one transaction, so two workers never
    /// take one task at once. `None` when nothing is runnable.
    async fn take(&self, worker: &str, ttl_ms: u64) -> Result<Option<Queued>, StoreError>;

    /// Removes the entry `queued` took, unless the task was enqueued again since.
    async fn finish(&self, queued: &Queued) -> Result<(), StoreError>;

    /// How many tasks wait, run, or wait for a time.
    async fn depth(&self) -> Result<QueueDepth, StoreError>;

    /// The tasks a live lease holds now, each with its holder, in task order.
    async fn holders(&self) -> Result<Vec<(TaskId, String)>, StoreError>;

    /// Records that `worker` is alive; `about` says what it is.
    async fn beat(&self, worker: &str, about: &str) -> Result<(), StoreError>;

    /// Forgets `worker` (it stopped).
    async fn gone(&self, worker: &str) -> Result<(), StoreError>;

    /// The workers seen within the last `within_ms` milliseconds, most recent first.
    async fn workers(&self, within_ms: u64) -> Result<Vec<WorkerSeen>, StoreError>;

    /// Waits until a task may have become runnable, or `max` passed: a store that can be told
    /// (PostgreSQL's LISTEN/NOTIFY) wakes at once; the default polls.
    async fn wait(&self, max: Duration) {
        futures_timer::Delay::new(max).await;
    }
}
