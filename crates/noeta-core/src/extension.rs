//! The one `Extension` interface: every hook the runner calls, all optional, and the view hooks read.
//!
//! A capability is an extension that implements the hooks it needs. The
//! runner calls one ordered list of extensions per agent (see
//! [`crate::session`]) and the agent's policy, nothing else. Hooks that
//! compute from the view are synchronous; hooks that may wait are async. A
//! hook that records calls [`View::record`]; the runner appends what was
//! staged in the batch of the phase that produced it.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contrib::Verdict;
use crate::fold::{CoreState, TaskState};
use crate::model::Message;
use crate::model::ToolCall;
use crate::model::{ModelReply, ModelRequest};
use crate::provider::Provider;
use crate::store::{Event, Record, TaskId};
use crate::tool::{Tool, ToolOutput};

/// A hook's failure; the runner applies the hook's failure rule to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HookError(pub String);

impl HookError {
    /// A failure with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// What a hook's result is.
pub type HookResult<T> = Result<T, HookError>;

/// Control flow a step hook may raise instead of returning (`reminders`, `before_model`);
/// none of these counts as the hook failing. From `on_context_overflow`, any signal means
/// the extension gives up making room.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StepSignal {
    /// End the turn now, without calling the model.
    TurnDone {
        /// Why.
        reason: String,
    },
    /// Compose the request again (something it depends on changed).
    RequestStale,
    /// Fail the turn with this reason.
    TurnFailed {
        /// Why.
        reason: String,
    },
    /// The hook itself failed.
    Error(HookError),
}

impl From<HookError> for StepSignal {
    fn from(err: HookError) -> Self {
        StepSignal::Error(err)
    }
}

/// A tool a step offers, with the extension that offered it.
#[derive(Clone)]
pub struct OfferedTool {
    /// The extension offering it.
    pub extension: String,
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// Held back until an extension loads it (`ToolFlags::deferred`).
    pub deferred: bool,
}

impl fmt::Debug for OfferedTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.extension, self.tool.name())
    }
}

/// What `tool_changes` does to the offered set.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ToolChanges {
    /// Tools to add.
    pub add: Vec<Arc<dyn Tool>>,
    /// Tools to withhold, each with the error a call to it returns.
    pub withhold: Vec<(String, String)>,
    /// Request entries that are not tools (provider-side tools, for instance).
    pub entries: Vec<Value>,
}

impl ToolChanges {
    /// No change.
    pub fn none() -> Self {
        Self::default()
    }
}

impl fmt::Debug for ToolChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let add: Vec<&str> = self.add.iter().map(|t| t.name()).collect();
        f.debug_struct("ToolChanges")
            .field("add", &add)
            .field("withhold", &self.withhold)
            .field("entries", &self.entries)
            .finish()
    }
}

/// Where a piece of context goes in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Segment {
    /// The stable prefix: system text, cached across steps.
    Stable,
    /// The semi-stable residents (instructions, environment, skills listings).
    Resident,
}

/// Text an extension puts into the request's system part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextPart {
    /// Which segment.
    pub segment: Segment,
    /// The text.
    pub text: String,
    /// The content kind of a resident (one of the session's [`kinds`](crate::session::Session::kinds)),
    /// which places it; residents without one follow every kind, in extension order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

impl ContextPart {
    /// Stable system text.
    pub fn stable(text: impl Into<String>) -> Self {
        Self {
            segment: Segment::Stable,
            text: text.into(),
            kind: None,
        }
    }

    /// A resident of no content kind: placed after the residents of every kind.
    pub fn resident(text: impl Into<String>) -> Self {
        Self {
            segment: Segment::Resident,
            text: text.into(),
            kind: None,
        }
    }

    /// A resident of content kind `kind`, placed by the kind's band.
    pub fn resident_of(kind: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            segment: Segment::Resident,
            text: text.into(),
            kind: Some(kind.into()),
        }
    }
}

/// A child task about to be created (the spawn checkpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRequest {
    /// The child's agent.
    pub agent: String,
    /// The child's depth below the root.
    pub depth: u32,
    /// Children the same call already asked for, before this one (not yet in the task's state).
    pub earlier_in_call: usize,
}

/// An extension's say on a compaction about to happen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactAdvice {
    /// Refuse the compaction, with the reason.
    pub refuse: Option<String>,
    /// Extra instructions for the summary.
    pub instructions: Option<String>,
}

/// An answer to a call's asks on the user's behalf (`resolve_ask`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskAnswer {
    /// The call runs.
    Allow,
    /// The call is refused; the reason, when the person gave one, reaches the model with the
    /// refusal (Claude Code's "no, and here is what to do instead").
    Deny(Option<String>),
}

impl AskAnswer {
    /// `allow`, as the plain yes or no it is.
    pub fn from_bool(allow: bool) -> Self {
        if allow { Self::Allow } else { Self::Deny(None) }
    }

    /// The refusal the model reads, for a denial.
    pub fn refusal(&self) -> Option<String> {
        match self {
            Self::Allow => None,
            Self::Deny(None) => Some("declined on the user's behalf".to_owned()),
            Self::Deny(Some(reason)) => {
                Some(format!("the user declined this call and said: {reason}"))
            }
        }
    }
}

