//! The host operations every frontend calls: submit a task, post a message to it, answer what
//! it asks, cancel it, follow its events, and get a runner for it — over one store, without a
//! terminal and without a model until a task is run.
//!
//! A frontend (the HTTP API, a worker, an editor protocol, a channel) holds one [`Tasks`]. It
//! opens a [`Host`] per workspace and settings choice the first time a task needs one and keeps
//! it, so a server does not load every plugin per request; it opens a model only for
//! [`Tasks::runner`], once per recorded provider and model. How each task runs is its
//! [`TaskRun`], recorded when it is submitted and read back by every later operation.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use noeta_core::fold::TaskState;
use noeta_core::model::{ModelReply, ModelRequest};
use noeta_core::provider::{Provider, ProviderError};
use noeta_core::runner::{RunError, Runtime};
use noeta_core::store::{Event, StoreError, TaskId};
use serde_json::{Value, json};

use crate::backends::Stores;
use crate::task_run::{TaskRun, TaskRunFailure, new_task_id};
use crate::{Host, HostConfig, HostError, HostPaths};

/// Makes the configuration of a host for a workspace and a run's settings choices (its
/// permission mode and sandbox): the frontend's own defaults, secrets and worker name.
pub type ConfigureHost =
    dyn Fn(HostPaths, &TaskRun) -> Result<HostConfig, crate::SettingsError> + Send + Sync;

/// Shapes each runtime [`Tasks::runner`] makes (a worker's lease, stop flag, text sink).
pub type ShapeRuntime = dyn Fn(Runtime) -> Runtime + Send + Sync;

/// A host operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum TaskOpError {
    /// No such task in the store.
    #[error("no task `{0}` in this store")]
    Unknown(TaskId),
    /// The task cannot take this now (it waits for something else, or a worker holds it).
    #[error("{0}")]
    Conflict(String),
    /// What was asked for cannot be done as asked (a bad answer, a goal with nothing in it).
    #[error("{0}")]
    Invalid(String),
    /// The host for the task cannot be opened (its settings, plugins, agent or model).
    #[error(transparent)]
    Host(Box<HostError>),
    /// How the task runs cannot be read.
    #[error(transparent)]
    Record(#[from] TaskRunFailure),
    /// The runtime refused.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<HostError> for TaskOpError {
    fn from(err: HostError) -> Self {
        Self::Host(Box::new(err))
    }
}

/// An answer to the call a task waits on.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// To a permission ask.
    Allow(bool),
    /// To a question (a tool's ask, such as `AskUserQuestion`).
    Reply(Value),
}

/// A host and a runtime with its model, for running the tasks of one recorded run.
pub struct TaskRunner {
    /// The host (every agent's session).
    pub host: Arc<Host>,
    /// The runtime over the store, with the run's model and the agent files' own.
    pub runtime: Runtime,
}

/// Why agents run on the run's model instead of their own, each note with the agents it
/// concerns (see [`Host::agent_models`]).
pub type ModelNotes = Vec<(Vec<String>, String)>;

impl TaskRunner {
    /// The runner of `host` over `stores`: the model `provider` and `model` name (else the
    /// settings'), and the agent files' own models where the provider knows them — what every
    /// frontend runs tasks with (a worker's [`Tasks::runner`], the terminal). With the notes of
    /// the agents that run on the run's model instead.
    ///
    /// # Errors
    /// The model cannot be opened.
    pub fn open(
        host: Arc<Host>,
        stores: &Stores,
        provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<(Self, ModelNotes), HostError> {
        let model = host.open_model(provider, model)?;
        Ok(Self::over(host, stores, model))
    }

    /// The same over a model already open (a chat that reloads its plugins keeps its model).
    pub fn over(host: Arc<Host>, stores: &Stores, model: Arc<dyn Provider>) -> (Self, ModelNotes) {
        let agent_models = host.agent_models(&model);
        let mut runtime = host.runtime(stores, model);
        for (agent, provider) in agent_models.models {
            runtime = runtime.with_agent_model(agent, provider);
        }
        (Self { host, runtime }, agent_models.notes)
    }
}

/// How many hosts and models a [`Tasks`] has opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Opened {
    /// Hosts (each loads the plugins once).
    pub hosts: usize,
    /// Models (the runners' own; agent files' models not counted).
    pub models: usize,
}

