//! The `Tool` trait: a model-visible capability with a name, a description, a JSON Schema and an async `run`.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use crate::canonical;
use crate::fold::TaskState;
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
    /// Not offered up front; loaded through tool search.
    pub deferred: bool,
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
    pub fn with_risk(mut self, risk: Risk) -> Self {
        self.risk = risk;
        self
    }
}

/// Receives a running tool's live output (shown to people, never recorded).
pub type ProgressSink = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// What the runtime hands a running tool.
#[derive(Clone)]
pub struct ToolContext {
    task_id: String,
    call_id: String,
    staged: Arc<Mutex<Vec<Record>>>,
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
            state,
            progress,
        }
    }

    /// Stages a record of `extension`; it commits together with this call's result.
    pub fn record(&self, extension: &str, kind: &str, data: Value) {
        self.staged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Record::new(extension, kind, data));
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

/// A tool's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolOutput {
    /// The text the model sees.
    pub text: String,
    /// Whether the call failed in a way the model should see as an error.
    pub is_error: bool,
    /// Structured data for frontends and records.
    pub data: Option<Value>,
}

impl ToolOutput {
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
            data: None,
        }
    }
}

/// Why a tool call failed — encoding what the runtime does next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The model sees this message as the call's error result and may try again.
    #[error("{0}")]
    RespondToModel(String),
    /// The turn cannot go on (a broken environment, not a bad call).
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

    /// The JSON Schema of the input object.
    fn input_schema(&self) -> Value;

    /// Behavioural flags.
    fn flags(&self) -> ToolFlags {
        ToolFlags::default()
    }

    /// Runs one call.
    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;

    /// After a crash left this call's outcome unknown: find its result by
    /// [`ToolContext::idempotency_key`], if the tool can. `None` means not found.
    async fn recover(&self, _ctx: &ToolContext) -> Result<Option<ToolOutput>, ToolError> {
        Ok(None)
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