/// A slash command an extension offers to frontends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandSpec {
    /// The name, without the slash.
    pub name: String,
    /// What it does.
    pub description: String,
}

/// What a slash command answers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandReply {
    /// Text shown to the person; nothing enters the conversation.
    Show(String),
    /// A message sent on the person's behalf, as if typed (an MCP prompt, a markdown
    /// command): the frontend sends it and runs the turn.
    Send(String),
}

impl CommandReply {
    /// The text, shown or sent.
    pub fn text(&self) -> &str {
        match self {
            Self::Show(text) | Self::Send(text) => text,
        }
    }
}

/// What hooks see: the task's folded state and a place to stage records.
pub struct View<'a> {
    task: &'a TaskId,
    agent: &'a str,
    state: &'a TaskState,
    roster: &'a [String],
    staged: Mutex<Vec<Record>>,
    pub(crate) peers: &'a [Arc<dyn Extension>],
    tools: &'a [OfferedTool],
    model: Option<&'a dyn Provider>,
    exec: Option<&'a Arc<dyn crate::exec::ExecEnv>>,
}

impl fmt::Debug for View<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("View")
            .field("task", &self.task)
            .field("agent", &self.agent)
            .field("seq", &self.state.seq)
            .finish_non_exhaustive()
    }
}

impl<'a> View<'a> {
    /// A view of `state` for `agent` in `task`; `peers` is the agent's extension list.
    pub fn new(
        task: &'a TaskId,
        agent: &'a str,
        state: &'a TaskState,
        roster: &'a [String],
        peers: &'a [Arc<dyn Extension>],
    ) -> Self {
        Self {
            task,
            agent,
            state,
            roster,
            staged: Mutex::new(Vec::new()),
            peers,
            tools: &[],
            model: None,
            exec: None,
        }
    }

    /// The same view, seeing the runtime's execution environment (the runner's views do when
    /// the runtime has one).
    pub fn with_exec_env(mut self, exec: Option<&'a Arc<dyn crate::exec::ExecEnv>>) -> Self {
        self.exec = exec;
        self
    }

