//! The runner end to end with the scripted provider: hook order, the gate, the tool runtime, crashes, pins and failures.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{
    Extension, HookError, HookResult, OfferedTool, StepSignal, ToolChanges, View,
};
use noeta_core::fold::{Folder, TaskState, TurnState};
use noeta_core::model::ModelRequest;
use noeta_core::model::Role;
use noeta_core::model::ToolCall;
use noeta_core::provider::ScriptedProvider;
use noeta_core::records::{CallOutcome, CoreRecord};
use noeta_core::runner::{RunError, RunOutcome, Runtime};
use noeta_core::session::{Session, bare_session};
use noeta_core::store::{
    ContentStore, Event, EventLog, MemoryEventLog, Record, StoreError, TaskId,
};
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput, Verdict};
use serde_json::{Value, json};

// --- harness -------------------------------------------------------------------

use noeta_testkit::harness::{CrashAfter, Harness, Tapped};

fn task(id: &str) -> TaskId {
    TaskId::new(id).unwrap()
}

fn session(extensions: Vec<Arc<dyn Extension>>) -> Session {
    let mut session = bare_session("main", "You are a careful assistant.");
    session.extensions.extend(extensions);
    session.folder = Folder::new(&session.extensions, "test-set");
    session
}

/// The text of each message of `state`'s conversation, in order.
fn texts(state: &TaskState) -> Vec<&str> {
    state
        .core
        .messages
        .iter()
        .map(|m| m.text.as_str())
        .collect()
}

fn call(name: &str, input: Value) -> Value {
    json!({ "name": name, "input": input })
}

/// A tool whose behaviour tests choose.
struct TestTool {
    name: &'static str,
    flags: ToolFlags,
    runs: Arc<AtomicUsize>,
    active: Arc<AtomicUsize>,
    max_active: Arc<AtomicUsize>,
    reply: fn(&Value) -> Result<ToolOutput, ToolError>,
    recovered: Option<&'static str>,
}

impl TestTool {
    fn new(name: &'static str) -> Self {
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

    fn read_only(mut self) -> Self {
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

fn offers(tools: Vec<Arc<dyn Tool>>) -> Arc<dyn Extension> {
    Arc::new(Offers(tools))
}

// --- zero plugins ----------------------------------------------------------------

#[test]
fn the_kernel_runs_a_task_to_completion_with_zero_plugins() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "Hello there." }]));
    let s = bare_session("main", "");
    let t = task("zero");
    block_on(rt.create(&s, &t, "Say hello.")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        outcome,
        RunOutcome::Ended {
            reason: "end_turn".to_owned()
        }
    );
    assert_eq!(
        h.core_kinds(&t),
        [
            "task_started",
            "plugins_pinned",
            "user_message",
            "intake_done",
            "request_composed",
            "assistant_reply",
            "turn_ended"
        ]
    );
    let state = block_on(rt.load(&s, &t)).unwrap();
    let roles: Vec<Role> = state.core.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant]);
    assert_eq!(state.core.messages[1].text, "Hello there.");
    // A finished turn does nothing more until a new message arrives.
    assert_eq!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended {
            reason: "end_turn".to_owned()
        }
    );
}

#[test]
fn a_second_message_starts_the_next_turn() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "One." }, { "text": "Two." }]));
    let s = bare_session("main", "");
    let t = task("turns");
    block_on(rt.create(&s, &t, "first")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    block_on(rt.send(&s, &t, "second")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    let state = block_on(rt.load(&s, &t)).unwrap();
    let texts = texts(&state);
    assert_eq!(texts, ["first", "One.", "second", "Two."]);
}

#[test]
fn a_task_loaded_after_its_run_is_the_task_folded_from_its_log() {
    let h = Harness::new();
    let script = json!([
        { "calls": [call("probe", json!({ "n": 1 }))] },
        { "text": "Done." },
        { "text": "Again." }
    ]);
    let s = session(vec![offers(vec![Arc::new(TestTool::new("probe"))])]);
    let t = task("loaded-after-run");
    let rt = h.runtime(script.clone());
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let bytes = |rt: &Runtime| {
        let state = block_on(rt.load(&s, &t)).unwrap();
        noeta_core::canonical::to_bytes(&serde_json::to_value(&state).unwrap())
    };
    // The runtime that ran it, and one that never did (it folds the log).
    assert_eq!(bytes(&rt), bytes(&h.runtime(json!([]))));
    // What another runtime records later is seen by the one that ran it first.
    let other = h.runtime(script);
    block_on(other.send(&s, &t, "once more")).unwrap();
    assert_eq!(bytes(&rt), bytes(&h.runtime(json!([]))));
    block_on(other.run(&s, &t)).unwrap();
    assert_eq!(bytes(&rt), bytes(&h.runtime(json!([]))));
    let state = block_on(rt.load(&s, &t)).unwrap();
    let texts = texts(&state);
    assert_eq!(texts[texts.len() - 2..], ["once more", "Again."]);
    // A session of another plugin set folds the log itself.
    let mut bare = session(Vec::new());
    bare.folder = Folder::new(&bare.extensions, "another-set");
    let folded = block_on(rt.load(&bare, &t)).unwrap();
    assert_eq!(folded.seq, state.seq);
}

// --- tools ----------------------------------------------------------------------

#[test]
fn tool_calls_run_and_their_records_commit_with_the_result() {
    let h = Harness::new();
    let tool = Arc::new(TestTool::new("Work"));
    let rt = h.runtime(json!([
        { "text": "Working.", "calls": [call("Work", json!({"n": 1}))] },
        { "text": "Done." }
    ]));
    let s = session(vec![offers(vec![tool.clone()])]);
    let t = task("tools");
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
    let events = h.events(&t);
    let started = events
        .iter()
        .position(|e| e.record.kind == "call_started")
        .unwrap();
    let ran = events.iter().position(|e| e.record.kind == "ran").unwrap();
    let finished = events
        .iter()
        .position(|e| e.record.kind == "call_finished")
        .unwrap();
    assert!(
        started < ran && ran + 1 == finished,
        "the tool's record commits with its result"
    );
    let state = block_on(rt.load(&s, &t)).unwrap();
    let tool_message = state
        .core
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert_eq!(tool_message.text, "ran with {\"n\":1}");
    assert_eq!(tool_message.call_id.as_deref(), Some("call_1_1"));
}

#[test]
fn input_is_checked_against_the_schema_before_any_gate() {
    let h = Harness::new();
    let tool = Arc::new(TestTool::new("Work"));
    let gate_calls = Arc::new(AtomicUsize::new(0));
    struct Counts(Arc<AtomicUsize>);
    #[async_trait]
    impl Extension for Counts {
        fn name(&self) -> &str {
            "counts"
        }
        async fn before_tool(&self, _v: &View<'_>, _c: &ToolCall) -> HookResult<Option<Verdict>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(None)
        }
    }
    let rt = h.runtime(json!([
        { "calls": [call("Work", json!({"n": "one"}))] },
        { "text": "ok" }
    ]));
    let s = session(vec![
        offers(vec![tool.clone()]),
        Arc::new(Counts(gate_calls.clone())),
    ]);
    let t = task("schema");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(gate_calls.load(Ordering::SeqCst), 0);
    let state = block_on(rt.load(&s, &t)).unwrap();
    let result = state
        .core
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert!(result.is_error);
    assert!(
        result.text.starts_with("Work: invalid input — /n: "),
        "{}",
        result.text
    );
    assert!(
        result
            .text
            .ends_with("Fix the arguments and call it again."),
        "{}",
        result.text
    );
}

#[test]
fn a_tool_whose_schema_breaks_the_meta_schema_is_an_error_result_naming_it() {
    /// Declares `required` as a string, which the JSON Schema meta-schema refuses.
    struct Broken(AtomicUsize);
    #[async_trait]
    impl Tool for Broken {
        fn name(&self) -> &str {
            "Broken"
        }
        fn description(&self) -> &str {
            "A tool with a malformed schema."
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": "n"})
        }
        async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(ToolOutput::text("ran"))
        }
    }
    let h = Harness::new();
    let broken = Arc::new(Broken(AtomicUsize::new(0)));
    let rt = h.runtime(json!([
        { "calls": [call("Broken", json!({"n": 1})), call("Work", json!({"n": 2}))] },
        { "text": "ok" }
    ]));
    let s = session(vec![offers(vec![
        broken.clone(),
        Arc::new(TestTool::new("Work")),
    ])]);
    let t = task("broken-schema");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        broken.0.load(Ordering::SeqCst),
        0,
        "an unchecked call never runs"
    );
    let state = block_on(rt.load(&s, &t)).unwrap();
    let results: Vec<(&str, bool)> = state
        .core
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.text.as_str(), m.is_error))
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0]
            .0
            .starts_with("Broken: the tool's input schema is invalid — /required: "),
        "{results:?}"
    );
    assert!(results[0].0.contains("\"n\""), "{results:?}");
    assert_eq!(
        results[1],
        ("ran with {\"n\":2}", false),
        "the other call runs"
    );
}

#[test]
fn an_unknown_tool_is_an_error_result_listing_the_available_ones() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "calls": [call("Nope", json!({}))] }, { "text": "ok" }]));
    let s = session(vec![offers(vec![Arc::new(TestTool::new("Work"))])]);
    let t = task("unknown");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let state = block_on(rt.load(&s, &t)).unwrap();
    let result = state
        .core
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert_eq!(
        result.text,
        "no tool named `Nope` is available (available: Work)"
    );
}

#[test]
fn adjacent_read_only_calls_run_together_and_others_one_by_one() {
    let h = Harness::new();
    let reader = Arc::new(TestTool::new("Look").read_only());
    let writer = Arc::new(TestTool::new("Change"));
    let rt = h.runtime(json!([
        { "calls": [call("Look", json!({"n": 1})), call("Look", json!({"n": 2})), call("Look", json!({"n": 3})),
                    call("Change", json!({"n": 4})), call("Change", json!({"n": 5}))] },
        { "text": "done" }
    ]));
    let s = session(vec![offers(vec![reader.clone(), writer.clone()])]);
    let t = task("parallel");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(reader.max_active.load(Ordering::SeqCst), 3);
    assert_eq!(writer.max_active.load(Ordering::SeqCst), 1);
    let state = block_on(rt.load(&s, &t)).unwrap();
    let ids: Vec<&str> = state
        .core
        .messages
        .iter()
        .filter_map(|m| m.call_id.as_deref())
        .collect();
    assert_eq!(
        ids,
        ["call_1_1", "call_1_2", "call_1_3", "call_1_4", "call_1_5"],
        "results in call order"
    );
}

#[test]
fn long_output_keeps_a_bounded_preview_inline_and_the_full_body_in_the_content_store() {
    let h = Harness::new();
    let mut tool = TestTool::new("Dump");
    tool.flags.max_result_chars = Some(100);
    tool.reply = |_| Ok(ToolOutput::text("x".repeat(50_000)));
    let rt = h.runtime(json!([{ "calls": [call("Dump", json!({}))] }, { "text": "ok" }]));
    let s = session(vec![offers(vec![Arc::new(tool)])]);
    let t = task("overflow");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let finished = h
        .events(&t)
        .into_iter()
        .find(|e| e.record.kind == "call_finished")
        .unwrap();
    let full: noeta_core::store::ContentRef =
        serde_json::from_value(finished.record.data["full"].clone()).unwrap();
    assert_eq!(full.len, 50_000);
    assert_eq!(block_on(h.content.get(&full)).unwrap().len(), 50_000);
    let text = finished.record.data["text"].as_str().unwrap();
    assert!(text.starts_with(&"x".repeat(100)));
    assert!(
        text.contains("50000 characters in all, 100 shown"),
        "{text}"
    );
}

#[test]
fn a_large_reply_is_spilled_to_the_content_store_and_folds_back_whole() {
    let h = Harness::new();
    let long = "word ".repeat(3_000);
    let rt = h.runtime(json!([{ "text": long }]));
    let s = bare_session("main", "");
    let t = task("spill");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let reply = h
        .events(&t)
        .into_iter()
        .find(|e| e.record.kind == "assistant_reply")
        .unwrap();
    assert!(reply.record.data.get("$spilled").is_some());
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(state.core.messages[1].text, long);
}

// --- the gate -------------------------------------------------------------------

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

fn says(name: &'static str, verdict: Option<Verdict>) -> Arc<dyn Extension> {
    Arc::new(Says(name, verdict))
}

fn gate_run(
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

fn result_text(rt: &Runtime, s: &Session, t: &TaskId) -> String {
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

#[test]
fn any_deny_denies_even_after_a_rewrite() {
    let (_h, rt, s, t, tool) = gate_run(vec![
        says(
            "rewriter",
            Some(Verdict::Rewrite {
                input: json!({"n": 2}),
                reason: "r".into(),
            }),
        ),
        says(
            "denier",
            Some(Verdict::Deny {
                reason: "not today".into(),
            }),
        ),
    ]);
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(result_text(&rt, &s, &t), "not today");
}

#[test]
fn the_first_rewrite_wins_and_is_gated_again_at_most_three_times() {
    struct Once(AtomicUsize);
    #[async_trait]
    impl Extension for Once {
        fn name(&self) -> &str {
            "once"
        }
        async fn before_tool(&self, _v: &View<'_>, c: &ToolCall) -> HookResult<Option<Verdict>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok((c.input["n"] == 1).then(|| Verdict::Rewrite {
                input: json!({"n": 7}),
                reason: "seven".into(),
            }))
        }
    }
    let once = Arc::new(Once(AtomicUsize::new(0)));
    let (_h, rt, s, t, tool) = gate_run(vec![once.clone(), says("second", None)]);
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        once.0.load(Ordering::SeqCst),
        2,
        "the rewritten call is gated again"
    );
    assert_eq!(result_text(&rt, &s, &t), "ran with {\"n\":7}");

    let (_h, rt, s, t, tool) = gate_run(vec![says(
        "loop",
        Some(Verdict::Rewrite {
            input: json!({"n": 1}),
            reason: "again".into(),
        }),
    )]);
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        result_text(&rt, &s, &t),
        "`Work` was rewritten more than 3 times; denied"
    );
}

#[test]
fn an_ask_parks_the_turn_until_answered() {
    let (h, rt, s, t, tool) = gate_run(vec![says(
        "asker",
        Some(Verdict::Ask {
            reason: "run Work?".into(),
            firm: false,
        }),
    )]);
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        outcome,
        RunOutcome::Parked {
            call_id: "call_1_1".into(),
            question: "run Work?".into()
        }
    );
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    let err = block_on(rt.answer(&s, &t, "call_9", true)).unwrap_err();
    assert!(matches!(err, RunError::NotParked { .. }), "{err}");
    block_on(rt.answer(&s, &t, "call_1_1", true)).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
    assert!(h.core_kinds(&t).contains(&"ask_answered".to_owned()));
}

#[test]
fn a_declined_ask_denies_the_call() {
    let (_h, rt, s, t, tool) = gate_run(vec![says(
        "asker",
        Some(Verdict::Ask {
            reason: "ok?".into(),
            firm: false,
        }),
    )]);
    block_on(rt.run(&s, &t)).unwrap();
    block_on(rt.answer(&s, &t, "call_1_1", false)).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(result_text(&rt, &s, &t), "the user declined this call");
}

#[test]
fn an_approving_allow_satisfies_asks_unless_they_are_firm() {
    let (_h, rt, s, t, tool) = gate_run(vec![
        says(
            "asker",
            Some(Verdict::Ask {
                reason: "ok?".into(),
                firm: false,
            }),
        ),
        says("voucher", Some(Verdict::Allow { approve: true })),
    ]);
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);

    let (_h, rt, s, t, _tool) = gate_run(vec![
        says(
            "asker",
            Some(Verdict::Ask {
                reason: "really?".into(),
                firm: true,
            }),
        ),
        says("voucher", Some(Verdict::Allow { approve: true })),
    ]);
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Parked { .. }
    ));
}

#[test]
fn resolve_ask_may_answer_for_the_user() {
    struct Classifier;
    #[async_trait]
    impl Extension for Classifier {
        fn name(&self) -> &str {
            "classifier"
        }
        async fn resolve_ask(
            &self,
            _v: &View<'_>,
            _c: &ToolCall,
            asks: &[String],
        ) -> HookResult<Option<bool>> {
            Ok(Some(asks == ["ok?"]))
        }
    }
    let (_h, rt, s, t, tool) = gate_run(vec![
        says(
            "asker",
            Some(Verdict::Ask {
                reason: "ok?".into(),
                firm: false,
            }),
        ),
        Arc::new(Classifier),
    ]);
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
}

#[test]
fn a_broken_check_denies_with_permission_check_failed() {
    struct Broken;
    #[async_trait]
    impl Extension for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        async fn before_tool(&self, _v: &View<'_>, _c: &ToolCall) -> HookResult<Option<Verdict>> {
            Err(HookError::new("rules file unreadable"))
        }
    }
    let (_h, rt, s, t, tool) = gate_run(vec![Arc::new(Broken)]);
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        result_text(&rt, &s, &t),
        "permission check failed: rules file unreadable"
    );

    struct Panics;
    #[async_trait]
    impl Extension for Panics {
        fn name(&self) -> &str {
            "panics"
        }
        async fn before_tool(&self, _v: &View<'_>, _c: &ToolCall) -> HookResult<Option<Verdict>> {
            panic!("boom")
        }
    }
    let (_h, rt, s, t, tool) = gate_run(vec![Arc::new(Panics)]);
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        result_text(&rt, &s, &t),
        "permission check failed: `panics` before_tool panicked: boom"
    );
}

// --- hook order -----------------------------------------------------------------

/// Logs every hook it is asked, in order.
struct Journal(Arc<Mutex<Vec<String>>>);

impl Journal {
    fn log(&self, hook: &str) {
        self.0.lock().unwrap().push(hook.to_owned());
    }
}