/// A host's workspace, permission mode and sandbox.
type HostKey = (PathBuf, Option<String>, Option<String>);

/// The host operations over one store (see the module's documentation).
pub struct Tasks {
    paths: HostPaths,
    stores: Stores,
    configure: Arc<ConfigureHost>,
    shape: Option<Arc<ShapeRuntime>>,
    /// The lease holder of the operations that only record: never the name the runners
    /// hold leases by, so a message never slips into a task a runner of this process holds.
    recorder: String,
    hosts: Mutex<HashMap<HostKey, Arc<Host>>>,
    runners: Mutex<HashMap<TaskRun, Arc<TaskRunner>>>,
    hosts_opened: AtomicUsize,
    models_opened: AtomicUsize,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("paths", &self.paths)
            .field("store", &self.stores.url)
            .finish_non_exhaustive()
    }
}

impl Tasks {
    /// Operations over `stores`, for tasks of `paths.workspace` unless a task records another,
    /// with hosts configured by `configure`.
    pub fn new(paths: HostPaths, stores: Stores, configure: Arc<ConfigureHost>) -> Self {
        Self {
            paths,
            stores,
            configure,
            shape: None,
            recorder: crate::process_worker("tasks"),
            hosts: Mutex::new(HashMap::new()),
            runners: Mutex::new(HashMap::new()),
            hosts_opened: AtomicUsize::new(0),
            models_opened: AtomicUsize::new(0),
        }
    }

    /// The same, with each runner's runtime shaped by `shape`.
    #[must_use]
    pub fn with_runtime_shape(mut self, shape: Arc<ShapeRuntime>) -> Self {
        self.shape = Some(shape);
        self
    }

    /// The store.
    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    /// How many hosts and models have been opened so far.
    pub fn opened(&self) -> Opened {
        Opened {
            hosts: self.hosts_opened.load(Ordering::SeqCst),
            models: self.models_opened.load(Ordering::SeqCst),
        }
    }

    /// The host for `run`: opened once per workspace, permission mode and sandbox.
    ///
    /// # Errors
    /// Its workspace does not exist here, or the host cannot be opened.
    pub fn host(&self, run: &TaskRun) -> Result<Arc<Host>, TaskOpError> {
        let workspace = run
            .workspace
            .clone()
            .unwrap_or_else(|| self.paths.workspace.clone());
        let key = (
            workspace.clone(),
            run.permission_mode.clone(),
            run.sandbox.clone(),
        );
        // Held while a host opens, so two requests at once load the plugins once.
        let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(host) = hosts.get(&key) {
            return Ok(Arc::clone(host));
        }
        if !workspace.is_dir() {
            return Err(TaskOpError::Invalid(format!(
                "its workspace `{}` does not exist on this host",
                workspace.display()
            )));
        }
        let paths = HostPaths {
            home: self.paths.home.clone(),
            workspace,
        };
        let config =
            (self.configure)(paths, run).map_err(|err| TaskOpError::from(HostError::from(err)))?;
        let host = Arc::new(Host::open(config)?);
        self.hosts_opened.fetch_add(1, Ordering::SeqCst);
        hosts.insert(key, Arc::clone(&host));
        Ok(host)
    }

    /// A runtime over the store that records `run` with every task it makes and opens no
    /// model: for the operations that only record.
    fn recorder(&self, host: &Host, run: &TaskRun) -> Runtime {
        host.runtime(&self.stores, Arc::new(Unopened::of(run)))
            .with_worker(self.recorder.clone())
            .with_host_facts(run.facts())
    }

    /// The task `id` names, which must exist.
    ///
    /// # Errors
    /// [`TaskOpError::Unknown`] for a task the store does not have.
    pub async fn task(&self, id: &TaskId) -> Result<TaskId, TaskOpError> {
        match self.stores.log.info(id).await {
            Ok(_) => Ok(id.clone()),
            Err(StoreError::UnknownTask { .. }) => Err(TaskOpError::Unknown(id.clone())),
            Err(err) => Err(err.into()),
        }
    }

