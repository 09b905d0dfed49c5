//! Running tasks taken from a task queue ([`crate::store::TaskQueue`]): one task per run, with
//! the tasks its run made runnable handed back to be queued, so a tree of tasks spreads over
//! every worker instead of running in the process that started it.
//!
//! What a run makes runnable:
//! - a call parked on child tasks: the children that have not finished;
//! - a task with background children: those that have not finished, or — when some have —
//!   the task itself, after their reports are delivered, to take a turn for them;
//! - a child task that finished (its turn ended or failed, or the task failed): its parent,
//!   which wakes the call that waits on it or delivers its report.

use crate::records::CoreRecord;
use crate::store::TaskId;

use super::{RunError, RunOutcome, Runtime, Sessions};

/// What one run of a queued task came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedRun {
    /// How the run stopped.
    pub outcome: RunOutcome,
    /// The tasks to put on the queue now (children, the parent, or the task itself).
    pub wake: Vec<TaskId>,
}

impl Runtime {
    /// Runs `task`, taken from the queue by this runtime's worker, until it stops, and says
    /// which tasks that made runnable (see the module documentation). Children are not run
    /// here: they are handed back to be queued.
    ///
    /// A child whose agent this host does not define fails alone, recorded, and its parent is
    /// woken with why; so does a root task (no worker of a pool that cannot run its agent
    /// would). A plugin the task was pinned with that this host lacks is an error when the
    /// claim was refused (recorded, the lease left to lapse for another worker, as a pool
    /// worker does); once the third refusal failed the task, the failure is the run's outcome.
    pub async fn run_queued(
        &self,
        sessions: &dyn Sessions,
        task: &TaskId,
    ) -> Result<QueuedRun, RunError> {
        let agent = self.agent_of(task).await?;
        let Some(session) = sessions.session(&agent) else {
            let err = RunError::UnknownAgent {
                task: task.clone(),
                agent,
            };
            let (_, outcome) = self.child_cannot_run(task.clone(), true, err).await?;
            return Ok(QueuedRun {
                outcome,
                wake: self.parent_of(task).await?.into_iter().collect(),
            });
        };
        let (outcome, state) = match self.run_to_stop(&session, task).await {
            Ok(stopped) => stopped,
            Err(err @ RunError::PluginMissing { .. }) => {
                let events = self.log.read(task, 0).await?;
                let Some(reason) = events.last().and_then(|e| failed_reason(&e.record)) else {
                    return Err(err);
                };
                return Ok(QueuedRun {
                    outcome: RunOutcome::TaskFailed { reason },
                    wake: self.parent_of(task).await?.into_iter().collect(),
                });
            }
            Err(err) => return Err(err),
        };
        let mut wake = Vec::new();
        match &outcome {
            RunOutcome::Parked { .. } => wake.extend(self.unfinished_children(&state).await?),
            _ => {
                wake.extend(self.background_unfinished(task, &state).await?);
                if self.deliver_background(&session, task, &state).await? {
                    wake.push(task.clone());
                }
            }
        }
        let finished = matches!(
            outcome,
            RunOutcome::Ended { .. }
                | RunOutcome::TurnFailed { .. }
                | RunOutcome::TaskFailed { .. }
        );
        if finished && let Some(parent) = &state.core.parent {
            wake.push(TaskId::new(parent.clone())?);
        }
        Ok(QueuedRun { outcome, wake })
    }

    /// The task's parent, from the store.
    async fn parent_of(&self, task: &TaskId) -> Result<Option<TaskId>, RunError> {
        Ok(self.log.info(task).await?.parent)
    }
}

/// Why the task failed, when its log ends with its failure.
fn failed_reason(record: &crate::store::Record) -> Option<String> {
    match CoreRecord::from_record(record)? {
        Ok(CoreRecord::TaskFailed { reason }) => Some(reason),
        _ => None,
    }
}
