//! What the runner tests share: a bare session with given extensions, a test tool whose behaviour a
//! test chooses and the extension offering it, a one-verdict gate, a tool that asks, a provider
//! noting each request's tools, a session built from plugin sources, and reading a task's messages
//! and results back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::fold::{Folder, TaskState};
use noeta_core::model::{ModelRequest, Role, ToolCall};
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::Runtime;
use noeta_core::session::{Session, bare_session, build_session};
use noeta_core::store::TaskId;
use noeta_core::{PluginSource, Tool, ToolContext, ToolError, ToolFlags, ToolOutput, Verdict};
use noeta_testkit::harness::Harness;
use serde_json::{Value, json};

use crate::support::{agent, compile};

pub(crate) fn task(id: &str) -> TaskId {
    TaskId::new(id).unwrap()
}

pub(crate) fn session(extensions: Vec<Arc<dyn Extension>>) -> Session {
    let mut session = bare_session("main", "You are a careful assistant.");
    session.extensions.extend(extensions);
    session.folder = Folder::new(&session.extensions, "test-set");
    session
}

/// The text of each message of `state`'s conversation, in order.
pub(crate) fn texts(state: &TaskState) -> Vec<&str> {
    state
        .core
        .messages
        .iter()
        .map(|m| m.text.as_str())
        .collect()
}

pub(crate) fn call(name: &str, input: Value) -> Value {
    json!({ "name": name, "input": input })
}

/// A tool whose behaviour tests choose.
pub(crate) struct TestTool {
    name: &'static str,
    pub(crate) flags: ToolFlags,
    pub(crate) runs: Arc<AtomicUsize>,
    active: Arc<AtomicUsize>,
    pub(crate) max_active: Arc<AtomicUsize>,
    pub(crate) reply: fn(&Value) -> Result<ToolOutput, ToolError>,
    pub(crate) recovered: Option<&'static str>,
}

impl TestTool {
    pub(crate) fn new(name: &'static str) -> Self {
        Self {
            name,
            flags: ToolFlags::default(),
            runs: Arc::new(AtomicUsize::new(0)),
            active: Arc::new(AtomicUsize::new(0)),
            max_active: Arc::new(AtomicUsize::new(0)),
            reply: |input| Ok(ToolOutput::text(format!("ran with {input}"))),
            recovered: None,
        }
    }

    pub(crate) fn read_only(mut self) -> Self {
        self.flags = ToolFlags::read_only();
        self
    }
}

/// Yields once, so futures polled together overlap.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

#[async_trait]
impl Tool for TestTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "A test tool."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": false})
    }
    fn flags(&self) -> ToolFlags {
        self.flags.clone()
    }
    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_active.fetch_max(now, Ordering::SeqCst);
        YieldOnce(false).await;
        self.active.fetch_sub(1, Ordering::SeqCst);
        ctx.record("testtool", "ran", json!({ "call": ctx.call_id() }));
        (self.reply)(&input)
    }
    async fn recover(&self, _ctx: &ToolContext) -> Result<Option<ToolOutput>, ToolError> {
        Ok(self.recovered.map(ToolOutput::text))
    }
}

/// Offers tools and otherwise stays out of the way.
struct Offers(Vec<Arc<dyn Tool>>);

#[async_trait]
impl Extension for Offers {
    fn name(&self) -> &str {
        "offers"
    }
    fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        Ok(self.0.clone())
    }
}

pub(crate) fn offers(tools: Vec<Arc<dyn Tool>>) -> Arc<dyn Extension> {
    Arc::new(Offers(tools))
}