#[async_trait]
impl Extension for Journal {
    fn name(&self) -> &str {
        "journal"
    }
    async fn on_start(&self, _v: &View<'_>) -> HookResult<()> {
        self.log("on_start");
        Ok(())
    }
    async fn turn_intake(&self, _v: &View<'_>, _m: &str) -> HookResult<()> {
        self.log("turn_intake");
        Ok(())
    }
    fn tools(&self, _v: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        self.log("tools");
        Ok(Vec::new())
    }
    fn tool_changes(&self, _v: &View<'_>, _o: &[OfferedTool]) -> HookResult<ToolChanges> {
        self.log("tool_changes");
        Ok(ToolChanges::none())
    }
    fn context(&self, _v: &View<'_>) -> HookResult<Vec<noeta_core::extension::ContextPart>> {
        self.log("context");
        Ok(Vec::new())
    }
    async fn reminders(&self, _v: &View<'_>) -> Result<Vec<String>, StepSignal> {
        self.log("reminders");
        Ok(Vec::new())
    }
    fn tail(&self, _v: &View<'_>) -> Option<String> {
        self.log("tail");
        None
    }
    async fn before_model(
        &self,
        _v: &View<'_>,
        r: ModelRequest,
    ) -> Result<ModelRequest, StepSignal> {
        self.log("before_model");
        Ok(r)
    }
    async fn before_tool(&self, _v: &View<'_>, _c: &ToolCall) -> HookResult<Option<Verdict>> {
        self.log("before_tool");
        Ok(None)
    }
    async fn after_tool(
        &self,
        _v: &View<'_>,
        _c: &ToolCall,
        o: ToolOutput,
    ) -> HookResult<ToolOutput> {
        self.log("after_tool");
        Ok(o)
    }
    fn on_event(&self, _v: &View<'_>, e: &Event) -> HookResult<()> {
        self.log(&format!("on_event:{}", e.record.kind));
        Ok(())
    }
    async fn before_finish(&self, _v: &View<'_>) -> HookResult<Option<String>> {
        self.log("before_finish");
        Ok(None)
    }
}

#[test]
fn each_hook_is_called_at_its_point_in_the_step() {
    let h = Harness::new();
    let journal = Arc::new(Mutex::new(Vec::new()));
    let rt = h.runtime(json!([{ "calls": [call("Work", json!({}))] }, { "text": "done" }]));
    let s = session(vec![
        offers(vec![Arc::new(TestTool::new("Work"))]),
        Arc::new(Journal(journal.clone())),
    ]);
    let t = task("order");
    block_on(rt.create(&s, &t, "go")).unwrap();
    journal.lock().unwrap().clear();
    block_on(rt.run(&s, &t)).unwrap();
    let log = journal.lock().unwrap().join(" ");
    let expected = [
        "on_start",
        "turn_intake on_event:intake_done",
        // The reply is written with the started-record of its call: both after the gate.
        "tools tool_changes reminders context tail before_model",
        "before_tool on_event:request_composed on_event:assistant_reply on_event:call_started after_tool on_event:ran on_event:call_finished",
        "tools tool_changes reminders context tail before_model on_event:request_composed on_event:assistant_reply",
        "before_finish on_event:turn_ended",
    ]
    .join(" ");
    assert_eq!(log, expected);
}

// --- reminders ------------------------------------------------------------------

#[test]
fn recorded_reminders_enter_the_conversation_and_tail_renders_are_never_recorded() {
    struct Both;
    #[async_trait]
    impl Extension for Both {
        fn name(&self) -> &str {
            "both"
        }
        async fn reminders(&self, v: &View<'_>) -> Result<Vec<String>, StepSignal> {
            Ok(if v.core().model_calls == 0 {
                vec!["recorded note".into()]
            } else {
                vec![]
            })
        }
        fn tail(&self, v: &View<'_>) -> Option<String> {
            Some(format!("tail after {} calls", v.core().model_calls))
        }
    }
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }]));
    let s = session(vec![Arc::new(Both)]);
    let t = task("reminders");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let state = block_on(rt.load(&s, &t)).unwrap();
    let texts = texts(&state);
    assert_eq!(texts, ["go", "recorded note", "ok"]);
    let all = serde_json::to_string(&h.events(&t)).unwrap();
    assert!(
        !all.contains("tail after"),
        "a tail render is never recorded"
    );
}

#[test]
fn turn_intake_runs_once_per_message_even_across_a_crash() {
    struct Intake(Arc<AtomicUsize>);
    #[async_trait]
    impl Extension for Intake {
        fn name(&self) -> &str {
            "intake"
        }
        async fn turn_intake(&self, v: &View<'_>, m: &str) -> HookResult<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            v.record_with_message("intake", "recall", json!({}), &format!("recalled for {m}"));
            Ok(())
        }
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let h = Harness::new();
    let s = session(vec![Arc::new(Intake(calls.clone()))]);
    let t = task("intake");
    // The first worker dies right after intake is recorded.
    let dying = h.runtime_over(
        Arc::new(CrashAfter::new(h.log.clone(), 2)),
        json!([{ "text": "ok" }]),
    );
    block_on(dying.create(&s, &t, "hello")).unwrap();
    assert!(block_on(dying.run(&s, &t)).is_err());
    h.clock.advance(2_000);
    let rt = h.runtime(json!([{ "text": "ok" }]));
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(state.core.messages[1].text, "recalled for hello");
}

// --- failures -------------------------------------------------------------------

#[test]
fn a_failing_step_hook_fails_the_turn_and_two_in_a_row_fail_the_task() {
    struct Fails;
    #[async_trait]
    impl Extension for Fails {
        fn name(&self) -> &str {
            "fails"
        }
        fn context(&self, _v: &View<'_>) -> HookResult<Vec<noeta_core::extension::ContextPart>> {
            Err(HookError::new("no context today"))
        }
    }
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "never" }]));
    let s = session(vec![Arc::new(Fails)]);
    let t = task("fails");
    block_on(rt.create(&s, &t, "one")).unwrap();
    let first = block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        first,
        RunOutcome::TurnFailed {
            reason: "internal_error: `fails` context failed: no context today".into()
        }
    );
    block_on(rt.send(&s, &t, "two")).unwrap();
    let second = block_on(rt.run(&s, &t)).unwrap();
    assert!(
        matches!(&second, RunOutcome::TaskFailed { reason } if reason.starts_with("2 turns failed in a row")),
        "{second:?}"
    );
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::TaskFailed { .. }
    ));
}

#[test]
fn a_failing_tool_is_an_error_result_and_its_staged_records_are_dropped() {
    let h = Harness::new();
    let mut tool = TestTool::new("Flaky");
    tool.reply = |_| Err(ToolError::RespondToModel("Flaky: disk full".into()));
    let rt = h.runtime(json!([{ "calls": [call("Flaky", json!({}))] }, { "text": "ok" }]));
    let s = session(vec![offers(vec![Arc::new(tool)])]);
    let t = task("flaky");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(result_text(&rt, &s, &t), "Flaky: disk full");
    assert!(
        !h.events(&t).iter().any(|e| e.record.kind == "ran"),
        "staged records are dropped"
    );
}

#[test]
fn a_broken_after_tool_keeps_the_result_and_a_broken_observer_is_skipped() {
    struct Sloppy;
    #[async_trait]
    impl Extension for Sloppy {
        fn name(&self) -> &str {
            "sloppy"
        }
        async fn after_tool(
            &self,
            _v: &View<'_>,
            _c: &ToolCall,
            _o: ToolOutput,
        ) -> HookResult<ToolOutput> {
            Err(HookError::new("cannot annotate"))
        }
        fn on_event(&self, _v: &View<'_>, _e: &Event) -> HookResult<()> {
            Err(HookError::new("metrics down"))
        }
    }
    let (_h, rt, s, t, _tool) = gate_run(vec![Arc::new(Sloppy)]);
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(result_text(&rt, &s, &t), "ran with {\"n\":1}");
}

#[test]
fn before_finish_may_refuse_with_a_message_the_model_sees() {
    struct NotYet(AtomicUsize);
    #[async_trait]
    impl Extension for NotYet {
        fn name(&self) -> &str {
            "not-yet"
        }
        async fn before_finish(&self, _v: &View<'_>) -> HookResult<Option<String>> {
            Ok((self.0.fetch_add(1, Ordering::SeqCst) == 0)
                .then(|| "Run the tests first.".to_owned()))
        }
    }
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "done?" }, { "text": "tests pass" }]));
    let s = session(vec![Arc::new(NotYet(AtomicUsize::new(0)))]);
    let t = task("finish");
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    let state = block_on(rt.load(&s, &t)).unwrap();
    let texts = texts(&state);
    assert_eq!(texts, ["go", "done?", "Run the tests first.", "tests pass"]);
}

#[test]
fn a_context_overflow_without_room_fails_the_turn_naming_it() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "error": "context_overflow" }]));
    let s = bare_session("main", "");
    let t = task("overflowing");
    block_on(rt.create(&s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(
        matches!(&outcome, RunOutcome::TurnFailed { reason } if reason.starts_with("context_overflow:")),
        "{outcome:?}"
    );
}

// --- crashes --------------------------------------------------------------------

/// Runs one task of `s` over `turns` and gives back the kinds of each batch it appended.
fn batches_of_a_run(s: &Session, turns: Value) -> Vec<Vec<String>> {
    let h = Harness::new();
    let seen: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let kinds = seen.clone();
    let log = Tapped::over(h.log.clone()).on_append(move |_, batch| {
        kinds
            .lock()
            .unwrap()
            .push(batch.iter().map(|r| r.kind.clone()).collect());
        Ok(())
    });
    let rt = h.runtime_over(Arc::new(log), turns);
    let t = task("batches");
    block_on(rt.create(s, &t, "go")).unwrap();
    block_on(rt.run(s, &t)).unwrap();
    seen.lock().unwrap().clone()
}

#[test]
fn a_reply_is_written_with_the_started_records_of_its_calls() {
    let work = Arc::new(TestTool::new("Work"));
    let s = session(vec![offers(vec![work.clone()])]);
    let batches = batches_of_a_run(
        &s,
        json!([{ "calls": [call("Work", json!({}))] }, { "text": "done" }]),
    );
    let expected: Vec<Vec<&str>> = vec![
        vec!["task_started", "plugins_pinned", "user_message"],
        vec!["intake_done"],
        vec!["request_composed", "assistant_reply", "call_started"],
        // The tool's own record, with its result.
        vec!["ran", "call_finished"],
        // A reply without calls is written on its own, before the turn is decided.
        vec!["request_composed", "assistant_reply"],
        vec!["turn_ended"],
    ];
    assert_eq!(batches, expected, "{batches:?}");
    assert_eq!(work.runs.load(Ordering::SeqCst), 1);
}

/// A read-only, retry-safe `Look` tool and a session offering it.
fn retry_safe_look() -> (Arc<TestTool>, Session) {
    let mut look = TestTool::new("Look").read_only();
    look.flags.retry_safe = true;
    let look = Arc::new(look);
    let s = session(vec![offers(vec![look.clone()])]);
    (look, s)
}

#[test]
fn a_retry_safe_result_is_written_with_the_next_reply_one_write_per_step() {
    let (look, s) = retry_safe_look();
    let batches = batches_of_a_run(
        &s,
        json!([
            { "calls": [call("Look", json!({"n": 1}))] },
            { "calls": [call("Look", json!({"n": 2}))] },
            { "text": "done" }
        ]),
    );
    let expected: Vec<Vec<&str>> = vec![
        vec!["task_started", "plugins_pinned", "user_message"],
        vec!["intake_done"],
        vec!["request_composed", "assistant_reply", "call_started"],
        // The tool's own record and its result go with the next reply.
        vec![
            "ran",
            "call_finished",
            "request_composed",
            "assistant_reply",
            "call_started",
        ],
        vec![
            "ran",
            "call_finished",
            "request_composed",
            "assistant_reply",
        ],
        vec!["turn_ended"],
    ];
    assert_eq!(batches, expected, "{batches:?}");
    assert_eq!(look.runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_crash_before_a_retry_safe_result_is_written_runs_the_call_again() {
    let h = Harness::new();
    let (look, s) = retry_safe_look();
    let t = task("rerun");
    let turns = json!([
        { "calls": [call("Look", json!({}))] },
        { "text": "done" }
    ]);
    // Appends: the first batch, intake, the reply with its started-record; the fourth (the
    // result with the next reply) never lands.
    let dying = h.runtime_over(Arc::new(CrashAfter::new(h.log.clone(), 3)), turns.clone());
    block_on(dying.create(&s, &t, "go")).unwrap();
    assert!(block_on(dying.run(&s, &t)).is_err());
    assert_eq!(look.runs.load(Ordering::SeqCst), 1);
    h.clock.advance(5_000);
    let rt = h.runtime(turns);
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(
        look.runs.load(Ordering::SeqCst),
        2,
        "run again, not outcome unknown"
    );
    let finished = h
        .core_kinds(&t)
        .iter()
        .filter(|k| *k == "call_finished")
        .count();
    assert_eq!(finished, 1, "one result recorded");
    assert_eq!(result_text(&rt, &s, &t), "ran with {}");
}

#[test]
fn the_lease_is_renewed_once_a_tenth_of_it_has_passed_not_every_step() {
    let steps = json!([
        { "calls": [call("Work", json!({}))] },
        { "calls": [call("Work", json!({}))] },
        { "calls": [call("Work", json!({}))] },
        { "text": "done" }
    ]);
    // A log over the harness's that counts renewals.
    let counted = |h: &Harness| {
        let renewals = Arc::new(AtomicUsize::new(0));
        let seen = renewals.clone();
        let log = Tapped::over(h.log.clone()).on_renew(move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        (Arc::new(log), renewals)
    };
    // Quick steps under a one-minute lease: no renewal at all.
    let h = Harness::new();
    let (log, renewals) = counted(&h);
    let s = session(vec![offers(vec![Arc::new(TestTool::new("Work"))])]);
    let t = task("quick");
    let rt = h
        .runtime_over(log.clone(), steps.clone())
        .with_lease_ttl(60_000);
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(renewals.load(Ordering::SeqCst), 0);

    // Steps slower than a tenth of a one-second lease: renewed before each step but the first.
    let h = Harness::new();
    let (log, renewals) = counted(&h);
    let mut slow = TestTool::new("Work");
    slow.reply = |_| {
        std::thread::sleep(std::time::Duration::from_millis(120));
        Ok(ToolOutput::text("slow"))
    };
    let s = session(vec![offers(vec![Arc::new(slow)])]);
    let t = task("slow");
    let rt = h.runtime_over(log.clone(), steps).with_lease_ttl(1_000);
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    // (A fourth only if taking the claim and starting took a tenth of the lease too.)
    let renewals = renewals.load(Ordering::SeqCst);
    assert!((3..=4).contains(&renewals), "{renewals} renewals");
}

#[test]
fn a_crash_before_a_reply_is_written_runs_no_tool_and_asks_the_model_again() {
    let h = Harness::new();
    let work = Arc::new(TestTool::new("Work"));
    let s = session(vec![offers(vec![work.clone()])]);
    let t = task("unwritten");
    let turns = json!([{ "calls": [call("Work", json!({}))] }, { "text": "done" }]);
    // Appends: create, intake — then the worker dies writing the reply and its started-record.
    let dying = h.runtime_over(Arc::new(CrashAfter::new(h.log.clone(), 2)), turns.clone());
    block_on(dying.create(&s, &t, "go")).unwrap();
    assert!(block_on(dying.run(&s, &t)).is_err());
    assert_eq!(work.runs.load(Ordering::SeqCst), 0, "no tool ran");
    assert!(!h.core_kinds(&t).contains(&"assistant_reply".to_owned()));
    h.clock.advance(5_000);
    let rt = h.runtime(turns);
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(work.runs.load(Ordering::SeqCst), 1);
    let kinds = h.core_kinds(&t);
    let replies = kinds.iter().filter(|k| *k == "assistant_reply").count();
    assert_eq!(replies, 2, "{kinds:?}");
    let seqs: Vec<u64> = h.events(&t).iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

#[test]
fn a_reply_is_written_before_a_person_is_asked() {
    struct Person(Arc<MemoryEventLog>, Arc<Mutex<Vec<String>>>);
    #[async_trait]
    impl Extension for Person {
        fn name(&self) -> &str {
            "person"
        }
        async fn resolve_ask(
            &self,
            v: &View<'_>,
            _c: &ToolCall,
            _asks: &[String],
        ) -> HookResult<Option<bool>> {
            let events = self.0.read(v.task_id(), 0).await.unwrap();
            *self.1.lock().unwrap() = events.iter().map(|e| e.record.kind.clone()).collect();
            Ok(Some(true))
        }
    }
    let h = Harness::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let work = Arc::new(TestTool::new("Work"));
    let s = session(vec![
        offers(vec![work.clone()]),
        says(
            "asker",
            Some(Verdict::Ask {
                reason: "run Work?".into(),
                firm: false,
            }),
        ),
        Arc::new(Person(h.log.clone(), seen.clone())),
    ]);
    let t = task("asked");
    let rt = h.runtime(json!([{ "calls": [call("Work", json!({}))] }, { "text": "ok" }]));
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.last().map(String::as_str),
        Some("assistant_reply"),
        "{seen:?}"
    );
    assert_eq!(work.runs.load(Ordering::SeqCst), 1);
}

fn three_tool_turn() -> Value {
    json!([
        { "text": "Three things.", "calls": [call("Safe", json!({"n": 1})), call("Risky", json!({"n": 2})), call("Found", json!({"n": 3}))] },
        { "text": "All done." }
    ])
}

fn crash_tools() -> (Arc<TestTool>, Arc<TestTool>, Arc<TestTool>) {
    let mut safe = TestTool::new("Safe");
    safe.flags.retry_safe = true;
    let risky = TestTool::new("Risky");
    let mut found = TestTool::new("Found");
    found.recovered = Some("recovered by idempotency key");
    (Arc::new(safe), Arc::new(risky), Arc::new(found))
}

#[test]
fn a_crash_at_every_event_boundary_loses_and_duplicates_nothing() {
    // The crash-free run, for comparison.
    let reference = {
        let h = Harness::new();
        let (a, b, c) = crash_tools();
        let s = session(vec![offers(vec![a, b, c])]);
        let t = task("crash");
        let rt = h.runtime(three_tool_turn());
        block_on(rt.create(&s, &t, "go")).unwrap();
        block_on(rt.run(&s, &t)).unwrap();
        (h.events(&t).len(), block_on(rt.load(&s, &t)).unwrap())
    };
    let appends_in_a_clean_run = reference.0; // an upper bound on batches
    for limit in 1..appends_in_a_clean_run {
        let h = Harness::new();
        let (a, b, c) = crash_tools();
        let s = session(vec![offers(vec![a.clone(), b.clone(), c.clone()])]);
        let t = task("crash");
        let dying = h.runtime_over(
            Arc::new(CrashAfter::new(h.log.clone(), limit)),
            three_tool_turn(),
        );
        block_on(dying.create(&s, &t, "go")).ok();
        if block_on(dying.run(&s, &t)).is_ok() {
            continue; // this limit was past the run's last append
        }
        h.clock.advance(5_000);
        let rt = h.runtime(three_tool_turn());
        if block_on(h.log.info(&t)).unwrap().head == 0 {
            continue; // died before the task's first batch: nothing to resume
        }
        let outcome = block_on(rt.run(&s, &t)).unwrap();
        assert!(
            matches!(outcome, RunOutcome::Ended { .. }),
            "limit {limit}: {outcome:?}"
        );
        let state = block_on(rt.load(&s, &t)).unwrap();
        let events = h.events(&t);
        // Every call is answered exactly once, and nothing is left open.
        for id in ["call_1_1", "call_1_2", "call_1_3"] {
            let answers = events
                .iter()
                .filter(|e| e.record.kind == "call_finished" && e.record.data["call_id"] == id)
                .count();
            assert_eq!(answers, 1, "limit {limit}: {id} answered {answers} times");
        }
        assert!(state.core.open_calls.is_empty());
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=events.len() as u64).collect::<Vec<_>>(),
            "no gaps"
        );
        // Each call was run, rerun (retry_safe), recovered or answered "outcome unknown".
        let outcomes: Vec<(String, String)> = events
            .iter()
            .filter(|e| e.record.kind == "call_finished")
            .map(|e| {
                (
                    e.record.data["call_id"].as_str().unwrap().to_owned(),
                    e.record.data["outcome"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        for (id, outcome) in &outcomes {
            let text = state
                .core
                .messages
                .iter()
                .find(|m| m.call_id.as_deref() == Some(id))
                .unwrap()
                .text
                .clone();
            match outcome.as_str() {
                "ok" => assert!(
                    text.starts_with("ran with") || text == "recovered by idempotency key",
                    "{text}"
                ),
                "unknown" => {
                    assert_eq!(
                        id, "call_1_2",
                        "only the tool that is neither retry-safe nor recoverable is unknown"
                    );
                    assert!(text.contains("outcome unknown"), "{text}");
                }
                other => panic!("limit {limit}: unexpected outcome {other} for {id}"),
            }
        }
        // Where the outcome is deterministic, the final fold equals the crash-free one.
        let unknown = outcomes.iter().any(|(_, o)| o == "unknown");
        let recovered = state
            .core
            .messages
            .iter()
            .any(|m| m.text == "recovered by idempotency key");
        if !unknown && !recovered {
            let texts = |s: &noeta_core::fold::TaskState| -> Vec<(Role, String)> {
                s.core
                    .messages
                    .iter()
                    .map(|m| (m.role, m.text.to_string()))
                    .collect()
            };
            assert_eq!(texts(&state), texts(&reference.1), "limit {limit}");
        }
        assert_eq!(
            state.core.turn,
            TurnState::Ended {
                reason: "end_turn".into()
            }
        );
    }
}

#[test]
fn a_stale_lease_writes_nothing_and_stops_the_runner() {
    let h = Harness::new();
    let s = bare_session("main", "");
    let t = task("stale");
    let rt = h.runtime(json!([{ "text": "late" }]));
    block_on(rt.create(&s, &t, "go")).unwrap();
    let head = block_on(h.log.info(&t)).unwrap().head;
    // Another worker holds the task: this one cannot claim it.
    block_on(h.log.claim(&t, "other", 10_000)).unwrap();
    let err = block_on(rt.run(&s, &t)).unwrap_err();
    assert!(
        matches!(err, RunError::Store(StoreError::Leased { .. })),
        "{err}"
    );
    assert_eq!(block_on(h.log.info(&t)).unwrap().head, head);
}

// --- pins, snapshots, erasure ----------------------------------------------------

#[test]
fn a_task_pinned_with_a_plugin_this_host_lacks_is_refused_naming_it() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }]));
    let mut with_plugin = bare_session("main", "");
    with_plugin.pins = vec![noeta_core::records::PluginPin {
        name: "house".into(),
        source: "file".into(),
        version: "1.0.0".into(),
        params: "p".into(),
    }];
    let t = task("pins");
    block_on(rt.create(&with_plugin, &t, "go")).unwrap();
    let without = bare_session("main", "");
    let err = block_on(rt.run(&without, &t)).unwrap_err();
    assert!(matches!(err, RunError::PluginMissing { .. }), "{err}");
    assert!(
        err.to_string().contains("plugin `house` (file 1.0.0)"),
        "{err}"
    );
}

#[test]
fn changed_pins_are_re_recorded() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }, { "text": "ok" }]));
    let mut s = bare_session("main", "");
    let t = task("repin");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    s.spec.instructions = "Now with instructions.".into();
    block_on(rt.send(&s, &t, "again")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let pinned = h
        .core_kinds(&t)
        .iter()
        .filter(|k| *k == "plugins_pinned")
        .count();
    assert_eq!(pinned, 2);
}

