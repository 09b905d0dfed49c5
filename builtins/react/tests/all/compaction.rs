//! Compaction, `RecallHistory`, the collapsed-context reminder and the default loop, through
//! the real runtime with a scripted model whose context window is small.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_builtin_react::{CONTINUE, EMPTY_NUDGE, RECALL_HISTORY, default_policy, policy_ref};
use noeta_core::extension::{CompactAdvice, Extension, HookResult, View};
use noeta_core::fold::{Folder, TaskState};
use noeta_core::model::Role;
use noeta_core::model::{ModelReply, ModelRequest, Purpose};
use noeta_core::provider::{Provider, ProviderError, ScriptedProvider};
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::{Session, SessionError, build_session};
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_core::{
    ActivationRules, AgentOptions, LoadOptions, PluginSource, Tool, ToolContext, ToolError,
    ToolOutput, compile_agent, load_plugins, standard_registry,
};
use noeta_toolkit::compaction::{self, Trigger};
use serde_json::{Value, json};

/// Answers with `size` bytes of numbered text.
struct Big;

#[async_trait]
impl Tool for Big {
    fn name(&self) -> &str {
        "Big"
    }
    fn description(&self) -> &str {
        "Returns a lot of text."
    }
    fn input_schema(&self) -> Value {
        json!({ "type": "object", "properties": { "n": { "type": "integer" } } })
    }
    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let n = input.get("n").and_then(Value::as_u64).unwrap_or(0);
        Ok(ToolOutput::text(format!(
            "result {n}: {}",
            "x".repeat(1500)
        )))
    }
}

/// Offers `Big`, and optionally has a say on compaction.
#[derive(Default)]
struct Helper {
    refuse: bool,
    advice: Option<&'static str>,
    resident: Option<&'static str>,
    lead: Option<&'static str>,
}

#[async_trait]
impl Extension for Helper {
    fn name(&self) -> &str {
        "helper"
    }
    fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        Ok(vec![Arc::new(Big)])
    }
    fn before_compact(&self, _view: &View<'_>) -> HookResult<CompactAdvice> {
        let mut advice = CompactAdvice::default();
        if self.refuse {
            advice.refuse = Some("a review is in progress".into());
        }
        advice.instructions = self.advice.map(str::to_owned);
        Ok(advice)
    }
    fn resident(&self, _view: &View<'_>) -> HookResult<Option<String>> {
        Ok(self.resident.map(str::to_owned))
    }
    fn lead_resident(&self, _view: &View<'_>) -> HookResult<Option<String>> {
        Ok(self.lead.map(str::to_owned))
    }
}

/// The scripted model, keeping every request it was sent.
struct Capture {
    inner: ScriptedProvider,
    seen: Mutex<Vec<ModelRequest>>,
}

impl Capture {
    fn requests(&self) -> Vec<ModelRequest> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
    fn steps(&self) -> Vec<ModelRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.purpose == Purpose::Step)
            .collect()
    }
    fn summaries(&self) -> Vec<ModelRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.purpose != Purpose::Step)
            .collect()
    }
}

#[async_trait]
impl Provider for Capture {
    fn name(&self) -> &str {
        "capture"
    }
    fn model(&self) -> &str {
        "capture"
    }
    fn context_window(&self) -> u64 {
        self.inner.context_window()
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ProviderError> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.clone());
        self.inner.complete(request).await
    }
}

fn compile(
    settings: Value,
) -> Result<(noeta_core::PluginSet, noeta_core::CompiledAgent), noeta_core::CompileError> {
    let set = load_plugins(
        &[PluginSource::Linked(noeta_builtin_react::plugin())],
        &LoadOptions::new(standard_registry()),
    )
    .unwrap();
    let merged = set.merged().unwrap();
    let mut options = AgentOptions::named("main");
    options.plugins = vec!["react".into()];
    if !settings.is_null() {
        options.config.insert("react".into(), settings);
    }
    let rules = ActivationRules {
        default_policy: policy_ref(),
        ..ActivationRules::default()
    };
    let compiled = compile_agent(&set, &merged, &options, &rules)?;
    Ok((set, compiled))
}

fn config(settings: &Value) -> BTreeMap<String, Value> {
    if settings.is_null() {
        BTreeMap::new()
    } else {
        BTreeMap::from([("react".to_owned(), settings.clone())])
    }
}

/// A session with `settings`; a compile or build failure as its message.
fn try_session(settings: Value, helper: Helper) -> Result<Session, String> {
    let (set, compiled) = compile(settings.clone()).map_err(|e| e.to_string())?;
    let mut session = build_session(&set, &compiled, &config(&settings), Some(default_policy()))
        .map_err(|e| e.to_string())?;
    session.extensions.push(Arc::new(helper));
    session.folder = Folder::new(&session.extensions, "test");
    Ok(session)
}

