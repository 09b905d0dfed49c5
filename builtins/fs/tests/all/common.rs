//! What the fs tests share: a tempdir workspace, a session with the plugin, scripted runs.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions; each test file uses a part"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::executor::block_on;
use noeta_core::Tool;
use noeta_core::exec::LocalExecEnv;
use noeta_core::extension::{Extension, View};
use noeta_core::fold::TaskState;
use noeta_core::model::Role;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::Runtime;
use noeta_core::session::{Session, SessionError};
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_testkit::harness::try_session_of;
use serde_json::{Value, json};
use tempfile::TempDir;

/// A temporary workspace directory.
pub(crate) struct Ws {
    pub(crate) dir: TempDir,
}

impl Ws {
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

    /// Writes `content` at `rel`, creating directories.
    pub(crate) fn put(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub(crate) fn get(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }
}

/// A session of agent `main` with the fs plugin and `settings` (none when null).
pub(crate) fn session(settings: Value) -> Result<Session, SessionError> {
    let config = if settings.is_null() {
        BTreeMap::new()
    } else {
        BTreeMap::from([("fs".to_owned(), settings)])
    };
    try_session_of(vec![noeta_builtin_fs::plugin()], &["fs"], &config)
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

/// The session's extension named `name`.
pub(crate) fn extension(session: &Session, name: &str) -> Arc<dyn Extension> {
    session
        .extensions
        .iter()
        .find(|e| e.name() == name)
        .cloned()
        .unwrap()
}

/// A finished scripted task.
pub(crate) struct Run {
    pub(crate) rt: Runtime,
    pub(crate) session: Session,
    pub(crate) task: TaskId,
}

impl Run {
    /// Every tool result, in order: its text and whether it is an error.
    pub(crate) fn results(&self) -> Vec<(String, bool)> {
        let state = block_on(self.rt.load(&self.session, &self.task)).unwrap();
        state
            .core
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| (m.text.to_string(), m.is_error))
            .collect()
    }

    /// The last tool result.
    pub(crate) fn last(&self) -> (String, bool) {
        self.results().pop().unwrap()
    }

    /// The data of the task's `fs` records of `kind`, in order.
    pub(crate) fn records(&self, kind: &str) -> Vec<Value> {
        block_on(self.rt.log().read(&self.task, 0))
            .unwrap()
            .into_iter()
            .filter(|e| e.record.extension == "fs" && e.record.kind == kind)
            .map(|e| e.record.data.clone())
            .collect()
    }

    /// The diff a record names (kept in the content store as `text/x-diff`).
    pub(crate) fn diff(&self, record: &Value) -> String {
        let reference: noeta_core::store::ContentRef =
            serde_json::from_value(record["diff"].clone()).unwrap();
        assert_eq!(reference.media_type, "text/x-diff");
        String::from_utf8(block_on(self.rt.content().get(&reference)).unwrap()).unwrap()
    }

    /// The folded state of the `fs` extension.
    pub(crate) fn state(&self) -> Value {
        let state = block_on(self.rt.load(&self.session, &self.task)).unwrap();
        state.ext_state("fs").cloned().unwrap_or(Value::Null)
    }
}

/// A call of `name` with `input`.
pub(crate) fn call(name: &str, input: Value) -> (String, Value) {
    (name.to_owned(), input)
}

/// Runs a task on `ws` whose model makes `calls`, one per reply, then ends its turn.
pub(crate) fn run_in(ws: Option<&Ws>, settings: Value, calls: &[(String, Value)]) -> Run {
    run_turns(ws, settings, &[calls], |_| {})
}

/// Runs one user turn per entry of `turns` on `ws`: the model makes its calls, one per reply,
/// then ends the turn; `between(n)` runs after user turn `n` (from 0) finished.
pub(crate) fn run_turns(
    ws: Option<&Ws>,
    settings: Value,
    turns: &[&[(String, Value)]],
    mut between: impl FnMut(usize),
) -> Run {
    let mut replies: Vec<Value> = Vec::new();
    for calls in turns {
        replies.extend(
            calls
                .iter()
                .map(|(name, input)| json!({ "calls": [{ "name": name, "input": input }] })),
        );
        replies.push(json!({ "text": "done" }));
    }
    let provider =
        ScriptedProvider::from_json(&json!({ "turns": replies }).to_string(), "test").unwrap();
    let mut rt = Runtime::new(
        Arc::new(MemoryEventLog::new(ManualClock::at(0))),
        Arc::new(MemoryContentStore::new()),
        Arc::new(provider),
    );
    if let Some(ws) = ws {
        rt = rt.with_exec_env(Arc::new(LocalExecEnv::new(ws.root())));
    }
    let session = session(settings).unwrap();
    let task = TaskId::new("t").unwrap();
    block_on(rt.create(&session, &task, "work on the files")).unwrap();
    for n in 0..turns.len() {
        if n > 0 {
            block_on(rt.send(&session, &task, "go on")).unwrap();
        }
        block_on(rt.run(&session, &task)).unwrap();
        between(n);
    }
    Run { rt, session, task }
}

/// Runs `calls` on `ws` with the default settings (dry run).
pub(crate) fn run(ws: &Ws, calls: &[(String, Value)]) -> Run {
    run_in(Some(ws), Value::Null, calls)
}

/// Runs `calls` on `ws` with `write_mode = "apply"`.
pub(crate) fn apply(ws: &Ws, calls: &[(String, Value)]) -> Run {
    run_in(Some(ws), json!({ "write_mode": "apply" }), calls)
}

/// The result of one call on `ws`.
pub(crate) fn one(ws: &Ws, name: &str, input: Value) -> (String, bool) {
    run(ws, &[call(name, input)]).last()
}

/// The text of one successful call; panics with the text when it failed.
pub(crate) fn ok(ws: &Ws, name: &str, input: Value) -> String {
    let (text, is_error) = one(ws, name, input);
    assert!(!is_error, "{text}");
    text
}

/// The text of one failed call; panics with the text when it succeeded.
pub(crate) fn err(ws: &Ws, name: &str, input: Value) -> String {
    let (text, is_error) = one(ws, name, input);
    assert!(is_error, "{text}");
    text
}

/// `cat -n` lines.
pub(crate) fn numbered(first: usize, lines: &[&str]) -> String {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{:>6}\t{l}", first + i))
        .collect::<Vec<_>>()
        .join("\n")
}
