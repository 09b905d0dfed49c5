//! The in-memory event log and content store: the reference backend, for tests, benches and short-lived hosts.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use super::{
    Clock, ContentRef, ContentStore, Event, EventLog, Lease, QueueDepth, Queued, Record, Snapshot,
    StoreError, TaskId, TaskInfo, TaskQueue, WorkerSeen, check_batch, content_ref,
};

#[derive(Debug)]
struct LeaseState {
    worker: String,
    expires_ms: u64,
}

#[derive(Debug)]
struct TaskLog {
    /// Creation order, for listing tasks created within one millisecond.
    order: u64,
    parent: Option<TaskId>,
    created_ms: u64,
    events: Vec<Event>,
    epoch: u64,
    lease: Option<LeaseState>,
    snapshot: Option<Snapshot>,
}

/// An event log held in memory, with leases timed by an injected clock; it is also the
/// reference [`TaskQueue`].
pub struct MemoryEventLog {
    clock: Arc<dyn Clock>,
    tasks: Mutex<BTreeMap<TaskId, TaskLog>>,
    queue: Mutex<QueueState>,
}

/// One queued task.
#[derive(Debug)]
struct Entry {
    ready_ms: u64,
    /// Enqueue order, for tasks ready at the same time.
    order: u64,
    generation: u64,
}

#[derive(Debug, Default)]
struct QueueState {
    entries: BTreeMap<TaskId, Entry>,
    enqueued: u64,
    workers: BTreeMap<String, (String, u64)>,
}

impl std::fmt::Debug for MemoryEventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryEventLog").finish_non_exhaustive()
    }
}

impl MemoryEventLog {
    /// Appends `batch` (already checked) under `lease`.
    fn keep(
        &self,
        lease: &Lease,
        batch: impl ExactSizeIterator<Item = Arc<Record>>,
    ) -> Result<u64, StoreError> {
        let now = self.clock.now_ms();
        let mut tasks = self.lock();
        let log = leased(&mut tasks, lease, now)?;
        let mut seq = log.events.len() as u64;
        log.events.reserve(batch.len());
        for record in batch {
            seq += 1;
            log.events.push(Event { seq, record });
        }
        Ok(seq)
    }

    /// An empty log timed by `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            tasks: Mutex::new(BTreeMap::new()),
            queue: Mutex::new(QueueState::default()),
        }
    }

    fn queue(&self) -> MutexGuard<'_, QueueState> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<TaskId, TaskLog>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn unknown(task: &TaskId) -> StoreError {
    StoreError::UnknownTask { task: task.clone() }
}

/// Whether `lease` is the task's live lease at `now`.
fn live(log: &TaskLog, lease: &Lease, now: u64) -> bool {
    log.epoch == lease.epoch
        && log
            .lease
            .as_ref()
            .is_some_and(|l| l.worker == lease.worker && l.expires_ms > now)
}

/// The log of `lease`'s task, when `lease` is its live lease at `now`.
fn leased<'a>(
    tasks: &'a mut BTreeMap<TaskId, TaskLog>,
    lease: &Lease,
    now: u64,
) -> Result<&'a mut TaskLog, StoreError> {
    let log = tasks
        .get_mut(&lease.task)
        .ok_or_else(|| unknown(&lease.task))?;
    if !live(log, lease, now) {
        return Err(stale(log, lease));
    }
    Ok(log)
}

fn stale(log: &TaskLog, lease: &Lease) -> StoreError {
    StoreError::StaleLease {
        task: lease.task.clone(),
        epoch: lease.epoch,
        live: log.epoch,
        holder: log
            .lease
            .as_ref()
            .filter(|_| log.epoch != lease.epoch)
            .map(|l| l.worker.clone()),
    }
}