/// Counts its own records; clears nothing on erasure but remembers it.
struct Counter;

#[async_trait]
impl Extension for Counter {
    fn name(&self) -> &str {
        "counter"
    }
    async fn turn_intake(&self, v: &View<'_>, _m: &str) -> HookResult<()> {
        v.record("counter", "tick", json!({}));
        Ok(())
    }
    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        let ticks = state.get("ticks").and_then(Value::as_u64).unwrap_or(0);
        let mut erased: Vec<Value> = state
            .get("erased")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        match kind {
            "tick" => *state = json!({"ticks": ticks + 1, "erased": erased}),
            "erased" => {
                erased.push(data["seq"].clone());
                *state = json!({"ticks": ticks, "erased": erased});
            }
            other => return Err(format!("unknown kind {other}")),
        }
        Ok(())
    }
}

#[test]
fn a_run_writes_a_snapshot_only_once_enough_events_came_after_the_last() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "a" }, { "text": "b" }]));
    let s = session(vec![]);
    let t = task("few");
    block_on(rt.create(&s, &t, "one")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        block_on(h.log.snapshot(&t)).unwrap(),
        None,
        "a short run writes none"
    );
    let rt = h
        .runtime(json!([{ "text": "a" }, { "text": "b" }]))
        .with_snapshot_every(3);
    block_on(rt.send(&s, &t, "two")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let snapshot = block_on(h.log.snapshot(&t)).unwrap().unwrap();
    assert_eq!(snapshot.seq, h.events(&t).len() as u64);
}

#[test]
fn a_snapshot_plus_tail_folds_to_the_same_bytes_and_another_plugin_set_ignores_it() {
    let h = Harness::new();
    let rt = h
        .runtime(json!([{ "text": "a" }, { "text": "b" }]))
        .with_snapshot_every(1);
    let s = session(vec![Arc::new(Counter)]);
    let t = task("snap");
    block_on(rt.create(&s, &t, "one")).unwrap();
    block_on(rt.run(&s, &t)).unwrap(); // writes a snapshot
    block_on(rt.send(&s, &t, "two")).unwrap();
    let events = h.events(&t);
    let scratch = s.folder.fold(&events).unwrap();
    let snapshot = block_on(h.log.snapshot(&t)).unwrap().unwrap();
    assert!(snapshot.seq < events.len() as u64);
    let tail: Vec<Event> = events
        .iter()
        .filter(|e| e.seq > snapshot.seq)
        .cloned()
        .collect();
    let resumed = s.folder.fold_from(Some(&snapshot), &tail).unwrap();
    assert_eq!(resumed.canonical_bytes(), scratch.canonical_bytes());
    assert_eq!(
        scratch.ext_state("counter"),
        Some(&json!({"ticks": 1, "erased": []}))
    );

    let other = Folder::new(&s.extensions, "another-set");
    let refolded = other.fold_from(Some(&snapshot), &events).unwrap();
    assert_eq!(refolded.canonical_bytes(), scratch.canonical_bytes());
}

#[test]
fn erasing_a_user_message_reaches_every_reduce_and_drops_the_message() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "a" }]));
    let s = session(vec![Arc::new(Counter)]);
    let t = task("erase");
    block_on(rt.create(&s, &t, "secret")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let mut events = h.events(&t);
    let user_seq = events
        .iter()
        .find(|e| e.record.kind == "user_message")
        .unwrap()
        .seq;
    events.push(Event {
        seq: events.len() as u64 + 1,
        record: CoreRecord::Erased { seq: user_seq }.to_record().into(),
    });
    let state = s.folder.fold(&events).unwrap();
    assert!(state.core.messages.iter().all(|m| m.text != "secret"));
    assert_eq!(
        state.ext_state("counter"),
        Some(&json!({"ticks": 1, "erased": [user_seq]}))
    );
}

#[test]
fn a_failing_reduce_names_the_extension_kind_and_seq() {
    let s = session(vec![Arc::new(Counter)]);
    let events = vec![Event {
        seq: 1,
        record: Record::new("counter", "bogus", json!({})).into(),
    }];
    let err = s.folder.fold(&events).unwrap_err();
    assert_eq!(
        err.to_string(),
        "extension `counter` failed to fold record `bogus` at seq 1: unknown kind bogus"
    );
}

#[test]
fn a_tool_result_marks_its_outcome() {
    let h = Harness::new();
    let (_a, _b, _c) = crash_tools();
    let rt = h.runtime(json!([{ "calls": [call("Work", json!({}))] }, { "text": "ok" }]));
    let s = session(vec![offers(vec![Arc::new(TestTool::new("Work"))])]);
    let t = task("outcome");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let finished = h
        .events(&t)
        .into_iter()
        .find(|e| e.record.kind == "call_finished")
        .unwrap();
    let parsed = CoreRecord::from_record(&finished.record).unwrap().unwrap();
    assert!(matches!(
        parsed,
        CoreRecord::CallFinished {
            outcome: CallOutcome::Ok,
            ..
        }
    ));
}

// --- parking and children ---------------------------------------------------------

/// Asks the user, then answers with what it was told.
struct AskTool(Arc<AtomicUsize>);

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

#[test]
fn a_tool_that_asks_parks_the_task_and_resumes_once_with_the_answer() {
    let h = Harness::new();
    let resumes = Arc::new(AtomicUsize::new(0));
    let rt = h.runtime(json!([{ "calls": [call("Ask", json!({}))] }, { "text": "blue it is" }]));
    let s = session(vec![offers(vec![Arc::new(AskTool(resumes.clone()))])]);
    let t = task("asking");
    block_on(rt.create(&s, &t, "pick")).unwrap();
    let parked = block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        parked,
        RunOutcome::Parked {
            call_id: "call_1_1".into(),
            question: "Which colour?".into()
        }
    );
    // Running again does nothing while the question is open.
    assert_eq!(block_on(rt.run(&s, &t)).unwrap(), parked);
    let err = block_on(rt.reply(&s, &t, "call_9", json!("red"))).unwrap_err();
    assert!(matches!(err, RunError::NotParked { .. }));
    // The tool checks an answer before it is recorded; a refused one leaves the question open.
    let head = h.events(&t).len();
    let err = block_on(rt.reply(&s, &t, "call_1_1", json!(7))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the answer to call `call_1_1` of task `asking` was refused, and the question stays open: a colour is a word, not `7`"
    );
    let err = block_on(rt.reply(&s, &t, "call_1_1", json!("boom"))).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("Ask: checking the answer panicked: the colour checker broke"),
        "{err}"
    );
    assert_eq!(h.events(&t).len(), head, "nothing was recorded");
    block_on(rt.reply(&s, &t, "call_1_1", json!("blue"))).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(resumes.load(Ordering::SeqCst), 1);
    assert_eq!(result_text(&rt, &s, &t), "the user said \"blue\"");
}

/// Spawns one child per entry of `input.agents` and reports their results.
struct Delegate;

#[async_trait]
impl Tool for Delegate {
    fn name(&self) -> &str {
        "Delegate"
    }
    fn description(&self) -> &str {
        "Delegates to child agents."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"agents": {"type": "array", "items": {"type": "string"}}}})
    }
    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let background = input["background"].as_bool().unwrap_or(false);
        let mut started = Vec::new();
        for agent in input["agents"].as_array().into_iter().flatten() {
            let agent = agent.as_str().unwrap_or_default();
            let goal = format!("do the {agent} part");
            if background {
                started.push(ctx.spawn_background(agent, &goal)?);
            } else {
                ctx.spawn(agent, &goal)?;
            }
        }
        if background {
            return Ok(ToolOutput::text(format!("started {}", started.join(", "))));
        }
        Ok(ToolOutput::wait_for_children())
    }
    async fn resume(
        &self,
        _input: Value,
        wake: noeta_core::records::Wake,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        match wake {
            noeta_core::records::Wake::Children { results } => Ok(ToolOutput::text(
                results
                    .iter()
                    .map(|r| format!("{}:{}:{}", r.agent, r.ok, r.text))
                    .collect::<Vec<_>>()
                    .join(" | "),
            )),
            other => Err(ToolError::RespondToModel(format!(
                "unexpected wake {other:?}"
            ))),
        }
    }
}

/// A host's sessions: the parent (roster `scout`, `fixer`) and its two children.
struct Host {
    parent: Arc<Session>,
    children: Vec<Arc<Session>>,
}

impl noeta_core::runner::Sessions for Host {
    fn session(&self, agent: &str) -> Option<Arc<Session>> {
        if agent == "main" {
            return Some(self.parent.clone());
        }
        self.children.iter().find(|s| s.spec.name == agent).cloned()
    }
}

/// Hands every child a note, and counts spawns through the checkpoint.
struct Parenting {
    checked: Arc<AtomicUsize>,
    deny: Option<&'static str>,
}

#[async_trait]
impl Extension for Parenting {
    fn name(&self) -> &str {
        "parenting"
    }
    fn before_spawn(
        &self,
        _v: &View<'_>,
        spawn: &noeta_core::extension::SpawnRequest,
    ) -> HookResult<Option<Verdict>> {
        self.checked.fetch_add(1, Ordering::SeqCst);
        assert_eq!(spawn.depth, 1);
        Ok(
            (Some(spawn.agent.as_str()) == self.deny).then(|| Verdict::Deny {
                reason: format!("no {} today", spawn.agent),
            }),
        )
    }
    fn inherit(&self, _v: &View<'_>) -> HookResult<Option<Value>> {
        Ok(Some(json!({"mode": "careful"})))
    }
}

fn family(checked: Arc<AtomicUsize>, deny: Option<&'static str>) -> Host {
    let mut parent = session(vec![
        offers(vec![Arc::new(Delegate)]),
        Arc::new(Parenting { checked, deny }),
    ]);
    parent.spec.spawnable = vec!["fixer".into(), "scout".into()];
    let child = |name: &str| {
        let mut s = bare_session(name, "You are a child.");
        s.folder = Folder::new(&s.extensions, "child-set");
        Arc::new(s)
    };
    Host {
        parent: Arc::new(parent),
        children: vec![child("scout"), child("fixer")],
    }
}

#[test]
fn children_run_and_wake_their_parent_exactly_once_with_their_results() {
    let h = Harness::new();
    let checked = Arc::new(AtomicUsize::new(0));
    let host = family(checked.clone(), None);
    let rt =
        Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware)).with_lease_ttl(1_000);
    let t = task("parent");
    block_on(rt.create(&host.parent, &t, "fix it")).unwrap();
    let (stopped, outcome) = block_on(rt.run_tree(&host, &t)).unwrap();
    assert_eq!(stopped, t);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(
        checked.load(Ordering::SeqCst),
        2,
        "each spawn passes the checkpoint"
    );
    let kinds = h.core_kinds(&t);
    assert_eq!(
        kinds.iter().filter(|k| *k == "children_finished").count(),
        1,
        "woken exactly once"
    );
    assert_eq!(
        result_text(&rt, &host.parent, &t),
        "scout:true:scout reporting | fixer:true:fixer reporting"
    );
    let tasks = block_on(h.log.tasks()).unwrap();
    let children: Vec<_> = tasks
        .iter()
        .filter(|i| i.parent.as_ref() == Some(&t))
        .collect();
    assert_eq!(children.len(), 2);
    let first = block_on(h.log.read(&children[0].id, 0)).unwrap();
    let started = CoreRecord::from_record(&first[0].record).unwrap().unwrap();
    match started {
        CoreRecord::TaskStarted {
            depth,
            inherited,
            parent,
            ..
        } => {
            assert_eq!(depth, 1);
            assert_eq!(parent.as_deref(), Some("parent"));
            assert_eq!(
                inherited.get("parenting"),
                Some(&json!({"mode": "careful"}))
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_spawn_refused_at_the_checkpoint_reaches_the_tool() {
    let h = Harness::new();
    let host = family(Arc::new(AtomicUsize::new(0)), Some("fixer"));
    let rt =
        Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware)).with_lease_ttl(1_000);
    let t = task("parent");
    block_on(rt.create(&host.parent, &t, "fix it")).unwrap();
    block_on(rt.run_tree(&host, &t)).unwrap();
    assert_eq!(result_text(&rt, &host.parent, &t), "no fixer today");
    let tasks = block_on(h.log.tasks()).unwrap();
    assert_eq!(
        tasks.len(),
        1,
        "a refused call's children are dropped with it"
    );
}

#[test]
fn a_spawn_outside_the_roster_is_refused_naming_the_roster() {
    let h = Harness::new();
    let mut host = family(Arc::new(AtomicUsize::new(0)), None);
    Arc::get_mut(&mut host.parent).unwrap().spec.spawnable = vec!["scout".into()];
    let rt =
        Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware)).with_lease_ttl(1_000);
    let t = task("parent");
    block_on(rt.create(&host.parent, &t, "fix it")).unwrap();
    block_on(rt.run_tree(&host, &t)).unwrap();
    assert_eq!(
        result_text(&rt, &host.parent, &t),
        "no agent named `fixer` on `main`'s roster (roster: scout)"
    );
}

/// Replies by agent: the parent delegates, then sums up; a child reports once.
struct ChildAware;

#[async_trait]
impl noeta_core::provider::Provider for ChildAware {
    fn name(&self) -> &str {
        "child-aware"
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
        let replies = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let mut reply = noeta_core::model::ModelReply::default();
        if request.system.contains("child") {
            let who = request.messages[0]
                .text
                .split(' ')
                .nth(2)
                .unwrap_or("?")
                .to_owned();
            reply.text = format!("{who} reporting");
        } else if replies == 0 {
            reply.text = "Delegating.".into();
            reply.calls = vec![ToolCall {
                id: "d1".into(),
                name: "Delegate".into(),
                input: json!({"agents": ["scout", "fixer"]}),
            }];
        } else {
            reply.text = "Both are done.".into();
        }
        Ok(reply)
    }
}

