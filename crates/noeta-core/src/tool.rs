//! The `Tool` trait: a model-visible capability with a name, a description, a JSON Schema and an async `run`.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical;
use crate::fold::TaskState;
use crate::model::Attachment;
/// The record payloads the tool API shares with the log (defined with the records).
use crate::records::{SpawnOrder, Wake};
use crate::store::Record;

/// How risky a tool call is; governance decides approval from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Reads only.
    #[default]
    Low,
    /// Changes something recoverable.
    Medium,
    /// Changes files, runs commands, spends money.
    High,
}

/// Behavioural flags the runtime reads from a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ToolFlags {
    /// The tool changes nothing; adjacent read-only calls may run together.
    pub read_only: bool,
    /// Old outputs of this tool may be cleared from the context.
    pub clearable: bool,
    /// Not offered up front: held back until an extension loads it through `tool_changes`
    /// (tool search does), and callable only once loaded.
    pub deferred: bool,
    /// Listed after the other tools in the request.
    pub listed_last: bool,
    /// In a reply with several calls, runs after the others.
    pub run_last: bool,
    /// Kept for an agent whose tool list does not name it.
    pub past_agent_lists: bool,
    /// After it succeeds the turn ends without another model call (its result is the last word).
    pub silent_reply_after: bool,
    /// Words tool search matches a deferred tool by, besides its name and description.
    pub search_hint: Option<String>,
    /// The description sent once a deferred tool is loaded (the short one is for search).
    pub loaded_description: Option<String>,
    /// Safe to run again after a crash left its outcome unknown.
    pub retry_safe: bool,
    /// The runtime does not check input against the schema (the tool checks it).
    pub unchecked_input: bool,
    /// Allowed while the agent is in plan mode.
    pub safe_while_planning: bool,
    /// Inline output limit in characters; longer output is truncated and kept in full elsewhere.
    pub max_result_chars: Option<usize>,
    /// The risk of a call.
    pub risk: Risk,
}

/// Builders: the struct is `#[non_exhaustive]`, so a tool outside the kernel starts from
/// [`ToolFlags::default`] or [`ToolFlags::read_only`] and chains these.
///
/// ```
/// use noeta_core::{Risk, ToolFlags};
///
/// let flags = ToolFlags::default()
///     .with_risk(Risk::High)
///     .clearable()
///     .retry_safe()
///     .with_max_result_chars(30_000);
/// assert_eq!(flags.risk, Risk::High);
/// assert!(flags.clearable && flags.retry_safe && !flags.read_only);
/// assert_eq!(flags.max_result_chars, Some(30_000));
///
/// let deferred = ToolFlags::read_only()
///     .deferred()
///     .with_search_hint("pdf")
///     .with_loaded_description("Reads a PDF.");
/// assert!(deferred.deferred && deferred.read_only && deferred.safe_while_planning);
/// assert_eq!(deferred.search_hint.as_deref(), Some("pdf"));
/// assert_eq!(deferred.loaded_description.as_deref(), Some("Reads a PDF."));
///
/// let last = ToolFlags::default()
///     .marked_read_only()
///     .safe_while_planning()
///     .run_last()
///     .listed_last()
///     .past_agent_lists()
///     .silent_reply_after()
///     .unchecked_input();
/// assert!(last.read_only && last.safe_while_planning && last.run_last && last.listed_last);
/// assert!(last.past_agent_lists && last.silent_reply_after && last.unchecked_input);
/// assert!(!last.clearable && !last.deferred && !last.retry_safe);
/// ```
impl ToolFlags {
    /// Flags for a read-only, low-risk tool that is safe while planning.
    pub fn read_only() -> Self {
        Self {
            read_only: true,
            safe_while_planning: true,
            ..Self::default()
        }
    }

    /// Sets the risk.
    #[must_use]
    pub fn with_risk(mut self, risk: Risk) -> Self {
        self.risk = risk;
        self
    }

    /// Sets `read_only` alone (adjacent calls may run together); [`ToolFlags::read_only`]
    /// also makes the tool safe while planning.
    #[must_use]
    pub fn marked_read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Sets `clearable`: old outputs may be cleared from the context.
    #[must_use]
    pub fn clearable(mut self) -> Self {
        self.clearable = true;
        self
    }

