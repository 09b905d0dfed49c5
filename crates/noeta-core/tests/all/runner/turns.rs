//! Turns and steps (`runner.rs`, `runner/step.rs`): running a task, new messages and forks, the
//! hooks of a step in order, intake and reminders, `before_model` and what the model's reply leads
//! to, how a turn ends or fails, a runtime stopping between steps.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{
    Extension, HookError, HookResult, OfferedTool, StepSignal, ToolChanges, View,
};
use noeta_core::model::{ModelRequest, Role, ToolCall};
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::bare_session;
use noeta_core::store::{ContentStore, Event, TaskId};
use noeta_core::{
    PluginSource, ProvidedReminder, ProviderInput, ReminderProvider, Resolved, Tool, ToolContext,
    ToolError, ToolOutput, Verdict,
};
use noeta_testkit::harness::{CrashAfter, Harness};
use serde_json::{Value, json};

use super::support::{AskTool, TestTool, built, call, offers, session, task, texts};
use crate::support::{Manifest, ResolveWith};

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
