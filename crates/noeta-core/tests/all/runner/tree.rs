//! The task tree (`runner/tree.rs`): children spawned and woken, the spawn checkpoint and roster,
//! inheritance, background children and their reports, crashes across a tree, and `run_tree`
//! stopping at a child that waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{Extension, HookError, HookResult, View};
use noeta_core::fold::Folder;
use noeta_core::model::{ModelRequest, Role, ToolCall};
use noeta_core::records::CoreRecord;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::{Session, bare_session};
use noeta_core::store::{EventLog, TaskId};
use noeta_core::{PluginSource, Resolved, Tool, ToolContext, ToolError, ToolOutput, Verdict};
use noeta_testkit::harness::{CrashAfter, Harness};
use serde_json::{Value, json};

use super::support::{AskTool, built, offers, result_text, session, task, texts};
use crate::support::{Manifest, ResolveWith};

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
    let rt =
        Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware)).with_lease_ttl(1_000);
    let t = task("parent");
    block_on(rt.create(&host.parent, &t, "fix it")).unwrap();
    block_on(rt.run_tree(&host, &t)).unwrap();
    assert_eq!(
        result_text(&rt, &host.parent, &t),
        "`bad-inherit` inherit failed: settings unreadable"
    );
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
    let rt =
        Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware)).with_lease_ttl(1_000);
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
    let rt =
        Runtime::new(h.log.clone(), h.content.clone(), Arc::new(ChildAware)).with_lease_ttl(1_000);
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
