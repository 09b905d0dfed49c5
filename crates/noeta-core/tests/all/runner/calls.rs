//! Tool calls (`runner/calls.rs`): input checks, running calls (adjacent read-only ones together,
//! run-last ones after), results (overflow, transforms, failures, attachments' records), calls that
//! ask and their answers, and a call's recovery after a crash.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{Extension, HookError, HookResult, View};
use noeta_core::fold::TurnState;
use noeta_core::model::{ModelRequest, Role, ToolCall};
use noeta_core::provider::ScriptedProvider;
use noeta_core::records::{CallOutcome, CoreRecord};
use noeta_core::runner::{RunError, RunOutcome, Runtime};
use noeta_core::session::Session;
use noeta_core::store::{ContentStore, Event, EventLog};
use noeta_core::{
    PluginSource, Resolved, Tool, ToolContext, ToolError, ToolFlags, ToolOutput,
    ToolResultTransform, TransformInput, Verdict,
};
use noeta_testkit::harness::{CrashAfter, Harness};
use serde_json::{Value, json};

use super::support::{
    AskTool, Capturing, TestTool, built, call, flagged, gate_run, offers, result_text,
    retry_safe_look, session, task,
};
use crate::support::{Manifest, ResolveWith};

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
                    ResolveWith(move |request: &noeta_core::ResolveRequest<'_>| {
                        match request.surface {
                            "tool_result_transform" => {
                                Ok(Resolved::ToolResultTransform(Arc::new(Redact(failing))))
                            }
                            _ => crate::support::fixture_value(request),
                        }
                    }),
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