    /// Records a new task of `run` with `goal` as its first message, and queues it for a
    /// worker. Opens the run's host if it is not open yet, and no model.
    ///
    /// # Errors
    /// An empty goal; the host, the agent or the store failing.
    pub async fn submit(&self, run: TaskRun, goal: &str) -> Result<TaskId, TaskOpError> {
        if goal.trim().is_empty() {
            return Err(TaskOpError::Invalid(
                "the goal is empty: say what the agent is to do".to_owned(),
            ));
        }
        let workspace = run
            .workspace
            .clone()
            .unwrap_or_else(|| self.paths.workspace.clone());
        let run = TaskRun {
            queued: true,
            workspace: Some(workspace.clone()),
            ..run
        }
        .with_absolute_script(&workspace);
        let host = self.host(&run)?;
        let session = host.session(run.agent())?;
        let runtime = self.recorder(&host, &run);
        let task = create_task(&runtime, &session, goal).await?;
        self.queue(&task).await?;
        Ok(task)
    }

    /// The host, session and recording runtime of an existing task.
    async fn recorded(
        &self,
        task: &TaskId,
    ) -> Result<(Arc<Host>, Arc<noeta_core::session::Session>, Runtime), TaskOpError> {
        let task = self.task(task).await?;
        let run = TaskRun::of_tree(self.stores.log.as_ref(), &task).await?;
        let host = self.host(&run)?;
        let session = host.session(run.agent())?;
        let runtime = self.recorder(&host, &run);
        Ok((host, session, runtime))
    }

    /// Posts `text` to `task` as the person's next message (the task must be between turns).
    ///
    /// # Errors
    /// An unknown task, an empty message, a task in no state to take one.
    pub async fn message(&self, task: &TaskId, text: &str) -> Result<(), TaskOpError> {
        if text.trim().is_empty() {
            return Err(TaskOpError::Invalid("the message is empty".to_owned()));
        }
        let (_, session, runtime) = self.recorded(task).await?;
        runtime.send(&session, task, text).await?;
        Ok(())
    }

    /// `task`'s state as its log folds it now.
    ///
    /// # Errors
    /// An unknown task, or one that cannot be folded.
    pub async fn state(&self, task: &TaskId) -> Result<TaskState, TaskOpError> {
        let (_, session, runtime) = self.recorded(task).await?;
        Ok(runtime.load(&session, task).await?)
    }

    /// Answers call `call_id`, which `task` waits on.
    ///
    /// # Errors
    /// An unknown task, or the runtime refusing the answer (not waiting on that call, an
    /// answer of the wrong kind).
    pub async fn answer(
        &self,
        task: &TaskId,
        call_id: &str,
        answer: Answer,
    ) -> Result<(), TaskOpError> {
        let (_, session, runtime) = self.recorded(task).await?;
        match answer {
            Answer::Allow(allow) => runtime.answer(&session, task, call_id, allow).await?,
            Answer::Reply(value) => runtime.reply(&session, task, call_id, value).await?,
        }
        Ok(())
    }

    /// Cancels `task` (and the children it waits on), saying `why`; whether it was still
    /// running. Its queue entry and its parent are queued, so a worker ends the one and wakes
    /// the other.
    ///
    /// # Errors
    /// An unknown task, the store or the runtime failing.
    pub async fn cancel(&self, task: &TaskId, why: &str) -> Result<bool, TaskOpError> {
        let (_, _, runtime) = self.recorded(task).await?;
        let cancelled = runtime.cancel(task, why).await?;
        self.queue(task).await?;
        if let Some(parent) = self.stores.log.info(task).await?.parent {
            self.queue(&parent).await?;
        }
        Ok(cancelled)
    }

    /// Puts `task` on the store's queue for a worker.
    ///
    /// # Errors
    /// The store's.
    pub async fn queue(&self, task: &TaskId) -> Result<(), StoreError> {
        self.stores.queue.enqueue(task, 0).await
    }

    /// `task`'s events after sequence number `after`, with their spilled payloads read back:
    /// what a frontend following the task shows next (call again with the last one's number).
    ///
    /// # Errors
    /// The store's.
    pub async fn follow(&self, task: &TaskId, after: u64) -> Result<Vec<Event>, StoreError> {
        let mut events = Vec::new();
        for event in self.stores.log.read(task, after).await? {
            events.push(noeta_core::records::hydrate(event, self.stores.content.as_ref()).await?);
        }
        Ok(events)
    }

