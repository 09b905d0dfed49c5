//! What the memory tests share: a temporary memory directory, a session with the plugin, tool calls.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions; each test file uses a part"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{Extension, View};
use noeta_core::fold::TaskState;
use noeta_core::model::{ModelReply, ModelRequest};
use noeta_core::provider::{Provider, ProviderError, ScriptedProvider};
use noeta_core::runner::Runtime;
use noeta_core::session::{Session, SessionError};
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_core::{
    LoadOptions, PluginSet, PluginSource, ProviderInput, ReminderProvider, Resolved, Seam,
    StateView, Tool, ToolContext, ToolError, load_plugins, standard_registry,
};
use serde_json::{Value, json};
use tempfile::TempDir;

/// 2026-01-02T03:04:05Z, the time the tests' clock starts at.
pub(crate) const T0: u64 = 1_767_323_045_000;
pub(crate) const T0_TEXT: &str = "2026-01-02T03:04:05Z";

/// A temporary memory directory.
pub(crate) struct Dir {
    pub(crate) dir: TempDir,
}

impl Dir {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes memory `name` with `text` as its file.
    pub(crate) fn put(&self, name: &str, text: impl AsRef<[u8]>) {
        std::fs::write(self.path(&format!("{name}.md")), text).unwrap();
    }

    /// Memory `name`'s file.
    pub(crate) fn get(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(&format!("{name}.md"))).unwrap()
    }

    /// The settings pointing the plugin here.
    pub(crate) fn settings(&self) -> Value {
        json!({ "dir": self.root().to_str().unwrap() })
    }
}

/// The plugin set with the memory plugin on `clock`.
pub(crate) fn plugin_set(clock: &Arc<ManualClock>) -> PluginSet {
    load_plugins(
        &[PluginSource::Linked(
            noeta_builtin_memory::plugin_with_clock(clock.clone()),
        )],
        &LoadOptions::new(standard_registry()),
    )
    .unwrap()
}

/// A session of agent `main` with the memory plugin, `settings` (none when null) and `clock`.
pub(crate) fn session_on(
    settings: Value,
    clock: &Arc<ManualClock>,
) -> Result<Session, SessionError> {
    let config = if settings.is_null() {
        BTreeMap::new()
    } else {
        BTreeMap::from([("memory".to_owned(), settings)])
    };
    noeta_testkit::harness::try_session_of(
        vec![noeta_builtin_memory::plugin_with_clock(clock.clone())],
        &["memory"],
        &config,
    )
}

/// A session with `settings` on a clock at [`T0`].
pub(crate) fn session(settings: Value) -> Result<Session, SessionError> {
    session_on(settings, &ManualClock::at(T0))
}

/// The tools the session offers, in offer order.
pub(crate) fn tools(session: &Session) -> Vec<Arc<dyn Tool>> {
    let task = TaskId::new("tools").unwrap();
    let state = TaskState::default();
    let view = View::new(&task, "main", &state, &[], &session.extensions);
    session
        .extensions
        .iter()
        .flat_map(|e| e.tools(&view).unwrap())
        .collect()
}

/// The session's tool named `name`.
pub(crate) fn tool(session: &Session, name: &str) -> Arc<dyn Tool> {
    tools(session)
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap()
}

/// The session's extension named `name`.
pub(crate) fn extension(session: &Session, name: &str) -> Arc<dyn Extension> {
    session
        .extensions
        .iter()
        .find(|e| e.name() == name)
        .cloned()
        .unwrap()
}

/// Memory tools over one directory, called directly.
pub(crate) struct Tools {
    pub(crate) dir: Dir,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) session: Session,
}

impl Tools {
    pub(crate) fn new() -> Self {
        let dir = Dir::new();
        let clock = ManualClock::at(T0);
        let session = session_on(dir.settings(), &clock).unwrap();
        Self {
            dir,
            clock,
            session,
        }
    }

    /// Calls `name` with `input` as task `task-1`.
    pub(crate) fn call(&self, name: &str, input: Value) -> Result<String, String> {
        let tool = tool(&self.session, name);
        let ctx = ToolContext::new("task-1", "call-1");
        match block_on(tool.run(input, &ctx)) {
            Ok(output) => {
                assert!(!output.is_error, "{}", output.text);
                Ok(output.text)
            }
            Err(ToolError::RespondToModel(message)) => Err(message),
            Err(other) => panic!("{name} failed: {other}"),
        }
    }