    /// Sets `deferred`: held back until an extension loads it.
    #[must_use]
    pub fn deferred(mut self) -> Self {
        self.deferred = true;
        self
    }

    /// Sets `listed_last`: listed after the other tools.
    #[must_use]
    pub fn listed_last(mut self) -> Self {
        self.listed_last = true;
        self
    }

    /// Sets `run_last`: in a reply with several calls, runs after the others.
    #[must_use]
    pub fn run_last(mut self) -> Self {
        self.run_last = true;
        self
    }

    /// Sets `past_agent_lists`: kept for an agent whose tool list does not name it.
    #[must_use]
    pub fn past_agent_lists(mut self) -> Self {
        self.past_agent_lists = true;
        self
    }

    /// Sets `silent_reply_after`: once it succeeds the turn ends without another model call.
    #[must_use]
    pub fn silent_reply_after(mut self) -> Self {
        self.silent_reply_after = true;
        self
    }

    /// Sets the words tool search matches a deferred tool by.
    #[must_use]
    pub fn with_search_hint(mut self, hint: impl Into<String>) -> Self {
        self.search_hint = Some(hint.into());
        self
    }

    /// Sets the description sent once a deferred tool is loaded.
    #[must_use]
    pub fn with_loaded_description(mut self, description: impl Into<String>) -> Self {
        self.loaded_description = Some(description.into());
        self
    }

    /// Sets `retry_safe`: safe to run again after a crash left its outcome unknown.
    #[must_use]
    pub fn retry_safe(mut self) -> Self {
        self.retry_safe = true;
        self
    }

    /// Sets `unchecked_input`: the tool checks its input itself, not the runtime.
    #[must_use]
    pub fn unchecked_input(mut self) -> Self {
        self.unchecked_input = true;
        self
    }

    /// Sets `safe_while_planning`: allowed while the agent is in plan mode.
    #[must_use]
    pub fn safe_while_planning(mut self) -> Self {
        self.safe_while_planning = true;
        self
    }

    /// Sets the inline output limit, in characters.
    #[must_use]
    pub fn with_max_result_chars(mut self, chars: usize) -> Self {
        self.max_result_chars = Some(chars);
        self
    }
}

/// Receives a running tool's live output (shown to people, never recorded).
pub type ProgressSink = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// The runner's side of `ctx.spawn`: the spawn checkpoint and `inherit`, run when the tool spawns.
pub trait Spawner: Send + Sync {
    /// Passes the spawn checkpoint for `agent` and gathers what the child inherits, or refuses;
    /// `earlier_in_call` children were already asked for by the same call.
    fn admit(
        &self,
        agent: &str,
        earlier_in_call: usize,
    ) -> Result<std::collections::BTreeMap<String, Value>, String>;

    /// The id the `n`-th child of call `call_id` gets (stable across workers and retries).
    fn child_id(&self, call_id: &str, n: usize) -> String;
}

/// The runner's side of `ctx.keep`.
#[async_trait]
pub trait Keeper: Send + Sync {
    /// Extends the claim's lease.
    async fn keep(&self) -> Result<(), String>;
}

/// Records posted to tasks from in-process work, waiting for their task's runner to commit them.
#[derive(Clone, Default)]
pub struct Inbox {
    posted: Arc<Mutex<std::collections::BTreeMap<String, Vec<Record>>>>,
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox").finish_non_exhaustive()
    }
}

impl Inbox {
    /// Queues a record for `task`.
    pub fn post(&self, task: &str, record: Record) {
        self.posted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(task.to_owned())
            .or_default()
            .push(record);
    }

    /// Takes what was posted to `task`, in posting order.
    pub fn take(&self, task: &str) -> Vec<Record> {
        self.posted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(task)
            .unwrap_or_default()
    }
}

/// A handle in-process work keeps to deliver records to its task later (`ctx.poster()`).
#[derive(Debug, Clone)]
pub struct Poster {
    task: String,
    inbox: Inbox,
}