fn session(helper: Helper) -> Session {
    try_session(Value::Null, helper).unwrap()
}

fn runtime(window: u64, turns: Value, auxiliary: Value) -> (Runtime, Arc<Capture>) {
    let script = json!({ "context_window": window, "turns": turns, "auxiliary": auxiliary });
    let capture = Arc::new(Capture {
        inner: ScriptedProvider::from_json(&script.to_string(), "test").unwrap(),
        seen: Mutex::new(Vec::new()),
    });
    let rt = Runtime::new(
        Arc::new(MemoryEventLog::new(ManualClock::at(0))),
        Arc::new(MemoryContentStore::new()),
        capture.clone(),
    );
    (rt, capture)
}

fn big(n: u64) -> Value {
    json!({ "calls": [{ "name": "Big", "input": { "n": n } }] })
}

fn run(rt: &Runtime, s: &Session, id: &str, goal: &str) -> (RunOutcome, TaskState) {
    let t = TaskId::new(id).unwrap();
    block_on(rt.create(s, &t, goal)).unwrap();
    let outcome = block_on(rt.run(s, &t)).unwrap();
    (outcome, block_on(rt.load(s, &t)).unwrap())
}

/// Bytes of a request's conversation.
fn conversation_bytes(request: &ModelRequest) -> usize {
    request.messages.iter().map(|m| m.text.len()).sum()
}

const GOAL: &str = "Collect every result; keep the number 4711 in mind.";

#[test]
fn a_long_conversation_is_summarised_and_the_summary_stands_in_for_what_it_covers() {
    // A 2,000-token window: 1,500 usable, a 500-token tail; each result is about 380 tokens.
    let turns: Vec<Value> = (1..=8)
        .map(big)
        .chain([json!({ "text": "all collected" })])
        .collect();
    let (rt, capture) = runtime(
        2_000,
        json!(turns),
        json!([
            "SUMMARY ONE",
            "SUMMARY TWO",
            "SUMMARY THREE",
            "SUMMARY FOUR"
        ]),
    );
    let s = session(Helper::default());
    let (outcome, state) = run(&rt, &s, "long", GOAL);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");

    // Every original message is still in the log.
    let results = state
        .core
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .count();
    assert_eq!(results, 8);
    let folded = compaction::read(&state);
    assert!(folded.count >= 1, "{folded:?}");
    let current = folded.current.clone().unwrap();
    assert_eq!(current.trigger, Trigger::Threshold);
    assert!(current.summary.starts_with("SUMMARY"), "{current:?}");

    // Every step request fits the usable window, and the last starts with the summary, then the
    // goal (the newest user message, never summarised away), then the kept messages.
    let steps = capture.steps();
    assert_eq!(steps.len(), 9);
    assert!(steps.iter().all(|r| conversation_bytes(r) < 6_000));
    let last = steps.last().unwrap();
    assert!(
        last.messages[0]
            .text
            .contains("Summary of the earlier conversation")
    );
    assert!(last.messages[0].text.contains(&current.summary));
    assert_eq!(last.messages[1].text, GOAL);
    assert_eq!(last.messages[1].role, Role::User);
    assert_ne!(
        last.messages[2].role,
        Role::Tool,
        "a result never loses its call"
    );
    // The collapsed-context reminder speaks while the summary is in force.
    assert!(
        last.tail.iter().any(|t| t.contains(RECALL_HISTORY)),
        "{:?}",
        last.tail
    );
    assert!(steps[0].tail.iter().all(|t| !t.contains(RECALL_HISTORY)));

    // The summary request was a transcript of the covered messages, from the goal on.
    let summaries = capture.summaries();
    assert_eq!(summaries.len() as u64, folded.count);
    assert_eq!(
        summaries[0].purpose,
        Purpose::Auxiliary {
            name: "compaction".into()
        }
    );
    let prompt = &summaries[0].messages[0].text;
    assert!(prompt.starts_with(&format!("[user]\n{GOAL}")), "{prompt}");
    assert!(prompt.contains("[tool call Big {\"n\":1}]"), "{prompt}");
    assert!(prompt.contains("[tool result]\nresult 1: xxx"), "{prompt}");
    // A later summary builds on the earlier one.
    if summaries.len() > 1 {
        assert!(
            summaries[1].messages[0]
                .text
                .starts_with("[summary of what came before]\nSUMMARY ONE")
        );
    }

    // Folding the log again gives the same state: a resume composes the same request.
    let t = TaskId::new("long").unwrap();
    let again = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(
        again.ext_state(compaction::EXTENSION),
        state.ext_state(compaction::EXTENSION)
    );
}

