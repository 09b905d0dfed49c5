//! The task tree: child tasks made from spawn orders and read back, the spawn checkpoint, and
//! `run_tree`, which runs a task and the children it waits on (at once, bounded) and delivers
//! background children's reports.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::canonical;
use crate::extension::{SpawnRequest, View};
use crate::fold::{Folder, TaskState, TurnState};
use crate::hooks::Hooks;
use crate::model::Role;
use crate::records::{ChildResult, SpawnOrder};
use crate::records::{CoreRecord, hydrate, spill};
use crate::session::Session;
use crate::store::{StoreError, TaskId};
use crate::tool::Spawner;

use super::claim::Claim;
use super::{RunError, RunOutcome, Runtime, Sessions};

/// Creates a child task from its spawn order; an existing child is left as it is.
pub(super) async fn create_child(
    rt: &Runtime,
    parent: &TaskId,
    depth: u32,
    order: &SpawnOrder,
) -> Result<(), RunError> {
    let child = TaskId::new(order.child.clone())?;
    match rt.log.create_task(&child, Some(parent)).await {
        Ok(()) | Err(StoreError::TaskExists { .. }) => {}
        Err(err) => return Err(err.into()),
    }
    if rt.log.info(&child).await?.head > 0 {
        return Ok(());
    }
    let lease = rt.log.claim(&child, &rt.worker, rt.lease_ttl_ms).await?;
    let started = CoreRecord::TaskStarted {
        agent: order.agent.clone(),
        parent: Some(parent.as_str().to_owned()),
        depth: depth + 1,
        inherited: order.inherited.clone(),
        host: None,
    };
    let goal = CoreRecord::UserMessage {
        text: order.goal.as_str().into(),
    };
    let batch = [
        spill(started.to_record(), rt.content.as_ref()).await?,
        spill(goal.to_record(), rt.content.as_ref()).await?,
    ];
    rt.log.append(&lease, &batch).await?;
    rt.log.release(&lease).await?;
    Ok(())
}

/// How a child ended, or `None` while it has not.
pub(super) async fn child_result(
    rt: &Runtime,
    child: &TaskId,
    order: &SpawnOrder,
) -> Result<Option<ChildResult>, RunError> {
    let events = match rt.read_hydrated(child, 0).await {
        Ok(events) => events,
        Err(RunError::Store(StoreError::UnknownTask { .. })) => return Ok(None),
        Err(err) => return Err(err),
    };
    // The kernel's own records say whether and how a task ended; no plugin is needed to read them.
    let state = Folder::new(&[], "core").fold(&events)?;
    let core = &state.core;
    // The child's last word: its final reply, or the result of a tool that ended the turn
    // silently (after the last reply).
    let last_reply = || {
        core.messages
            .iter()
            .rev()
            .find(|m| matches!(m.role, Role::Assistant | Role::Tool))
            .map(|m| m.text.as_str().to_owned())
            .unwrap_or_default()
    };
    let result = |ok: bool, text: String| ChildResult {
        task: order.child.clone(),
        agent: order.agent.clone(),
        ok,
        text,
    };
    Ok(match (&core.task_failed, &core.turn) {
        (Some(reason), _) => Some(result(false, format!("the child task failed: {reason}"))),
        (None, TurnState::Ended { .. }) => Some(result(true, last_reply())),
        (None, TurnState::Failed { reason }) => {
            Some(result(false, format!("the child's turn failed: {reason}")))
        }
        _ => None,
    })
}

/// The runner's side of `ctx.spawn`: the roster, the spawn checkpoint and `inherit`.
pub(super) struct ClaimSpawner {
    /// Children this call spawned before (in earlier parks), so new ids never repeat.
    earlier: usize,
    task: TaskId,
    agent: String,
    roster: Vec<String>,
    depth: u32,
    state: Arc<TaskState>,
    extensions: Vec<Arc<dyn crate::extension::Extension>>,
}

impl Spawner for ClaimSpawner {
    fn admit(
        &self,
        agent: &str,
        earlier_in_call: usize,
    ) -> Result<BTreeMap<String, Value>, String> {
        if !self.roster.iter().any(|a| a == agent) {
            return Err(format!(
                "no agent named `{agent}` on `{}`'s roster (roster: {})",
                self.agent,
                if self.roster.is_empty() {
                    "empty".to_owned()
                } else {
                    self.roster.join(", ")
                }
            ));
        }
        let view = View::new(
            &self.task,
            &self.agent,
            &self.state,
            &self.roster,
            &self.extensions,
        );
        let request = SpawnRequest {
            agent: agent.to_owned(),
            depth: self.depth + 1,
            earlier_in_call,
        };
        let hooks = Hooks(&self.extensions);
        hooks.before_spawn(&view, &request)?;
        hooks.inherit(&view)
    }

    fn child_id(&self, call_id: &str, n: usize) -> String {
        let digest = canonical::sha256_hex(format!("{}:{call_id}", self.task).as_bytes());
        format!("child{}-{}", self.earlier + n, &digest[..20])
    }
}

