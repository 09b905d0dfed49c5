//! How a task runs: the provider, model, workspace, permission mode, sandbox and agent a host
//! recorded when it made the task, so that any later process — a `noeta resume`, a worker on
//! another host, a server answering for it — carries it on as it was started.
//!
//! The record lives in the task's `task_started` record: the agent in its `agent` field (the
//! kernel writes it), the rest in its `host` field (`Runtime::with_host_facts`). One type
//! writes it ([`TaskRun::facts`]) and one reads it ([`TaskRun::from_started`]); records made
//! before the type existed (no `version` key) read the same way.

use std::path::{Path, PathBuf};

use noeta_core::store::{EventLog, StoreError, TaskId};
use serde_json::{Map, Value, json};

/// The version [`TaskRun::facts`] writes. A record of a later version is refused, naming it,
/// rather than run on a guess.
pub const TASK_RUN_VERSION: u64 = 1;

/// How a task runs, as recorded when it was made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TaskRun {
    /// The agent (`main` when the record names none).
    pub agent: Option<String>,
    /// The model provider (`anthropic`, `openai`, `scripted:<absolute path>`); `None`: the
    /// provider the settings or the environment give where it runs.
    pub provider: Option<String>,
    /// The model; `None`: the provider's default.
    pub model: Option<String>,
    /// The workspace it runs in (a submitted task's; `None`: where it is resumed).
    pub workspace: Option<PathBuf>,
    /// The permission mode it was submitted with.
    pub permission_mode: Option<String>,
    /// The sandbox it was submitted with.
    pub sandbox: Option<String>,
    /// Whether it was submitted to the store's queue (a worker runs it), rather than run by
    /// the process that made it.
    pub queued: bool,
}

/// A `task_started` record whose run cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("task {task}: how it runs cannot be read from its `task_started` record: {reason}")]
pub struct TaskRunError {
    /// The task.
    pub task: String,
    /// What is wrong.
    pub reason: String,
}

impl TaskRun {
    /// A run of `agent` with nothing else chosen.
    pub fn of_agent(agent: impl Into<String>) -> Self {
        Self {
            agent: Some(agent.into()),
            ..Self::default()
        }
    }

    /// The agent, `main` when none is named.
    pub fn agent(&self) -> &str {
        self.agent.as_deref().unwrap_or("main")
    }

    /// The same run with a scripted model's script named by its absolute path (resolved
    /// against `workspace`), so a worker elsewhere finds it.
    #[must_use]
    pub fn with_absolute_script(mut self, workspace: &Path) -> Self {
        if let Some(script) = self
            .provider
            .as_deref()
            .and_then(|p| p.strip_prefix("scripted:"))
        {
            self.provider = Some(format!("scripted:{}", workspace.join(script).display()));
        }
        self
    }

    /// The host facts this run is recorded as (the agent is the `task_started` record's own
    /// field, not repeated here). Keys sorted; absent choices left out; never a secret.
    pub fn facts(&self) -> Value {
        let mut facts = Map::new();
        facts.insert("version".into(), json!(TASK_RUN_VERSION));
        let mut text = |key: &str, value: Option<String>| {
            if let Some(value) = value {
                facts.insert(key.to_owned(), Value::String(value));
            }
        };
        text("provider", self.provider.clone());
        text("model", self.model.clone());
        text(
            "workspace",
            self.workspace.as_ref().map(|w| w.display().to_string()),
        );
        text("permission_mode", self.permission_mode.clone());
        text("sandbox", self.sandbox.clone());
        if self.queued {
            facts.insert("queued".into(), Value::Bool(true));
        }
        Value::Object(facts)
    }

    /// The run a `task_started` record's data describes: its `agent` and its `host` facts, as
    /// [`facts`](Self::facts) writes them or as hosts wrote them before (no `version`).
    ///
    /// # Errors
    /// A later version, or a fact of the wrong type, naming it.
    pub fn from_started(task: &TaskId, data: &Value) -> Result<Self, TaskRunError> {
        let fail = |reason: String| TaskRunError {
            task: task.to_string(),
            reason,
        };
        let host = match &data["host"] {
            Value::Null => &Value::Object(Map::new()),
            Value::Object(_) => &data["host"],
            other => return Err(fail(format!("`host` is {other}, not an object"))),
        };
        if let Some(version) = host.get("version") {
            match version.as_u64() {
                Some(v) if v <= TASK_RUN_VERSION => {}
                _ => {
                    return Err(fail(format!(
                        "`host.version` is {version}; this noeta reads up to {TASK_RUN_VERSION} (a later noeta made it)"
                    )));
                }
            }
        }
        let text = |value: &Value, key: &str| -> Result<Option<String>, TaskRunError> {
            match value.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(other) => Err(fail(format!("`{key}` is {other}, not a string"))),
            }
        };
        let queued = match host.get("queued") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(queued)) => *queued,
            Some(other) => return Err(fail(format!("`host.queued` is {other}, not a boolean"))),
        };
        Ok(Self {
            agent: text(data, "agent")?,
            provider: text(host, "provider")?,
            model: text(host, "model")?,
            workspace: text(host, "workspace")?.map(PathBuf::from),
            permission_mode: text(host, "permission_mode")?,
            sandbox: text(host, "sandbox")?,
            queued,
        })
    }

    /// The run `task` recorded (a task without a `task_started` record reads as one of
    /// `main` with nothing chosen).
    ///
    /// # Errors
    /// The store's, or the record's ([`from_started`](Self::from_started)).
    pub async fn of_task(log: &dyn EventLog, task: &TaskId) -> Result<Self, TaskRunFailure> {
        let first = log.read(task, 0).await?.into_iter().next();
        match first.filter(|e| e.record.extension == "core" && e.record.kind == "task_started") {
            Some(started) => Ok(Self::from_started(task, &started.record.data)?),
            None => Ok(Self::default()),
        }
    }

    /// The run of `task`'s tree: its root's, which every task of the tree keeps (with the
    /// agent of `task` itself).
    ///
    /// # Errors
    /// As [`of_task`](Self::of_task).
    pub async fn of_tree(log: &dyn EventLog, task: &TaskId) -> Result<Self, TaskRunFailure> {
        let mut root = task.clone();
        while let Some(parent) = log.info(&root).await?.parent {
            root = parent;
        }
        let mut run = Self::of_task(log, &root).await?;
        if root != *task {
            run.agent = Self::of_task(log, task).await?.agent;
        }
        Ok(run)
    }

    /// What a runtime is opened with: the host's and the model's choices.
    pub(crate) fn runtime_key(&self) -> Self {
        Self {
            agent: None,
            queued: false,
            ..self.clone()
        }
    }
}

/// Reading a task's run failed: the store, or the record.
#[derive(Debug, thiserror::Error)]
pub enum TaskRunFailure {
    /// The store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The record.
    #[error(transparent)]
    Record(#[from] TaskRunError),
}

/// A new task id: the time it was made (UTC) and a few characters that keep two made in one
/// second apart.
///
/// # Errors
/// Never in practice: the id is made of digits, letters and `-`.
pub fn new_task_id() -> Result<TaskId, StoreError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) =
        noeta_core::dates::civil_from_days(i64::try_from(days).unwrap_or_default());
    let salt = (now.subsec_nanos() ^ std::process::id().rotate_left(16)) & 0xffff;
    TaskId::new(format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}-{salt:04x}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    ))
}