#[test]
fn a_crash_at_every_boundary_of_a_parent_with_two_children_loses_nothing() {
    let reference = {
        let h = Harness::new();
        let host = family(Arc::new(AtomicUsize::new(0)), None);
        let rt = Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware))
            .with_lease_ttl(1_000);
        let t = task("parent");
        block_on(rt.create(&host.parent, &t, "fix it")).unwrap();
        block_on(rt.run_tree(&host, &t)).unwrap();
        let total: u64 = block_on(h.log.tasks())
            .unwrap()
            .iter()
            .map(|i| i.head)
            .sum();
        (total as usize, result_text(&rt, &host.parent, &t))
    };
    for limit in 1..reference.0 + 4 {
        let h = Harness::new();
        let host = family(Arc::new(AtomicUsize::new(0)), None);
        let t = task("parent");
        let dying = Runtime::new(
            Arc::new(CrashAfter::new(h.log.clone(), limit)),
            h.content.clone(),
            Arc::new(ChildAware),
        )
        .with_lease_ttl(1_000);
        if block_on(dying.create(&host.parent, &t, "fix it")).is_err()
            && block_on(h.log.info(&t)).map(|i| i.head).unwrap_or(0) == 0
        {
            continue;
        }
        let crashed = block_on(dying.run_tree(&host, &t)).is_err();
        h.clock.advance(5_000);
        let rt = Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware))
            .with_lease_ttl(1_000);
        let (_, outcome) = block_on(rt.run_tree(&host, &t)).unwrap();
        assert!(
            matches!(outcome, RunOutcome::Ended { .. }),
            "limit {limit} (crashed: {crashed}): {outcome:?}"
        );
        let text = result_text(&rt, &host.parent, &t);
        let wakes = h
            .core_kinds(&t)
            .iter()
            .filter(|k| *k == "children_finished")
            .count();
        if text.contains("outcome unknown") {
            // The crash came before the park was recorded (no children, no wake), or during
            // the one resume a wake allows (which must not run twice).
            assert!(wakes <= 1, "limit {limit}: woken {wakes} times");
        } else {
            assert_eq!(text, reference.1, "limit {limit}");
            assert_eq!(wakes, 1, "limit {limit}: woken exactly once");
        }
        for info in block_on(h.log.tasks()).unwrap() {
            let events = block_on(h.log.read(&info.id, 0)).unwrap();
            let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
            assert_eq!(
                seqs,
                (1..=events.len() as u64).collect::<Vec<_>>(),
                "limit {limit}: gaps in {}",
                info.id
            );
            let replies = events
                .iter()
                .filter(|e| e.record.kind == "assistant_reply")
                .count();
            assert!(
                replies <= 2,
                "limit {limit}: {} replied {replies} times",
                info.id
            );
        }
    }
}

/// The parent starts `scout` in the background, ends its turn, and sums up once the report
/// arrives; a child reports once.
struct BackgroundAware;

#[async_trait]
impl noeta_core::provider::Provider for BackgroundAware {
    fn name(&self) -> &str {
        "background-aware"
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
        let replies = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let mut reply = noeta_core::model::ModelReply::default();
        if request.system.contains("child") {
            reply.text = "scout reporting".into();
        } else if replies == 0 {
            reply.text = "Sending a scout.".into();
            reply.calls = vec![ToolCall {
                id: "d1".into(),
                name: "Delegate".into(),
                input: json!({"agents": ["scout"], "background": true}),
            }];
        } else if replies == 1 {
            reply.text = "The scout is out; I will wait.".into();
        } else {
            let last = request.messages.last().map(|m| m.text.clone());
            reply.text = format!("Heard back: {}", last.unwrap_or_default());
        }
        Ok(reply)
    }
}

/// The texts of `t`'s messages in order, by role.
fn transcript(rt: &Runtime, s: &Session, t: &TaskId) -> Vec<(Role, String)> {
    let state = block_on(rt.load(s, t)).unwrap();
    state
        .core
        .messages
        .iter()
        .map(|m| (m.role, m.text.to_string()))
        .collect()
}

#[test]
fn a_background_child_runs_after_its_parent_stops_and_its_report_starts_one_more_turn() {
    let h = Harness::new();
    let host = family(Arc::new(AtomicUsize::new(0)), None);
    let rt = Runtime::new(h.log.clone(), h.content.clone(), Arc::new(BackgroundAware))
        .with_lease_ttl(1_000);
    let t = task("parent");
    block_on(rt.create(&host.parent, &t, "look around")).unwrap();
    let (stopped, outcome) = block_on(rt.run_tree(&host, &t)).unwrap();
    assert_eq!(stopped, t);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let kinds = h.core_kinds(&t);
    let count = |kind: &str| kinds.iter().filter(|k| *k == kind).count();
    assert_eq!(count("background_started"), 1);
    assert_eq!(count("background_delivered"), 1, "delivered exactly once");
    assert_eq!(count("children_finished"), 0, "the call never waited");
    let messages = transcript(&rt, &host.parent, &t);
    let child = block_on(h.log.tasks())
        .unwrap()
        .into_iter()
        .find(|i| i.parent.as_ref() == Some(&t))
        .expect("the child was created")
        .id;
    let tool_result = messages
        .iter()
        .find(|(role, _)| *role == Role::Tool)
        .map(|(_, text)| text.clone());
    assert_eq!(
        tool_result.as_deref(),
        Some(format!("started {child}").as_str()),
        "the call returned at once"
    );
    let report = format!(
        "Background subagent `scout` (task {child}) finished. Its report:\n\nscout reporting"
    );
    let last = messages.last().unwrap();
    assert_eq!(last.0, Role::Assistant);
    assert_eq!(last.1, format!("Heard back: {report}"));
    let state = block_on(rt.load(&host.parent, &t)).unwrap();
    assert!(state.core.background.is_empty(), "nothing left to deliver");
}

#[test]
fn a_crash_at_every_boundary_of_a_background_child_delivers_its_report_exactly_once() {
    let reference = {
        let h = Harness::new();
        let host = family(Arc::new(AtomicUsize::new(0)), None);
        let rt = Runtime::new(h.log.clone(), h.content.clone(), Arc::new(BackgroundAware))
            .with_lease_ttl(1_000);
        let t = task("parent");
        block_on(rt.create(&host.parent, &t, "look around")).unwrap();
        block_on(rt.run_tree(&host, &t)).unwrap();
        let total: u64 = block_on(h.log.tasks())
            .unwrap()
            .iter()
            .map(|i| i.head)
            .sum();
        total as usize
    };
    for limit in 1..reference + 4 {
        let h = Harness::new();
        let host = family(Arc::new(AtomicUsize::new(0)), None);
        let t = task("parent");
        let dying = Runtime::new(
            Arc::new(CrashAfter::new(h.log.clone(), limit)),
            h.content.clone(),
            Arc::new(BackgroundAware),
        )
        .with_lease_ttl(1_000);
        if block_on(dying.create(&host.parent, &t, "look around")).is_err()
            && block_on(h.log.info(&t)).map(|i| i.head).unwrap_or(0) == 0
        {
            continue;
        }
        let crashed = block_on(dying.run_tree(&host, &t)).is_err();
        h.clock.advance(5_000);
        let rt = Runtime::new(h.log.clone(), h.content.clone(), Arc::new(BackgroundAware))
            .with_lease_ttl(1_000);
        let (_, outcome) = block_on(rt.run_tree(&host, &t)).unwrap();
        assert!(
            matches!(outcome, RunOutcome::Ended { .. }),
            "limit {limit} (crashed: {crashed}): {outcome:?}"
        );
        let kinds = h.core_kinds(&t);
        let count = |kind: &str| kinds.iter().filter(|k| *k == kind).count();
        let children = block_on(h.log.tasks())
            .unwrap()
            .into_iter()
            .filter(|i| i.parent.as_ref() == Some(&t))
            .count();
        assert!(children <= 1, "limit {limit}: {children} children");
        assert_eq!(
            count("background_delivered"),
            count("background_started"),
            "limit {limit}: every started child delivers once"
        );
        assert!(count("background_started") <= 1, "limit {limit}");
        if count("background_started") == 1 {
            let last = transcript(&rt, &host.parent, &t).pop().unwrap();
            assert!(
                last.1
                    .starts_with("Heard back: Background subagent `scout`"),
                "limit {limit}: {}",
                last.1
            );
        }
    }
}

// --- refused claims -----------------------------------------------------------------

#[test]
fn a_pool_worker_missing_a_pinned_plugin_lets_the_task_go_and_three_refusals_fail_it() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }]));
    let mut pinned = bare_session("main", "");
    pinned.pins = vec![noeta_core::records::PluginPin {
        name: "house".into(),
        source: "file".into(),
        version: "1.0.0".into(),
        params: "p".into(),
    }];
    let t = task("pool");
    block_on(rt.create(&pinned, &t, "go")).unwrap();
    let worker = h.runtime(json!([{ "text": "ok" }])).as_pool_worker();
    let lacking = bare_session("main", "");
    for round in 1..=3 {
        let err = block_on(worker.run(&lacking, &t)).unwrap_err();
        assert!(
            matches!(err, RunError::PluginMissing { .. }),
            "round {round}: {err}"
        );
        h.clock.advance(2_000); // the lease lapses
    }
    let state = block_on(rt.load(&pinned, &t)).unwrap();
    assert!(
        state.core.task_failed.as_deref().is_some_and(
            |r| r.starts_with("plugin_missing: no worker that claimed it has plugin `house`")
        ),
        "{state:?}"
    );
    assert_eq!(
        h.core_kinds(&t)
            .iter()
            .filter(|k| *k == "claim_refused")
            .count(),
        3
    );
}

/// One session for every agent.
struct Only(Arc<Session>);

impl noeta_core::runner::Sessions for Only {
    fn session(&self, _agent: &str) -> Option<Arc<Session>> {
        Some(self.0.clone())
    }
}

#[test]
fn through_the_queue_the_third_refused_take_fails_the_task_and_ends_its_entry() {
    use noeta_core::store::{QueueDepth, TaskQueue};
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }]));
    let mut pinned = bare_session("main", "");
    pinned.pins = vec![noeta_core::records::PluginPin {
        name: "house".into(),
        source: "file".into(),
        version: "1.0.0".into(),
        params: "p".into(),
    }];
    let t = task("queued-pool");
    block_on(rt.create(&pinned, &t, "go")).unwrap();
    block_on(h.log.enqueue(&t, 0)).unwrap();
    let worker = h
        .runtime(json!([{ "text": "ok" }]))
        .with_worker("lacking")
        .as_pool_worker();
    let lacking = Only(Arc::new(bare_session("main", "")));
    for round in 1..=2 {
        let taken = block_on(h.log.take("lacking", 1_000)).unwrap().unwrap();
        let err = block_on(worker.run_queued(&lacking, h.log.as_ref(), &taken)).unwrap_err();
        assert!(
            matches!(err, RunError::PluginMissing { .. }),
            "round {round}: {err}"
        );
        // The entry stays and the lease is left to lapse for a worker that has the plugin.
        assert!(block_on(h.log.take("other", 1_000)).unwrap().is_none());
        h.clock.advance(2_000);
    }
    let taken = block_on(h.log.take("lacking", 1_000)).unwrap().unwrap();
    let ran = block_on(worker.run_queued(&lacking, h.log.as_ref(), &taken)).unwrap();
    assert!(
        matches!(&ran.outcome, RunOutcome::TaskFailed { reason } if reason.starts_with("plugin_missing: ")),
        "{ran:?}"
    );
    assert!(ran.woke.is_empty(), "a root task wakes nobody: {ran:?}");
    assert_eq!(block_on(h.log.depth()).unwrap(), QueueDepth::default());
    assert_eq!(
        h.core_kinds(&t)
            .iter()
            .filter(|k| *k == "claim_refused")
            .count(),
        3
    );
}

#[test]
fn a_cancel_fences_out_the_holder_and_fails_the_task_once() {
    let h = Harness::new();
    let s = bare_session("main", "");
    let t = task("cancelled");
    let rt = h.runtime(json!([{ "text": "never" }]));
    block_on(rt.create(&s, &t, "go")).unwrap();
    // A worker holds the task when the cancel comes.
    let held = block_on(h.log.claim(&t, "busy-worker", 60_000)).unwrap();
    let canceller = h.runtime(json!([])).with_worker("api");
    assert!(block_on(canceller.cancel(&t, "by a test")).unwrap());
    let late = block_on(
        h.log
            .append(&held, &[Record::new("core", "note", json!({}))]),
    );
    assert!(
        matches!(late, Err(StoreError::StaleLease { .. })),
        "{late:?}"
    );
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(
        state.core.task_failed.as_deref(),
        Some("cancelled: by a test")
    );
    assert!(!block_on(canceller.cancel(&t, "again")).unwrap());
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(
        matches!(outcome, RunOutcome::TaskFailed { .. }),
        "{outcome:?}"
    );
}

#[test]
fn a_stopping_runtime_stops_between_steps_and_the_turn_goes_on_later() {
    let h = Harness::new();
    let s = bare_session("main", "");
    let t = task("stopping");
    let rt = h.runtime(json!([{ "text": "done" }]));
    block_on(rt.create(&s, &t, "go")).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let stopping = h
        .runtime(json!([{ "text": "done" }]))
        .with_worker("leaving")
        .with_stop(stop.clone());
    let outcome = block_on(stopping.run(&s, &t)).unwrap();
    assert_eq!(outcome, RunOutcome::Stopped);
    // The lease was released: another worker carries on at once.
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
}

#[test]
fn a_fold_that_fails_on_three_claims_fails_the_task() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }]));
    let s = session(vec![Arc::new(Counter)]);
    let t = task("unfoldable");
    block_on(rt.create(&s, &t, "go")).unwrap();
    let lease = block_on(h.log.claim(&t, "someone", 10)).unwrap();
    block_on(
        h.log
            .append(&lease, &[Record::new("counter", "bogus", json!({}))]),
    )
    .unwrap();
    h.clock.advance(20);
    for round in 1..=3 {
        let err = block_on(rt.run(&s, &t)).unwrap_err();
        assert!(matches!(err, RunError::Fold(_)), "round {round}: {err}");
        h.clock.advance(2_000);
    }
    let kinds = h.core_kinds(&t);
    assert_eq!(kinds.iter().filter(|k| *k == "fold_failed").count(), 3);
    assert_eq!(kinds.last().map(String::as_str), Some("task_failed"));
    // Later claims leave the failed task alone.
    assert!(block_on(rt.run(&s, &t)).is_err());
    assert_eq!(h.core_kinds(&t).len(), kinds.len());
}

// --- tool flags -----------------------------------------------------------------

/// Records the tool list (name and description) of every request, then asks the script.
struct Capturing {
    inner: ScriptedProvider,
    seen: Mutex<Vec<Vec<(String, String)>>>,
}