    /// The runner for `task`: its tree's recorded workspace, settings choices and model,
    /// opened the first time a task of that run is run and kept.
    ///
    /// # Errors
    /// The record, the host or the model cannot be had.
    pub async fn runner(&self, task: &TaskId) -> Result<Arc<TaskRunner>, TaskOpError> {
        let run = TaskRun::of_tree(self.stores.log.as_ref(), task).await?;
        let key = run.runtime_key();
        if let Some(runner) = self
            .runners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(Arc::clone(runner));
        }
        let host = self.host(&run)?;
        let (mut runner, notes) = TaskRunner::open(
            host,
            &self.stores,
            run.provider.as_deref(),
            run.model.as_deref(),
        )?;
        self.models_opened.fetch_add(1, Ordering::SeqCst);
        for (_, note) in notes {
            tracing::warn!("{note}");
        }
        if let Some(shape) = &self.shape {
            runner.runtime = shape(runner.runtime);
        }
        let runner = Arc::new(runner);
        // Two slots opening the same runner at once keep the first.
        let mut runners = self.runners.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(Arc::clone(runners.entry(key).or_insert(runner)))
    }
}

/// Records a new task of `session`'s agent over `runtime` with `goal` as its first message, and
/// its id — the one way every frontend makes a task. Ids carry the time and a salt; a clash
/// with a task made in the same instant (by another process) draws a new one.
///
/// # Errors
/// No id could be drawn, or the runtime refused.
pub async fn create_task(
    runtime: &Runtime,
    session: &noeta_core::session::Session,
    goal: &str,
) -> Result<TaskId, TaskOpError> {
    let mut tries = 0;
    loop {
        let task = new_task_id()?;
        match runtime.create(session, &task, goal).await {
            Ok(()) => return Ok(task),
            Err(RunError::Store(StoreError::TaskExists { .. })) if tries < 8 => tries += 1,
            Err(err) => return Err(err.into()),
        }
    }
}

/// The model of a task that is only being recorded: named as the run names it, never called
/// (a task is run by [`Tasks::runner`]'s runtime, which opens the real one).
struct Unopened {
    name: String,
    model: String,
}

impl Unopened {
    fn of(run: &TaskRun) -> Self {
        Self {
            name: run.provider.clone().unwrap_or_default(),
            model: run.model.clone().unwrap_or_default(),
        }
    }
}

#[async_trait::async_trait]
impl Provider for Unopened {
    fn name(&self) -> &str {
        &self.name
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn context_window(&self) -> u64 {
        0
    }

    async fn complete(&self, _request: &ModelRequest) -> Result<ModelReply, ProviderError> {
        Err(ProviderError::Fatal {
            message: "this host only records tasks: a worker runs them with their model".into(),
        })
    }
}

/// A typed answer to the question call `call_id` of `state` waits on: JSON as it is; plain
/// text for an `AskUserQuestion` of one question as the answer to it (with several, JSON is
/// needed); plain text for any other question as a string.
///
/// # Errors
/// Text for an `AskUserQuestion` of several questions, saying how to give them.
pub fn typed_answer(state: &TaskState, call_id: &str, text: &str) -> Result<Value, String> {
    if let Ok(value) = serde_json::from_str::<Value>(text)
        && value.is_object()
    {
        return Ok(value);
    }
    match parked_call(state, call_id) {
        Some(call) if call.name == "AskUserQuestion" => {
            let questions: Vec<&str> = call.input["questions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|q| q["question"].as_str())
                .collect();
            match questions.as_slice() {
                [only] => Ok(json!({ "answers": { *only: text } })),
                _ => Err(format!(
                    "call {call_id} asks {} questions: give the answers as JSON, {{\"answers\": {{\"<question>\": \"<answer>\", …}}}}",
                    questions.len()
                )),
            }
        }
        _ => Ok(Value::String(text.to_owned())),
    }
}

/// The call `call_id` of `state`'s conversation (the one a parked task waits on).
pub fn parked_call<'s>(
    state: &'s TaskState,
    call_id: &str,
) -> Option<&'s noeta_core::model::ToolCall> {
    state
        .core
        .messages
        .iter()
        .rev()
        .flat_map(|m| m.calls.iter())
        .find(|c| c.id == call_id)
}
