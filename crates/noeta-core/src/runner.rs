//! The runner: claim a task, fold it, check its pins, and advance it step by step until the turn ends.
//!
//! One step: turn intake (once per user message) → tools → tool_changes →
//! reminders → context and tail → compose → before_model → provider → record
//! the reply → policy → gate the calls in order → run them (adjacent
//! read-only calls together) → after_tool → record. Everything a phase produces is appended
//! as one batch, so a crash loses a phase whole or not at all; a tool call's
//! started-record commits before the tool runs. A new claim folds the log and
//! carries on from exactly where the last one stopped.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use crate::canonical;
use crate::extension::SpawnRequest;
use crate::extension::{ModelReply, ModelRequest, Purpose, Segment, StepSignal, View};
use crate::fold::Folder;
use crate::fold::{CoreState, Role, TaskState, TurnState, chain_hash};
use crate::hooks::{CallVerdict, FinishCheck, Hooks};
use crate::policy::Decision;
use crate::provider::{Provider, ProviderError};
use crate::records::{
    CallOutcome, CoreRecord, PluginPin, StopReason, ToolCall, hydrate, hydrate_all, spill,
};
use crate::session::Session;
use crate::store::{ContentStore, Event, EventLog, Lease, Record, StoreError, TaskId};

mod lease;

use crate::tool::{
    ChildResult, Inbox, Keeper, Park, ProgressSink, SpawnOrder, Spawner, Tool, ToolContext,
    ToolError, ToolOutput, Wake,
};
use lease::HeldLease;

/// At most this many adjacent read-only calls run at once.
pub const MAX_PARALLEL_READS: usize = 10;

/// The inline limit of a tool result when the tool sets none, in characters.
pub const DEFAULT_MAX_RESULT_CHARS: usize = 30_000;

/// At most this many rewrites of one call before it is denied.
pub const MAX_REWRITES: u32 = 3;

/// A run fails its turn after this many steps without the turn ending.
pub const MAX_STEPS_PER_TURN: u32 = 10_000;

/// Two turns failing in a row fail the task.
pub const MAX_FAILED_TURNS: u32 = 2;

/// How a run stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOutcome {
    /// The turn ended; the task waits for the next user message.
    Ended {
        /// Why the turn ended.
        reason: String,
    },
    /// The turn waits for a person's answer about a call.
    Parked {
        /// The call.
        call_id: String,
        /// What is asked.
        question: String,
    },
    /// The turn failed; a new user message starts the next one.
    TurnFailed {
        /// Why.
        reason: String,
    },
    /// The task failed for good.
    TaskFailed {
        /// Why.
        reason: String,
    },
    /// No user message is waiting.
    Idle,
}

/// Why a run could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The log cannot be folded with this plugin set.
    #[error(transparent)]
    Fold(#[from] crate::fold::FoldError),
    /// A plugin the task was pinned with is not in this host.
    #[error(
        "task `{task}` ran with plugin `{}` ({} {}), which this host does not have — it will not run here",
        pin.name, pin.source, pin.version
    )]
    PluginMissing {
        /// The task.
        task: TaskId,
        /// The missing plugin's pin.
        pin: PluginPin,
    },
    /// The claim's lease is gone: another worker claimed the task, or the lease lapsed before
    /// a renewal reached the store. Nothing more was written.
    #[error("{}", lease::describe_loss(task, holder.as_deref()))]
    LeaseLost {
        /// The task.
        task: TaskId,
        /// The worker that claimed the task since, when one did.
        holder: Option<String>,
    },
    /// A message cannot be added now.
    #[error("task `{task}` cannot take a new message: {reason}")]
    Busy {
        /// The task.
        task: TaskId,
        /// Why.
        reason: String,
    },
    /// A slash command failed or does not exist.
    #[error("/{name}: {message}")]
    Command {
        /// The command.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// A task runs an agent this host has no session for.
    #[error("task `{task}` runs agent `{agent}`, which this host does not define")]
    UnknownAgent {
        /// The task.
        task: TaskId,
        /// The agent.
        agent: String,
    },
    /// `answer` named a call the task is not waiting on.
    #[error("task `{task}` is not waiting for an answer about call `{call_id}`")]
    NotParked {
        /// The task.
        task: TaskId,
        /// The call named.
        call_id: String,
    },
}

/// The sessions a host can run, by agent name (child tasks name their agent).
pub trait Sessions: Send + Sync {
    /// The session for `agent`.
    fn session(&self, agent: &str) -> Option<Arc<Session>>;
}

/// Creates a child task from its spawn order; an existing child is left as it is.
async fn create_child(
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
    };
    let goal = CoreRecord::UserMessage {
        text: order.goal.clone(),
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
async fn child_result(
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
            .map(|m| m.text.clone())
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

/// The runner's side of `ctx.keep`: renews the claim's lease now (the heartbeat renews it on
/// its own as well).
struct ClaimKeeper(Arc<HeldLease>);

#[async_trait::async_trait]
impl Keeper for ClaimKeeper {
    async fn keep(&self) -> Result<(), String> {
        self.0.renew().await.map_err(|err| err.to_string())
    }
}

/// The runner's side of `ctx.spawn`: the roster, the spawn checkpoint and `inherit`.
struct ClaimSpawner {
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

/// A run that ends this many events after the task's last snapshot writes a new one: often
/// enough that a load folds a short tail, rarely enough that short turns do not pay for it.
pub const SNAPSHOT_EVERY: u64 = 128;

/// Child tasks run at once by default: the machine's parallelism, at most 8.
fn default_children_at_once() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// Runs tasks against one store and one provider.
pub struct Runtime {
    log: Arc<dyn EventLog>,
    content: Arc<dyn ContentStore>,
    provider: Arc<dyn Provider>,
    worker: String,
    lease_ttl_ms: u64,
    progress: Option<ProgressSink>,
    text: Option<Arc<crate::provider::TextSink<'static>>>,
    snapshot_every: u64,
    pool: bool,
    exec: Option<Arc<dyn crate::exec::ExecEnv>>,
    inbox: Inbox,
    /// How many child tasks `run_tree` runs at once.
    children_at_once: usize,
    /// Tasks this runtime is running now.
    driving: Mutex<std::collections::BTreeSet<TaskId>>,
}

/// Marks a task as being driven for as long as it lives.
struct Driving<'a> {
    set: &'a Mutex<std::collections::BTreeSet<TaskId>>,
    task: TaskId,
}

impl<'a> Driving<'a> {
    fn start(set: &'a Mutex<std::collections::BTreeSet<TaskId>>, task: &TaskId) -> Self {
        set.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(task.clone());
        Self {
            set,
            task: task.clone(),
        }
    }
}

impl Drop for Driving<'_> {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.task);
    }
}

/// Claims in a row that may refuse a task (a failing fold, a missing plugin) before it fails.
pub const MAX_REFUSED_CLAIMS: usize = 3;

