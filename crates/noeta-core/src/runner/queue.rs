//! Running tasks taken from a task queue ([`TaskQueue`]): one task per run, with the tasks its
//! run made runnable put on the queue, so a tree of tasks spreads over every worker instead of
//! running in the process that started it.
//!
//! What a run makes runnable:
//! - a call parked on child tasks: the children that have not finished;
//! - a task with background children: those that have not finished, and — when some have —
//!   the task itself, their reports delivered, to take a turn for them;
//! - a child task that finished (its turn ended or failed, or the task failed): its parent,
//!   which wakes the call that waits on it or delivers its report.
//!
//! The run queues those and finishes its entry while it still holds the task's lease, and
//! only then lets the lease go: no other worker can take the entry between the two. A worker
//! that dies before leaves the entry behind, and its lease lapses: the next take runs it again.

use std::sync::Arc;

use crate::fold::Folder;
use crate::records::CoreRecord;
use crate::store::{Queued, StoreError, TaskId, TaskQueue};

use super::claim::Claim;
use super::{Driving, RunError, RunOutcome, Runtime, Sessions};

/// What one run of a queued task came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedRun {
    /// How the run stopped.
    pub outcome: RunOutcome,
    /// The tasks it put on the queue (children, the parent, or the task itself).
    pub woke: Vec<TaskId>,
}

impl Runtime {
    /// Runs the task `queued` took (with this runtime's worker name) until it stops, queues
    /// what that made runnable (see the module documentation) and finishes the entry — unless
    /// the run was stopped ([`RunOutcome::Stopped`]): the entry stays for the next worker.
    /// Children are not run here.
    ///
    /// A child whose agent this host does not define fails alone, recorded, and its parent is
    /// woken with why; so does a root task (a worker that cannot run its agent records why,
    /// rather than leave it for ever). A plugin the task was pinned with that this host lacks
    /// refuses the claim (recorded, the lease left to lapse for another worker, as pool
    /// workers do): that is the error, unless the refusal was the third and failed the task.
    pub async fn run_queued(
        &self,
        sessions: &dyn Sessions,
        queue: &dyn TaskQueue,
        queued: &Queued,
    ) -> Result<QueuedRun, RunError> {
        let task = &queued.lease.task;
        let agent = self.agent_of(task).await?;
        let Some(session) = sessions.session(&agent) else {
            let err = RunError::UnknownAgent {
                task: task.clone(),
                agent,
            };
            let (_, outcome) = self.child_cannot_run(task.clone(), true, err).await?;
            let woke: Vec<TaskId> = self.log.info(task).await?.parent.into_iter().collect();
            for woken in &woke {
                queue.enqueue(woken, 0).await?;
            }
            queue.finish(queued).await?;
            return Ok(QueuedRun { outcome, woke });
        };
        let mut claim = self.claim(&session, task).await?;
        let _driving = Driving::start(&self.driving, task);
        let held = Arc::clone(&claim.lease);
        let outcome = match held.keep_alive(claim.drive()).await {
            Ok(outcome) => outcome,
            Err(err @ RunError::PluginMissing { .. }) => match &claim.state.core.task_failed {
                Some(reason) => RunOutcome::TaskFailed {
                    reason: reason.clone(),
                },
                // The lease is left to lapse for a worker that has the plugin.
                None => return Err(err),
            },
            Err(err) => return Err(err),
        };
        claim.write_unwritten().await?;
        if claim.state.seq.saturating_sub(claim.snapshot_seq) >= self.snapshot_every {
            claim.snapshot().await;
        }
        if outcome == RunOutcome::Stopped {
            claim.release().await?;
            return Ok(QueuedRun {
                outcome,
                woke: Vec::new(),
            });
        }
        let woke = self.woken(&mut claim, &outcome).await?;
        for woken in &woke {
            queue.enqueue(woken, 0).await?;
        }
        queue.finish(queued).await?;
        claim.release().await?;
        Ok(QueuedRun { outcome, woke })
    }

    /// Cancels `task` for good: records its failure (`cancelled: {reason}`) under a lease taken
    /// from whoever holds it — a worker running it is refused its next write, which stops its
    /// run there. `false` when the task had already failed (nothing is written).
    pub async fn cancel(&self, task: &TaskId, reason: &str) -> Result<bool, RunError> {
        let lease = match self.log.claim(task, &self.worker, self.lease_ttl_ms).await {
            Err(StoreError::Leased { holder, .. }) => {
                self.log
                    .take_over(task, &self.worker, self.lease_ttl_ms, &holder)
                    .await?
            }
            other => other?,
        };
        let events = self.read_hydrated(task, 0).await?;
        // The kernel's own records say whether the task failed; no plugin is needed.
        let state = Folder::new(&[], "core").fold(&events)?;
        let cancelled = state.core.task_failed.is_none();
        if cancelled {
            let failed = CoreRecord::TaskFailed {
                reason: format!("cancelled: {reason}"),
            };
            self.log.append(&lease, &[failed.to_record()]).await?;
        }
        self.log.release(&lease).await?;
        Ok(cancelled)
    }

    /// What the run of `claim`'s task that stopped with `outcome` made runnable; background
    /// reports are delivered under the claim.
    async fn woken(
        &self,
        claim: &mut Claim<'_>,
        outcome: &RunOutcome,
    ) -> Result<Vec<TaskId>, RunError> {
        let state = Arc::clone(&claim.state);
        let mut woke = Vec::new();
        if matches!(outcome, RunOutcome::Parked { .. }) {
            woke.extend(self.unfinished_children(&state).await?);
        } else {
            woke.extend(self.background_unfinished(&claim.task, &state).await?);
            let reports = self.background_reports(&state).await?;
            if !reports.is_empty() {
                claim.commit(reports).await?;
                woke.push(claim.task.clone());
            }
        }
        let finished = matches!(
            outcome,
            RunOutcome::Ended { .. }
                | RunOutcome::TurnFailed { .. }
                | RunOutcome::TaskFailed { .. }
        );
        if finished && let Some(parent) = &state.core.parent {
            woke.push(TaskId::new(parent.clone())?);
        }
        Ok(woke)
    }
}