/// Child tasks run at once by default: the machine's parallelism, at most 8.
pub(super) fn default_children_at_once() -> usize {
    crate::runner::parallelism().min(8)
}

/// What running a task's background children came to.
pub(super) enum Background {
    /// It has none waiting.
    None,
    /// Results were delivered: the task has a turn to take.
    Delivered,
    /// A background child (or one of its own) waits for a person.
    Waiting(TaskId, RunOutcome),
}

impl Runtime {
    /// Runs a task and, whenever it parks on children, runs them and wakes it, until it ends,
    /// fails, or parks on a person. The children of one park run at once, at most
    /// [`with_children_at_once`](Self::with_children_at_once) together, each with its own
    /// children the same way. A child this host cannot run (its agent unknown here, a plugin
    /// it pinned missing) fails alone: it is recorded as failed, with why, and its parent
    /// gets that as the child's result.
    /// Returns the task where it stopped with that task's outcome: the root when the tree
    /// finished, or the task (root or descendant) that waits for a person.
    pub async fn run_tree(
        &self,
        sessions: &dyn Sessions,
        task: &TaskId,
    ) -> Result<(TaskId, RunOutcome), RunError> {
        self.subtree(sessions, task.clone(), false).await
    }

    /// [`run_tree`](Self::run_tree) from `task`; `child` makes what keeps it from running its
    /// own failure rather than the caller's.
    pub(super) fn subtree<'a>(
        &'a self,
        sessions: &'a dyn Sessions,
        task: TaskId,
        child: bool,
    ) -> futures::future::BoxFuture<'a, Result<(TaskId, RunOutcome), RunError>> {
        use futures::{FutureExt, StreamExt};
        async move {
            loop {
                let agent = self.agent_of(&task).await?;
                let Some(session) = sessions.session(&agent) else {
                    let err = RunError::UnknownAgent {
                        task: task.clone(),
                        agent,
                    };
                    return self.child_cannot_run(task, child, err).await;
                };
                let (outcome, state) = match self.run_to_stop(&session, &task).await {
                    Ok(stopped) => stopped,
                    Err(err @ RunError::PluginMissing { .. }) => {
                        return self.child_cannot_run(task, child, err).await;
                    }
                    Err(err) => return Err(err),
                };
                if !matches!(outcome, RunOutcome::Parked { .. }) {
                    // Background children run once the task stopped; their results start
                    // another turn, so the task runs again.
                    match self
                        .run_background(sessions, &session, &task, &state)
                        .await?
                    {
                        Background::None => return Ok((task, outcome)),
                        Background::Delivered => continue,
                        Background::Waiting(stopped, outcome) => return Ok((stopped, outcome)),
                    }
                }
                let waiting = self.unfinished_children(&state).await?;
                if waiting.is_empty() {
                    // Parked on a person: the whole tree waits for the answer.
                    return Ok((task, outcome));
                }
                let ran: Vec<Result<(TaskId, RunOutcome), RunError>> =
                    futures::stream::iter(waiting)
                        .map(|c| self.subtree(sessions, c, true))
                        .buffered(self.children_at_once)
                        .collect()
                        .await;
                for result in ran {
                    let (stopped, outcome) = result?;
                    if matches!(outcome, RunOutcome::Parked { .. }) {
                        // A descendant waits for a person: so does the tree.
                        return Ok((stopped, outcome));
                    }
                }
            }
        }
        .boxed()
    }

    /// Runs `task`'s background children that have not delivered (`state`: the task as its
    /// run left it; creating any a crash left uncreated), then delivers every finished one's
    /// result to it.
    pub(super) async fn run_background(
        &self,
        sessions: &dyn Sessions,
        session: &Session,
        task: &TaskId,
        state: &TaskState,
    ) -> Result<Background, RunError> {
        use futures::StreamExt;
        if state.core.background.is_empty() {
            return Ok(Background::None);
        }
        let unfinished = self.background_unfinished(task, state).await?;
        let ran: Vec<Result<(TaskId, RunOutcome), RunError>> = futures::stream::iter(unfinished)
            .map(|c| self.subtree(sessions, c, true))
            .buffered(self.children_at_once)
            .collect()
            .await;
        for result in ran {
            let (stopped, outcome) = result?;
            if matches!(outcome, RunOutcome::Parked { .. }) {
                return Ok(Background::Waiting(stopped, outcome));
            }
        }
        Ok(if self.deliver_background(session, task, state).await? {
            Background::Delivered
        } else {
            Background::None
        })
    }

    /// Creates `task`'s background children that a crash left uncreated (`state`: the task as
    /// its run left it) and returns those that have not finished.
    pub(super) async fn background_unfinished(
        &self,
        task: &TaskId,
        state: &TaskState,
    ) -> Result<Vec<TaskId>, RunError> {
        let mut unfinished = Vec::new();
        for order in &state.core.background {
            create_child(self, task, state.core.depth, order).await?;
            let child = TaskId::new(order.child.clone())?;
            if child_result(self, &child, order).await?.is_none() {
                unfinished.push(child);
            }
        }
        Ok(unfinished)
    }

    /// Delivers the result of every finished background child of `task` to it; `true` when
    /// something was delivered (the task has a turn to take).
    pub(super) async fn deliver_background(
        &self,
        session: &Session,
        task: &TaskId,
        state: &TaskState,
    ) -> Result<bool, RunError> {
        let delivered = self.background_reports(state).await?;
        if delivered.is_empty() {
            return Ok(false);
        }
        let mut claim = self.claim(session, task).await?;
        claim.commit(delivered).await?;
        claim.release().await?;
        Ok(true)
    }

    /// The reports of the finished background children of the task in `state`, as the
    /// records that deliver them.
    pub(super) async fn background_reports(
        &self,
        state: &TaskState,
    ) -> Result<Vec<crate::store::Record>, RunError> {
        let mut delivered = Vec::new();
        for order in &state.core.background {
            let child = TaskId::new(order.child.clone())?;
            if let Some(result) = child_result(self, &child, order).await? {
                let message = if result.ok {
                    format!(
                        "Background subagent `{}` (task {}) finished. Its report:\n\n{}",
                        result.agent, result.task, result.text
                    )
                } else {
                    format!(
                        "Background subagent `{}` (task {}) did not finish: {}",
                        result.agent, result.task, result.text
                    )
                };
                delivered.push(
                    CoreRecord::BackgroundDelivered { result }
                        .to_record()
                        .with_message(message),
                );
            }
        }
        Ok(delivered)
    }

    /// A child that cannot run here fails alone (recorded, so its parent wakes with why); the
    /// root's own failure is the caller's error.
    pub(super) async fn child_cannot_run(
        &self,
        task: TaskId,
        child: bool,
        err: RunError,
    ) -> Result<(TaskId, RunOutcome), RunError> {
        if !child {
            return Err(err);
        }
        let reason = err.to_string();
        let lease = self
            .log
            .claim(&task, &self.worker, self.lease_ttl_ms)
            .await?;
        let failed = CoreRecord::TaskFailed {
            reason: reason.clone(),
        };
        self.log.append(&lease, &[failed.to_record()]).await?;
        self.log.release(&lease).await?;
        Ok((task, RunOutcome::TaskFailed { reason }))
    }

    /// The agent a task runs, from its first record.
    pub(super) async fn agent_of(&self, task: &TaskId) -> Result<String, RunError> {
        let first = match self.log.read(task, 0).await?.into_iter().next() {
            Some(event) => Some(hydrate(event, self.content.as_ref()).await?),
            None => None,
        };
        let started = first
            .and_then(|e| CoreRecord::from_record(&e.record))
            .and_then(Result::ok);
        match started {
            Some(CoreRecord::TaskStarted { agent, .. }) => Ok(agent),
            _ => Err(RunError::UnknownAgent {
                task: task.clone(),
                agent: "(none recorded)".to_owned(),
            }),
        }
    }

    /// The children a parked call of the task in `state` still waits for.
    pub(super) async fn unfinished_children(
        &self,
        state: &TaskState,
    ) -> Result<Vec<TaskId>, RunError> {
        let mut waiting = Vec::new();
        for parked in state.core.parked.values().filter(|p| p.wake.is_none()) {
            for order in &parked.children {
                let child = TaskId::new(order.child.clone())?;
                if child_result(self, &child, order).await?.is_none() {
                    waiting.push(child);
                }
            }
        }
        Ok(waiting)
    }
}