/// A guard-like extension answering every call with one verdict.
struct Says(&'static str, Option<Verdict>);

#[async_trait]
impl Extension for Says {
    fn name(&self) -> &str {
        self.0
    }
    async fn before_tool(&self, _v: &View<'_>, _c: &ToolCall) -> HookResult<Option<Verdict>> {
        Ok(self.1.clone())
    }
}

pub(crate) fn says(name: &'static str, verdict: Option<Verdict>) -> Arc<dyn Extension> {
    Arc::new(Says(name, verdict))
}

pub(crate) fn result_text(rt: &Runtime, s: &Session, t: &TaskId) -> String {
    let state = block_on(rt.load(s, t)).unwrap();
    state
        .core
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap()
        .text
        .to_string()
        .clone()
}

/// A read-only, retry-safe `Look` tool and a session offering it.
pub(crate) fn retry_safe_look() -> (Arc<TestTool>, Session) {
    let mut look = TestTool::new("Look").read_only();
    look.flags.retry_safe = true;
    let look = Arc::new(look);
    let s = session(vec![offers(vec![look.clone()])]);
    (look, s)
}

/// Asks the user, then answers with what it was told.
pub(crate) struct AskTool(pub(crate) Arc<AtomicUsize>);

#[async_trait]
impl Tool for AskTool {
    fn name(&self) -> &str {
        "Ask"
    }
    fn description(&self) -> &str {
        "Asks the user."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::ask("Which colour?"))
    }
    fn check_answer(&self, _input: &Value, answer: &Value) -> Result<(), String> {
        match answer.as_str() {
            Some("boom") => panic!("the colour checker broke"),
            Some(_) => Ok(()),
            None => Err(format!("a colour is a word, not `{answer}`")),
        }
    }
    async fn resume(
        &self,
        _input: Value,
        wake: noeta_core::records::Wake,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        match wake {
            noeta_core::records::Wake::Answer { answer } => {
                Ok(ToolOutput::text(format!("the user said {answer}")))
            }
            other => Err(ToolError::RespondToModel(format!(
                "unexpected wake {other:?}"
            ))),
        }
    }
}

/// Records the tool list (name and description) of every request, then asks the script.
pub(crate) struct Capturing {
    inner: ScriptedProvider,
    pub(crate) seen: Mutex<Vec<Vec<(String, String)>>>,
}

impl Capturing {
    pub(crate) fn new(turns: Value) -> Arc<Self> {
        let script = json!({ "turns": turns }).to_string();
        Arc::new(Self {
            inner: ScriptedProvider::from_json(&script, "capturing").unwrap(),
            seen: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn tools(&self, request: usize) -> Vec<String> {
        self.seen.lock().unwrap()[request]
            .iter()
            .map(|(n, _)| n.clone())
            .collect()
    }
}

#[async_trait]
impl noeta_core::provider::Provider for Capturing {
    fn name(&self) -> &str {
        "capturing"
    }
    fn model(&self) -> &str {
        "test"
    }
    fn context_window(&self) -> u64 {
        1_000
    }
    async fn complete(
        &self,
        request: &ModelRequest,
    ) -> Result<noeta_core::model::ModelReply, noeta_core::provider::ProviderError> {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_owned(),
                    t["description"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        self.seen.lock().unwrap().push(tools);
        self.inner.complete(request).await
    }
}

pub(crate) fn flagged(name: &'static str, set: fn(&mut ToolFlags)) -> Arc<TestTool> {
    let mut tool = TestTool::new(name);
    set(&mut tool.flags);
    Arc::new(tool)
}

pub(crate) fn built(manifests: Vec<PluginSource>, plugins: &[&str]) -> Session {
    let set = crate::support::load(&manifests);
    let compiled = compile(&set, &agent("main", plugins)).unwrap();
    build_session(&set, &compiled, &Default::default(), None).unwrap()
}

/// A created task whose model calls `Work` once, with `extensions` beside the one offering it:
/// the harness, runtime, session, task and the `Work` tool.
pub(crate) fn gate_run(
    extensions: Vec<Arc<dyn Extension>>,
) -> (Harness, Runtime, Session, TaskId, Arc<TestTool>) {
    let h = Harness::new();
    let tool = Arc::new(TestTool::new("Work"));
    let rt = h.runtime(json!([{ "calls": [call("Work", json!({"n": 1}))] }, { "text": "ok" }]));
    let mut all = vec![offers(vec![tool.clone()])];
    all.extend(extensions);
    let s = session(all);
    let t = task("gate");
    block_on(rt.create(&s, &t, "go")).unwrap();
    (h, rt, s, t, tool)
}