#[async_trait]
impl EventLog for MemoryEventLog {
    async fn create_task(&self, task: &TaskId, parent: Option<&TaskId>) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        let mut tasks = self.lock();
        if tasks.contains_key(task) {
            return Err(StoreError::TaskExists { task: task.clone() });
        }
        if let Some(parent) = parent
            && !tasks.contains_key(parent)
        {
            return Err(unknown(parent));
        }
        let order = tasks.len() as u64;
        tasks.insert(
            task.clone(),
            TaskLog {
                order,
                parent: parent.cloned(),
                created_ms: now,
                events: Vec::new(),
                epoch: 0,
                lease: None,
                snapshot: None,
            },
        );
        Ok(())
    }

    async fn claim(&self, task: &TaskId, worker: &str, ttl_ms: u64) -> Result<Lease, StoreError> {
        self.take_over(task, worker, ttl_ms, worker).await
    }

    async fn take_over(
        &self,
        task: &TaskId,
        worker: &str,
        ttl_ms: u64,
        holder: &str,
    ) -> Result<Lease, StoreError> {
        let now = self.clock.now_ms();
        let mut tasks = self.lock();
        let log = tasks.get_mut(task).ok_or_else(|| unknown(task))?;
        if let Some(held) = &log.lease
            && held.expires_ms > now
            && held.worker != worker
            && held.worker != holder
        {
            return Err(StoreError::Leased {
                task: task.clone(),
                holder: held.worker.clone(),
                until_ms: held.expires_ms,
            });
        }
        log.epoch += 1;
        let expires_ms = now.saturating_add(ttl_ms);
        log.lease = Some(LeaseState {
            worker: worker.to_owned(),
            expires_ms,
        });
        Ok(Lease {
            task: task.clone(),
            worker: worker.to_owned(),
            epoch: log.epoch,
            expires_ms,
        })
    }

    async fn renew(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StoreError> {
        let now = self.clock.now_ms();
        let mut tasks = self.lock();
        let log = leased(&mut tasks, lease, now)?;
        let expires_ms = now.saturating_add(ttl_ms);
        if let Some(held) = &mut log.lease {
            held.expires_ms = expires_ms;
        }
        Ok(Lease {
            expires_ms,
            ..lease.clone()
        })
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        let mut tasks = self.lock();
        let log = tasks
            .get_mut(&lease.task)
            .ok_or_else(|| unknown(&lease.task))?;
        if live(log, lease, now) {
            log.lease = None;
        }
        Ok(())
    }

    async fn append(&self, lease: &Lease, batch: &[Record]) -> Result<u64, StoreError> {
        check_batch(batch)?;
        self.keep(lease, batch.iter().cloned().map(Arc::new))
    }

    async fn append_shared(&self, lease: &Lease, batch: &[Arc<Record>]) -> Result<u64, StoreError> {
        check_batch(batch.iter().map(AsRef::as_ref))?;
        // One copy, kept together: a log whose records sit side by side in memory is read and
        // folded back half again as fast as one sharing the runner's records, scattered as
        // they were made (the fold bench measures it).
        self.keep(lease, batch.iter().map(|r| Arc::new(Record::clone(r))))
    }

    async fn read(&self, task: &TaskId, after: u64) -> Result<Vec<Event>, StoreError> {
        let tasks = self.lock();
        let log = tasks.get(task).ok_or_else(|| unknown(task))?;
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(log.events.len());
        Ok(log.events[start..].to_vec())
    }

    async fn info(&self, task: &TaskId) -> Result<TaskInfo, StoreError> {
        let tasks = self.lock();
        let log = tasks.get(task).ok_or_else(|| unknown(task))?;
        Ok(info(task, log))
    }

    async fn tasks(&self) -> Result<Vec<TaskInfo>, StoreError> {
        let tasks = self.lock();
        let mut all: Vec<(u64, TaskInfo)> = tasks
            .iter()
            .map(|(id, log)| (log.order, info(id, log)))
            .collect();
        all.sort_by_key(|(order, _)| *order);
        Ok(all.into_iter().map(|(_, info)| info).collect())
    }

    async fn put_snapshot(&self, task: &TaskId, snapshot: &Snapshot) -> Result<(), StoreError> {
        let mut tasks = self.lock();
        let log = tasks.get_mut(task).ok_or_else(|| unknown(task))?;
        if log.snapshot.as_ref().is_none_or(|s| s.seq <= snapshot.seq) {
            log.snapshot = Some(snapshot.clone());
        }
        Ok(())
    }

    async fn snapshot(&self, task: &TaskId) -> Result<Option<Snapshot>, StoreError> {
        let tasks = self.lock();
        let log = tasks.get(task).ok_or_else(|| unknown(task))?;
        Ok(log.snapshot.clone())
    }
}

/// Whether another lease than a lapsed one holds the task at `now`.
fn held(log: &TaskLog, now: u64) -> bool {
    log.lease.as_ref().is_some_and(|l| l.expires_ms > now)
}

#[async_trait]
impl TaskQueue for MemoryEventLog {
    async fn enqueue(&self, task: &TaskId, ready_ms: u64) -> Result<(), StoreError> {
        if !self.lock().contains_key(task) {
            return Err(unknown(task));
        }
        let ready_ms = if ready_ms == 0 {
            self.clock.now_ms()
        } else {
            ready_ms
        };
        let mut queue = self.queue();
        queue.enqueued += 1;
        let order = queue.enqueued;
        queue
            .entries
            .entry(task.clone())
            .and_modify(|e| {
                e.ready_ms = e.ready_ms.min(ready_ms);
                e.generation += 1;
            })
            .or_insert(Entry {
                ready_ms,
                order,
                generation: 1,
            });
        Ok(())
    }