impl Claim<'_> {
    /// The spawner a tool's context carries: the roster, the spawn checkpoint and `inherit`.
    pub(super) fn spawner(&self, call_id: &str) -> Arc<dyn Spawner> {
        // A call that spawns again when it resumes numbers its new children after the old ones.
        let earlier = self
            .state
            .core
            .parked
            .get(call_id)
            .map_or(0, |p| p.children.len() + p.earlier_children);
        Arc::new(ClaimSpawner {
            earlier,
            task: self.task.clone(),
            agent: self.session.spec.name.clone(),
            roster: self.session.spec.spawnable.clone(),
            depth: self.state.core.depth,
            state: Arc::clone(&self.state),
            extensions: self.session.extensions.clone(),
        })
    }

    /// Wakes a call parked on children once all of them finished: recorded, so exactly once.
    pub(super) async fn wake_children(&mut self, call_id: &str) -> Result<bool, RunError> {
        let Some(parked) = self.state.core.parked.get(call_id).cloned() else {
            return Ok(false);
        };
        if parked.children.is_empty() || parked.wake.is_some() {
            return Ok(false);
        }
        let depth = self.state.core.depth;
        // Children are created after the park commits; a crash in between is repaired here.
        for order in &parked.children {
            create_child(self.rt, &self.task, depth, order).await?;
        }
        let mut results = Vec::with_capacity(parked.children.len());
        for order in &parked.children {
            let child = TaskId::new(order.child.clone())?;
            match child_result(self.rt, &child, order).await? {
                Some(result) => results.push(result),
                None => return Ok(false),
            }
        }
        let wake = CoreRecord::ChildrenFinished {
            call_id: call_id.to_owned(),
            results,
        };
        self.commit(vec![wake.to_record()]).await?;
        Ok(true)
    }
}