impl Poster {
    /// Posts a record of `extension`; a message enters the conversation. The task's runner
    /// commits it at its next step, or `Runtime::deliver` does while the task is idle.
    pub fn post(&self, extension: &str, kind: &str, data: Value, message: Option<&str>) {
        let mut record = Record::new(extension, kind, data);
        record.message = message.map(str::to_owned);
        self.inbox.post(&self.task, record);
    }
}

/// What the runtime hands a running tool.
#[derive(Clone)]
pub struct ToolContext {
    task_id: String,
    call_id: String,
    staged: Arc<Mutex<Vec<Record>>>,
    spawns: Arc<Mutex<Vec<SpawnOrder>>>,
    spawner: Option<Arc<dyn Spawner>>,
    keeper: Option<Arc<dyn Keeper>>,
    model: Option<Arc<dyn crate::provider::Provider>>,
    exec: Option<Arc<dyn crate::exec::ExecEnv>>,
    content: Option<Arc<dyn crate::store::ContentStore>>,
    inbox: Option<Inbox>,
    state: Arc<TaskState>,
    progress: Option<ProgressSink>,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("task_id", &self.task_id)
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// A context for one call of one task, over an empty state (for tests and direct calls).
    pub fn new(task_id: impl Into<String>, call_id: impl Into<String>) -> Self {
        Self::with_state(task_id, call_id, Arc::new(TaskState::default()), None)
    }

    /// A context over the task's folded state, as the runner builds it.
    pub fn with_state(
        task_id: impl Into<String>,
        call_id: impl Into<String>,
        state: Arc<TaskState>,
        progress: Option<ProgressSink>,
    ) -> Self {
        Self {
            task_id: task_id.into(),
            call_id: call_id.into(),
            staged: Arc::new(Mutex::new(Vec::new())),
            spawns: Arc::new(Mutex::new(Vec::new())),
            spawner: None,
            keeper: None,
            model: None,
            exec: None,
            content: None,
            inbox: None,
            state,
            progress,
        }
    }

    /// Gives the tool an execution environment (the runner does this).
    pub fn with_exec(mut self, exec: Arc<dyn crate::exec::ExecEnv>) -> Self {
        self.exec = Some(exec);
        self
    }

    /// Gives the tool the task's content store (the runner does this).
    pub fn with_content(mut self, content: Arc<dyn crate::store::ContentStore>) -> Self {
        self.content = Some(content);
        self
    }

    /// Keeps a body (an artifact: a diff, a full output) in the task's content store; a record
    /// names it by the ref. Without a content store (a tool called directly) there is none.
    pub async fn put_content(
        &self,
        media_type: &str,
        body: &[u8],
    ) -> Option<Result<crate::store::ContentRef, crate::store::StoreError>> {
        match &self.content {
            Some(content) => Some(content.put(media_type, body).await),
            None => None,
        }
    }

    /// Lets the tool post records to its task later (the runner does this).
    pub fn with_inbox(mut self, inbox: Inbox) -> Self {
        self.inbox = Some(inbox);
        self
    }

    /// Where the tool runs commands, when the host gave it one.
    pub fn exec_env(&self) -> Option<&Arc<dyn crate::exec::ExecEnv>> {
        self.exec.as_ref()
    }

    /// A handle for in-process work to post records to this task after the tool returned.
    pub fn poster(&self) -> Option<Poster> {
        self.inbox.as_ref().map(|inbox| Poster {
            task: self.task_id.clone(),
            inbox: inbox.clone(),
        })
    }

    /// Lets the tool call the model (the runner does this).
    pub fn with_model(mut self, model: Arc<dyn crate::provider::Provider>) -> Self {
        self.model = Some(model);
        self
    }

    /// Lets the tool keep the claim alive (the runner does this).
    pub fn with_keeper(mut self, keeper: Arc<dyn Keeper>) -> Self {
        self.keeper = Some(keeper);
        self
    }