impl Capturing {
    fn new(turns: Value) -> Arc<Self> {
        let script = json!({ "turns": turns }).to_string();
        Arc::new(Self {
            inner: ScriptedProvider::from_json(&script, "capturing").unwrap(),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn tools(&self, request: usize) -> Vec<String> {
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

fn flagged(name: &'static str, set: fn(&mut ToolFlags)) -> Arc<TestTool> {
    let mut tool = TestTool::new(name);
    set(&mut tool.flags);
    Arc::new(tool)
}

/// Loads every held-back tool whose search hint appears in the newest user message.
struct Loader;

#[async_trait]
impl Extension for Loader {
    fn name(&self) -> &str {
        "loader"
    }
    fn tool_changes(&self, view: &View<'_>, offered: &[OfferedTool]) -> HookResult<ToolChanges> {
        let wanted = view
            .messages()
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.text.clone())
            .unwrap_or_default();
        let mut changes = ToolChanges::none();
        changes.add = offered
            .iter()
            .filter(|t| t.deferred)
            .filter(|t| {
                t.tool
                    .flags()
                    .search_hint
                    .is_some_and(|hint| wanted.contains(&hint))
            })
            .map(|t| t.tool.clone())
            .collect();
        Ok(changes)
    }
}

#[test]
fn a_deferred_tool_is_held_back_until_loaded_and_then_sent_with_its_loaded_description() {
    let h = Harness::new();
    let deep = flagged("Deep", |f| {
        f.deferred = true;
        f.search_hint = Some("spelunk".into());
        f.loaded_description = Some("Deep, loaded.".into());
    });
    let provider = Capturing::new(json!([
        { "calls": [call("Deep", json!({}))] },
        { "text": "ok" },
        { "calls": [call("Deep", json!({}))] },
        { "text": "ok" }
    ]));
    let rt = Runtime::new(h.log.clone(), h.content.clone(), provider.clone()).with_lease_ttl(1_000);
    let s = session(vec![
        offers(vec![deep.clone(), Arc::new(TestTool::new("Plain"))]),
        Arc::new(Loader),
    ]);
    let t = task("deferred");
    block_on(rt.create(&s, &t, "look around")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(provider.tools(0), ["Plain"]);
    assert_eq!(
        deep.runs.load(Ordering::SeqCst),
        0,
        "a held-back tool cannot be called"
    );
    block_on(rt.send(&s, &t, "now spelunk")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(provider.tools(2), ["Plain", "Deep"]);
    assert_eq!(provider.seen.lock().unwrap()[2][1].1, "Deep, loaded.");
    assert_eq!(deep.runs.load(Ordering::SeqCst), 1);
}

#[test]
fn listed_last_tools_go_after_the_others() {
    let h = Harness::new();
    let provider = Capturing::new(json!([{ "text": "ok" }]));
    let rt = Runtime::new(h.log.clone(), h.content.clone(), provider.clone()).with_lease_ttl(1_000);
    let s = session(vec![offers(vec![
        flagged("Tail", |f| f.listed_last = true),
        Arc::new(TestTool::new("Head")),
        flagged("Also", |f| f.listed_last = true),
    ])]);
    let t = task("listed");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(provider.tools(0), ["Head", "Tail", "Also"]);
}

#[test]
fn run_last_calls_run_after_the_others_in_a_reply() {
    let h = Harness::new();
    let rt = h.runtime(json!([
        { "calls": [call("Wrap", json!({})), call("Work", json!({}))] },
        { "text": "ok" }
    ]));
    let s = session(vec![offers(vec![
        flagged("Wrap", |f| f.run_last = true),
        Arc::new(TestTool::new("Work")),
    ])]);
    let t = task("runlast");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let started: Vec<String> = h
        .events(&t)
        .iter()
        .filter(|e| e.record.kind == "call_started")
        .map(|e| e.record.data["tool"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(started, ["Work", "Wrap"]);
}

#[test]
fn a_silent_reply_tool_ends_the_turn_without_another_model_call() {
    let h = Harness::new();
    let provider = Capturing::new(
        json!([{ "calls": [call("Deliver", json!({}))] }, { "text": "never asked" }]),
    );
    let rt = Runtime::new(h.log.clone(), h.content.clone(), provider.clone()).with_lease_ttl(1_000);
    let s = session(vec![offers(vec![flagged("Deliver", |f| {
        f.silent_reply_after = true
    })])]);
    let t = task("silent");
    block_on(rt.create(&s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        outcome,
        RunOutcome::Ended {
            reason: "silent_reply_after".into()
        }
    );
    assert_eq!(provider.seen.lock().unwrap().len(), 1);
}

#[test]
fn unchecked_input_skips_the_schema_check() {
    let h = Harness::new();
    let lax = flagged("Lax", |f| f.unchecked_input = true);
    let rt = h.runtime(
        json!([{ "calls": [call("Lax", json!({"n": "not a number"}))] }, { "text": "ok" }]),
    );
    let s = session(vec![offers(vec![lax.clone()])]);
    let t = task("unchecked");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(lax.runs.load(Ordering::SeqCst), 1);
}

/// A test plan mode: `/plan` in a user message switches it on (recorded); then only tools
/// safe while planning run.
struct PlanMode;

#[async_trait]
impl Extension for PlanMode {
    fn name(&self) -> &str {
        "plan-mode"
    }
    async fn turn_intake(&self, v: &View<'_>, message: &str) -> HookResult<()> {
        if message.starts_with("/plan") {
            v.record("plan-mode", "switch", json!({"on": true}));
        }
        Ok(())
    }
    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        if kind == "switch" {
            *state = data.clone();
        }
        Ok(())
    }
    async fn before_tool(&self, v: &View<'_>, c: &ToolCall) -> HookResult<Option<Verdict>> {
        let planning = v.ext_state("plan-mode").is_some_and(|s| s["on"] == true);
        let safe = c.name == "Look";
        Ok((planning && !safe).then(|| Verdict::Deny {
            reason: format!("plan mode: `{}` is not safe while planning", c.name),
        }))
    }
}

#[test]
fn in_plan_mode_only_tools_safe_while_planning_run() {
    let h = Harness::new();
    let look = Arc::new(TestTool::new("Look").read_only());
    assert!(look.flags.safe_while_planning);
    let change = Arc::new(TestTool::new("Change"));
    let rt = h.runtime(json!([
        { "calls": [call("Look", json!({})), call("Change", json!({}))] },
        { "text": "planned" }
    ]));
    let s = session(vec![
        offers(vec![look.clone(), change.clone()]),
        Arc::new(PlanMode),
    ]);
    let t = task("plan");
    block_on(rt.create(&s, &t, "/plan the refactor")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(look.runs.load(Ordering::SeqCst), 1);
    assert_eq!(change.runs.load(Ordering::SeqCst), 0);
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert!(
        state
            .core
            .messages
            .iter()
            .any(|m| m.text == "plan mode: `Change` is not safe while planning")
    );
}

// --- combination rules the audit asked for ------------------------------------------

#[test]
fn the_first_offer_of_a_shared_tool_name_wins() {
    let h = Harness::new();
    let first = Arc::new(TestTool::new("Shared"));
    let mut second = TestTool::new("Shared");
    second.reply = |_| Ok(ToolOutput::text("the second one ran"));
    let second = Arc::new(second);
    let rt = h.runtime(json!([
        { "calls": [call("Shared", json!({"n": 1}))] },
        { "text": "done" }
    ]));
    let s = session(vec![
        offers(vec![first.clone()]),
        offers(vec![second.clone()]),
    ]);
    let t = task("shared");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(first.runs.load(Ordering::SeqCst), 1);
    assert_eq!(second.runs.load(Ordering::SeqCst), 0);
    assert_eq!(result_text(&rt, &s, &t), "ran with {\"n\":1}");
}

#[test]
fn at_most_ten_adjacent_read_only_calls_run_at_once() {
    let h = Harness::new();
    let reader = Arc::new(TestTool::new("Look").read_only());
    let calls: Vec<Value> = (1..=12).map(|n| call("Look", json!({ "n": n }))).collect();
    let rt = h.runtime(json!([{ "calls": calls }, { "text": "done" }]));
    let s = session(vec![offers(vec![reader.clone()])]);
    let t = task("cap");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(reader.runs.load(Ordering::SeqCst), 12);
    assert_eq!(
        reader.max_active.load(Ordering::SeqCst),
        noeta_core::runner::MAX_PARALLEL_READS
    );
    assert_eq!(noeta_core::runner::MAX_PARALLEL_READS, 10);
}

#[test]
fn gating_stops_at_the_first_call_that_must_ask_until_it_is_answered() {
    /// Asks about `Risky`, and remembers every call it was asked about.
    struct Watcher(Arc<Mutex<Vec<String>>>);
    #[async_trait]
    impl Extension for Watcher {
        fn name(&self) -> &str {
            "watcher"
        }
        async fn before_tool(&self, _v: &View<'_>, call: &ToolCall) -> HookResult<Option<Verdict>> {
            self.0.lock().unwrap().push(call.id.clone());
            Ok((call.name == "Risky").then(|| Verdict::Ask {
                reason: "Risky needs a yes".into(),
                firm: false,
            }))
        }
    }
    let h = Harness::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let risky = Arc::new(TestTool::new("Risky"));
    let later = Arc::new(TestTool::new("Later"));
    let rt = h.runtime(json!([
        { "calls": [
            { "id": "a", "name": "Later", "input": {"n": 1} },
            { "id": "b", "name": "Risky", "input": {"n": 2} },
            { "id": "c", "name": "Later", "input": {"n": 3} }
        ] },
        { "text": "done" }
    ]));
    let s = session(vec![
        offers(vec![risky.clone(), later.clone()]),
        Arc::new(Watcher(seen.clone())),
    ]);
    let t = task("ask-stops");
    block_on(rt.create(&s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(
        matches!(&outcome, RunOutcome::Parked { call_id, .. } if call_id == "b"),
        "{outcome:?}"
    );
    assert_eq!(*seen.lock().unwrap(), ["a", "b"], "c is not gated yet");
    assert_eq!(later.runs.load(Ordering::SeqCst), 1, "only a ran");
    assert_eq!(risky.runs.load(Ordering::SeqCst), 0);

    block_on(rt.answer(&s, &t, "b", true)).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.last().map(String::as_str), Some("c"), "{seen:?}");
    assert!(
        !seen[..seen.len() - 1].contains(&"c".to_owned()),
        "{seen:?}"
    );
    assert_eq!(risky.runs.load(Ordering::SeqCst), 1);
    assert_eq!(later.runs.load(Ordering::SeqCst), 2);
}

// --- sessions built from a plugin set ------------------------------------------------

mod from_plugins {
    use super::*;
    use crate::support::assert_mentions;
    use crate::support::{Fixtures, Manifest, ResolveWith, agent, compile};
    use noeta_core::ContentKindSpec;
    use noeta_core::session::build_session;
    use noeta_core::{
        PluginSource, ProvidedReminder, ProviderInput, ReminderProvider, Resolved,
        ToolResultTransform, TransformInput,
    };

    fn built(manifests: Vec<PluginSource>, plugins: &[&str]) -> Session {
        let set = crate::support::load(&manifests);
        let compiled = compile(&set, &agent("main", plugins)).unwrap();
        build_session(&set, &compiled, &Default::default(), None).unwrap()
    }

    /// A pack declaring content kinds whose extension gives one resident of each (and one
    /// of no kind, and one of `stray` when told).
    struct KindPack {
        name: &'static str,
        kinds: Vec<ContentKindSpec>,
        stray: bool,
    }

    struct KindResidents {
        name: String,
        kinds: Vec<String>,
        stray: bool,
    }

    #[async_trait]
    impl Extension for KindResidents {
        fn name(&self) -> &str {
            &self.name
        }
        fn context(&self, _v: &View<'_>) -> HookResult<Vec<noeta_core::extension::ContextPart>> {
            use noeta_core::extension::ContextPart;
            let mut parts = vec![ContextPart::resident(format!("{} plain", self.name))];
            for kind in &self.kinds {
                parts.push(ContextPart::resident_of(
                    kind,
                    format!("{} {kind}", self.name),
                ));
            }
            if self.stray {
                parts.push(ContextPart::resident_of("stray", "lost"));
            }
            Ok(parts)
        }
    }

    impl noeta_core::SessionPackFactory for KindPack {
        fn build(
            &self,
            _ctx: &noeta_core::SessionBuildContext,
        ) -> Result<noeta_core::PackContribution, String> {
            let mut pack = noeta_core::PackContribution::empty();
            pack.content_kinds = self.kinds.clone();
            pack.extensions.push(Arc::new(KindResidents {
                name: self.name.to_owned(),
                kinds: self.kinds.iter().map(|k| k.kind.clone()).collect(),
                stray: self.stray,
            }));
            Ok(pack)
        }
    }

    fn kind(name: &str, band: i64, title: &str) -> ContentKindSpec {
        ContentKindSpec {
            kind: name.to_owned(),
            band,
            title: title.to_owned(),
        }
    }

    fn kind_plugin(plugin: &'static str, priority: i64, pack: KindPack) -> PluginSource {
        let pack = Arc::new(pack);
        PluginSource::Linked(
            Manifest::new(plugin)
                .with(
                    "session_pack",
                    &format!("{plugin}-residents"),
                    &format!("priority = {priority}"),
                )
                .linked(
                    &format!("noeta-{plugin}"),
                    ResolveWith(move |_: &noeta_core::ResolveRequest<'_>| {
                        Ok(Resolved::SessionPack(pack.clone()))
                    }),
                ),
        )
    }

    /// Keeps every request it is sent and answers "done".
    #[derive(Default)]
    struct Capture(Mutex<Vec<ModelRequest>>);

    #[async_trait]
    impl noeta_core::provider::Provider for Capture {
        fn name(&self) -> &str {
            "capture"
        }
        fn model(&self) -> &str {
            "capture"
        }
        fn context_window(&self) -> u64 {
            100_000
        }
        async fn complete(
            &self,
            request: &ModelRequest,
        ) -> Result<noeta_core::model::ModelReply, noeta_core::provider::ProviderError> {
            self.0.lock().unwrap().push(request.clone());
            Ok(noeta_core::model::ModelReply {
                text: "done".into(),
                ..Default::default()
            })
        }
    }

    fn first_request(s: &Session) -> Result<ModelRequest, RunOutcome> {
        let h = Harness::new();
        let capture = Arc::new(Capture::default());
        let rt =
            Runtime::new(h.log.clone(), h.content.clone(), capture.clone()).with_lease_ttl(1_000);
        let t = task("kinds");
        block_on(rt.create(s, &t, "go")).unwrap();
        let outcome = block_on(rt.run(s, &t)).unwrap();
        capture.0.lock().unwrap().first().cloned().ok_or(outcome)
    }

    #[test]
    fn residents_are_laid_out_by_content_kind_band_then_pack_order_and_unkinded_ones_last() {
        // Pack order is `first` (100) then `second` (200); bands put `second`'s `skills`
        // first, and `rules` and `facts` (both band 20) keep pack order.
        let s = built(
            vec![
                kind_plugin(
                    "first",
                    100,
                    KindPack {
                        name: "first",
                        kinds: vec![kind("notes", 30, ""), kind("rules", 20, "")],
                        stray: false,
                    },
                ),
                kind_plugin(
                    "second",
                    200,
                    KindPack {
                        name: "second",
                        kinds: vec![kind("skills", 10, "## Skills"), kind("facts", 20, "")],
                        stray: false,
                    },
                ),
            ],
            &["first", "second"],
        );
        let kinds: Vec<&str> = s.kinds.iter().map(|k| k.kind.as_str()).collect();
        assert_eq!(kinds, ["skills", "rules", "facts", "notes"]);
        let request = first_request(&s).unwrap();
        assert_eq!(
            request.residents,
            [
                "## Skills",
                "second skills",
                "first rules",
                "second facts",
                "first notes",
                "first plain",
                "second plain"
            ]
        );
    }

    #[test]
    fn a_resident_of_a_kind_the_agent_lacks_fails_the_turn_naming_extension_and_kind() {
        let s = built(
            vec![kind_plugin(
                "first",
                100,
                KindPack {
                    name: "first",
                    kinds: vec![kind("notes", 30, "")],
                    stray: true,
                },
            )],
            &["first"],
        );
        let outcome = first_request(&s).unwrap_err();
        let RunOutcome::TurnFailed { reason } = outcome else {
            panic!("{outcome:?}");
        };
        assert_mentions(
            &reason,
            &[
                "extension `first`",
                "content kind `stray`",
                "agent `main`",
                "(kinds: notes)",
            ],
        );
    }

    #[test]
    fn two_packs_declaring_one_content_kind_is_an_error_naming_both() {
        let set = crate::support::load(&[
            kind_plugin(
                "first",
                100,
                KindPack {
                    name: "first",
                    kinds: vec![kind("notes", 30, "")],
                    stray: false,
                },
            ),
            kind_plugin(
                "second",
                200,
                KindPack {
                    name: "second",
                    kinds: vec![kind("notes", 10, "")],
                    stray: false,
                },
            ),
        ]);
        let compiled = compile(&set, &agent("main", &["first", "second"])).unwrap();
        let err = build_session(&set, &compiled, &Default::default(), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "agent `main`: content kind `notes` is declared by both first/first-residents and second/second-residents — a kind has one owner"
        );
    }

    #[test]
    fn a_mounted_control_tool_runs_like_a_tool_and_is_offered_after_the_others() {
        let h = Harness::new();
        let s = built(
            vec![PluginSource::Linked(
                Manifest::new("ctl")
                    .with("tool", "Echo", "")
                    .with("control_tool", "ask_user", "priority = 300")
                    .linked("noeta-ctl", Fixtures),
            )],
            &["ctl"],
        );
        let provider = Capturing::new(
            json!([{ "calls": [call("ask_user", json!({"text": "hi"}))] }, { "text": "ok" }]),
        );
        let rt =
            Runtime::new(h.log.clone(), h.content.clone(), provider.clone()).with_lease_ttl(1_000);
        let t = task("control");
        block_on(rt.create(&s, &t, "go")).unwrap();
        block_on(rt.run(&s, &t)).unwrap();
        assert_eq!(provider.tools(0), ["Echo", "ask_user"]);
        assert!(result_text(&rt, &s, &t).starts_with("hi (key "));
        assert_eq!(
            s.pins.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["ctl"]
        );
    }

    struct Redact(bool);

    impl ToolResultTransform for Redact {
        fn transform(&self, input: TransformInput) -> Result<ToolOutput, String> {
            if self.0 {
                return Err("redaction rules missing".into());
            }
            Ok(ToolOutput::text(
                input.output.text.replace("secret", "[redacted]"),
            ))
        }
    }

    fn with_transform(failing: bool) -> Session {
        built(
            vec![PluginSource::Linked(
                Manifest::new("house")
                    .with("tool", "Echo", "")
                    .with("tool_result_transform", "redact", "priority = 1")
                    .linked(
                        "noeta-house",
                        ResolveWith(
                            move |request: &noeta_core::ResolveRequest<'_>| match request.surface {
                                "tool_result_transform" => {
                                    Ok(Resolved::ToolResultTransform(Arc::new(Redact(failing))))
                                }
                                _ => crate::support::fixture_value(request),
                            },
                        ),
                    ),
            )],
            &["house"],
        )
    }

    #[test]
    fn a_transform_rewrites_results_and_a_failing_one_fails_the_call_closed() {
        for (failing, expected) in [
            (false, "the [redacted] word (key transform:call_1_1)".to_owned()),
            (true, "Echo: the result was withheld because transform `house/redact` failed: redaction rules missing".to_owned()),
        ] {
            let h = Harness::new();
            let s = with_transform(failing);
            let rt = h.runtime(json!([{ "calls": [call("Echo", json!({"text": "the secret word"}))] }, { "text": "ok" }]));
            let t = task("transform");
            block_on(rt.create(&s, &t, "go")).unwrap();
            block_on(rt.run(&s, &t)).unwrap();
            assert_eq!(result_text(&rt, &s, &t), expected);
            let log = serde_json::to_string(&h.events(&t)).unwrap();
            assert!(!log.contains("the secret word (key"), "the untransformed result is never recorded");
        }
    }

    struct Recall(Arc<AtomicUsize>);

    #[async_trait]
    impl ReminderProvider for Recall {
        async fn provide(&self, input: ProviderInput<'_>) -> Result<Vec<ProvidedReminder>, String> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(vec![ProvidedReminder {
                text: format!("recall for: {}", input.user_message.unwrap_or_default()),
            }])
        }
    }

    /// A pack mounting two tools, noting the allow-list it was built with.
    struct TwoTools(Arc<Mutex<Option<Option<Vec<String>>>>>);

    impl noeta_core::SessionPackFactory for TwoTools {
        fn build(
            &self,
            ctx: &noeta_core::SessionBuildContext,
        ) -> Result<noeta_core::PackContribution, String> {
            *self.0.lock().unwrap() = Some(ctx.tools.clone());
            let mut pack = noeta_core::PackContribution::empty();
            pack.tools = vec![
                Arc::new(crate::support::EchoTool::new("Echo")),
                Arc::new(crate::support::EchoTool::new("Shout")),
            ];
            Ok(pack)
        }
    }

    #[test]
    fn the_agents_tool_allow_list_filters_pack_tools_and_is_part_of_its_identity() {
        let seen = Arc::new(Mutex::new(None));
        let pack = TwoTools(seen.clone());
        let pack = Arc::new(pack);
        let set = crate::support::load(&[PluginSource::Linked(
            Manifest::new("packed")
                .with("session_pack", "two", "priority = 100")
                .linked(
                    "noeta-packed",
                    ResolveWith(move |_: &noeta_core::ResolveRequest<'_>| {
                        Ok(Resolved::SessionPack(pack.clone()))
                    }),
                ),
        )]);
        let offered = |options: &noeta_core::AgentOptions| -> (Vec<String>, String) {
            let compiled = compile(&set, options).unwrap();
            let session = build_session(&set, &compiled, &Default::default(), None).unwrap();
            let task_id = task("offer");
            let state = noeta_core::fold::TaskState::default();
            let view = View::new(&task_id, "main", &state, &[], &session.extensions);
            let names = session
                .extensions
                .iter()
                .flat_map(|e| e.tools(&view).unwrap())
                .map(|t| t.name().to_owned())
                .collect();
            (names, compiled.spec.identity_hash())
        };
        let all = agent("main", &["packed"]);
        let (names, open) = offered(&all);
        assert_eq!(names, ["Echo", "Shout"]);
        assert_eq!(*seen.lock().unwrap(), Some(None));
        let mut listed = all.clone();
        listed.tools = Some(vec!["Shout".into(), "Read".into(), "Shout".into()]);
        let (names, limited) = offered(&listed);
        assert_eq!(names, ["Shout"]);
        assert_eq!(
            *seen.lock().unwrap(),
            Some(Some(vec!["Read".to_owned(), "Shout".to_owned()])),
            "packs see the list sorted, once each"
        );
        assert_ne!(open, limited, "the allow-list is identity-bearing");
    }

    #[test]
    fn a_reminder_provider_runs_at_its_seam_and_is_folded_back_not_asked_again() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let s = built(
            vec![PluginSource::Linked(
                Manifest::new("mem")
                    .with("reminder_provider", "recall", "seams = [\"turn_intake\"]")
                    .linked(
                        "noeta-mem",
                        ResolveWith(move |_: &noeta_core::ResolveRequest<'_>| {
                            Ok(Resolved::ReminderProvider(Arc::new(Recall(
                                counter.clone(),
                            ))))
                        }),
                    ),
            )],
            &["mem"],
        );
        let h = Harness::new();
        let rt = h.runtime(json!([{ "text": "ok" }]));
        let t = task("recall");
        block_on(rt.create(&s, &t, "where is the config?")).unwrap();
        block_on(rt.run(&s, &t)).unwrap();
        block_on(rt.run(&s, &t)).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let state = block_on(rt.load(&s, &t)).unwrap();
        assert_eq!(
            state.core.messages[1].text,
            "recall for: where is the config?"
        );
    }

    #[test]
    fn a_process_wide_guard_applies_to_an_agent_that_does_not_activate_its_plugin() {
        let s = built(
            vec![
                PluginSource::Linked(
                    Manifest::new("tools")
                        .with("tool", "Echo", "")
                        .linked("noeta-tools", Fixtures),
                ),
                PluginSource::Linked(
                    Manifest::new("policy-guard")
                        .with("guard", "no-echo", "")
                        .linked(
                            "noeta-guard",
                            ResolveWith(|_: &noeta_core::ResolveRequest<'_>| {
                                Ok(Resolved::Guard(Arc::new(noeta_testkit_like::DenyEcho)))
                            }),
                        ),
                ),
            ],
            &["tools"],
        );
        let h = Harness::new();
        let rt =
            h.runtime(json!([{ "calls": [call("Echo", json!({"text": "x"}))] }, { "text": "ok" }]));
        let t = task("guarded");
        block_on(rt.create(&s, &t, "go")).unwrap();
        block_on(rt.run(&s, &t)).unwrap();
        assert_eq!(result_text(&rt, &s, &t), "Echo is not allowed here");
    }

    /// Records every checkpoint it is asked at; denies spawning `fixer` and the first finish.
    struct Checkpoints {
        seen: Arc<Mutex<Vec<String>>>,
        finishes: AtomicUsize,
    }

    impl noeta_core::Guard for Checkpoints {
        fn check(&self, input: &noeta_core::GuardInput) -> Option<Verdict> {
            use noeta_core::Checkpoint;
            match &input.checkpoint {
                Checkpoint::Spawn { agent, .. } => {
                    self.seen.lock().unwrap().push(format!("spawn {agent}"));
                    (agent == "fixer").then(|| Verdict::Deny {
                        reason: "no fixing today".into(),
                    })
                }
                Checkpoint::Finish => {
                    self.seen.lock().unwrap().push("finish".into());
                    (self.finishes.fetch_add(1, Ordering::SeqCst) == 0).then(|| Verdict::Deny {
                        reason: "not yet: say goodbye first".into(),
                    })
                }
                _ => None,
            }
        }
    }

    #[test]
    fn a_guard_contribution_is_asked_at_the_spawn_checkpoint_and_at_finish() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let guard = Arc::new(Checkpoints {
            seen: seen.clone(),
            finishes: AtomicUsize::new(0),
        });
        let mut parent = built(
            vec![PluginSource::Linked(
                Manifest::new("gatekeeper")
                    .with("guard", "checkpoints", "")
                    .linked(
                        "noeta-gatekeeper",
                        ResolveWith(move |_: &noeta_core::ResolveRequest<'_>| {
                            Ok(Resolved::Guard(guard.clone()))
                        }),
                    ),
            )],
            &[],
        );
        parent
            .extensions
            .insert(0, offers(vec![Arc::new(Delegate)]));
        parent.folder = Folder::new(&parent.extensions, "guarded-family");
        parent.spec.spawnable = vec!["fixer".into(), "scout".into()];
        let child = |name: &str| {
            let mut s = bare_session(name, "You are a child.");
            s.folder = Folder::new(&s.extensions, "child-set");
            Arc::new(s)
        };
        let host = Host {
            parent: Arc::new(parent),
            children: vec![child("scout"), child("fixer")],
        };
        let h = Harness::new();
        let rt = Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware))
            .with_lease_ttl(1_000);
        let t = task("guarded-parent");
        block_on(rt.create(&host.parent, &t, "fix it")).unwrap();
        let (_, outcome) = block_on(rt.run_tree(&host, &t)).unwrap();
        assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(&seen[..2], ["spawn scout", "spawn fixer"], "{seen:?}");
        assert_eq!(
            seen.iter().filter(|s| *s == "finish").count(),
            2,
            "the refused finish and the one after: {seen:?}"
        );
        let state = block_on(rt.load(&host.parent, &t)).unwrap();
        let texts = texts(&state);
        assert!(
            texts.iter().any(|m| m.contains("no fixing today")),
            "the refused spawn reached the tool: {texts:?}"
        );
        assert!(
            texts.contains(&"not yet: say goodbye first"),
            "the refusal to finish reached the model: {texts:?}"
        );
    }

    /// Sees every event, fails on every other one, and panics at the turn's end.
    struct Flaky(Arc<Mutex<Vec<String>>>);

    impl noeta_core::Observer for Flaky {
        fn observe(&self, event: &noeta_core::ObservedEvent) -> Result<(), String> {
            let count = {
                let mut seen = self.0.lock().unwrap();
                seen.push(event.kind.clone());
                seen.len()
            };
            if event.kind == "turn_ended" {
                panic!("an observer that panics");
            }
            if count % 2 == 0 {
                return Err("the metrics sink is down".into());
            }
            Ok(())
        }
    }

    #[test]
    fn an_observer_contribution_sees_every_event_and_its_failures_leave_the_task_alone() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let observer = Arc::new(Flaky(seen.clone()));
        let s = built(
            vec![
                PluginSource::Linked(
                    Manifest::new("tools")
                        .with("tool", "Echo", "")
                        .linked("noeta-tools", Fixtures),
                ),
                PluginSource::Linked(
                    Manifest::new("metrics")
                        .with("observer", "flaky", "")
                        .linked(
                            "noeta-metrics",
                            ResolveWith(move |_: &noeta_core::ResolveRequest<'_>| {
                                Ok(Resolved::Observer(observer.clone()))
                            }),
                        ),
                ),
            ],
            &["tools"],
        );
        let h = Harness::new();
        let rt =
            h.runtime(json!([{ "calls": [call("Echo", json!({"text": "x"}))] }, { "text": "ok" }]));
        let t = task("observed");
        block_on(rt.create(&s, &t, "go")).unwrap();
        let outcome = block_on(rt.run(&s, &t)).unwrap();
        assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
        let kinds: Vec<String> = h.events(&t).iter().map(|e| e.record.kind.clone()).collect();
        assert_eq!(*seen.lock().unwrap(), kinds, "every event, in order");
        assert!(kinds.iter().any(|k| k == "call_finished"));
        assert_eq!(kinds.last().map(String::as_str), Some("turn_ended"));
    }

    mod noeta_testkit_like {
        use noeta_core::{Checkpoint, Guard, GuardInput, Verdict};

        pub(crate) struct DenyEcho;

        impl Guard for DenyEcho {
            fn check(&self, input: &GuardInput) -> Option<Verdict> {
                match &input.checkpoint {
                    Checkpoint::ToolCall { tool, .. } if tool == "Echo" => Some(Verdict::Deny {
                        reason: "Echo is not allowed here".into(),
                    }),
                    _ => None,
                }
            }
        }
    }
}

