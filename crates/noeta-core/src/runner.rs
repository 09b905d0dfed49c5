//! The runner: claim a task, fold it, check its pins, and advance it step by step until the turn ends.
//!
//! One step: turn intake (once per user message) → tools → tool_changes →
//! reminders → context and tail → compose → before_model → provider → record
//! the reply → policy → gate the calls in order → run them (adjacent
//! read-only calls together) → after_tool → record. Everything a phase produces is appended
//! as one batch, so a crash loses a phase whole or not at all; a tool call's
//! started-record commits before the tool runs. A new claim folds the log and
//! carries on from exactly where the last one stopped.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use crate::fold::{CoreState, TaskState, TurnState};
use crate::hooks::Hooks;
use crate::provider::Provider;
use crate::records::{CoreRecord, PluginPin};
use crate::session::Session;
use crate::store::{ContentStore, EventLog, Record, StoreError, TaskId};
use crate::tool::{Inbox, ProgressSink};

mod calls;
mod claim;
mod commands;
pub(crate) mod compose;
mod direct;
mod lease;
mod queue;
mod step;
mod tree;

pub use direct::{AskRefusal, DirectResult};
pub use queue::QueuedRun;
use tree::default_children_at_once;

/// How many threads this machine runs at once (`std::thread::available_parallelism`, 1 when it
/// cannot be told), asked once per process: on Linux asking reads the process's cgroup files.
pub fn parallelism() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

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
    /// The run stopped between two steps because the runtime was asked to stop
    /// ([`Runtime::with_stop`]); the turn goes on at the next run.
    Stopped,
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
    /// A direct call could not be made (the task failed, a hook failed, no result).
    #[error("{reason}")]
    Direct {
        /// Why.
        reason: String,
    },
    /// A task runs an agent this host has no session for.
    #[error("task `{task}` runs agent `{agent}`, which this host does not define")]
    UnknownAgent {
        /// The task.
        task: TaskId,
        /// The agent.
        agent: String,
    },
    /// `reply` gave an answer the waiting tool does not take; nothing was written and the
    /// question stays open.
    #[error(
        "the answer to call `{call_id}` of task `{task}` was refused, and the question stays open: {reason}"
    )]
    BadAnswer {
        /// The task.
        task: TaskId,
        /// The call.
        call_id: String,
        /// What is wrong with the answer.
        reason: String,
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

/// A run that ends this many events after the task's last snapshot writes a new one: often
/// enough that a load folds a short tail, rarely enough that short turns do not pay for it.
pub const SNAPSHOT_EVERY: u64 = 128;

/// Receives the text of a task's step reply, piece by piece, as the model streams it.
pub type TaskTextSink = dyn Fn(&TaskId, &str) + Send + Sync;

/// Runs tasks against one store and one provider.
pub struct Runtime {
    log: Arc<dyn EventLog>,
    content: Arc<dyn ContentStore>,
    provider: Arc<dyn Provider>,
    /// Agents that run on a model of their own, by agent name (the others on `provider`).
    agent_models: BTreeMap<String, Arc<dyn Provider>>,
    /// What the host keeps with each task it makes (`TaskStarted::host`).
    host_facts: Option<Value>,
    worker: String,
    lease_ttl_ms: u64,
    progress: Option<ProgressSink>,
    text: Option<Arc<TaskTextSink>>,
    snapshot_every: u64,
    pool: bool,
    exec: Option<Arc<dyn crate::exec::ExecEnv>>,
    /// Says whether the worker holding a task's lease is gone (its process ended), so the task
    /// is taken over at once instead of when the lease lapses.
    holder_gone: Option<Arc<HolderGone>>,
    inbox: Inbox,
    /// How many child tasks `run_tree` runs at once.
    children_at_once: usize,
    /// Tasks this runtime is running now.
    driving: Mutex<std::collections::BTreeSet<TaskId>>,
    /// Set when runs are to stop between steps (a worker shutting down).
    stop: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// The state the last run of this runtime left its task in, for [`load`](Self::load).
    last_run: Mutex<Option<LastRun>>,
    /// The stable prefix each session's requests last carried, and its hash, shared by the
    /// claims of its tasks (by agent and plugin set).
    prefixes: Mutex<BTreeMap<(String, String), compose::SessionPrefix>>,
}

/// A task's state as a run left it, with the plugin set that folded it.
struct LastRun {
    task: TaskId,
    plugin_set: String,
    state: Arc<TaskState>,
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

/// Says whether the worker named by a lease is gone: see [`Runtime::with_holder_check`].
pub type HolderGone = dyn Fn(&str) -> bool + Send + Sync;

/// Claims in a row that may refuse a task (a failing fold, a missing plugin) before it fails.
pub const MAX_REFUSED_CLAIMS: usize = 3;

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
            agent_models: BTreeMap::new(),
            host_facts: None,
            worker: "local".to_owned(),
            lease_ttl_ms: 60_000,
            progress: None,
            text: None,
            snapshot_every: SNAPSHOT_EVERY,
            pool: false,
            exec: None,
            holder_gone: None,
            inbox: Inbox::default(),
            children_at_once: default_children_at_once(),
            driving: Mutex::new(std::collections::BTreeSet::new()),
            stop: None,
            last_run: Mutex::new(None),
            prefixes: Mutex::new(BTreeMap::new()),
        }
    }

    /// The prompt-cache state of `session`'s requests (see [`compose::SessionPrefix`]).
    fn session_prefix(&self, session: &Session) -> compose::SessionPrefix {
        self.prefixes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((
                session.spec.name.clone(),
                session.folder.plugin_set().to_owned(),
            ))
            .or_default()
            .clone()
    }

    /// Runs stop between two steps once `stop` is set ([`RunOutcome::Stopped`]): the step in
    /// flight finishes and is recorded, the lease is released, and the turn goes on at the
    /// next run (a worker shutting down gracefully).
    pub fn with_stop(mut self, stop: Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Whether runs were asked to stop.
    pub(crate) fn stopping(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst))
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

    /// Takes a task over at once from a lease holder `gone` says has ended (a process of this
    /// host that is no longer running); any other holder's live lease is waited for.
    pub fn with_holder_check(mut self, gone: Arc<HolderGone>) -> Self {
        self.holder_gone = Some(gone);
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

    /// The same runtime, with agent `agent`'s tasks (and their tools' and extensions' model
    /// calls) on `provider` instead of the runtime's own: an agent file's `model`.
    #[must_use]
    pub fn with_agent_model(
        mut self,
        agent: impl Into<String>,
        provider: Arc<dyn Provider>,
    ) -> Self {
        self.agent_models.insert(agent.into(), provider);
        self
    }

    /// The same runtime, keeping `facts` with every task it makes (recorded in the task's
    /// `task_started`, folded into `CoreState::host`): the host's model, so a later process
    /// carries the task on with it. Never a secret: the log keeps it.
    #[must_use]
    pub fn with_host_facts(mut self, facts: Value) -> Self {
        self.host_facts = Some(facts);
        self
    }

    /// The runtime's own provider (what agents without a model of their own run on).
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// The provider agent `agent`'s tasks run on.
    pub fn provider_for(&self, agent: &str) -> &Arc<dyn Provider> {
        self.agent_models.get(agent).unwrap_or(&self.provider)
    }

    /// Receives the text of each step's reply as it streams in, with the task it belongs to
    /// (not recorded; the reply is, once whole).
    pub fn with_text_sink(mut self, sink: Arc<TaskTextSink>) -> Self {
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
            host: self.host_facts.clone(),
        };
        let pins = CoreRecord::PluginsPinned {
            identity: session.spec.identity_hash(),
            pins: session.pins.clone(),
        };
        let message = CoreRecord::UserMessage { text: goal.into() };
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
        let message = CoreRecord::UserMessage { text: text.into() };
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
        let mut claim = self.claim(session, task).await?;
        if !waiting(&claim.state.core) {
            claim.release().await?;
            return Err(RunError::NotParked {
                task: task.clone(),
                call_id: call_id.to_owned(),
            });
        }
        // The tool that waits checks the answer before it is recorded.
        if let Some(open) = claim.state.core.open_calls.get(call_id)
            && let Ok(offer) = claim.offer()
            && let Some(tool) = offer.find(&open.tool)
            && let Err(reason) = crate::hooks::check_answer(tool.as_ref(), &open.input, &answer)
        {
            claim.release().await?;
            return Err(RunError::BadAnswer {
                task: task.clone(),
                call_id: call_id.to_owned(),
                reason,
            });
        }
        let answered = CoreRecord::CallAnswered {
            call_id: call_id.to_owned(),
            answer,
        };
        claim.commit(vec![answered.to_record()]).await?;
        claim.release().await
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
            host: self.host_facts.clone(),
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

    /// Folds a task without claiming it (for listings and logs). A task this runtime ran last
    /// is folded on from the state its run left (only what was recorded since is read), so
    /// looking at a task right after running it does not fold its whole log again.
    pub async fn load(&self, session: &Session, task: &TaskId) -> Result<TaskState, RunError> {
        let last = self
            .last_run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .filter(|last| last.task == *task && last.plugin_set == session.folder.plugin_set())
            .map(|last| Arc::clone(&last.state));
        if let Some(state) = last {
            let events = self.read_hydrated(task, state.seq).await?;
            return Ok(session
                .folder
                .fold_onto(Arc::unwrap_or_clone(state), &events)?);
        }
        let (state, _) = self.fold_task(session, task).await?;
        Ok(state?)
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
        *self.last_run.lock().unwrap_or_else(PoisonError::into_inner) = Some(LastRun {
            task: task.clone(),
            plugin_set: session.folder.plugin_set().to_owned(),
            state: Arc::clone(&state),
        });
        Ok((outcome, state))
    }
}