    /// The text of a call that must succeed.
    pub(crate) fn ok(&self, name: &str, input: Value) -> String {
        self.call(name, input).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The error of a call that must fail.
    pub(crate) fn err(&self, name: &str, input: Value) -> String {
        match self.call(name, input) {
            Ok(text) => panic!("expected an error, got: {text}"),
            Err(message) => message,
        }
    }
}

/// A provider that replays a script and keeps every request it was sent.
pub(crate) struct Capture {
    inner: ScriptedProvider,
    pub(crate) requests: Mutex<Vec<ModelRequest>>,
}

impl Capture {
    /// Answers `turns` model calls with `done`.
    pub(crate) fn done(turns: usize) -> Arc<Self> {
        let replies: Vec<Value> = (0..turns).map(|_| json!({ "text": "done" })).collect();
        Arc::new(Self {
            inner: ScriptedProvider::from_json(&json!({ "turns": replies }).to_string(), "test")
                .unwrap(),
            requests: Mutex::new(Vec::new()),
        })
    }

    /// The residents of every request, in order.
    pub(crate) fn residents(&self) -> Vec<Vec<String>> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.residents.clone())
            .collect()
    }
}

#[async_trait]
impl Provider for Capture {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn context_window(&self) -> u64 {
        self.inner.context_window()
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.complete(request).await
    }
}

/// A task run through the runtime with the memory plugin.
pub(crate) struct Run {
    pub(crate) rt: Runtime,
    pub(crate) session: Session,
    pub(crate) task: TaskId,
    pub(crate) provider: Arc<Capture>,
}

impl Run {
    /// Creates task `id` with `message` on a session over `dir`, and runs its first turn.
    pub(crate) fn start(dir: &Dir, id: &str, message: &str) -> Self {
        let provider = Capture::done(8);
        let rt = Runtime::new(
            Arc::new(MemoryEventLog::new(ManualClock::at(0))),
            Arc::new(MemoryContentStore::new()),
            provider.clone(),
        );
        let session = session(dir.settings()).unwrap();
        let task = TaskId::new(id).unwrap();
        block_on(rt.create(&session, &task, message)).unwrap();
        block_on(rt.run(&session, &task)).unwrap();
        Self {
            rt,
            session,
            task,
            provider,
        }
    }

    /// Sends another user message and runs the turn.
    pub(crate) fn send(&self, message: &str) {
        block_on(self.rt.send(&self.session, &self.task, message)).unwrap();
        block_on(self.rt.run(&self.session, &self.task)).unwrap();
    }

    /// The task's records of `extension` and `kind`: their data and message.
    pub(crate) fn records(&self, extension: &str, kind: &str) -> Vec<(Value, Option<String>)> {
        block_on(self.rt.log().read(&self.task, 0))
            .unwrap()
            .into_iter()
            .filter(|e| e.record.extension == extension && e.record.kind == kind)
            .map(|e| (e.record.data.clone(), e.record.message.clone()))
            .collect()
    }

    /// The task's folded state.
    pub(crate) fn state(&self) -> TaskState {
        block_on(self.rt.load(&self.session, &self.task)).unwrap()
    }
}

/// A state view over a fixed map of extension states.
pub(crate) struct States(pub(crate) BTreeMap<String, Value>);

impl StateView for States {
    fn ext_state(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }
}

/// The `memory-recall` provider, resolved from the plugin.
pub(crate) fn recall_provider() -> Arc<dyn ReminderProvider> {
    let set = plugin_set(&ManualClock::at(T0));
    match set
        .resolve_contribution("memory", "reminder_provider", "memory-recall")
        .unwrap()
    {
        Resolved::ReminderProvider(provider) => provider,
        other => panic!("not a reminder provider: {other:?}"),
    }
}

/// What the recall provider answers to `message` over `dir` (the state naming the directory
/// as the pack's index record does).
pub(crate) fn recall(dir: &Dir, message: &str) -> Vec<String> {
    let states = States(BTreeMap::from([(
        "memory".to_owned(),
        json!({ "index": "", "dir": dir.root().to_str().unwrap() }),
    )]));
    let input = ProviderInput::new(Seam::TurnIntake, Some(message), &states);
    block_on(recall_provider().provide(input))
        .unwrap()
        .into_iter()
        .map(|r| r.text)
        .collect()
}