// --- the remaining hooks -----------------------------------------------------------

#[test]
fn on_empty_reply_may_nudge_the_model_to_go_on() {
    struct Nudge;
    #[async_trait]
    impl Extension for Nudge {
        fn name(&self) -> &str {
            "nudge"
        }
        async fn on_empty_reply(
            &self,
            v: &View<'_>,
            _r: &noeta_core::model::ModelReply,
        ) -> HookResult<Option<String>> {
            Ok((v.core().model_calls == 1).then(|| "Please answer.".to_owned()))
        }
    }
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "" }, { "text": "Here." }]));
    let s = session(vec![Arc::new(Nudge)]);
    let t = task("empty");
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    let state = block_on(rt.load(&s, &t)).unwrap();
    let texts = texts(&state);
    assert_eq!(texts, ["go", "", "Please answer.", "Here."]);

    // With no extension to nudge, an empty reply ends the turn.
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": " " }]));
    let s = bare_session("main", "");
    let t = task("empty2");
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert_eq!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended {
            reason: "empty_reply".into()
        }
    );
}

#[test]
fn on_context_overflow_makes_room_and_the_call_is_retried() {
    struct Compactor(AtomicUsize);
    #[async_trait]
    impl Extension for Compactor {
        fn name(&self) -> &str {
            "compactor"
        }
        async fn on_context_overflow(
            &self,
            v: &View<'_>,
            _r: &ModelRequest,
        ) -> Result<bool, StepSignal> {
            self.0.fetch_add(1, Ordering::SeqCst);
            v.record_with_message(
                "compactor",
                "summary",
                json!({}),
                "Summary of earlier work.",
            );
            Ok(true)
        }
    }
    /// Overflows until the conversation holds a summary.
    struct Tight;
    #[async_trait]
    impl noeta_core::provider::Provider for Tight {
        fn name(&self) -> &str {
            "tight"
        }
        fn model(&self) -> &str {
            "tight"
        }
        fn context_window(&self) -> u64 {
            10
        }
        async fn complete(
            &self,
            r: &ModelRequest,
        ) -> Result<noeta_core::model::ModelReply, noeta_core::provider::ProviderError> {
            if r.messages.iter().any(|m| m.text.starts_with("Summary")) {
                Ok(noeta_core::model::ModelReply {
                    text: "fits now".into(),
                    ..Default::default()
                })
            } else {
                Err(noeta_core::provider::ProviderError::ContextOverflow {
                    message: "too long".into(),
                })
            }
        }
    }
    let h = Harness::new();
    let compactor = Arc::new(Compactor(AtomicUsize::new(0)));
    let rt = Runtime::new(h.log.clone(), h.content.clone(), Arc::new(Tight)).with_lease_ttl(1_000);
    let s = session(vec![compactor.clone()]);
    let t = task("overflow-room");
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(compactor.0.load(Ordering::SeqCst), 1);
}

#[test]
fn before_model_may_end_the_turn_or_ask_for_a_fresh_compose() {
    struct Gatekeeper(AtomicUsize);
    #[async_trait]
    impl Extension for Gatekeeper {
        fn name(&self) -> &str {
            "gatekeeper"
        }
        async fn before_model(
            &self,
            v: &View<'_>,
            r: ModelRequest,
        ) -> Result<ModelRequest, StepSignal> {
            match self.0.fetch_add(1, Ordering::SeqCst) {
                0 => {
                    v.record_with_message("gatekeeper", "fresh", json!({}), "Context refreshed.");
                    Err(StepSignal::RequestStale)
                }
                _ if r.messages.iter().any(|m| m.text == "stop") => Err(StepSignal::TurnDone {
                    reason: "budget".into(),
                }),
                _ => Ok(r),
            }
        }
    }
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "first" }]));
    let s = session(vec![Arc::new(Gatekeeper(AtomicUsize::new(0)))]);
    let t = task("before-model");
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(
        state.core.messages[1].text, "Context refreshed.",
        "recomposed with what the hook recorded"
    );
    block_on(rt.send(&s, &t, "stop")).unwrap();
    assert_eq!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended {
            reason: "budget".into()
        }
    );
    assert_eq!(
        block_on(rt.load(&s, &t)).unwrap().core.model_calls,
        1,
        "the model was not called"
    );
}

#[test]
fn a_reply_cut_off_by_the_token_limit_is_continued_by_the_minimal_policy() {
    let h = Harness::new();
    let rt =
        h.runtime(json!([{ "text": "Half", "stop": "max_tokens" }, { "text": "and the rest." }]));
    let s = bare_session("main", "");
    let t = task("maxtokens");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(state.core.model_calls, 2);
    assert!(
        state.core.messages[2]
            .text
            .starts_with("Your reply was cut off")
    );
}

/// Stands in for compaction: asks the others, and reports what they said.
struct Compacting;

#[async_trait]
impl Extension for Compacting {
    fn name(&self) -> &str {
        "compacting"
    }
    fn commands(&self, _v: &View<'_>) -> HookResult<Vec<noeta_core::extension::CommandSpec>> {
        Ok(vec![noeta_core::extension::CommandSpec {
            name: "compact".into(),
            description: "Compact now.".into(),
        }])
    }
    async fn run_command(
        &self,
        v: &View<'_>,
        name: &str,
        args: &str,
    ) -> HookResult<noeta_core::extension::CommandReply> {
        if args == "fail" {
            return Err(HookError::new("nothing to compact"));
        }
        let advice: Vec<String> = v
            .ask_before_compact("compacting")
            .into_iter()
            .map(|(n, a)| format!("{n}:{:?}", a.refuse))
            .collect();
        let residents: Vec<String> = v
            .ask_residents("compacting")
            .into_iter()
            .map(|(n, t)| format!("{n}:{t}"))
            .collect();
        let leads: Vec<String> = v
            .ask_lead_residents("compacting")
            .into_iter()
            .map(|(n, t)| format!("{n}:{t}"))
            .collect();
        v.record("compacting", "ran", json!({ "command": name }));
        Ok(noeta_core::extension::CommandReply::Show(format!(
            "{} | {} | {}",
            advice.join(","),
            residents.join(","),
            leads.join(",")
        )))
    }
}

struct Keeps;

#[async_trait]
impl Extension for Keeps {
    fn name(&self) -> &str {
        "keeps"
    }
    fn before_compact(&self, _v: &View<'_>) -> HookResult<noeta_core::extension::CompactAdvice> {
        let mut advice = noeta_core::extension::CompactAdvice::default();
        advice.refuse = Some("mid-edit".into());
        Ok(advice)
    }
    fn resident(&self, _v: &View<'_>) -> HookResult<Option<String>> {
        Ok(Some("the plan".into()))
    }
    fn lead_resident(&self, _v: &View<'_>) -> HookResult<Option<String>> {
        Err(HookError::new("broken lead"))
    }
}

#[test]
fn commands_run_through_the_offering_extension_which_may_ask_the_others() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }]));
    let s = session(vec![Arc::new(Compacting), Arc::new(Keeps)]);
    let t = task("commands");
    block_on(rt.create(&s, &t, "go")).unwrap();
    let listed = block_on(rt.commands(&s, &t)).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, "compacting");
    let out = block_on(rt.run_command(&s, &t, "compact", "")).unwrap();
    assert_eq!(
        out.text(),
        "keeps:Some(\"mid-edit\") | keeps:the plan | ",
        "a failing lead_resident is skipped"
    );
    assert!(
        h.events(&t).iter().any(|e| e.record.kind == "ran"),
        "a command's records are committed"
    );
    let err = block_on(rt.run_command(&s, &t, "compact", "fail")).unwrap_err();
    assert_eq!(err.to_string(), "/compact: nothing to compact");
    let err = block_on(rt.run_command(&s, &t, "nope", "")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/nope: no such command (available: /compact)"
    );
}

#[test]
fn a_fork_continues_the_conversation_with_what_continue_state_keeps() {
    struct Notes;
    #[async_trait]
    impl Extension for Notes {
        fn name(&self) -> &str {
            "notes"
        }
        async fn turn_intake(&self, v: &View<'_>, m: &str) -> HookResult<()> {
            v.record("notes", "note", json!({ "text": m }));
            Ok(())
        }
        fn reduce(&self, state: &mut Value, _kind: &str, data: &Value) -> Result<(), String> {
            let mut notes = state
                .get("notes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            notes.push(data["text"].clone());
            *state = json!({ "notes": notes, "timer": "belongs to the source" });
            Ok(())
        }
        fn continue_state(&self, state: &Value) -> Value {
            json!({ "notes": state["notes"] })
        }
    }
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "first answer" }, { "text": "second answer" }]));
    let s = session(vec![Arc::new(Notes)]);
    let (a, b) = (task("source"), task("fork"));
    block_on(rt.create(&s, &a, "remember this")).unwrap();
    block_on(rt.run(&s, &a)).unwrap();
    block_on(rt.fork(&s, &a, &b)).unwrap();
    block_on(rt.send(&s, &b, "and this")).unwrap();
    block_on(rt.run(&s, &b)).unwrap();
    let forked = block_on(rt.load(&s, &b)).unwrap();
    let texts = texts(&forked);
    assert_eq!(
        texts,
        ["remember this", "first answer", "and this", "second answer"]
    );
    assert_eq!(
        forked.ext_state("notes"),
        Some(&json!({ "notes": ["remember this", "and this"], "timer": "belongs to the source" }))
    );
    let source = block_on(rt.load(&s, &a)).unwrap();
    assert_eq!(source.core.messages.len(), 2, "the source is untouched");
}