/// How many of the log's last records are `core` records of `kind`, counting back from the end.
fn trailing(events: &[Event], kind: &str) -> usize {
    events
        .iter()
        .rev()
        .take_while(|e| e.record.extension == crate::records::CORE && e.record.kind == kind)
        .count()
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("worker", &self.worker)
            .field("provider", &self.provider.name())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime over a store and a provider, as worker `local` with a 60-second lease.
    pub fn new(
        log: Arc<dyn EventLog>,
        content: Arc<dyn ContentStore>,
        provider: Arc<dyn Provider>,
    ) -> Self {
        Self {
            log,
            content,
            provider,
            worker: "local".to_owned(),
            lease_ttl_ms: 60_000,
            progress: None,
            text: None,
            snapshot_every: SNAPSHOT_EVERY,
            pool: false,
            exec: None,
            inbox: Inbox::default(),
            children_at_once: default_children_at_once(),
            driving: Mutex::new(std::collections::BTreeSet::new()),
        }
    }

    /// Runs at most `n` (at least one) child tasks at once in [`run_tree`](Self::run_tree);
    /// the default is the smaller of 8 and the machine's parallelism.
    pub fn with_children_at_once(mut self, n: usize) -> Self {
        self.children_at_once = n.max(1);
        self
    }

    /// Names this worker (leases carry it).
    pub fn with_worker(mut self, worker: impl Into<String>) -> Self {
        self.worker = worker.into();
        self
    }

    /// Sets the lease length.
    pub fn with_lease_ttl(mut self, ttl_ms: u64) -> Self {
        self.lease_ttl_ms = ttl_ms;
        self
    }

    /// Runs as a pool worker: a task pinned with a plugin this worker lacks is refused by
    /// letting the lease lapse (recorded), and fails with `plugin_missing` after
    /// [`MAX_REFUSED_CLAIMS`] such claims in a row; interactively the run stops at once instead.
    pub fn as_pool_worker(mut self) -> Self {
        self.pool = true;
        self
    }

    /// Gives tools an execution environment.
    pub fn with_exec_env(mut self, exec: Arc<dyn crate::exec::ExecEnv>) -> Self {
        self.exec = Some(exec);
        self
    }

    /// Commits what in-process work posted to an idle task (a running task's runner commits
    /// posts itself at every step). Returns how many records were delivered.
    pub async fn deliver(&self, session: &Session, task: &TaskId) -> Result<usize, RunError> {
        // A task this runtime is driving commits its posts itself, at its next step; claiming it
        // here would take the lease from under that run.
        if self
            .driving
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(task)
        {
            return Ok(0);
        }
        let posted = self.inbox.take(task.as_str());
        if posted.is_empty() {
            return Ok(0);
        }
        let count = posted.len();
        let repost = |posted: Vec<Record>| {
            // Nothing is lost: the posts wait for the next delivery.
            for record in posted {
                self.inbox.post(task.as_str(), record);
            }
        };
        let mut claim = match self.claim(session, task).await {
            Ok(claim) => claim,
            Err(err) => {
                repost(posted);
                return Err(err);
            }
        };
        if let Err(err) = claim.commit(posted.clone()).await {
            repost(posted);
            return Err(err);
        }
        claim.release().await?;
        Ok(count)
    }

    /// Writes a snapshot when a run ends at least `events` events after the last one (1: after
    /// every run).
    pub fn with_snapshot_every(mut self, events: u64) -> Self {
        self.snapshot_every = events.max(1);
        self
    }

    /// Receives the text of each step's reply as it streams in (not recorded; the reply is,
    /// once whole).
    pub fn with_text_sink(mut self, sink: Arc<crate::provider::TextSink<'static>>) -> Self {
        self.text = Some(sink);
        self
    }

    /// Receives tools' live output.
    pub fn with_progress(mut self, sink: ProgressSink) -> Self {
        self.progress = Some(sink);
        self
    }

    /// The event log.
    pub fn log(&self) -> &Arc<dyn EventLog> {
        &self.log
    }

    /// The content store.
    pub fn content(&self) -> &Arc<dyn ContentStore> {
        &self.content
    }

    /// Creates a task for `session`'s agent with a first user message.
    pub async fn create(
        &self,
        session: &Session,
        task: &TaskId,
        goal: &str,
    ) -> Result<(), RunError> {
        self.log.create_task(task, None).await?;
        let mut claim = self.claim(session, task).await?;
        let started = CoreRecord::TaskStarted {
            agent: session.spec.name.clone(),
            parent: None,
            depth: 0,
            inherited: BTreeMap::new(),
        };
        let pins = CoreRecord::PluginsPinned {
            identity: session.spec.identity_hash(),
            pins: session.pins.clone(),
        };
        let message = CoreRecord::UserMessage {
            text: goal.to_owned(),
        };
        claim
            .commit(vec![
                started.to_record(),
                pins.to_record(),
                message.to_record(),
            ])
            .await?;
        claim.release().await
    }

    /// Adds a user message; the next run starts a turn for it.
    pub async fn send(&self, session: &Session, task: &TaskId, text: &str) -> Result<(), RunError> {
        let mut claim = self.claim(session, task).await?;
        let busy = match &claim.state.core.turn {
            TurnState::Running => {
                Some("its turn is still running — run it to the end first".to_owned())
            }
            TurnState::Parked { call_id, question } => {
                Some(match claim.state.core.parked.get(call_id) {
                    Some(parked) if parked.question.is_none() => format!(
                        "call `{call_id}` waits for {} child task(s) to finish — run them first",
                        parked.children.len()
                    ),
                    _ => format!(
                        "it waits for an answer about call `{call_id}` ({question}) — answer that first"
                    ),
                })
            }
            _ => None,
        };
        if let Some(reason) = busy {
            claim.release().await?;
            return Err(RunError::Busy {
                task: task.clone(),
                reason,
            });
        }
        let message = CoreRecord::UserMessage {
            text: text.to_owned(),
        };
        claim.commit(vec![message.to_record()]).await?;
        claim.release().await
    }

    /// Answers a parked call: `allow` lets it run, otherwise it is denied.
    pub async fn answer(
        &self,
        session: &Session,
        task: &TaskId,
        call_id: &str,
        allow: bool,
    ) -> Result<(), RunError> {
        // Gate asks only: a call its tool parked is answered with `reply`.
        let waiting = |core: &CoreState| {
            matches!(&core.turn, TurnState::Parked { call_id: c, .. } if c == call_id)
                && !core.parked.contains_key(call_id)
        };
        let answer = CoreRecord::AskAnswered {
            call_id: call_id.to_owned(),
            allow,
        };
        self.answer_waiting(session, task, call_id, waiting, answer)
            .await
    }

    /// Answers the question a tool parked its call on; the tool's `resume` gets the answer.
    pub async fn reply(
        &self,
        session: &Session,
        task: &TaskId,
        call_id: &str,
        answer: Value,
    ) -> Result<(), RunError> {
        let waiting = |core: &CoreState| {
            core.parked
                .get(call_id)
                .is_some_and(|p| p.question.is_some() && p.wake.is_none())
        };
        let answered = CoreRecord::CallAnswered {
            call_id: call_id.to_owned(),
            answer,
        };
        self.answer_waiting(session, task, call_id, waiting, answered)
            .await
    }

    /// Records `answer` when `waiting` holds for the task's state, else refuses (`NotParked`).
    async fn answer_waiting(
        &self,
        session: &Session,
        task: &TaskId,
        call_id: &str,
        waiting: impl Fn(&CoreState) -> bool,
        answer: CoreRecord,
    ) -> Result<(), RunError> {
        let mut claim = self.claim(session, task).await?;
        if !waiting(&claim.state.core) {
            claim.release().await?;
            return Err(RunError::NotParked {
                task: task.clone(),
                call_id: call_id.to_owned(),
            });
        }
        claim.commit(vec![answer.to_record()]).await?;
        claim.release().await
    }

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
    fn subtree<'a>(
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
    async fn run_background(
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
        let orders = state.core.background.clone();
        let mut unfinished = Vec::new();
        for order in &orders {
            create_child(self, task, state.core.depth, order).await?;
            let child = TaskId::new(order.child.clone())?;
            if child_result(self, &child, order).await?.is_none() {
                unfinished.push(child);
            }
        }
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
        let mut delivered = Vec::new();
        for order in &orders {
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
        if delivered.is_empty() {
            return Ok(Background::None);
        }
        let mut claim = self.claim(session, task).await?;
        claim.commit(delivered).await?;
        claim.release().await?;
        Ok(Background::Delivered)
    }

    /// A child that cannot run here fails alone (recorded, so its parent wakes with why); the
    /// root's own failure is the caller's error.
    async fn child_cannot_run(
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
    async fn agent_of(&self, task: &TaskId) -> Result<String, RunError> {
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
    async fn unfinished_children(&self, state: &TaskState) -> Result<Vec<TaskId>, RunError> {
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

    /// Starts task `to` from task `from`'s conversation; each extension's `continue_state`
    /// decides what of its state the new task takes along.
    pub async fn fork(
        &self,
        session: &Session,
        from: &TaskId,
        to: &TaskId,
    ) -> Result<(), RunError> {
        let source = self.load(session, from).await?;
        let states = Hooks(&session.extensions).continue_state(&source);
        self.log.create_task(to, None).await?;
        let mut claim = self.claim(session, to).await?;
        let started = CoreRecord::TaskStarted {
            agent: session.spec.name.clone(),
            parent: None,
            depth: 0,
            inherited: BTreeMap::new(),
        };
        let continued = CoreRecord::Continued {
            from: from.as_str().to_owned(),
            messages: source.core.messages.as_ref().clone(),
            states,
        };
        claim
            .commit(vec![started.to_record(), continued.to_record()])
            .await?;
        claim.release().await
    }

    /// The slash commands the task's extensions offer, with the extension offering each.
    pub async fn commands(
        &self,
        session: &Session,
        task: &TaskId,
    ) -> Result<Vec<(String, crate::extension::CommandSpec)>, RunError> {
        let state = self.load(session, task).await?;
        let view = View::new(
            task,
            &session.spec.name,
            &state,
            &session.spec.spawnable,
            &session.extensions,
        );
        Ok(Hooks(&session.extensions).commands(&view))
    }

    /// Runs `/name args`; the offering extension's error goes to the caller.
    pub async fn run_command(
        &self,
        session: &Session,
        task: &TaskId,
        name: &str,
        args: &str,
    ) -> Result<String, RunError> {
        let offered = self.commands(session, task).await?;
        let Some((owner, _)) = offered.iter().find(|(_, c)| c.name == name) else {
            return Err(RunError::Command {
                name: name.to_owned(),
                message: format!(
                    "no such command (available: {})",
                    offered
                        .iter()
                        .map(|(_, c)| format!("/{}", c.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        let mut claim = self.claim(session, task).await?;
        let held = Arc::clone(&claim.lease);
        let (outcome, staged) = held
            .keep_alive(async {
                let view = claim.view();
                let outcome = Hooks(&session.extensions)
                    .run_command(owner, &view, name, args)
                    .await;
                Ok((outcome, view.take_staged()))
            })
            .await?;
        claim.commit(staged).await?;
        claim.release().await?;
        outcome.map_err(|err| RunError::Command {
            name: name.to_owned(),
            message: err.to_string(),
        })
    }

    /// Folds a task without claiming it (for listings and logs).
    pub async fn load(&self, session: &Session, task: &TaskId) -> Result<TaskState, RunError> {
        let (state, _) = self.fold_task(session, task).await?;
        Ok(state?)
    }

    /// Restores the task's snapshot when it is usable, reads the rest and folds it; the events
    /// read are returned too, and a failing fold is returned, not raised.
    async fn fold_task(
        &self,
        session: &Session,
        task: &TaskId,
    ) -> Result<(Result<TaskState, crate::fold::FoldError>, Vec<Event>), RunError> {
        let snapshot = self.log.snapshot(task).await?;
        let start = session
            .folder
            .restore(snapshot.as_ref())
            .unwrap_or_default();
        let events = self.read_hydrated(task, start.seq).await?;
        let folded = session.folder.fold_onto(start, &events);
        Ok((folded, events))
    }

    async fn read_hydrated(&self, task: &TaskId, after: u64) -> Result<Vec<Event>, RunError> {
        let mut events = self.log.read(task, after).await?;
        hydrate_all(&mut events, self.content.as_ref()).await?;
        Ok(events)
    }

    async fn claim<'s>(
        &'s self,
        session: &'s Session,
        task: &TaskId,
    ) -> Result<Claim<'s>, RunError> {
        let lease = self
            .log
            .claim(task, &self.worker, self.lease_ttl_ms)
            .await?;
        let (folded, events) = self.fold_task(session, task).await?;
        let state = match folded {
            Ok(state) => state,
            Err(err) => return Err(self.fold_refused(task, &lease, err).await),
        };
        Ok(Claim {
            rt: self,
            session,
            task: task.clone(),
            lease: HeldLease::new(Arc::clone(&self.log), lease, self.lease_ttl_ms),
            refusals: trailing(&events, "claim_refused"),
            snapshot_seq: state.seq - events.len() as u64,
            state: Arc::new(state),
            stable: None,
            residents: None,
            rendered: None,
            images: HashMap::new(),
            unwritten: Vec::new(),
        })
    }

    /// A claim whose fold failed: recorded, and the lease left to lapse so a later claim (or
    /// another worker) can try; the third such claim in a row fails the task.
    async fn fold_refused(
        &self,
        task: &TaskId,
        lease: &Lease,
        err: crate::fold::FoldError,
    ) -> RunError {
        let events = match self.log.read(task, 0).await {
            Ok(events) => events,
            Err(store) => return store.into(),
        };
        if trailing(&events, "task_failed") > 0 {
            return err.into();
        }
        let mut batch = vec![
            CoreRecord::FoldFailed {
                reason: err.to_string(),
            }
            .to_record(),
        ];
        if trailing(&events, "fold_failed") + 1 >= MAX_REFUSED_CLAIMS {
            batch.push(
                CoreRecord::TaskFailed {
                    reason: format!(
                        "the log could not be folded on {MAX_REFUSED_CLAIMS} claims in a row: {err}"
                    ),
                }
                .to_record(),
            );
        }
        if let Err(store) = self.log.append(lease, &batch).await {
            return store.into();
        }
        err.into()
    }

    /// Runs the task until its turn ends, parks or fails.
    pub async fn run(&self, session: &Session, task: &TaskId) -> Result<RunOutcome, RunError> {
        self.run_to_stop(session, task)
            .await
            .map(|(outcome, _)| outcome)
    }

    /// [`run`](Self::run), also handing back the task's state as the run left it (so a caller
    /// that looks at it next does not fold the log again).
    async fn run_to_stop(
        &self,
        session: &Session,
        task: &TaskId,
    ) -> Result<(RunOutcome, Arc<TaskState>), RunError> {
        let mut claim = self.claim(session, task).await?;
        let _driving = Driving::start(&self.driving, task);
        let held = Arc::clone(&claim.lease);
        let outcome = held.keep_alive(claim.drive()).await?;
        claim.write_unwritten().await?;
        if claim.state.seq.saturating_sub(claim.snapshot_seq) >= self.snapshot_every {
            claim.snapshot().await;
        }
        let state = Arc::clone(&claim.state);
        claim.release().await?;
        Ok((outcome, state))
    }
}

/// What running a task's background children came to.
enum Background {
    /// It has none waiting.
    None,
    /// Results were delivered: the task has a turn to take.
    Delivered,
    /// A background child (or one of its own) waits for a person.
    Waiting(TaskId, RunOutcome),
}

/// What one run of a tool produced.
struct Ran {
    output: ToolOutput,
    outcome: CallOutcome,
    staged: Vec<Record>,
    spawns: Vec<SpawnOrder>,
}

/// A gate's verdict on one call.
enum Gate {
    Allow(ToolCall),
    Deny(String),
    Ask(ToolCall, Vec<String>),
}

/// One claim of one task: the lease, the folded state, and caches valid for this claim.
struct Claim<'s> {
    rt: &'s Runtime,
    session: &'s Session,
    task: TaskId,
    /// The live lease; shared with the heartbeat and tools' `ctx.keep`.
    lease: Arc<HeldLease>,
    /// Claims refused in a row just before this one (a missing plugin).
    refusals: usize,
    /// The sequence number the task's latest snapshot reaches (0: none).
    snapshot_seq: u64,
    state: Arc<TaskState>,
    /// The stable prefix as last sent (system text, tool schemas, entries) and its hash.
    stable: Option<StableKey>,
    /// The tools last rendered (each with whether it was loaded) and their schemas; the tools
    /// are held so an unchanged offer is recognised by identity.
    rendered: Option<Rendered>,
    /// The residents and their hash.
    residents: Option<(Vec<String>, String)>,
    /// Image bodies loaded for requests, by SHA-256.
    images: HashMap<String, Arc<Vec<u8>>>,
    /// Records folded in under the sequence numbers their append gets, not yet appended (each
    /// as appended, its bodies spilled, and as folded): a reply whose tool calls are allowed
    /// is written with their started-records, one durable write instead of two. The next
    /// commit writes them first; anything slow or outside this process (a person asked, the
    /// turn ending, the claim ending) writes them before it starts.
    unwritten: Vec<(Record, Event)>,
}

/// Rendered tool schemas, shared from request to request.
type Schemas = Arc<Vec<Value>>;

/// A stable prefix as sent (system text, tool schemas, entries) and its hash.
type StableKey = (String, Schemas, Vec<Value>, String);

/// The tools last rendered, each with whether it was loaded, and their schemas.
type Rendered = (Vec<(Arc<dyn Tool>, bool)>, Schemas);

/// The tools a step offers, first offer of a name winning, and those withheld.
type Offer = crate::hooks::ToolOffer;

/// What a phase of a step decided.
enum Flow {
    Continue,
    Stop(RunOutcome),
}

impl Claim<'_> {
    /// The agent's extensions, as the hook dispatcher calls them.
    fn hooks(&self) -> Hooks<'_> {
        Hooks(&self.session.extensions)
    }

    fn view(&self) -> View<'_> {
        View::new(
            &self.task,
            &self.session.spec.name,
            &self.state,
            &self.session.spec.spawnable,
            &self.session.extensions,
        )
        .with_model(&*self.rt.provider)
        .with_exec_env(self.rt.exec.as_ref())
    }

    /// Folds `records` in now and leaves their append to the next commit (see `unwritten`).
    async fn defer(&mut self, records: Vec<Record>) -> Result<(), RunError> {
        for record in records {
            let spilled = spill(record.clone(), self.rt.content.as_ref()).await?;
            let event = Event::new(self.state.seq + 1, record);
            self.session
                .folder
                .apply(Arc::make_mut(&mut self.state), &event)?;
            self.unwritten.push((spilled, event));
        }
        Ok(())
    }

    /// Appends what was deferred, if anything.
    async fn write_unwritten(&mut self) -> Result<(), RunError> {
        self.append(Vec::new()).await
    }

    /// Appends a batch (after anything deferred) under the lease and folds it in; observers
    /// see each event. An empty batch leaves deferred records for the next.
    async fn commit(&mut self, records: Vec<Record>) -> Result<(), RunError> {
        if records.is_empty() {
            return Ok(());
        }
        self.append(records).await
    }

    async fn append(&mut self, records: Vec<Record>) -> Result<(), RunError> {
        let deferred = std::mem::take(&mut self.unwritten);
        if records.is_empty() && deferred.is_empty() {
            return Ok(());
        }
        let mut batch = Vec::with_capacity(deferred.len() + records.len());
        let mut events = Vec::with_capacity(deferred.len() + records.len());
        for (spilled, event) in deferred {
            batch.push(spilled);
            events.push(event);
        }
        let folded = events.len();
        for record in &records {
            batch.push(spill(record.clone(), self.rt.content.as_ref()).await?);
        }
        let lease = self.lease.current();
        let last = self
            .rt
            .log
            .append(&lease, &batch)
            .await
            .map_err(lease::lost)?;
        let first = last + 1 - batch.len() as u64;
        // Deferred records were folded under the numbers the lease guarantees them.
        if let Some(event) = events.first()
            && event.seq != first
        {
            return Err(crate::fold::FoldError::Gap {
                seq: first,
                after: event.seq - 1,
            }
            .into());
        }
        events.extend(
            records
                .into_iter()
                .enumerate()
                .map(|(i, record)| Event::new(first + (folded + i) as u64, record)),
        );
        {
            let state = Arc::make_mut(&mut self.state);
            for event in &events[folded..] {
                self.session.folder.apply(state, event)?;
            }
        }
        self.hooks().on_event(&self.view(), &events);
        Ok(())
    }

    async fn release(self) -> Result<(), RunError> {
        self.rt.log.release(&self.lease.current()).await?;
        Ok(())
    }

    /// Writes a snapshot; a failure only costs the next load some time.
    async fn snapshot(&self) {
        let snapshot = self.session.folder.snapshot(&self.state);
        if let Err(err) = self.rt.log.put_snapshot(&self.task, &snapshot).await {
            tracing::warn!(task = %self.task, "writing a snapshot failed: {err}");
        }
    }

    /// Records the pins on first start, re-records them when they changed, refuses a missing plugin.
    async fn check_pins(&mut self) -> Result<(), RunError> {
        let identity = self.session.spec.identity_hash();
        let core = &self.state.core;
        if core.identity.as_deref() == Some(identity.as_str()) && core.pins == self.session.pins {
            return Ok(());
        }
        if core.identity.is_some() {
            let missing = core
                .pins
                .iter()
                .find(|pin| !self.session.pins.iter().any(|p| p.name == pin.name))
                .cloned();
            if let Some(pin) = missing {
                if self.rt.pool {
                    // Recorded, and the lease left to lapse for a worker that has the plugin.
                    let mut batch = vec![
                        CoreRecord::ClaimRefused {
                            plugin: pin.name.clone(),
                        }
                        .to_record(),
                    ];
                    if self.refusals + 1 >= MAX_REFUSED_CLAIMS {
                        batch.push(
                            CoreRecord::TaskFailed {
                                reason: format!(
                                    "plugin_missing: no worker that claimed it has plugin `{}` ({} {})",
                                    pin.name, pin.source, pin.version
                                ),
                            }
                            .to_record(),
                        );
                    }
                    self.commit(batch).await?;
                }
                return Err(RunError::PluginMissing {
                    task: self.task.clone(),
                    pin,
                });
            }
            tracing::info!(task = %self.task, "the task's plugins or identity changed since it was pinned; re-recording them");
        }
        let pins = CoreRecord::PluginsPinned {
            identity,
            pins: self.session.pins.clone(),
        };
        self.commit(vec![pins.to_record()]).await
    }

    async fn drive(&mut self) -> Result<RunOutcome, RunError> {
        if let Some(reason) = &self.state.core.task_failed {
            return Ok(RunOutcome::TaskFailed {
                reason: reason.clone(),
            });
        }
        self.check_pins().await?;
        let started = {
            let view = self.view();
            let failure = self.hooks().on_start(&view).await;
            (view.take_staged(), failure)
        };
        self.commit(started.0).await?;
        if let Some(reason) = started.1 {
            if self.state.core.turn == TurnState::Running {
                return self.fail_turn(reason).await;
            }
            return Ok(RunOutcome::TurnFailed { reason });
        }
        let mut steps = 0;
        loop {
            match &self.state.core.turn {
                TurnState::Idle => return Ok(RunOutcome::Idle),
                TurnState::Ended { reason } => {
                    return Ok(RunOutcome::Ended {
                        reason: reason.clone(),
                    });
                }
                TurnState::Failed { reason } => {
                    return Ok(RunOutcome::TurnFailed {
                        reason: reason.clone(),
                    });
                }
                TurnState::Parked { call_id, question } => {
                    let (call_id, question) = (call_id.clone(), question.clone());
                    if self.wake_children(&call_id).await? {
                        continue;
                    }
                    return Ok(RunOutcome::Parked { call_id, question });
                }
                TurnState::Running => {}
            }
            // What in-process work posted since the last step is committed before the next.
            let posted = self.rt.inbox.take(self.task.as_str());
            if let Err(err) = self.commit(posted.clone()).await {
                for record in posted {
                    self.rt.inbox.post(self.task.as_str(), record);
                }
                return Err(err);
            }
            steps += 1;
            if steps > MAX_STEPS_PER_TURN {
                return self
                    .fail_turn(format!(
                        "the turn took more than {MAX_STEPS_PER_TURN} steps"
                    ))
                    .await;
            }
            self.lease.renew_when_due().await?;
            if let Flow::Stop(outcome) = self.step().await? {
                return Ok(outcome);
            }
        }
    }

    async fn fail_turn(&mut self, reason: String) -> Result<RunOutcome, RunError> {
        let mut batch = vec![
            CoreRecord::TurnFailed {
                reason: reason.clone(),
            }
            .to_record(),
        ];
        if self.state.core.failed_turns + 1 >= MAX_FAILED_TURNS {
            let task_reason =
                format!("{MAX_FAILED_TURNS} turns failed in a row; the last: {reason}");
            batch.push(
                CoreRecord::TaskFailed {
                    reason: task_reason.clone(),
                }
                .to_record(),
            );
            self.commit(batch).await?;
            return Ok(RunOutcome::TaskFailed {
                reason: task_reason,
            });
        }
        self.commit(batch).await?;
        Ok(RunOutcome::TurnFailed { reason })
    }

    async fn end_turn(&mut self, reason: &str) -> Result<Flow, RunError> {
        self.commit(vec![
            CoreRecord::TurnEnded {
                reason: reason.to_owned(),
            }
            .to_record(),
        ])
        .await?;
        Ok(Flow::Stop(RunOutcome::Ended {
            reason: reason.to_owned(),
        }))
    }

    async fn note(&mut self, reason: &str, message: &str) -> Result<(), RunError> {
        let note = CoreRecord::Note {
            reason: reason.to_owned(),
        };
        self.commit(vec![note.with_message(message)]).await
    }

    /// Turn intake: once per user message, recorded, so a resume never repeats it.
    async fn intake(&mut self) -> Result<Option<String>, RunError> {
        let core = &self.state.core;
        let Some((seq, text)) = core
            .last_user
            .and_then(|i| core.messages.get(i))
            .map(|m| (m.seq, m.text.clone()))
        else {
            return Ok(None);
        };
        if seq <= self.state.core.intake_seq {
            return Ok(None);
        }
        let (mut staged, failure) = {
            let view = self.view();
            let failure = self.hooks().turn_intake(&view, &text).await;
            (view.take_staged(), failure)
        };
        if let Some(reason) = failure {
            return Ok(Some(reason));
        }
        staged.push(CoreRecord::IntakeDone { seq }.to_record());
        self.commit(staged).await?;
        Ok(None)
    }

    /// The calls of the last reply that have no result yet, in reply order.
    fn pending_calls(&self) -> Vec<ToolCall> {
        let messages = &self.state.core.messages;
        let mut answered: Vec<&str> = Vec::new();
        for message in messages.iter().rev() {
            match message.role {
                Role::Tool => answered.extend(message.call_id.as_deref()),
                Role::Assistant => {
                    return message
                        .calls
                        .iter()
                        .filter(|c| !answered.contains(&c.id.as_str()))
                        .cloned()
                        .collect();
                }
                Role::Context => {}
                Role::User => return Vec::new(),
            }
        }
        Vec::new()
    }

    fn offer(&self) -> Result<Offer, String> {
        self.hooks().offer(&self.view())
    }

    async fn step(&mut self) -> Result<Flow, RunError> {
        if let Some(reason) = self.intake().await? {
            return Ok(Flow::Stop(self.fail_turn(reason).await?));
        }
        let offer = match self.offer() {
            Ok(offer) => offer,
            Err(reason) => return Ok(Flow::Stop(self.fail_turn(reason).await?)),
        };
        let pending = self.pending_calls();
        if !pending.is_empty() {
            return self.run_calls(&offer, pending).await;
        }
        // A reply recorded before a crash, whose decision was not: decide again, never re-ask the model.
        if let Some(last) = self.state.core.messages.last()
            && last.role == Role::Assistant
            && last.calls.is_empty()
        {
            let reply = ModelReply {
                text: last.text.clone(),
                calls: Vec::new(),
                stop: self.state.core.last_stop,
                usage: Default::default(),
                reasoning: last.reasoning.clone(),
            };
            return self.after_reply(&offer, reply).await;
        }
        self.model_step(&offer).await
    }

    /// Compose the request and call the model, then hand the reply to the policy.
    async fn model_step(&mut self, offer: &Offer) -> Result<Flow, RunError> {
        let mut overflow_retries = 0;
        let mut stale_retries = 0;
        loop {
            // Reminders are recorded now and so sent with this request.
            let reminders = {
                let view = self.view();
                let signal = self.hooks().reminders(&view).await;
                (view.take_staged(), signal)
            };
            self.commit(reminders.0).await?;
            if let Some(signal) = reminders.1 {
                match self.signal(signal, &mut stale_retries).await? {
                    Some(flow) => return Ok(flow),
                    None => continue,
                }
            }
            let request = match self.compose(offer) {
                Ok(request) => request,
                Err(reason) => return Ok(Flow::Stop(self.fail_turn(reason).await?)),
            };
            let (request, staged) = {
                let view = self.view();
                let request = self.hooks().before_model(&view, request).await;
                (request, view.take_staged())
            };
            self.commit(staged).await?;
            let request = match request {
                Ok(request) => request,
                Err(signal) => match self.signal(signal, &mut stale_retries).await? {
                    Some(flow) => return Ok(flow),
                    None => continue,
                },
            };
            let request = self.attach(request).await?;
            let hashes = self.segment_hashes(&request);
            let answer = match &self.rt.text {
                Some(sink) => {
                    self.rt
                        .provider
                        .complete_streaming(&request, sink.as_ref())
                        .await
                }
                None => self.rt.provider.complete(&request).await,
            };
            let reply = match answer {
                Ok(reply) => reply,
                Err(ProviderError::ContextOverflow { message }) => {
                    overflow_retries += 1;
                    let made = overflow_retries <= 2 && self.make_room(&request).await?;
                    if !made {
                        return Ok(Flow::Stop(
                            self.fail_turn(format!("context_overflow: {message}"))
                                .await?,
                        ));
                    }
                    continue;
                }
                Err(err) => {
                    return Ok(Flow::Stop(
                        self.fail_turn(format!("provider: {err}")).await?,
                    ));
                }
            };
            // The request shares the conversation; drop it so recording the reply never copies it.
            drop(request);
            let composed = CoreRecord::RequestComposed {
                stable: hashes.0,
                residents: hashes.1,
                dynamic: hashes.2,
            };
            let recorded = CoreRecord::AssistantReply {
                text: reply.text.clone(),
                calls: reply.calls.clone(),
                stop: reply.stop.unwrap_or(StopReason::EndTurn),
                usage: reply.usage,
                reasoning: reply.reasoning.clone(),
            };
            // Written with the started-records of the calls it makes, or before anything else.
            self.defer(vec![composed.to_record(), recorded.to_record()])
                .await?;
            return self.after_reply(offer, reply).await;
        }
    }

    /// Loads the bodies of the images the request's messages carry (each once per claim).
    async fn attach(&mut self, mut request: ModelRequest) -> Result<ModelRequest, RunError> {
        for message in request.messages.iter() {
            for reference in &message.attachments {
                if request.attachments.contains_key(&reference.sha256) {
                    continue;
                }
                let data = match self.images.get(&reference.sha256) {
                    Some(data) => Arc::clone(data),
                    None => {
                        let data = Arc::new(self.rt.content.get(reference).await?);
                        self.images
                            .insert(reference.sha256.clone(), Arc::clone(&data));
                        data
                    }
                };
                request.attachments.insert(
                    reference.sha256.clone(),
                    crate::tool::Attachment {
                        media_type: reference.media_type.clone(),
                        data,
                    },
                );
            }
        }
        Ok(request)
    }

    /// Handles a step signal; `None` means compose again.
    async fn signal(
        &mut self,
        signal: StepSignal,
        stale: &mut u32,
    ) -> Result<Option<Flow>, RunError> {
        match signal {
            StepSignal::TurnDone { reason } => Ok(Some(self.end_turn(&reason).await?)),
            StepSignal::RequestStale => {
                *stale += 1;
                if *stale > 3 {
                    return Ok(Some(Flow::Stop(
                        self.fail_turn(
                            "the request went stale more than 3 times in one step".to_owned(),
                        )
                        .await?,
                    )));
                }
                Ok(None)
            }
            StepSignal::TurnFailed { reason } => {
                Ok(Some(Flow::Stop(self.fail_turn(reason).await?)))
            }
            StepSignal::Error(err) => Ok(Some(Flow::Stop(
                self.fail_turn(format!("internal_error: {err}")).await?,
            ))),
        }
    }

    /// Asks each extension to make room after an overflow; true when one did.
    async fn make_room(&mut self, request: &ModelRequest) -> Result<bool, RunError> {
        let (made, staged) = {
            let view = self.view();
            let made = self.hooks().on_context_overflow(&view, request).await;
            (made, view.take_staged())
        };
        self.commit(staged).await?;
        Ok(made)
    }

    /// The offered tools' schemas; the last rendering again when the offer is the same tools.
    fn render_tools(&mut self, offer: &Offer) -> Arc<Vec<Value>> {
        let key: Vec<(Arc<dyn Tool>, bool)> = offer
            .tools
            .iter()
            .map(|t| {
                let loaded = offer.loaded.iter().any(|n| n == t.tool.name());
                (Arc::clone(&t.tool), loaded)
            })
            .collect();
        if let Some((last, tools)) = &self.rendered
            && last.len() == key.len()
            && last
                .iter()
                .zip(&key)
                .all(|(a, b)| Arc::ptr_eq(&a.0, &b.0) && a.1 == b.1)
        {
            return Arc::clone(tools);
        }
        let tools: Arc<Vec<Value>> = Arc::new(
            key.iter()
                .map(|(tool, loaded)| {
                    let description = match (loaded, tool.flags().loaded_description) {
                        (true, Some(text)) => text,
                        _ => tool.description().to_owned(),
                    };
                    json!({
                        "name": tool.name(),
                        "description": description,
                        "input_schema": tool.input_schema(),
                    })
                })
                .collect(),
        );
        self.rendered = Some((key, Arc::clone(&tools)));
        tools
    }

    fn compose(&mut self, offer: &Offer) -> Result<ModelRequest, String> {
        let view = self.view();
        let mut system: Vec<String> = Vec::new();
        // Residents by their kind's place in the layout (no kind: after every kind), then in
        // extension order.
        let kinds = &self.session.kinds;
        let mut placed: Vec<(usize, String)> = Vec::new();
        for (extension, part) in self.hooks().context(&view)? {
            {
                match part.segment {
                    Segment::Stable => system.push(part.text),
                    Segment::Resident => {
                        let rank = match &part.kind {
                            None => kinds.len(),
                            Some(kind) => kinds.iter().position(|k| &k.kind == kind).ok_or_else(|| {
                                let known: Vec<&str> = kinds.iter().map(|k| k.kind.as_str()).collect();
                                format!(
                                    "extension `{}`: context gave a resident of content kind `{kind}`, which agent `{}` does not have (kinds: {})",
                                    extension,
                                    self.session.spec.name,
                                    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                                )
                            })?,
                        };
                        placed.push((rank, part.text));
                    }
                }
            }
        }
        placed.sort_by_key(|(rank, _)| *rank);
        let mut residents: Vec<String> = Vec::with_capacity(placed.len());
        let mut titled = usize::MAX;
        for (rank, text) in placed {
            // A kind's title heads its residents.
            if rank != titled
                && let Some(kind) = kinds.get(rank)
                && !kind.title.is_empty()
            {
                residents.push(kind.title.clone());
                titled = rank;
            }
            residents.push(text);
        }
        let tail = self.hooks().tail(&view);
        let tools = self.render_tools(offer);
        Ok(ModelRequest {
            purpose: Purpose::Step,
            agent: self.session.spec.name.clone(),
            step: self
                .state
                .core
                .messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .count() as u64,
            system: system.join("\n\n"),
            tools,
            entries: offer.entries.clone(),
            residents,
            messages: Arc::clone(&self.state.core.messages),
            tail,
            attachments: BTreeMap::new(),
        })
    }

    /// The hash of each segment of the request as sent (after `before_model`); the stable
    /// prefix and residents are re-hashed only when they differ from the previous request's.
    fn segment_hashes(&mut self, request: &ModelRequest) -> (String, String, String) {
        let stable = match &self.stable {
            Some((system, tools, entries, hash))
                if *system == request.system
                    && (Arc::ptr_eq(tools, &request.tools) || *tools == request.tools)
                    && *entries == request.entries =>
            {
                hash.clone()
            }
            _ => {
                let body = json!({ "system": request.system, "tools": request.tools, "entries": request.entries });
                let hash = canonical::sha256_hex(&canonical::to_bytes(&body));
                self.stable = Some((
                    request.system.clone(),
                    Arc::clone(&request.tools),
                    request.entries.clone(),
                    hash.clone(),
                ));
                hash
            }
        };
        let residents = match &self.residents {
            Some((texts, hash)) if *texts == request.residents => hash.clone(),
            _ => {
                let hash = canonical::sha256_hex(&canonical::to_bytes(&json!(request.residents)));
                self.residents = Some((request.residents.clone(), hash.clone()));
                hash
            }
        };
        let tail = canonical::Digest::blake3(&[&canonical::to_bytes(&json!(request.tail))]);
        // A `before_model` that changed the conversation is hashed as sent.
        let chain = if Arc::ptr_eq(&request.messages, &self.state.core.messages) {
            self.state.core.chain
        } else {
            crate::fold::chain_of(&request.messages)
        };
        let dynamic = chain_hash(&chain, &tail).to_hex();
        (stable, residents, dynamic)
    }

    async fn after_reply(&mut self, offer: &Offer, reply: ModelReply) -> Result<Flow, RunError> {
        if reply.calls.is_empty() {
            self.write_unwritten().await?;
        }
        if reply.text.trim().is_empty() && reply.calls.is_empty() {
            let nudge = self.hooks().on_empty_reply(&self.view(), &reply).await;
            return match nudge {
                Some(message) => {
                    self.note("empty_reply", &message).await?;
                    Ok(Flow::Continue)
                }
                None => self.end_turn("empty_reply").await,
            };
        }
        let decision = crate::hooks::decide(self.session.policy.as_ref(), &self.view(), &reply);
        let decision = match decision {
            Ok(decision) => decision,
            Err(reason) => return Ok(Flow::Stop(self.fail_turn(reason).await?)),
        };
        if !matches!(decision, Decision::RunTools) {
            self.write_unwritten().await?;
        }
        match decision {
            Decision::RunTools => self.run_calls(offer, reply.calls).await,
            Decision::Continue { message } => {
                self.note("policy", &message).await?;
                Ok(Flow::Continue)
            }
            Decision::Finish { reason } => self.finish(&reason).await,
        }
    }

    /// Ends the turn unless an extension refuses, with a message the model sees.
    async fn finish(&mut self, reason: &str) -> Result<Flow, RunError> {
        let (check, staged) = {
            let view = self.view();
            let check = self.hooks().before_finish(&view).await;
            (check, view.take_staged())
        };
        self.commit(staged).await?;
        match check {
            FinishCheck::Failed(reason) => Ok(Flow::Stop(self.fail_turn(reason).await?)),
            FinishCheck::Refused(message) => {
                self.note("finish_refused", &message).await?;
                Ok(Flow::Continue)
            }
            FinishCheck::Go => self.end_turn(reason).await,
        }
    }

    /// Every extension is asked; any deny wins, else the first rewrite (re-gated), else ask.
    async fn gate(&self, view: &View<'_>, offer: &Offer, call: ToolCall) -> Gate {
        let mut call = call;
        let mut rewrites = 0;
        loop {
            let Some(tool) = offer.find(&call.name) else {
                return Gate::Deny(missing_tool(offer, &call.name));
            };
            if let Err(reason) = check_input(tool.as_ref(), &call.input) {
                return Gate::Deny(reason);
            }
            match self.hooks().before_tool(view, &call).await {
                CallVerdict::Deny(reason) => return Gate::Deny(reason),
                CallVerdict::Rewrite(input) => {
                    rewrites += 1;
                    if rewrites > MAX_REWRITES {
                        return Gate::Deny(format!(
                            "`{}` was rewritten more than {MAX_REWRITES} times; denied",
                            call.name
                        ));
                    }
                    call.input = input;
                }
                CallVerdict::Ask(asks) => return Gate::Ask(call, asks),
                CallVerdict::Allow => return Gate::Allow(call),
            }
        }
    }

    /// Gates calls in order and runs them; adjacent read-only calls run together.
    async fn run_calls(&mut self, offer: &Offer, calls: Vec<ToolCall>) -> Result<Flow, RunError> {
        let flag = |call: &ToolCall, pick: fn(&crate::tool::ToolFlags) -> bool| {
            offer.find(&call.name).is_some_and(|t| pick(&t.flags()))
        };
        // Calls to run-last tools go after the others, each group in reply order.
        let mut calls = calls;
        calls.sort_by_key(|c| flag(c, |f| f.run_last));
        let silent: Vec<String> = calls
            .iter()
            .filter(|c| flag(c, |f| f.silent_reply_after))
            .map(|c| c.id.clone())
            .collect();
        let mut batch: Vec<(ToolCall, Arc<dyn Tool>)> = Vec::new();
        for call in calls {
            // The calls after one that parked are gated only once it is answered.
            if matches!(self.state.core.turn, TurnState::Parked { .. }) {
                return Ok(Flow::Stop(self.parked_outcome()));
            }
            if self.state.core.open_calls.contains_key(&call.id) {
                self.flush(&mut batch).await?;
                match self.state.core.parked.get(&call.id).cloned() {
                    Some(parked) if !parked.resuming => match parked.wake {
                        Some(wake) => self.resume(offer, &call, wake).await?,
                        // Another call of this reply parked too: wake it if its children are
                        // done, else wait on it.
                        None => {
                            if !self.wake_children(&call.id).await? {
                                return Ok(Flow::Stop(RunOutcome::Parked {
                                    call_id: call.id.clone(),
                                    question: parked.question.clone().unwrap_or_else(|| {
                                        format!(
                                            "waiting for {} child task(s)",
                                            parked.children.len()
                                        )
                                    }),
                                }));
                            }
                            let woken = self
                                .state
                                .core
                                .parked
                                .get(&call.id)
                                .and_then(|p| p.wake.clone());
                            if let Some(wake) = woken {
                                self.resume(offer, &call, wake).await?;
                            }
                        }
                    },
                    _ => self.recover(offer, &call).await?,
                }
                if matches!(self.state.core.turn, TurnState::Parked { .. }) {
                    return Ok(Flow::Stop(self.parked_outcome()));
                }
                continue;
            }
            // Records hooks stage while gating commit with the gate's phase.
            let (gated, staged) = {
                let view = self.view().with_tools(&offer.tools);
                let gated = self.gate(&view, offer, call.clone()).await;
                (gated, view.take_staged())
            };
            let (gated, staged) = match gated {
                Gate::Ask(asked, asks) => match self.state.core.answers.get(&call.id).copied() {
                    Some(true) => (Gate::Allow(asked), staged),
                    Some(false) => (Gate::Deny("the user declined this call".to_owned()), staged),
                    None => {
                        // Asking may take a person's time: everything so far is written first.
                        self.commit(staged).await?;
                        self.write_unwritten().await?;
                        let view = self.view().with_tools(&offer.tools);
                        let gated = match self.hooks().resolve_ask(&view, &asked, &asks).await {
                            Ok(Some(true)) => Gate::Allow(asked),
                            Ok(Some(false)) => {
                                Gate::Deny("declined on the user's behalf".to_owned())
                            }
                            Ok(None) => Gate::Ask(asked, asks),
                            Err(reason) => Gate::Deny(reason),
                        };
                        (gated, view.take_staged())
                    }
                },
                other => (other, staged),
            };
            self.commit(staged).await?;
            match gated {
                Gate::Deny(reason) => {
                    self.flush(&mut batch).await?;
                    self.finish_call(
                        &call,
                        ToolOutput::error(reason),
                        CallOutcome::Denied,
                        Vec::new(),
                        None,
                    )
                    .await?;
                }
                Gate::Ask(_, asks) => {
                    let question = asks.join("; ");
                    self.flush(&mut batch).await?;
                    let parked = CoreRecord::CallParked {
                        call_id: call.id.clone(),
                        question: question.clone(),
                    };
                    self.commit(vec![parked.to_record()]).await?;
                    return Ok(Flow::Stop(RunOutcome::Parked {
                        call_id: call.id,
                        question,
                    }));
                }
                Gate::Allow(allowed) => {
                    let Some(tool) = offer.find(&allowed.name).cloned() else {
                        continue;
                    };
                    if tool.flags().read_only {
                        batch.push((allowed, tool));
                        if batch.len() == MAX_PARALLEL_READS {
                            self.flush(&mut batch).await?;
                        }
                    } else {
                        self.flush(&mut batch).await?;
                        let mut single = vec![(allowed, tool)];
                        self.flush(&mut single).await?;
                    }
                }
            }
        }
        self.flush(&mut batch).await?;
        if matches!(self.state.core.turn, TurnState::Parked { .. }) {
            return Ok(Flow::Stop(self.parked_outcome()));
        }
        // A successful call of a silent-reply tool ends the turn: its result is the last word.
        let succeeded = |id: &String| {
            self.state
                .core
                .messages
                .iter()
                .rev()
                .take_while(|m| m.role != Role::Assistant)
                .any(|m| m.call_id.as_ref() == Some(id) && !m.is_error)
        };
        if silent.iter().any(succeeded) {
            return self.finish("silent_reply_after").await;
        }
        Ok(Flow::Continue)
    }

    /// The outcome for a parked turn.
    fn parked_outcome(&self) -> RunOutcome {
        match &self.state.core.turn {
            TurnState::Parked { call_id, question } => RunOutcome::Parked {
                call_id: call_id.clone(),
                question: question.clone(),
            },
            _ => RunOutcome::Idle,
        }
    }

    /// The call with the input it started with (after any rewrite), as its `call_started`
    /// record holds it.
    fn as_started(&self, call: &ToolCall) -> ToolCall {
        let input = self
            .state
            .core
            .open_calls
            .get(&call.id)
            .map_or_else(|| call.input.clone(), |open| open.input.clone());
        ToolCall {
            input,
            ..call.clone()
        }
    }

    /// Resumes a woken call, exactly once: the resume is recorded before it runs.
    async fn resume(&mut self, offer: &Offer, call: &ToolCall, wake: Wake) -> Result<(), RunError> {
        let call = self.as_started(call);
        let Some(tool) = offer.find(&call.name).cloned() else {
            let output = ToolOutput::error(format!(
                "{}: the tool is no longer offered, so the parked call cannot resume",
                call.name
            ));
            return self
                .finish_call(&call, output, CallOutcome::Error, Vec::new(), None)
                .await;
        };
        let started = CoreRecord::ResumeStarted {
            call_id: call.id.clone(),
        };
        self.commit(vec![started.to_record()]).await?;
        let ran = self.invoke(&call, &tool, Some(wake)).await;
        self.settle(&call, &tool, ran).await
    }

    /// Commits the started-records of a batch, runs it, and records results in call order.
    async fn flush(&mut self, batch: &mut Vec<(ToolCall, Arc<dyn Tool>)>) -> Result<(), RunError> {
        if batch.is_empty() {
            return Ok(());
        }
        let calls = std::mem::take(batch);
        let started = calls
            .iter()
            .map(|(call, _)| {
                CoreRecord::CallStarted {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    input: call.input.clone(),
                }
                .to_record()
            })
            .collect();
        self.commit(started).await?;
        let runs = calls
            .iter()
            .map(|(call, tool)| self.invoke(call, tool, None));
        let results = futures::future::join_all(runs).await;
        for ((call, tool), ran) in calls.iter().zip(results) {
            self.settle(call, tool, ran).await?;
        }
        Ok(())
    }

    /// The spawner a tool's context carries: the roster, the spawn checkpoint and `inherit`.
    fn spawner(&self, call_id: &str) -> Arc<dyn Spawner> {
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

    /// Runs one tool call (or resumes a parked one); a failure or panic becomes an error
    /// result and drops the call's staged records and children.
    async fn invoke(&self, call: &ToolCall, tool: &Arc<dyn Tool>, wake: Option<Wake>) -> Ran {
        let ctx = self.tool_context(call);
        let running = async {
            match wake {
                Some(wake) => tool.resume(call.input.clone(), wake, &ctx).await,
                None => tool.run(call.input.clone(), &ctx).await,
            }
        };
        self.finish_invoke(call, &ctx, running).await
    }

    /// The context a tool runs with: state, spawner, model, inbox, lease keeper, exec env.
    fn tool_context(&self, call: &ToolCall) -> ToolContext {
        let ctx = ToolContext::with_state(
            self.task.as_str(),
            call.id.as_str(),
            Arc::clone(&self.state),
            self.rt.progress.clone(),
        )
        .with_spawner(self.spawner(&call.id))
        .with_model(Arc::clone(&self.rt.provider))
        .with_content(Arc::clone(&self.rt.content))
        .with_inbox(self.rt.inbox.clone())
        .with_keeper(Arc::new(ClaimKeeper(Arc::clone(&self.lease))));
        match &self.rt.exec {
            Some(exec) => ctx.with_exec(Arc::clone(exec)),
            None => ctx,
        }
    }

    async fn finish_invoke(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
        running: impl std::future::Future<Output = Result<ToolOutput, ToolError>>,
    ) -> Ran {
        let failed = |output: ToolOutput| Ran {
            output,
            outcome: CallOutcome::Error,
            staged: Vec::new(),
            spawns: Vec::new(),
        };
        match crate::hooks::run_tool(&call.name, running).await {
            Ok(output) => {
                let outcome = if output.is_error {
                    CallOutcome::Error
                } else {
                    CallOutcome::Ok
                };
                Ran {
                    output,
                    outcome,
                    staged: ctx.take_staged(),
                    spawns: ctx.take_spawns(),
                }
            }
            Err(text) => failed(ToolOutput::error(text)),
        }
    }

    /// Records what a finished run produced: a result, or a park (with its children created).
    async fn settle(
        &mut self,
        call: &ToolCall,
        tool: &Arc<dyn Tool>,
        ran: Ran,
    ) -> Result<(), RunError> {
        let limit = tool.flags().max_result_chars;
        let Some(park) = ran.output.park.clone() else {
            if !ran.spawns.is_empty() && ran.spawns.iter().all(|s| s.background) {
                // Children it does not wait for: recorded with the result, created after it.
                let started = CoreRecord::BackgroundStarted {
                    call_id: call.id.clone(),
                    children: ran.spawns.clone(),
                };
                let mut staged = ran.staged;
                staged.push(started.to_record());
                self.finish_call(call, ran.output, ran.outcome, staged, limit)
                    .await?;
                let depth = self.state.core.depth;
                for order in &ran.spawns {
                    create_child(self.rt, &self.task, depth, order).await?;
                }
                return Ok(());
            }
            if !ran.spawns.is_empty() {
                let output = ToolOutput::error(format!(
                    "{}: spawned {} child task(s) without waiting for them — a tool that spawns must return ToolOutput::wait_for_children()",
                    call.name,
                    ran.spawns.len()
                ));
                return self
                    .finish_call(call, output, CallOutcome::Error, Vec::new(), limit)
                    .await;
            }
            let batch = self
                .finished_records(call, ran.output, ran.outcome, ran.staged, limit)
                .await?;
            if tool.flags().retry_safe {
                // Lost in a crash, it runs again: its result goes with the next write (the
                // next reply's, a person asked, the turn's end), one durable write per step.
                return self.defer(batch).await;
            }
            return self.commit(batch).await;
        };
        let question = match park {
            Park::Ask { question } => Some(question),
            Park::Children if ran.spawns.is_empty() => {
                let output = ToolOutput::error(format!(
                    "{}: waits for children but spawned none",
                    call.name
                ));
                return self
                    .finish_call(call, output, CallOutcome::Error, Vec::new(), limit)
                    .await;
            }
            Park::Children => None,
        };
        let parked = CoreRecord::ToolParked {
            call_id: call.id.clone(),
            question,
            children: ran.spawns.clone(),
        };
        let mut batch = ran.staged;
        batch.push(parked.to_record());
        self.commit(batch).await?;
        let depth = self.state.core.depth;
        for order in &ran.spawns {
            create_child(self.rt, &self.task, depth, order).await?;
        }
        Ok(())
    }

    /// Wakes a call parked on children once all of them finished: recorded, so exactly once.
    async fn wake_children(&mut self, call_id: &str) -> Result<bool, RunError> {
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

    /// A call a crash left open: rerun it if retry-safe, else ask `recover`, else answer "outcome unknown".
    async fn recover(&mut self, offer: &Offer, call: &ToolCall) -> Result<(), RunError> {
        let call = self.as_started(call);
        let unknown = || {
            ToolOutput::error(format!(
                "{}: outcome unknown — the worker stopped while this call was running; check its effects before trying again",
                call.name
            ))
        };
        let Some(tool) = offer.find(&call.name).cloned() else {
            return self
                .finish_call(&call, unknown(), CallOutcome::Unknown, Vec::new(), None)
                .await;
        };
        if tool.flags().retry_safe {
            // A retry-safe call runs again — a resumed one resumes again with the same wake.
            let wake = self
                .state
                .core
                .parked
                .get(&call.id)
                .and_then(|p| p.wake.clone());
            let ran = self.invoke(&call, &tool, wake).await;
            return self.settle(&call, &tool, ran).await;
        }
        let ctx = self.tool_context(&call);
        match crate::hooks::recover_tool(&tool, &call.name, &ctx).await {
            Some(output) => {
                let outcome = if output.is_error {
                    CallOutcome::Error
                } else {
                    CallOutcome::Ok
                };
                // Settled like a run: what it staged or spawned, and a park, count.
                let ran = Ran {
                    output,
                    outcome,
                    staged: ctx.take_staged(),
                    spawns: ctx.take_spawns(),
                };
                self.settle(&call, &tool, ran).await
            }
            None => {
                self.finish_call(&call, unknown(), CallOutcome::Unknown, Vec::new(), None)
                    .await
            }
        }
    }

    /// after_tool, the overflow rule, then the result and the tool's records in one batch.
    async fn finish_call(
        &mut self,
        call: &ToolCall,
        output: ToolOutput,
        outcome: CallOutcome,
        staged: Vec<Record>,
        limit: Option<usize>,
    ) -> Result<(), RunError> {
        let batch = self
            .finished_records(call, output, outcome, staged, limit)
            .await?;
        self.commit(batch).await
    }

    /// A call's result (after every `after_tool`, bounded by the overflow rule) with the
    /// records staged while it ran, ready to append.
    async fn finished_records(
        &mut self,
        call: &ToolCall,
        output: ToolOutput,
        outcome: CallOutcome,
        staged: Vec<Record>,
        limit: Option<usize>,
    ) -> Result<Vec<Record>, RunError> {
        let mut output = output;
        let mut hook_records = Vec::new();
        if matches!(outcome, CallOutcome::Ok | CallOutcome::Error) {
            let view = self.view();
            output = self.hooks().after_tool(&view, call, output).await;
            hook_records = view.take_staged();
        }
        let outcome = match (outcome, output.is_error) {
            (CallOutcome::Ok, true) => CallOutcome::Error,
            (other, _) => other,
        };
        let limit = limit.unwrap_or(DEFAULT_MAX_RESULT_CHARS);
        let (text, full) = self.overflow(call, &output.text, limit).await?;
        let mut attachments = Vec::with_capacity(output.attachments.len());
        for attachment in &output.attachments {
            attachments.push(
                self.rt
                    .content
                    .put(&attachment.media_type, &attachment.data)
                    .await?,
            );
        }
        let finished = CoreRecord::CallFinished {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            text,
            outcome,
            full,
            attachments,
        };
        let mut batch = staged;
        batch.extend(hook_records);
        batch.push(finished.to_record());
        Ok(batch)
    }

    /// The one overflow rule: over the limit, the full body goes to the content store and a bounded preview stays inline.
    async fn overflow(
        &self,
        call: &ToolCall,
        text: &str,
        limit: usize,
    ) -> Result<(String, Option<crate::store::ContentRef>), RunError> {
        let total = text.chars().count();
        if total <= limit {
            return Ok((text.to_owned(), None));
        }
        let reference = self.rt.content.put("text/plain", text.as_bytes()).await?;
        let head: String = text.chars().take(limit).collect();
        let preview = format!(
            "{head}\n… [{} output truncated: {total} characters in all, {limit} shown; the full output is kept as sha256 {}]",
            call.name, reference.sha256
        );
        Ok((preview, Some(reference)))
    }
}

fn missing_tool(offer: &Offer, name: &str) -> String {
    if let Some(error) = offer.withheld.get(name) {
        return error.clone();
    }
    let names: Vec<&str> = offer.tools.iter().map(|t| t.tool.name()).collect();
    format!(
        "no tool named `{name}` is available (available: {})",
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    )
}

/// Checks a call's input against the tool's JSON Schema, with an error the model can act on.
/// Compiled input schemas, by their canonical bytes (compiling one costs far more than a step).
static VALIDATORS: std::sync::LazyLock<Mutex<HashMap<Vec<u8>, Arc<jsonschema::Validator>>>> =
    std::sync::LazyLock::new(|| Mutex::new(HashMap::new()));

/// Schemas kept compiled at most; past it the cache starts over.
const MAX_VALIDATORS: usize = 1024;

fn validator(tool: &dyn Tool) -> Result<Arc<jsonschema::Validator>, String> {
    let schema = tool.input_schema();
    let key = canonical::to_bytes(&schema);
    let mut cache = VALIDATORS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(validator) = cache.get(&key) {
        return Ok(Arc::clone(validator));
    }
    let validator =
        Arc::new(jsonschema::validator_for(&schema).map_err(|err| {
            format!("{}: the tool's input schema is invalid: {err}", tool.name())
        })?);
    if cache.len() >= MAX_VALIDATORS {
        cache.clear();
    }
    cache.insert(key, Arc::clone(&validator));
    Ok(validator)
}

fn check_input(tool: &dyn Tool, input: &Value) -> Result<(), String> {
    if tool.flags().unchecked_input {
        return Ok(());
    }
    let validator = validator(tool)?;
    let errors: Vec<String> = validator
        .iter_errors(input)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}: invalid input — {}. Fix the arguments and call it again.",
            tool.name(),
            errors.join("; ")
        ))
    }
}