    /// The execution environment tools run in, `None` when the runtime has none.
    pub fn exec_env(&self) -> Option<&'a Arc<dyn crate::exec::ExecEnv>> {
        self.exec
    }

    /// The workspace root of the execution environment, `None` without one: where hooks find
    /// the project's files (its instructions, its skills).
    pub fn workspace(&self) -> Option<&'a std::path::Path> {
        self.exec.map(|exec| exec.workspace())
    }

    /// The same view, able to call the task's model (the runner's views are).
    pub fn with_model(mut self, model: &'a dyn Provider) -> Self {
        self.model = Some(model);
        self
    }

    /// The task's model, for auxiliary calls (a summary); `None` outside the runner.
    pub fn model(&self) -> Option<&'a dyn Provider> {
        self.model
    }

    /// The same view, able to look up the tools offered in this step (the gate's view is).
    pub fn with_tools(mut self, tools: &'a [OfferedTool]) -> Self {
        self.tools = tools;
        self
    }

    /// A tool offered in this step, by model-visible name (only in views that carry the offer).
    pub fn find_tool(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools
            .iter()
            .find(|t| t.tool.name() == name)
            .map(|t| &t.tool)
    }

    /// The task.
    pub fn task_id(&self) -> &TaskId {
        self.task
    }

    /// The agent running it.
    pub fn agent(&self) -> &str {
        self.agent
    }

    /// The agents this one may spawn.
    pub fn agents(&self) -> &[String] {
        self.roster
    }

    /// The sequence number of the last event folded into the state.
    pub fn seq(&self) -> u64 {
        self.state.seq
    }

    /// The kernel's folded state.
    pub fn core(&self) -> &CoreState {
        &self.state.core
    }

    /// The conversation.
    pub fn messages(&self) -> &[Message] {
        &self.state.core.messages
    }

    /// One extension's folded state.
    pub fn ext_state(&self, name: &str) -> Option<&Value> {
        self.state.ext_state(name)
    }

    /// Stages a record of `extension`; it is appended with the current phase's batch.
    pub fn record(&self, extension: &str, kind: &str, data: Value) {
        self.stage(Record::new(extension, kind, data));
    }

    /// Stages a record whose message enters the conversation.
    pub fn record_with_message(&self, extension: &str, kind: &str, data: Value, message: &str) {
        self.stage(Record::new(extension, kind, data).with_message(message));
    }

    fn stage(&self, record: Record) {
        self.staged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(record);
    }

    /// Takes the records staged so far.
    pub fn take_staged(&self) -> Vec<Record> {
        std::mem::take(&mut *self.staged.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl crate::contrib::StateView for View<'_> {
    fn ext_state(&self, name: &str) -> Option<&Value> {
        self.state.ext_state(name)
    }
}

/// One capability's hooks, all optional. See the hook table in `docs/hooks.md`.
#[async_trait]
pub trait Extension: Send + Sync {
    /// The extension's unique name; its records and state live under it.
    fn name(&self) -> &str;

    /// Other names whose records this extension also folds.
    fn folds(&self) -> Vec<String> {
        Vec::new()
    }

    /// Every claim, before the first step: read what is read once, and record it.
    async fn on_start(&self, _view: &View<'_>) -> HookResult<()> {
        Ok(())
    }

    /// A user message arrived (turn intake), before the turn's first step.
    async fn turn_intake(&self, _view: &View<'_>, _message: &str) -> HookResult<()> {
        Ok(())
    }

    /// Every step: the tools this extension offers now. First offer of a name wins.
    fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        Ok(Vec::new())
    }

    /// Every step, after all `tools`: add, withhold, or add non-tool request entries.
    fn tool_changes(&self, _view: &View<'_>, _offered: &[OfferedTool]) -> HookResult<ToolChanges> {
        Ok(ToolChanges::none())
    }

    /// Every model call: system text and residents.
    fn context(&self, _view: &View<'_>) -> HookResult<Vec<ContextPart>> {
        Ok(Vec::new())
    }

    /// Before every model call: reminders recorded now and sent with this request.
    async fn reminders(&self, _view: &View<'_>) -> Result<Vec<String>, StepSignal> {
        Ok(Vec::new())
    }

    /// The pure tail render: text after the conversation, re-derived on every compose, never recorded.
    fn tail(&self, _view: &View<'_>) -> Option<String> {
        None
    }

    /// Before every model call, after reminders: the request to send, or a signal.
    async fn before_model(
        &self,
        _view: &View<'_>,
        request: ModelRequest,
    ) -> Result<ModelRequest, StepSignal> {
        Ok(request)
    }

    /// The model refused the request as too long: make room and return true to retry.
    async fn on_context_overflow(
        &self,
        _view: &View<'_>,
        _request: &ModelRequest,
    ) -> Result<bool, StepSignal> {
        Ok(false)
    }

    /// The reply had no text and no tool calls: a message to go on with, if any.
    async fn on_empty_reply(
        &self,
        _view: &View<'_>,
        _reply: &ModelReply,
    ) -> HookResult<Option<String>> {
        Ok(None)
    }

    /// Every tool call, in reply order: allow, deny, rewrite, ask, or no opinion.
    async fn before_tool(&self, _view: &View<'_>, _call: &ToolCall) -> HookResult<Option<Verdict>> {
        Ok(None)
    }

    /// A call is about to park on asks: answer for the user, if this extension can.
    async fn resolve_ask(
        &self,
        _view: &View<'_>,
        _call: &ToolCall,
        _asks: &[String],
    ) -> HookResult<Option<AskAnswer>> {
        Ok(None)
    }

    /// A call ran, before its result is recorded: change the result.
    async fn after_tool(
        &self,
        _view: &View<'_>,
        _call: &ToolCall,
        output: ToolOutput,
    ) -> HookResult<ToolOutput> {
        Ok(output)
    }

    /// After every appended event: metrics, audit, forwarding.
    fn on_event(&self, _view: &View<'_>, _event: &Event) -> HookResult<()> {
        Ok(())
    }

    /// Folds one of this extension's records (or a folded name's) into its state. Pure.
    fn reduce(&self, _state: &mut Value, _kind: &str, _data: &Value) -> Result<(), String> {
        Ok(())
    }

    /// What a task continuing this one's conversation (a fork) starts from; what belongs to the
    /// source task's own run (its timers, its running background work) stays behind.
    fn continue_state(&self, state: &Value) -> Value {
        state.clone()
    }

    /// Configuration every child task starts with.
    fn inherit(&self, _view: &View<'_>) -> HookResult<Option<Value>> {
        Ok(None)
    }

    /// Asked by a compacting extension: refuse, or add instructions for the summary.
    fn before_compact(&self, _view: &View<'_>) -> HookResult<CompactAdvice> {
        Ok(CompactAdvice::default())
    }

    /// Asked by a compacting extension: text that must stay after compaction.
    fn resident(&self, _view: &View<'_>) -> HookResult<Option<String>> {
        Ok(None)
    }

    /// Asked by a compacting extension: text that must lead the kept context.
    fn lead_resident(&self, _view: &View<'_>) -> HookResult<Option<String>> {
        Ok(None)
    }

    /// The spawn checkpoint: every child task, whether a tool or a hook starts it.
    fn before_spawn(&self, _view: &View<'_>, _spawn: &SpawnRequest) -> HookResult<Option<Verdict>> {
        Ok(None)
    }

    /// Before the turn ends: a message the model sees to refuse ending it, if any.
    async fn before_finish(&self, _view: &View<'_>) -> HookResult<Option<String>> {
        Ok(None)
    }

    /// Slash commands for frontends.
    fn commands(&self, _view: &View<'_>) -> HookResult<Vec<CommandSpec>> {
        Ok(Vec::new())
    }

    /// Runs a slash command: text to show, or a message to send; errors go to the caller.
    async fn run_command(
        &self,
        _view: &View<'_>,
        name: &str,
        _args: &str,
    ) -> HookResult<CommandReply> {
        Err(HookError::new(format!("unknown command `/{name}`")))
    }
}