#[test]
fn recall_history_reads_the_collapsed_messages_back_verbatim() {
    let mut turns: Vec<Value> = (1..=6).map(big).collect();
    turns.push(
        json!({ "calls": [{ "name": RECALL_HISTORY, "input": { "offset": 0, "limit": 2 } }] }),
    );
    turns.push(json!({ "calls": [{ "name": RECALL_HISTORY, "input": { "offset": 999 } }] }));
    turns.push(json!({ "text": "recalled" }));
    let (rt, _) = runtime(2_000, json!(turns), json!([]));
    let s = session(Helper::default());
    let (outcome, state) = run(&rt, &s, "recall", GOAL);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let results: Vec<&noeta_core::model::Message> = state
        .core
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .collect();
    let read = &results[6];
    assert!(!read.is_error, "{}", read.text);
    assert!(
        read.text.starts_with("Collapsed messages 0 to 1 of 0 to "),
        "{}",
        read.text
    );
    assert!(
        read.text.contains(&format!("#0 user:\n{GOAL}")),
        "{}",
        read.text
    );
    assert!(
        read.text
            .contains("#1 assistant:\n\n[tool call Big {\"n\":1}]"),
        "{}",
        read.text
    );
    assert!(
        read.text.ends_with("[more: read on with offset 2]"),
        "{}",
        read.text
    );
    let past = &results[7];
    assert!(past.is_error);
    assert!(
        past.text
            .starts_with("RecallHistory: offset 999 is past the collapsed messages (0 to "),
        "{}",
        past.text
    );
}

#[test]
fn recall_history_before_any_compaction_says_nothing_is_collapsed() {
    let (rt, _) = runtime(
        200_000,
        json!([
            { "calls": [{ "name": RECALL_HISTORY, "input": { "offset": 0 } }] },
            { "text": "ok" }
        ]),
        json!([]),
    );
    let s = session(Helper::default());
    let (_, state) = run(&rt, &s, "nothing", GOAL);
    let result = state
        .core
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert!(result.is_error);
    assert_eq!(
        result.text,
        "RecallHistory: nothing has been collapsed; the whole conversation is in view."
    );
}

#[test]
fn other_extensions_instruct_lead_and_follow_the_summary() {
    let turns: Vec<Value> = (1..=6)
        .map(big)
        .chain([json!({ "text": "done" })])
        .collect();
    let (rt, capture) = runtime(2_000, json!(turns), json!([]));
    let s = session(Helper {
        advice: Some("Keep the ticket number."),
        resident: Some("PLAN: collect, then report."),
        lead: Some("ROLE: you are the collector."),
        ..Helper::default()
    });
    let (outcome, state) = run(&rt, &s, "advised", GOAL);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let prompt = &capture.summaries()[0].messages[0].text;
    assert!(
        prompt.ends_with(
            "Summarise the conversation above.\nAlso:\n- (helper) Keep the ticket number."
        ),
        "{prompt}"
    );
    let current = compaction::read(&state).current.unwrap();
    assert_eq!(
        current.lead,
        [(
            "helper".to_owned(),
            "ROLE: you are the collector.".to_owned()
        )]
    );
    let steps = capture.steps();
    let head = &steps.last().unwrap().messages[0].text;
    assert!(
        head.starts_with("ROLE: you are the collector.\n\nSummary of the earlier conversation"),
        "{head}"
    );
    assert!(head.ends_with("\n\nPLAN: collect, then report."), "{head}");
}

#[test]
fn a_refusal_keeps_the_conversation_whole() {
    // 3,000 tokens: the requests pass the usable 2,250 but stay under the window.
    let turns: Vec<Value> = (1..=6)
        .map(big)
        .chain([json!({ "text": "done" })])
        .collect();
    let (rt, capture) = runtime(3_000, json!(turns), json!([]));
    let s = session(Helper {
        refuse: true,
        ..Helper::default()
    });
    let (outcome, state) = run(&rt, &s, "refused", GOAL);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(compaction::read(&state).count, 0);
    assert!(capture.summaries().is_empty());
    assert_eq!(capture.steps().last().unwrap().messages[0].text, GOAL);
}