#[test]
fn a_text_sink_sees_each_step_reply_as_it_comes() {
    let h = Harness::new();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = {
        let seen = seen.clone();
        Arc::new(move |task: &TaskId, piece: &str| {
            seen.lock().unwrap().push(format!("{task}: {piece}"));
        })
    };
    let rt = h
        .runtime(json!([
            { "text": "looking", "calls": [call("Echo", json!({ "text": "a" }))] },
            { "text": "done" }
        ]))
        .with_text_sink(sink);
    let s = session(vec![offers(vec![Arc::new(TestTool::new("Echo"))])]);
    let t = task("streamed");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        ["streamed: looking", "streamed: done"]
    );
}

#[test]
fn an_image_a_tool_returns_is_stored_and_travels_with_the_next_request() {
    struct Camera;
    #[async_trait]
    impl Tool for Camera {
        fn name(&self) -> &str {
            "Camera"
        }
        fn description(&self) -> &str {
            "Takes a picture."
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object"})
        }
        async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text("a picture").with_attachment("image/png", b"abcd".to_vec()))
        }
    }
    /// The images of one request: media type and bytes.
    type Images = Vec<(String, Vec<u8>)>;
    /// Keeps the attachments of every request, then asks the script.
    struct Looking {
        inner: ScriptedProvider,
        seen: Mutex<Vec<Images>>,
    }
    #[async_trait]
    impl noeta_core::provider::Provider for Looking {
        fn name(&self) -> &str {
            "looking"
        }
        fn model(&self) -> &str {
            "test"
        }
        fn context_window(&self) -> u64 {
            100_000
        }
        async fn complete(
            &self,
            request: &ModelRequest,
        ) -> Result<noeta_core::model::ModelReply, noeta_core::provider::ProviderError> {
            let images = request
                .attachments
                .values()
                .map(|a| (a.media_type.clone(), a.data.as_ref().clone()))
                .collect();
            self.seen.lock().unwrap().push(images);
            self.inner.complete(request).await
        }
    }
    let h = Harness::new();
    let script = json!({ "turns": [
        { "calls": [call("Camera", json!({}))] },
        { "text": "I see it" }
    ]});
    let looking = Arc::new(Looking {
        inner: ScriptedProvider::from_json(&script.to_string(), "test").unwrap(),
        seen: Mutex::new(Vec::new()),
    });
    let rt = Runtime::new(h.log.clone(), h.content.clone(), looking.clone()).with_lease_ttl(1_000);
    let s = session(vec![offers(vec![Arc::new(Camera)])]);
    let t = task("camera");
    block_on(rt.create(&s, &t, "look")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let seen = looking.seen.lock().unwrap().clone();
    assert_eq!(seen[0], []);
    assert_eq!(seen[1], [("image/png".to_owned(), b"abcd".to_vec())]);
    let state = block_on(rt.load(&s, &t)).unwrap();
    let result = &state.core.messages[2];
    assert_eq!(result.attachments.len(), 1);
    assert_eq!(
        block_on(h.content.get(&result.attachments[0])).unwrap(),
        b"abcd"
    );
    let mut without = state.core.messages.as_ref().clone();
    without[2].attachments.clear();
    assert_ne!(noeta_core::fold::chain_of(&without), state.core.chain);
}

#[test]
fn reasoning_blocks_are_recorded_with_the_reply_and_kept_in_its_message() {
    let h = Harness::new();
    let thinking = json!([{ "type": "thinking", "thinking": "check a.txt", "signature": "sig" }]);
    let rt = h.runtime(json!([
        { "text": "", "reasoning": thinking, "calls": [call("Echo", json!({ "text": "a" }))] },
        { "text": "done" }
    ]));
    let s = session(vec![offers(vec![Arc::new(TestTool::new("Echo"))])]);
    let t = task("thinking");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let reply = h
        .events(&t)
        .into_iter()
        .find(|e| e.record.kind == "assistant_reply")
        .unwrap();
    assert_eq!(reply.record.data["reasoning"], thinking);
    let done = h
        .events(&t)
        .into_iter()
        .filter(|e| e.record.kind == "assistant_reply")
        .nth(1)
        .unwrap();
    assert!(
        done.record.data.get("reasoning").is_none(),
        "empty blocks are not written"
    );
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(
        serde_json::Value::Array(state.core.messages[1].reasoning.clone()),
        thinking
    );
    // The blocks are part of the message's link in the chain.
    let mut without = state.core.messages.as_ref().clone();
    without[1].reasoning.clear();
    assert_ne!(noeta_core::fold::chain_of(&without), state.core.chain);
}

#[test]
fn a_tool_may_call_the_model_and_keep_its_claim() {
    struct Thinker;
    #[async_trait]
    impl Tool for Thinker {
        fn name(&self) -> &str {
            "Think"
        }
        fn description(&self) -> &str {
            "Asks the model on the side."
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object"})
        }
        async fn run(&self, _input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
            ctx.keep().await?;
            let request = ModelRequest::auxiliary("think", "aux", vec![]);
            let reply = ctx.complete(&request).await?;
            Ok(ToolOutput::text(format!("the model said: {}", reply.text)))
        }
    }
    let h = Harness::new();
    // The auxiliary call takes no turn: it gets the script's auxiliary answer.
    let script = json!({
        "turns": [{ "text": "thinking", "calls": [call("Think", json!({}))] }, { "text": "done" }],
        "auxiliary": ["aux answer"],
    });
    let provider = ScriptedProvider::from_json(&script.to_string(), "test script").unwrap();
    let rt =
        Runtime::new(h.log.clone(), h.content.clone(), Arc::new(provider)).with_lease_ttl(1_000);
    let s = session(vec![offers(vec![Arc::new(Thinker)])]);
    let t = task("think");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(result_text(&rt, &s, &t), "the model said: aux answer");
}

// --- regressions ---------------------------------------------------------------------

#[test]
fn a_child_waiting_for_a_person_stops_the_tree_and_names_the_child() {
    let h = Harness::new();
    let mut parent = session(vec![offers(vec![Arc::new(Delegate)])]);
    parent.spec.spawnable = vec!["asker".into()];
    let mut asker = session(vec![offers(vec![Arc::new(AskTool(Arc::new(
        AtomicUsize::new(0),
    )))])]);
    asker.spec.name = "asker".into();
    /// Parent delegates to `asker`; `asker` calls Ask; everyone finishes with text afterwards.
    struct Script;
    #[async_trait]
    impl noeta_core::provider::Provider for Script {
        fn name(&self) -> &str {
            "script"
        }
        fn model(&self) -> &str {
            "script"
        }
        fn context_window(&self) -> u64 {
            1_000
        }
        async fn complete(
            &self,
            r: &ModelRequest,
        ) -> Result<noeta_core::model::ModelReply, noeta_core::provider::ProviderError> {
            let replies = r
                .messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .count();
            let child = r.messages[0].text.starts_with("do the");
            let mut reply = noeta_core::model::ModelReply::default();
            match (child, replies) {
                (false, 0) => {
                    reply.calls = vec![ToolCall {
                        id: "d".into(),
                        name: "Delegate".into(),
                        input: json!({"agents": ["asker"]}),
                    }]
                }
                (true, 0) => {
                    reply.calls = vec![ToolCall {
                        id: "a".into(),
                        name: "Ask".into(),
                        input: json!({}),
                    }]
                }
                _ => reply.text = "finished".into(),
            }
            Ok(reply)
        }
    }
    let host = Host {
        parent: Arc::new(parent),
        children: vec![Arc::new(asker)],
    };
    let rt = Runtime::new(h.log.clone(), h.content.clone(), Arc::new(Script)).with_lease_ttl(1_000);
    let t = task("root");
    block_on(rt.create(&host.parent, &t, "start")).unwrap();
    let (stopped, outcome) = block_on(rt.run_tree(&host, &t)).unwrap();
    assert_ne!(stopped, t, "the tree stops at the child that waits");
    assert_eq!(
        outcome,
        RunOutcome::Parked {
            call_id: "a".into(),
            question: "Which colour?".into()
        }
    );
    let child_session = host.children[0].clone();
    block_on(rt.reply(&child_session, &stopped, "a", json!("green"))).unwrap();
    let (stopped, outcome) = block_on(rt.run_tree(&host, &t)).unwrap();
    assert_eq!(stopped, t);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
}

/// Spawns one child, and when woken spawns one more, then reports.
struct TwoRounds;

#[async_trait]
impl Tool for TwoRounds {
    fn name(&self) -> &str {
        "Delegate"
    }
    fn description(&self) -> &str {
        "Two rounds of delegation."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn run(&self, _input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        ctx.spawn("scout", "do the scout part")?;
        Ok(ToolOutput::wait_for_children())
    }
    async fn resume(
        &self,
        _input: Value,
        wake: noeta_core::records::Wake,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let noeta_core::records::Wake::Children { results } = wake else {
            return Err(ToolError::RespondToModel("bad wake".into()));
        };
        if results[0].task.starts_with("child1-") {
            let second = ctx.spawn("fixer", "do the fixer part")?;
            assert!(second.starts_with("child2-"), "{second}");
            return Ok(ToolOutput::wait_for_children());
        }
        Ok(ToolOutput::text(format!(
            "second round: {}",
            results[0].task.split('-').next().unwrap_or_default()
        )))
    }
}

#[test]
fn a_call_that_spawns_again_on_resume_gets_new_child_ids() {
    let h = Harness::new();
    let mut parent = session(vec![offers(vec![Arc::new(TwoRounds)])]);
    parent.spec.spawnable = vec!["fixer".into(), "scout".into()];
    let child = |name: &str| {
        let mut s = bare_session(name, "You are a child.");
        s.folder = Folder::new(&s.extensions, "child-set");
        Arc::new(s)
    };
    let host = Host {
        parent: Arc::new(parent),
        children: vec![child("scout"), child("fixer")],
    };
    let rt =
        Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware)).with_lease_ttl(1_000);
    let t = task("parent");
    block_on(rt.create(&host.parent, &t, "fix it")).unwrap();
    let (_, outcome) = block_on(rt.run_tree(&host, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(result_text(&rt, &host.parent, &t), "second round: child2");
    assert_eq!(block_on(h.log.tasks()).unwrap().len(), 3);
}

#[test]
fn a_message_cannot_be_added_while_a_turn_waits_for_an_answer() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "calls": [call("Ask", json!({}))] }, { "text": "ok" }]));
    let s = session(vec![offers(vec![Arc::new(AskTool(Arc::new(
        AtomicUsize::new(0),
    )))])]);
    let t = task("busy");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let err = block_on(rt.send(&s, &t, "hello?")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "task `busy` cannot take a new message: it waits for an answer about call `call_1_1` (Which colour?) — answer that first"
    );
}

#[test]
fn an_unreadable_snapshot_is_ignored_and_the_log_folded_from_scratch() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "a" }, { "text": "b" }]));
    let s = bare_session("main", "");
    let t = task("badsnap");
    block_on(rt.create(&s, &t, "one")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let head = block_on(h.log.info(&t)).unwrap().head;
    let broken = noeta_core::store::Snapshot {
        seq: head,
        plugin_set: s.folder.plugin_set().to_owned(),
        state: json!({"not": "a state"}).to_string(),
    };
    block_on(h.log.put_snapshot(&t, &broken)).unwrap();
    block_on(rt.send(&s, &t, "two")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert!(!h.core_kinds(&t).contains(&"fold_failed".to_owned()));
    assert_eq!(block_on(rt.load(&s, &t)).unwrap().core.messages.len(), 4);
}

#[test]
fn records_a_guard_stages_while_gating_are_kept() {
    struct Auditor;
    #[async_trait]
    impl Extension for Auditor {
        fn name(&self) -> &str {
            "auditor"
        }
        async fn before_tool(&self, v: &View<'_>, c: &ToolCall) -> HookResult<Option<Verdict>> {
            v.record("auditor", "checked", json!({ "tool": c.name }));
            Ok(None)
        }
    }
    let (h, rt, s, t, _tool) = gate_run(vec![Arc::new(Auditor)]);
    block_on(rt.run(&s, &t)).unwrap();
    assert!(
        h.events(&t)
            .iter()
            .any(|e| e.record.kind == "checked" && e.record.data["tool"] == "Work")
    );
}

#[test]
fn a_broken_finish_check_fails_the_turn_instead_of_refusing_forever() {
    struct Broken;
    #[async_trait]
    impl Extension for Broken {
        fn name(&self) -> &str {
            "broken-finish"
        }
        async fn before_finish(&self, _v: &View<'_>) -> HookResult<Option<String>> {
            Err(HookError::new("cannot read the checklist"))
        }
    }
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "done" }]));
    let s = session(vec![Arc::new(Broken)]);
    let t = task("finish-broken");
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert_eq!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::TurnFailed {
            reason:
                "internal_error: `broken-finish` before_finish failed: cannot read the checklist"
                    .into()
        }
    );
}

#[test]
fn the_stable_prefix_changes_exactly_when_the_tools_or_the_system_text_change() {
    /// Offers `Extra` once the conversation has three messages.
    struct Grows;
    #[async_trait]
    impl Extension for Grows {
        fn name(&self) -> &str {
            "grows"
        }
        fn tools(&self, v: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
            Ok(if v.messages().len() >= 3 {
                vec![Arc::new(TestTool::new("Extra"))]
            } else {
                vec![]
            })
        }
    }
    let h = Harness::new();
    let turns = json!([
        { "calls": [call("Work", json!({}))] },
        { "calls": [call("Work", json!({}))] },
        { "text": "done" },
        { "text": "again" }
    ]);
    let rt = h.runtime(turns.clone());
    let s = session(vec![
        offers(vec![Arc::new(TestTool::new("Work"))]),
        Arc::new(Grows),
    ]);
    let t = task("prefix");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    // A resume in a new runtime (new caches) keeps the bytes.
    block_on(rt.send(&s, &t, "more")).unwrap();
    let fresh = h.runtime(turns);
    block_on(fresh.run(&s, &t)).unwrap();
    let stable: Vec<String> = h
        .events(&t)
        .iter()
        .filter(|e| e.record.kind == "request_composed")
        .map(|e| e.record.data["stable"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(stable.len(), 4);
    assert_ne!(stable[0], stable[1], "the tool set grew");
    assert_eq!(stable[1], stable[2], "nothing changed");
    assert_eq!(stable[2], stable[3], "identical across a resume");
    // The session remembers the last prefix for its next claims, but only while it matches:
    // a new task, whose first request has no `Extra`, hashes as the first one did.
    let t3 = task("prefix3");
    let rt3 = h.runtime(json!([{ "text": "x" }]));
    block_on(rt3.create(&s, &t3, "go")).unwrap();
    block_on(rt3.run(&s, &t3)).unwrap();
    let third = h
        .events(&t3)
        .into_iter()
        .find(|e| e.record.kind == "request_composed")
        .unwrap();
    assert_eq!(third.record.data["stable"].as_str().unwrap(), stable[0]);
    // Changing the system text changes it.
    let mut other = session(vec![
        offers(vec![Arc::new(TestTool::new("Work"))]),
        Arc::new(Grows),
    ]);
    other.extensions[0] = bare_session("main", "Different instructions.").extensions[0].clone();
    let t2 = task("prefix2");
    let rt2 = h.runtime(json!([{ "text": "x" }]));
    block_on(rt2.create(&other, &t2, "go")).unwrap();
    block_on(rt2.run(&other, &t2)).unwrap();
    let first = h
        .events(&t2)
        .into_iter()
        .find(|e| e.record.kind == "request_composed")
        .unwrap();
    assert_ne!(first.record.data["stable"].as_str().unwrap(), stable[0]);
}

mod session_errors {
    use super::*;
    use crate::support::{Fixtures, Manifest, agent, compile};
    use noeta_core::PluginSource;
    use noeta_core::session::{SessionError, build_session};

    #[test]
    fn a_default_policy_that_is_not_the_pinned_one_is_refused() {
        struct Other;
        impl noeta_core::policy::Policy for Other {
            fn policy_ref(&self) -> noeta_core::ComponentRef {
                noeta_core::ComponentRef::new("other", "2")
            }
            fn decide(
                &self,
                _v: &View<'_>,
                _r: &noeta_core::model::ModelReply,
            ) -> noeta_core::policy::Decision {
                noeta_core::policy::Decision::RunTools
            }
        }
        let set = crate::support::load(&[PluginSource::Linked(
            Manifest::new("p").linked("noeta-p", Fixtures),
        )]);
        let compiled = compile(&set, &agent("main", &["p"])).unwrap();
        let err =
            build_session(&set, &compiled, &Default::default(), Some(Arc::new(Other))).unwrap_err();
        assert!(matches!(err, SessionError::PolicyMismatch { .. }));
        assert_eq!(
            err.to_string(),
            "agent `main` pins policy core@1, but the policy available to run it is other@2"
        );
    }
}

// --- exec env and posting ------------------------------------------------------------

mod exec_and_post {
    use super::*;
    use noeta_core::exec::{ExecCommand, ExecEnv, ExecError, LocalExecEnv};
    use std::time::Duration;

    #[test]
    fn the_local_environment_runs_programs_in_the_workspace_and_enforces_deadlines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let env = LocalExecEnv::new(dir.path());
        let out = block_on(env.run(&ExecCommand::new("pwd", Vec::<String>::new()).in_dir("sub")))
            .unwrap();
        assert_eq!(out.status, Some(0));
        assert!(
            String::from_utf8(out.stdout)
                .unwrap()
                .trim_end()
                .ends_with("/sub")
        );
        let out =
            block_on(env.run(&ExecCommand::new("cat", Vec::<String>::new()).with_stdin("piped")))
                .unwrap();
        assert_eq!(out.stdout, b"piped");
        let out =
            block_on(env.run(&ExecCommand::new("sh", ["-c", "echo oops >&2; exit 3"]))).unwrap();
        assert_eq!((out.status, out.stderr), (Some(3), b"oops\n".to_vec()));
        let slow = ExecCommand::new("sleep", ["5"]).with_timeout(Duration::from_millis(100));
        let out = block_on(env.run(&slow)).unwrap();
        assert!(out.timed_out && out.status.is_none());
        // A run nobody waits for any more (a cancelled step) takes its whole group down.
        let marker = dir.path().join("still-running");
        let script = format!("sleep 1 && touch {}", marker.display());
        let dropped = ExecCommand::new("sh", ["-c", script.as_str()]);
        {
            let mut run = Box::pin(env.run(&dropped));
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            assert!(std::future::Future::poll(run.as_mut(), &mut cx).is_pending());
        }
        std::thread::sleep(Duration::from_millis(1_500));
        assert!(
            !marker.exists(),
            "the command ran on after its run was dropped"
        );
        let err = block_on(env.run(&ExecCommand::new("pwd", Vec::<String>::new()).in_dir("../..")))
            .unwrap_err();
        assert!(matches!(err, ExecError::OutsideWorkspace { .. }), "{err}");
        let err = block_on(env.run(&ExecCommand::new(
            "no-such-program-here",
            Vec::<String>::new(),
        )))
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot start `no-such-program-here`"),
            "{err}"
        );
    }

    /// Polls `job` until it ends (ten seconds at most), gathering its output.
    fn until_done(
        job: &dyn noeta_core::exec::ExecJob,
    ) -> (String, String, noeta_core::exec::JobStatus) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let (mut out, mut err) = (String::new(), String::new());
        loop {
            let taken = job.take();
            out.push_str(&String::from_utf8_lossy(&taken.stdout));
            err.push_str(&String::from_utf8_lossy(&taken.stderr));
            if taken.status != noeta_core::exec::JobStatus::Running {
                return (out, err, taken.status);
            }
            assert!(std::time::Instant::now() < deadline, "the job did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn background_jobs_stream_their_output_and_die_by_kill_or_deadline() {
        use noeta_core::exec::JobStatus;
        let dir = tempfile::tempdir().unwrap();
        let env = LocalExecEnv::new(dir.path());
        let job = env
            .spawn(&ExecCommand::new(
                "sh",
                ["-c", "echo one; sleep 0.2; echo two >&2; exit 4"],
            ))
            .unwrap();
        assert_eq!(
            until_done(job.as_ref()),
            ("one\n".to_owned(), "two\n".to_owned(), JobStatus::Exited(4))
        );
        let job = env
            .spawn(&ExecCommand::new("sh", ["-c", "sleep 30 & wait"]))
            .unwrap();
        assert_eq!(job.status(), JobStatus::Running);
        job.kill();
        assert_eq!(until_done(job.as_ref()).2, JobStatus::Killed);
        let job = env
            .spawn(&ExecCommand::new("sleep", ["30"]).with_timeout(Duration::from_millis(100)))
            .unwrap();
        assert_eq!(until_done(job.as_ref()).2, JobStatus::Killed);
        let capped = ExecCommand::new("sh", ["-c", "head -c 5000 /dev/zero"]).with_output_cap(1000);
        let job = env.spawn(&capped).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while job.status() == JobStatus::Running {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(20));
        }
        let taken = job.take();
        assert_eq!((taken.stdout.len(), taken.dropped), (1000, 4000));
        let err = env
            .spawn(&ExecCommand::new("pwd", Vec::<String>::new()).in_dir("../.."))
            .err()
            .unwrap();
        assert!(matches!(err, ExecError::OutsideWorkspace { .. }), "{err}");
    }

    /// Runs `echo` through the context's environment, and posts a follow-up for later.
    struct Shell;

    #[async_trait]
    impl Tool for Shell {
        fn name(&self) -> &str {
            "Shell"
        }
        fn description(&self) -> &str {
            "Echoes through the execution environment."
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object"})
        }
        async fn run(&self, _input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
            let Some(env) = ctx.exec_env() else {
                return Err(ToolError::RespondToModel(
                    "Shell: no execution environment".into(),
                ));
            };
            let out = env
                .run(&ExecCommand::new("echo", ["from the environment"]))
                .await
                .map_err(|e| ToolError::RespondToModel(e.to_string()))?;
            if let Some(poster) = ctx.poster() {
                poster.post(
                    "shell",
                    "finished",
                    json!({"job": 1}),
                    Some("Background job 1 finished."),
                );
            }
            Ok(ToolOutput::text(
                String::from_utf8_lossy(&out.stdout).trim_end().to_owned(),
            ))
        }
    }

    #[test]
    fn tools_reach_the_environment_and_their_posts_arrive_at_the_next_step() {
        let h = Harness::new();
        let dir = tempfile::tempdir().unwrap();
        let rt = h
            .runtime(json!([{ "calls": [call("Shell", json!({}))] }, { "text": "ok" }]))
            .with_exec_env(Arc::new(LocalExecEnv::new(dir.path())));
        let s = session(vec![offers(vec![Arc::new(Shell)])]);
        let t = task("shell");
        block_on(rt.create(&s, &t, "go")).unwrap();
        block_on(rt.run(&s, &t)).unwrap();
        assert_eq!(result_text(&rt, &s, &t), "from the environment");
        let state = block_on(rt.load(&s, &t)).unwrap();
        let texts = texts(&state);
        assert_eq!(
            texts,
            [
                "go",
                "",
                "from the environment",
                "Background job 1 finished.",
                "ok"
            ]
        );
        assert_eq!(
            block_on(rt.deliver(&s, &t)).unwrap(),
            0,
            "nothing left to deliver"
        );
    }

    #[test]
    fn without_an_environment_a_tool_is_told_so() {
        let h = Harness::new();
        let rt = h.runtime(json!([{ "calls": [call("Shell", json!({}))] }, { "text": "ok" }]));
        let s = session(vec![offers(vec![Arc::new(Shell)])]);
        let t = task("noshell");
        block_on(rt.create(&s, &t, "go")).unwrap();
        block_on(rt.run(&s, &t)).unwrap();
        assert_eq!(result_text(&rt, &s, &t), "Shell: no execution environment");
    }
}