    async fn take(&self, worker: &str, ttl_ms: u64) -> Result<Option<Queued>, StoreError> {
        let now = self.clock.now_ms();
        let mut tasks = self.lock();
        let queue = self.queue();
        let next = queue
            .entries
            .iter()
            .filter(|(task, e)| {
                e.ready_ms <= now && tasks.get(*task).is_some_and(|log| !held(log, now))
            })
            .min_by_key(|(_, e)| (e.ready_ms, e.order));
        let Some((task, entry)) = next else {
            return Ok(None);
        };
        let log = tasks.get_mut(task).ok_or_else(|| unknown(task))?;
        log.epoch += 1;
        let expires_ms = now.saturating_add(ttl_ms);
        log.lease = Some(LeaseState {
            worker: worker.to_owned(),
            expires_ms,
        });
        Ok(Some(Queued {
            lease: Lease {
                task: task.clone(),
                worker: worker.to_owned(),
                epoch: log.epoch,
                expires_ms,
            },
            generation: entry.generation,
            waited_ms: now.saturating_sub(entry.ready_ms),
        }))
    }

    async fn finish(&self, queued: &Queued) -> Result<(), StoreError> {
        let mut queue = self.queue();
        let task = &queued.lease.task;
        if queue
            .entries
            .get(task)
            .is_some_and(|e| e.generation == queued.generation)
        {
            queue.entries.remove(task);
        }
        Ok(())
    }

    async fn depth(&self) -> Result<QueueDepth, StoreError> {
        let now = self.clock.now_ms();
        let tasks = self.lock();
        let queue = self.queue();
        let mut depth = QueueDepth::default();
        for (task, entry) in &queue.entries {
            if tasks.get(task).is_some_and(|log| held(log, now)) {
                depth.running += 1;
            } else if entry.ready_ms <= now {
                depth.ready += 1;
            } else {
                depth.later += 1;
            }
        }
        Ok(depth)
    }

    async fn holders(&self) -> Result<Vec<(TaskId, String)>, StoreError> {
        let now = self.clock.now_ms();
        Ok(self
            .lock()
            .iter()
            .filter_map(|(task, log)| {
                log.lease
                    .as_ref()
                    .filter(|l| l.expires_ms > now)
                    .map(|l| (task.clone(), l.worker.clone()))
            })
            .collect())
    }

    async fn beat(&self, worker: &str, about: &str) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        self.queue()
            .workers
            .insert(worker.to_owned(), (about.to_owned(), now));
        Ok(())
    }

    async fn gone(&self, worker: &str) -> Result<(), StoreError> {
        self.queue().workers.remove(worker);
        Ok(())
    }

    async fn workers(&self, within_ms: u64) -> Result<Vec<WorkerSeen>, StoreError> {
        let since = self.clock.now_ms().saturating_sub(within_ms);
        let mut seen: Vec<WorkerSeen> = self
            .queue()
            .workers
            .iter()
            .filter(|(_, (_, seen))| *seen >= since)
            .map(|(worker, (about, seen_ms))| WorkerSeen {
                worker: worker.clone(),
                about: about.clone(),
                seen_ms: *seen_ms,
            })
            .collect();
        seen.sort_by(|a, b| b.seen_ms.cmp(&a.seen_ms).then(a.worker.cmp(&b.worker)));
        Ok(seen)
    }

    async fn wait(&self, max: std::time::Duration) {
        // In one process: look again every few milliseconds for something new.
        let start = self.queue().enqueued;
        let began = std::time::Instant::now();
        while began.elapsed() < max {
            futures_timer::Delay::new(std::time::Duration::from_millis(2).min(max)).await;
            if self.queue().enqueued != start {
                return;
            }
        }
    }
}

fn info(id: &TaskId, log: &TaskLog) -> TaskInfo {
    TaskInfo {
        id: id.clone(),
        parent: log.parent.clone(),
        head: log.events.len() as u64,
        created_ms: log.created_ms,
    }
}

/// A content store held in memory.
#[derive(Debug, Default)]
pub struct MemoryContentStore {
    bodies: Mutex<BTreeMap<String, Arc<[u8]>>>,
}

impl MemoryContentStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl ContentStore for MemoryContentStore {
    async fn put(&self, media_type: &str, body: &[u8]) -> Result<ContentRef, StoreError> {
        let reference = content_ref(media_type, body);
        self.bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(reference.sha256.clone())
            .or_insert_with(|| Arc::from(body));
        Ok(reference)
    }

    async fn get(&self, reference: &ContentRef) -> Result<Vec<u8>, StoreError> {
        self.bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&reference.sha256)
            .map(|b| b.to_vec())
            .ok_or_else(|| StoreError::MissingContent {
                sha256: reference.sha256.clone(),
            })
    }
}
