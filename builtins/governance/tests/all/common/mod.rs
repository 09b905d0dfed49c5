//! What the governance tests share: probe tools, a session with the plugin, a scripted runtime.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions; each test file uses a part"
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::fold::Folder;
use noeta_core::model::Role;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::Runtime;
use noeta_core::session::{Session, SessionError};
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, Record, TaskId};
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::{Value, json};

/// The inputs a probe tool was run with.
#[derive(Clone, Default)]
pub(crate) struct Runs(Arc<Mutex<Vec<Value>>>);

impl Runs {
    pub(crate) fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    pub(crate) fn inputs(&self) -> Vec<Value> {
        self.0.lock().unwrap().clone()
    }
}

/// A tool that answers `<name> ran` and remembers its inputs.
pub(crate) struct Probe {
    name: &'static str,
    flags: ToolFlags,
    runs: Runs,
}

impl Probe {
    pub(crate) fn tool(name: &'static str, flags: ToolFlags) -> (Arc<dyn Tool>, Runs) {
        let runs = Runs::default();
        let probe = Self {
            name,
            flags,
            runs: runs.clone(),
        };
        (Arc::new(probe), runs)
    }
}

#[async_trait]
impl Tool for Probe {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "A probe."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn flags(&self) -> ToolFlags {
        self.flags.clone()
    }
    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.0.lock().unwrap().push(input);
        Ok(ToolOutput::text(format!("{} ran", self.name)))
    }
}

struct Tools(Vec<Arc<dyn Tool>>);

#[async_trait]
impl Extension for Tools {
    fn name(&self) -> &str {
        "test-tools"
    }
    fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        Ok(self.0.clone())
    }
}

/// A session of agent `main` with governance (`settings`, or none when null) and `tools`.
pub(crate) fn session(settings: Value, tools: &[Arc<dyn Tool>]) -> Result<Session, SessionError> {
    let config = if settings.is_null() {
        BTreeMap::new()
    } else {
        BTreeMap::from([("governance".to_owned(), settings)])
    };
    let mut session = noeta_testkit::harness::try_session_of(
        vec![noeta_builtin_governance::plugin()],
        &["governance"],
        &config,
    )?;
    session.extensions.push(Arc::new(Tools(tools.to_vec())));
    session.folder = Folder::new(&session.extensions, "test");
    Ok(session)
}

/// A call of `name` with `input`, as a scripted reply lists it.
pub(crate) fn call(name: &str, input: Value) -> Value {
    json!({ "name": name, "input": input })
}

/// A runtime on memory stores whose model replies with `turns` (the scripted format).
pub(crate) fn scripted(turns: Value) -> Runtime {
    let provider = ScriptedProvider::from_json(&turns.to_string(), "test").unwrap();
    Runtime::new(
        Arc::new(MemoryEventLog::new(ManualClock::at(0))),
        Arc::new(MemoryContentStore::new()),
        Arc::new(provider),
    )
}

/// The texts of the task's tool results, in order.
pub(crate) fn results(rt: &Runtime, s: &Session, t: &TaskId) -> Vec<String> {
    messages(rt, s, t, Role::Tool)
}

/// The texts of the task's messages with `role`, in order.
pub(crate) fn messages(rt: &Runtime, s: &Session, t: &TaskId, role: Role) -> Vec<String> {
    let state = block_on(rt.load(s, t)).unwrap();
    state
        .core
        .messages
        .iter()
        .filter(|m| m.role == role)
        .map(|m| m.text.to_string())
        .collect()
}

/// The task's records from `extension` of `kind`.
pub(crate) fn records(rt: &Runtime, t: &TaskId, extension: &str, kind: &str) -> Vec<Record> {
    block_on(rt.log().read(t, 0))
        .unwrap()
        .into_iter()
        .filter(|e| e.record.extension == extension && e.record.kind == kind)
        .map(|e| (*e.record).clone())
        .collect()
}