    /// Calls the model outside the step loop (an auxiliary call: it is not a step and is not
    /// recorded as a reply). Transient failures are retried up to twice.
    pub async fn complete(
        &self,
        request: &crate::model::ModelRequest,
    ) -> Result<crate::model::ModelReply, ToolError> {
        let Some(model) = &self.model else {
            return Err(ToolError::Fatal(
                "no model is available to this tool here".to_owned(),
            ));
        };
        let mut attempts = 0;
        loop {
            attempts += 1;
            match model.complete(request).await {
                Ok(reply) => return Ok(reply),
                Err(crate::provider::ProviderError::Transient { .. }) if attempts < 3 => {}
                Err(err) => {
                    return Err(ToolError::RespondToModel(format!(
                        "the model call failed: {err}"
                    )));
                }
            }
        }
    }

    /// Keeps the task's claim while the tool works in-process (call it at least once per lease).
    pub async fn keep(&self) -> Result<(), ToolError> {
        match &self.keeper {
            Some(keeper) => keeper.keep().await.map_err(ToolError::Fatal),
            None => Ok(()),
        }
    }

    /// Lets the tool spawn children through `spawner` (the runner does this).
    pub fn with_spawner(mut self, spawner: Arc<dyn Spawner>) -> Self {
        self.spawner = Some(spawner);
        self
    }

    /// Asks for a child task running `agent` on `goal`; returns its id. The spawn checkpoint and
    /// `inherit` run now, so a refusal reaches the tool; the child is created when the call's
    /// records commit, and dropped with them if the call fails.
    pub fn spawn(&self, agent: &str, goal: &str) -> Result<String, ToolError> {
        self.spawn_order(agent, goal, false)
    }

    /// Like [`spawn`](Self::spawn), for a child the call does not wait for: the call returns
    /// its result at once, the child is created when the result commits, and its result is
    /// delivered to this task as a message once it finished (starting a turn if none runs).
    pub fn spawn_background(&self, agent: &str, goal: &str) -> Result<String, ToolError> {
        self.spawn_order(agent, goal, true)
    }

    fn spawn_order(&self, agent: &str, goal: &str, background: bool) -> Result<String, ToolError> {
        let Some(spawner) = &self.spawner else {
            return Err(ToolError::RespondToModel(
                "this host cannot start child tasks here".to_owned(),
            ));
        };
        let mut spawns = self.spawns.lock().unwrap_or_else(PoisonError::into_inner);
        let inherited = spawner
            .admit(agent, spawns.len())
            .map_err(ToolError::RespondToModel)?;
        let child = spawner.child_id(&self.call_id, spawns.len() + 1);
        spawns.push(SpawnOrder {
            child: child.clone(),
            agent: agent.to_owned(),
            goal: goal.to_owned(),
            inherited,
            background,
        });
        Ok(child)
    }