mod more_failure_rows {
    use super::*;

    /// Posts from a background thread after the tool returned.
    struct Later(Arc<std::sync::Barrier>);

    #[async_trait]
    impl Tool for Later {
        fn name(&self) -> &str {
            "Later"
        }
        fn description(&self) -> &str {
            "Finishes in the background."
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object"})
        }
        async fn run(&self, _input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
            let poster = ctx.poster().expect("the runner gives tools an inbox");
            let barrier = self.0.clone();
            std::thread::spawn(move || {
                barrier.wait();
                poster.post(
                    "later",
                    "done",
                    json!({}),
                    Some("The background work is done."),
                );
                barrier.wait();
            });
            Ok(ToolOutput::text("started"))
        }
    }

    #[test]
    fn posts_to_an_idle_task_are_delivered_on_request() {
        let h = Harness::new();
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let rt = h.runtime(json!([{ "calls": [call("Later", json!({}))] }, { "text": "ok" }]));
        let s = session(vec![offers(vec![Arc::new(Later(barrier.clone()))])]);
        let t = task("later");
        block_on(rt.create(&s, &t, "go")).unwrap();
        block_on(rt.run(&s, &t)).unwrap();
        barrier.wait(); // let the thread post
        barrier.wait(); // and finish posting
        assert_eq!(block_on(rt.deliver(&s, &t)).unwrap(), 1);
        let state = block_on(rt.load(&s, &t)).unwrap();
        assert_eq!(
            state.core.messages.last().unwrap().text,
            "The background work is done."
        );
    }

    #[test]
    fn a_broken_recover_is_logged_and_the_outcome_is_unknown() {
        struct BadRecover;
        #[async_trait]
        impl Tool for BadRecover {
            fn name(&self) -> &str {
                "Fragile"
            }
            fn description(&self) -> &str {
                "Cannot recover."
            }
            fn input_schema(&self) -> Value {
                json!({"type": "object"})
            }
            async fn run(&self, _i: Value, _c: &ToolContext) -> Result<ToolOutput, ToolError> {
                Ok(ToolOutput::text("ran"))
            }
            async fn recover(&self, _c: &ToolContext) -> Result<Option<ToolOutput>, ToolError> {
                Err(ToolError::Fatal("the ledger is gone".into()))
            }
        }
        let h = Harness::new();
        let s = session(vec![offers(vec![Arc::new(BadRecover)])]);
        let t = task("badrecover");
        let turns = json!([{ "calls": [call("Fragile", json!({}))] }, { "text": "ok" }]);
        // Appends: create, intake, reply with started — then the worker dies before the result.
        let dying = h.runtime_over(Arc::new(CrashAfter::new(h.log.clone(), 3)), turns.clone());
        block_on(dying.create(&s, &t, "go")).unwrap();
        assert!(block_on(dying.run(&s, &t)).is_err());
        h.clock.advance(5_000);
        let rt = h.runtime(turns);
        block_on(rt.run(&s, &t)).unwrap();
        assert!(result_text(&rt, &s, &t).contains("outcome unknown"));
    }

    #[test]
    fn broken_on_empty_reply_and_commands_are_skipped() {
        struct Flaky;
        #[async_trait]
        impl Extension for Flaky {
            fn name(&self) -> &str {
                "flaky"
            }
            async fn on_empty_reply(
                &self,
                _v: &View<'_>,
                _r: &noeta_core::model::ModelReply,
            ) -> HookResult<Option<String>> {
                Err(HookError::new("no idea"))
            }
            fn commands(
                &self,
                _v: &View<'_>,
            ) -> HookResult<Vec<noeta_core::extension::CommandSpec>> {
                Err(HookError::new("cannot list"))
            }
        }
        let h = Harness::new();
        let rt = h.runtime(json!([{ "text": "" }]));
        let s = session(vec![Arc::new(Flaky), Arc::new(Compacting)]);
        let t = task("flaky");
        block_on(rt.create(&s, &t, "go")).unwrap();
        assert_eq!(
            block_on(rt.run(&s, &t)).unwrap(),
            RunOutcome::Ended {
                reason: "empty_reply".into()
            }
        );
        let commands = block_on(rt.commands(&s, &t)).unwrap();
        assert_eq!(
            commands.len(),
            1,
            "the failing extension is skipped, the other still lists"
        );
    }

    #[test]
    fn an_inherit_failure_reaches_the_tool_that_spawns() {
        struct BadInherit;
        #[async_trait]
        impl Extension for BadInherit {
            fn name(&self) -> &str {
                "bad-inherit"
            }
            fn inherit(&self, _v: &View<'_>) -> HookResult<Option<Value>> {
                Err(HookError::new("settings unreadable"))
            }
        }
        let h = Harness::new();
        let mut parent = session(vec![offers(vec![Arc::new(Delegate)]), Arc::new(BadInherit)]);
        parent.spec.spawnable = vec!["scout".into(), "fixer".into()];
        let host = Host {
            parent: Arc::new(parent),
            children: vec![],
        };
        let rt = Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware))
            .with_lease_ttl(1_000);
        let t = task("parent");
        block_on(rt.create(&host.parent, &t, "fix it")).unwrap();
        block_on(rt.run_tree(&host, &t)).unwrap();
        assert_eq!(
            result_text(&rt, &host.parent, &t),
            "`bad-inherit` inherit failed: settings unreadable"
        );
    }
}

mod review_regressions {
    use super::*;

    /// Asks, like `AskTool`, but read-only, so two calls of one reply run (and park) together.
    struct ReadOnlyAsk;

    #[async_trait]
    impl Tool for ReadOnlyAsk {
        fn name(&self) -> &str {
            "Poll"
        }
        fn description(&self) -> &str {
            "Asks the user, read-only."
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object", "properties": {"q": {"type": "string"}}})
        }
        fn flags(&self) -> ToolFlags {
            ToolFlags::read_only()
        }
        async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::ask(input["q"].as_str().unwrap_or("?")))
        }
        async fn resume(
            &self,
            input: Value,
            wake: noeta_core::records::Wake,
            _ctx: &ToolContext,
        ) -> Result<ToolOutput, ToolError> {
            match wake {
                noeta_core::records::Wake::Answer { answer } => Ok(ToolOutput::text(format!(
                    "{}: {answer}",
                    input["q"].as_str().unwrap_or("?")
                ))),
                other => Err(ToolError::RespondToModel(format!("{other:?}"))),
            }
        }
    }

    #[test]
    fn two_calls_parked_in_one_group_each_wait_for_their_own_answer() {
        let h = Harness::new();
        let rt = h.runtime(json!([
            { "calls": [call("Poll", json!({"q": "first"})), call("Poll", json!({"q": "second"}))] },
            { "text": "both answered" }
        ]));
        let s = session(vec![offers(vec![Arc::new(ReadOnlyAsk)])]);
        let t = task("two-parks");
        block_on(rt.create(&s, &t, "go")).unwrap();
        let outcome = block_on(rt.run(&s, &t)).unwrap();
        assert!(matches!(&outcome, RunOutcome::Parked { .. }), "{outcome:?}");
        block_on(rt.reply(&s, &t, "call_1_2", json!("B"))).unwrap();
        // The turn still waits, now on the first call.
        assert_eq!(
            block_on(rt.run(&s, &t)).unwrap(),
            RunOutcome::Parked {
                call_id: "call_1_1".into(),
                question: "first".into()
            }
        );
        block_on(rt.reply(&s, &t, "call_1_1", json!("A"))).unwrap();
        assert!(matches!(
            block_on(rt.run(&s, &t)).unwrap(),
            RunOutcome::Ended { .. }
        ));
        let state = block_on(rt.load(&s, &t)).unwrap();
        let results: Vec<&str> = state
            .core
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| m.text.as_str())
            .collect();
        assert_eq!(results, ["first: \"A\"", "second: \"B\""]);
    }

    /// Hands every child more than a record can hold inline.
    struct Generous;

    #[async_trait]
    impl Extension for Generous {
        fn name(&self) -> &str {
            "generous"
        }
        fn inherit(&self, _v: &View<'_>) -> HookResult<Option<Value>> {
            Ok(Some(json!({ "notes": "n".repeat(6_000) })))
        }
    }

    #[test]
    fn a_child_whose_first_record_was_spilled_still_runs_under_run_tree() {
        let h = Harness::new();
        let mut parent = session(vec![offers(vec![Arc::new(Delegate)]), Arc::new(Generous)]);
        parent.spec.spawnable = vec!["fixer".into(), "scout".into()];
        let child = |name: &str| {
            let mut s = bare_session(name, "You are a child.");
            s.folder = Folder::new(&s.extensions, "child-set");
            Arc::new(s)
        };
        let host = Host {
            parent: Arc::new(parent),
            children: vec![child("scout"), child("fixer")],
        };
        let rt = Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware))
            .with_lease_ttl(1_000);
        let t = task("parent");
        block_on(rt.create(&host.parent, &t, "fix it")).unwrap();
        let (_, outcome) = block_on(rt.run_tree(&host, &t)).unwrap();
        assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
        assert_eq!(
            result_text(&rt, &host.parent, &t),
            "scout:true:scout reporting | fixer:true:fixer reporting"
        );
    }

    #[test]
    fn a_plugin_payload_with_a_spilled_key_among_others_is_its_own_data() {
        let h = Harness::new();
        let record = Record::new(
            "p",
            "k",
            json!({"$spilled": {"sha256": "x", "len": 1, "media_type": "t"}, "more": 1}),
        );
        let event = noeta_core::store::Event::new(1, record.clone());
        let back = block_on(noeta_core::records::hydrate(event, h.content.as_ref())).unwrap();
        assert_eq!(*back.record, record);
    }

    #[test]
    fn large_input_does_not_deadlock_and_a_deadline_kills_the_whole_group() {
        use noeta_core::exec::{ExecCommand, ExecEnv, LocalExecEnv};
        use std::time::{Duration, Instant};
        let dir = tempfile::tempdir().unwrap();
        let env = LocalExecEnv::new(dir.path());
        let big = vec![b'z'; 300_000];
        let out = block_on(
            env.run(&ExecCommand::new("cat", Vec::<String>::new()).with_stdin(big.clone())),
        )
        .unwrap();
        assert_eq!(out.stdout.len(), big.len());
        let started = Instant::now();
        let slow = ExecCommand::new("sh", ["-c", "sleep 30 & sleep 30"])
            .with_timeout(Duration::from_millis(200));
        let out = block_on(env.run(&slow)).unwrap();
        assert!(out.timed_out);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the grandchild was killed too"
        );
        let capped = ExecCommand::new("cat", Vec::<String>::new())
            .with_stdin(big.clone())
            .with_output_cap(1000);
        let out = block_on(env.run(&capped)).unwrap();
        assert_eq!((out.stdout.len(), out.dropped), (1000, 299_000));
        let bare = ExecCommand::new("/usr/bin/env", Vec::<String>::new())
            .without_host_env()
            .with_env("ONLY", "this");
        let out = block_on(env.run(&bare)).unwrap();
        assert_eq!(out.stdout, b"ONLY=this\n");
        // A process that leaves the group keeps the pipe open: not waited for past the grace.
        let started = Instant::now();
        // The shell ends only once the sleep has left its group (else the group's end could
        // take the sleep with it first, as on a busy machine it did).
        let escaped = ExecCommand::new(
            "sh",
            [
                "-c",
                "setsid sh -c ': > escaped; exec sleep 8' & \
                 while [ ! -e escaped ]; do sleep 0.01; done; echo hi",
            ],
        );
        let out = block_on(env.run(&escaped)).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            (out.status, out.stdout.as_slice()),
            (Some(0), b"hi\n".as_slice())
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("[output incomplete"),
            "{out:?}"
        );
        let started = Instant::now();
        let lingering = ExecCommand::new("sh", ["-c", "sleep 30 & echo started"]);
        let out = block_on(env.run(&lingering)).unwrap();
        assert_eq!(out.stdout, b"started\n");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "what the command left running ends with it"
        );
    }
}

#[test]
fn hooks_see_the_workspace_of_the_runtimes_execution_environment() {
    struct Where(Arc<Mutex<Vec<Option<std::path::PathBuf>>>>);
    #[async_trait]
    impl Extension for Where {
        fn name(&self) -> &str {
            "where"
        }
        async fn on_start(&self, v: &View<'_>) -> HookResult<()> {
            self.0
                .lock()
                .unwrap()
                .push(v.workspace().map(std::path::Path::to_path_buf));
            Ok(())
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = session(vec![Arc::new(Where(seen.clone()))]);
    let turns = json!([{ "text": "ok" }]);
    let h = Harness::new();
    let bare = h.runtime(turns.clone());
    block_on(bare.create(&s, &task("nowhere"), "go")).unwrap();
    block_on(bare.run(&s, &task("nowhere"))).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let placed = h
        .runtime(turns)
        .with_exec_env(Arc::new(noeta_core::exec::LocalExecEnv::new(dir.path())));
    block_on(placed.create(&s, &task("somewhere"), "go")).unwrap();
    block_on(placed.run(&s, &task("somewhere"))).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![None, Some(dir.path().to_path_buf())]
    );
}