#[test]
fn a_context_overflow_compacts_and_the_step_is_retried() {
    let (rt, capture) = runtime(
        200_000,
        json!([big(1), big(2), big(3), { "error": "context_overflow" }, { "text": "fits now" }]),
        json!(["OVERFLOW SUMMARY"]),
    );
    let s = session(Helper::default());
    let (outcome, state) = run(&rt, &s, "overflow", GOAL);
    assert!(matches!(&outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let current = compaction::read(&state).current.unwrap();
    assert_eq!(current.trigger, Trigger::Overflow);
    assert_eq!(current.summary, "OVERFLOW SUMMARY");
    let steps = capture.steps();
    assert_eq!(steps.len(), 5);
    assert!(steps[4].messages[0].text.contains("OVERFLOW SUMMARY"));
    assert_eq!(state.core.messages.last().unwrap().text, "fits now");
}

#[test]
fn an_empty_or_failed_summary_fails_the_turn_and_records_nothing() {
    for (auxiliary, why) in [
        (
            json!([""]),
            "compaction_summary_failed: the model returned an empty summary",
        ),
        (
            json!(["only one"]),
            "compaction_summary_failed: provider error: the model script has 1 auxiliary answer(s) and answer 2 was asked for (by compaction)",
        ),
    ] {
        let turns: Vec<Value> = (1..=12).map(big).collect();
        let (rt, _) = runtime(2_000, json!(turns), auxiliary);
        let s = session(Helper::default());
        let (outcome, state) = run(&rt, &s, "failing", GOAL);
        match &outcome {
            RunOutcome::TurnFailed { reason } => assert_eq!(reason, why),
            other => panic!("{other:?}"),
        }
        // Everything recorded before stays.
        assert_eq!(state.core.messages[0].text, GOAL);
        assert!(state.core.messages.iter().any(|m| m.role == Role::Tool));
    }
}

#[test]
fn a_request_that_cannot_be_made_to_fit_fails_with_no_progress() {
    let (rt, capture) = runtime(1_000, json!([{ "text": "never" }]), json!([]));
    let s = session(Helper::default());
    let huge = "y".repeat(8_000);
    let (outcome, state) = run(&rt, &s, "huge", &huge);
    match &outcome {
        RunOutcome::TurnFailed { reason } => assert!(
            reason.starts_with("compaction_no_progress: the request is about ")
                && reason.ends_with(
                    "over the 1000-token context window, and nothing more can be summarised"
                ),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(capture.requests().is_empty(), "nothing was sent");
    assert_eq!(state.core.messages[0].text, huge);
}

#[test]
fn compacting_every_few_replies_latches_thrashing() {
    // Results of ~1,100 tokens in a 2,000-token window: nearly every step compacts.
    struct Huge;
    #[async_trait]
    impl Tool for Huge {
        fn name(&self) -> &str {
            "Big"
        }
        fn description(&self) -> &str {
            "Returns a great deal of text."
        }
        fn input_schema(&self) -> Value {
            json!({ "type": "object" })
        }
        async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text("z".repeat(4_400)))
        }
    }
    struct OffersHuge;
    #[async_trait]
    impl Extension for OffersHuge {
        fn name(&self) -> &str {
            "helper"
        }
        fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
            Ok(vec![Arc::new(Huge)])
        }
    }
    let (set, compiled) = compile(Value::Null).unwrap();
    let mut s = build_session(&set, &compiled, &BTreeMap::new(), Some(default_policy())).unwrap();
    s.extensions.push(Arc::new(OffersHuge));
    s.folder = Folder::new(&s.extensions, "test");
    let turns: Vec<Value> = (1..=6)
        .map(big)
        .chain([json!({ "text": "done" })])
        .collect();
    let (rt, _) = runtime(2_000, json!(turns), json!([]));
    let (outcome, state) = run(&rt, &s, "thrash", GOAL);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let folded = compaction::read(&state);
    assert!(folded.count >= 3, "{folded:?}");
    assert!(folded.thrashing, "{folded:?}");
}

#[test]
fn bad_settings_fail_the_session_build_naming_the_key() {
    for (settings, message) in [
        (
            json!({ "compaction": "yes" }),
            "settings [plugins.react] compaction: expected true or false, got `\"yes\"`",
        ),
        (
            json!({ "compaction_reserve_tokens": 0 }),
            "settings [plugins.react] compaction_reserve_tokens: expected a positive integer, got `0`",
        ),
    ] {
        let err = try_session(settings, Helper::default()).err().unwrap();
        assert!(err.contains(message), "{err}");
    }
}

#[test]
fn switched_off_there_is_no_compaction_and_no_recall_tool() {
    let off = json!({ "compaction": false });
    let (set, compiled) = compile(off.clone()).unwrap();
    assert!(
        compiled
            .control_tools
            .iter()
            .all(|m| m.name() != RECALL_HISTORY)
    );
    let session = build_session(&set, &compiled, &config(&off), Some(default_policy())).unwrap();
    assert!(
        session
            .extensions
            .iter()
            .all(|e| e.name() != compaction::EXTENSION)
    );
    let (_, on) = compile(Value::Null).unwrap();
    assert!(on.control_tools.iter().any(|m| m.name() == RECALL_HISTORY));
}

#[test]
fn the_loop_continues_a_cut_off_reply_three_times_then_ends_the_turn() {
    let cut = json!({ "text": "part", "stop": "max_tokens" });
    let (rt, _) = runtime(
        200_000,
        json!([cut, cut, cut, cut, { "text": "unused" }]),
        json!([]),
    );
    let s = session(Helper::default());
    let (outcome, state) = run(&rt, &s, "cut", "write a long essay");
    match &outcome {
        RunOutcome::Ended { reason } => assert_eq!(reason, "max_tokens"),
        other => panic!("{other:?}"),
    }
    let notes = state
        .core
        .messages
        .iter()
        .filter(|m| m.role == Role::Context && m.text == CONTINUE)
        .count();
    assert_eq!(notes, 3);
}

#[test]
fn the_loop_nudges_once_after_an_empty_reply() {
    let (rt, _) = runtime(
        200_000,
        json!([{ "text": "" }, { "text": "here it is" }]),
        json!([]),
    );
    let s = session(Helper::default());
    let (outcome, state) = run(&rt, &s, "empty", "answer");
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let texts: Vec<&str> = state
        .core
        .messages
        .iter()
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(texts, ["answer", "", EMPTY_NUDGE, "here it is"]);

    let (rt, _) = runtime(200_000, json!([{ "text": "" }, { "text": " " }]), json!([]));
    let (outcome, _) = run(&rt, &s, "empty-twice", "answer");
    match &outcome {
        RunOutcome::Ended { reason } => assert_eq!(reason, "empty_reply"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn another_policy_replaces_the_loop_and_its_hooks() {
    let (set, compiled) = compile(Value::Null).unwrap();
    let minimal = noeta_core::policy::minimal_policy();
    let err = build_session(&set, &compiled, &BTreeMap::new(), Some(minimal))
        .err()
        .unwrap();
    assert!(matches!(err, SessionError::PolicyMismatch { .. }), "{err}");
    // Compiled for the kernel's own policy, the loop's hooks are not mounted.
    let set = load_plugins(
        &[PluginSource::Linked(noeta_builtin_react::plugin())],
        &LoadOptions::new(standard_registry()),
    )
    .unwrap();
    let merged = set.merged().unwrap();
    let mut options = AgentOptions::named("main");
    options.plugins = vec!["react".into()];
    let kernel = compile_agent(&set, &merged, &options, &ActivationRules::default()).unwrap();
    let session = build_session(&set, &kernel, &BTreeMap::new(), None).unwrap();
    assert!(
        session
            .extensions
            .iter()
            .all(|e| e.name() != noeta_builtin_react::LOOP)
    );
}

#[test]
fn compact_summarises_now_at_the_persons_word_and_the_next_reply_starts_from_it() {
    // A big window: nothing would compact by itself.
    let (rt, capture) = runtime(
        200_000,
        json!([big(1), big(2), big(3), { "text": "collected" }, { "text": "still here" }]),
        json!(["SUMMARY BY REQUEST"]),
    );
    let s = session(Helper::default());
    let (outcome, state) = run(&rt, &s, "asked", GOAL);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(compaction::read(&state).count, 0);
    let t = TaskId::new("asked").unwrap();
    let listed = block_on(rt.commands(&s, &t)).unwrap();
    assert!(
        listed.iter().any(|(_, c)| c.name == "compact"),
        "{listed:?}"
    );

    let reply = block_on(rt.run_command(&s, &t, "compact", "")).unwrap();
    assert!(reply.text().starts_with("compacted: "), "{}", reply.text());
    let state = block_on(rt.load(&s, &t)).unwrap();
    let current = compaction::read(&state).current.unwrap();
    assert_eq!(current.trigger, Trigger::Requested);
    assert_eq!(current.summary, "SUMMARY BY REQUEST");
    // Right after, there is nothing left to compact.
    let again = block_on(rt.run_command(&s, &t, "compact", "")).unwrap();
    assert_eq!(
        again.text(),
        "nothing to compact yet: the conversation is all recent"
    );

    // The next reply's request starts from the summary.
    block_on(rt.send(&s, &t, "and now?")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let last = capture.steps().last().cloned().unwrap();
    assert!(
        last.messages[0].text.contains("SUMMARY BY REQUEST"),
        "{:?}",
        last.messages[0].text
    );
}