    /// Takes the children the tool asked for.
    pub(crate) fn take_spawns(&self) -> Vec<SpawnOrder> {
        std::mem::take(&mut *self.spawns.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Stages a record of `extension`; it commits together with this call's result.
    pub fn record(&self, extension: &str, kind: &str, data: Value) {
        self.staged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Record::new(extension, kind, data));
    }

    /// The kernel's folded state (the conversation, the turn, counts), as of when the call started.
    pub fn core(&self) -> &crate::fold::CoreState {
        &self.state.core
    }

    /// One extension's folded state, as of when the call started.
    pub fn state(&self, name: &str) -> Option<&Value> {
        self.state.ext_state(name)
    }

    /// Reports live output (not recorded).
    pub fn progress(&self, text: &str) {
        if let Some(sink) = &self.progress {
            sink(&self.call_id, text);
        }
    }

    /// [`progress`](Self::progress) as a function another thread can keep (a command's line
    /// sink); `None` when nobody watches.
    pub fn progress_sink(&self) -> Option<crate::exec::LineFn> {
        let sink = Arc::clone(self.progress.as_ref()?);
        let call = self.call_id.clone();
        Some(Arc::new(move |text: &str| sink(&call, text)))
    }

    /// Takes the records staged by the tool.
    pub(crate) fn take_staged(&self) -> Vec<Record> {
        std::mem::take(&mut *self.staged.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The task the call belongs to.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The model's id for this call.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The key a tool uses to find the result of this exact call after a crash: `<task id>:<call id>`.
    pub fn idempotency_key(&self) -> String {
        format!("{}:{}", self.task_id, self.call_id)
    }
}

/// What a parking tool waits for. While it waits the task holds no worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "on", rename_all = "snake_case")]
pub enum Park {
    /// A person's answer to a question.
    Ask {
        /// The question.
        question: String,
    },
    /// Every child task this call spawned.
    Children,
}

/// A tool's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolOutput {
    /// The text the model sees.
    pub text: String,
    /// Whether the call failed in a way the model should see as an error.
    pub is_error: bool,
    /// Structured data for frontends and records.
    pub data: Option<Value>,
    /// Set when the call must wait; `text` is then ignored and `resume` gives the result.
    pub park: Option<Park>,
    /// Images the model sees with the text (a screenshot `Read`); kept in the content store,
    /// the result records their refs.
    pub attachments: Vec<Attachment>,
}

impl ToolOutput {
    /// Parks the call until a person answers `question`.
    pub fn ask(question: impl Into<String>) -> Self {
        Self {
            park: Some(Park::Ask {
                question: question.into(),
            }),
            ..Self::default()
        }
    }

    /// Parks the call until every child it spawned has finished.
    pub fn wait_for_children() -> Self {
        Self {
            park: Some(Park::Children),
            ..Self::default()
        }
    }

    /// A successful text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// An error result the model sees.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
            ..Self::default()
        }
    }

    /// The same result with an image the model sees with it.
    pub fn with_attachment(mut self, media_type: impl Into<String>, data: Vec<u8>) -> Self {
        self.attachments.push(Attachment {
            media_type: media_type.into(),
            data: Arc::new(data),
        });
        self
    }
}

impl crate::contrib::StateView for ToolContext {
    fn ext_state(&self, name: &str) -> Option<&Value> {
        self.state(name)
    }
}

/// Why a tool call failed — encoding what the runtime does next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The model sees this message as the call's error result and may try again.
    #[error("{0}")]
    RespondToModel(String),
    /// Something broke that the model cannot fix by calling differently (a broken environment,
    /// a missing capability). The call still ends with an error result naming it.
    #[error("fatal tool error: {0}")]
    Fatal(String),
}

/// A model-visible capability.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The model-visible name.
    fn name(&self) -> &str;

    /// The description the model reads.
    fn description(&self) -> &str;

    /// The JSON Schema of the input object; the same for the life of the tool (calls are
    /// checked against it as first compiled).
    fn input_schema(&self) -> Value;

    /// Behavioural flags.
    fn flags(&self) -> ToolFlags {
        ToolFlags::default()
    }

    /// Runs one call.
    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;

    /// Finishes a call that parked, when what it waited for arrives. Runs exactly once per wake.
    async fn resume(
        &self,
        _input: Value,
        _wake: Wake,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Fatal(format!(
            "{} parked but does not implement resume",
            self.name()
        )))
    }

    /// After a crash left this call's outcome unknown: find its result by
    /// [`ToolContext::idempotency_key`], if the tool can. `None` means not found.
    async fn recover(&self, _ctx: &ToolContext) -> Result<Option<ToolOutput>, ToolError> {
        Ok(None)
    }

    /// Whether `answer` answers the question this call (with `input`) parked on: checked when
    /// the answer arrives, before it is recorded, so a malformed one is refused and the question
    /// stays open instead of failing the call on resume. `Err` says what is wrong with it.
    fn check_answer(&self, _input: &Value, _answer: &Value) -> Result<(), String> {
        Ok(())
    }
}

impl fmt::Debug for dyn Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tool({})", self.name())
    }
}

/// The SHA-256 of a tool's canonical schema entry (name, description, input schema).
pub fn tool_schema_hash(tool: &dyn Tool) -> String {
    let entry = serde_json::json!({
        "name": tool.name(),
        "description": tool.description(),
        "input_schema": tool.input_schema(),
    });
    canonical::sha256_hex(&canonical::to_bytes(&entry))
}
