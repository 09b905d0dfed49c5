//! `Task` through the real runtime and `run_tree`: one child, a fan-out, a child that cannot
//! run, bad input, and a crash while the children run.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::fold::Folder;
use noeta_core::model::Role;
use noeta_core::model::ToolCall;
use noeta_core::model::{ModelReply, ModelRequest};
use noeta_core::provider::{Provider, ProviderError};
use noeta_core::runner::{RunOutcome, Runtime, Sessions};
use noeta_core::session::{Session, bare_session, build_session};
use noeta_core::store::{
    EventLog, ManualClock, MemoryContentStore, MemoryEventLog, TaskId, TaskInfo, TaskQueue,
};
use noeta_core::{
    ActivationRules, AgentDefinition, AgentOptions, LinkedPlugin, LoadOptions, PluginSource,
    RefTable, Resolved, compile_agent, load_plugins, standard_registry,
};
use noeta_testkit::harness::CrashAfter;
use serde_json::{Value, json};

/// The parent asks for the `Task` calls it is given, then sums up; a child answers its goal
/// after yielding a few times (so children running at once overlap), noting how many run.
struct Model {
    calls: Vec<Value>,
    active: AtomicUsize,
    most: AtomicUsize,
}

impl Model {
    fn new(calls: Vec<Value>) -> Arc<Self> {
        Arc::new(Self {
            calls,
            active: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        })
    }
}

/// Pending a few times before it is ready, so other futures get polled meanwhile.
struct Yield(u32);

impl std::future::Future for Yield {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 == 0 {
            return std::task::Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

#[async_trait]
impl Provider for Model {
    fn name(&self) -> &str {
        "test"
    }
    fn model(&self) -> &str {
        "test"
    }
    fn context_window(&self) -> u64 {
        100_000
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ProviderError> {
        let mut reply = ModelReply::default();
        if request.system.contains("You are a subagent") {
            let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            Yield(5).await;
            self.active.fetch_sub(1, Ordering::SeqCst);
            let goal = &request.messages[0].text;
            reply.text = format!("did: {goal}");
            return Ok(reply);
        }
        let replies = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        if replies == 0 {
            reply.calls = self
                .calls
                .iter()
                .enumerate()
                .map(|(i, input)| ToolCall {
                    id: format!("t{}", i + 1),
                    name: "Task".into(),
                    input: input.clone(),
                })
                .collect();
        } else {
            reply.text = "All reported.".into();
        }
        Ok(reply)
    }
}

fn task_call(agent: &str, prompt: &str) -> Value {
    json!({ "description": "a part", "prompt": prompt, "subagent_type": agent })
}

/// The parent `main` (delegation, roster `explore`, `ghost`, `plan`) and the children this
/// host defines (`explore`, `plan`; not `ghost`).
struct Host {
    parent: Arc<Session>,
    children: Vec<Arc<Session>>,
}

impl Sessions for Host {
    fn session(&self, agent: &str) -> Option<Arc<Session>> {
        if agent == "main" {
            return Some(self.parent.clone());
        }
        self.children.iter().find(|s| s.spec.name == agent).cloned()
    }
}

/// The agents a roster may name, as a plugin contributes them.
const TEAM: &str = r#"
name = "team"
version = "0.1.0"
requires-noeta = ">=0.1"

[[contributions]]
surface = "agent"
ref = "team::explore"

[[contributions]]
surface = "agent"
ref = "team::ghost"

[[contributions]]
surface = "agent"
ref = "team::plan"
"#;

fn team() -> LinkedPlugin {
    let table = ["explore", "ghost", "plan"]
        .into_iter()
        .fold(RefTable::new(), |table, name| {
            let def = Arc::new(AgentDefinition {
                name: name.to_owned(),
                description: format!("the {name} agent"),
                instructions: "You are a subagent.".to_owned(),
                tools: None,
                plugins: Vec::new(),
                agents: Vec::new(),
                model: None,
            });
            table.with(&format!("team::{name}"), move |_| {
                Ok(Resolved::Agent(Arc::clone(&def)))
            })
        });
    LinkedPlugin::new("team", TEAM, table)
}

fn parent_session(roster: &[&str]) -> Session {
    let set = load_plugins(
        &[
            PluginSource::Linked(noeta_builtin_delegation::plugin()),
            PluginSource::Linked(team()),
        ],
        &LoadOptions::new(standard_registry()),
    )
    .unwrap();
    let merged = set.merged().unwrap();
    let mut options = AgentOptions::named("main");
    options.instructions = "You lead.".into();
    options.plugins = vec!["delegation".into()];
    options.agents = roster.iter().map(|a| (*a).to_owned()).collect();
    let compiled = compile_agent(&set, &merged, &options, &ActivationRules::default()).unwrap();
    build_session(&set, &compiled, &Default::default(), None).unwrap()
}

fn host() -> Host {
    let child = |name: &str| {
        let mut s = bare_session(name, "You are a subagent.");
        s.folder = Folder::new(&s.extensions, "child-set");
        Arc::new(s)
    };
    Host {
        parent: Arc::new(parent_session(&["explore", "ghost", "plan"])),
        children: vec![child("explore"), child("plan")],
    }
}

struct Run {
    log: Arc<MemoryEventLog>,
    content: Arc<MemoryContentStore>,
    clock: Arc<ManualClock>,
    host: Host,
    task: TaskId,
}

impl Run {
    fn new() -> Self {
        let clock = ManualClock::at(1_000);
        Self {
            log: Arc::new(MemoryEventLog::new(clock.clone())),
            content: Arc::new(MemoryContentStore::new()),
            clock,
            host: host(),
            task: TaskId::new("parent").unwrap(),
        }
    }

    fn runtime(&self, log: Arc<dyn EventLog>, model: Arc<Model>) -> Runtime {
        Runtime::new(log, self.content.clone(), model).with_lease_ttl(1_000)
    }

    fn start(&self, model: Arc<Model>, at_once: usize) -> (TaskId, RunOutcome) {
        let rt = self
            .runtime(self.log.clone(), model)
            .with_children_at_once(at_once);
        block_on(rt.create(&self.host.parent, &self.task, "do the work")).unwrap();
        block_on(rt.run_tree(&self.host, &self.task)).unwrap()
    }

    /// The parent's tool results, in order: (call id, text, is_error).
    fn results(&self) -> Vec<(String, String, bool)> {
        let rt = self.runtime(self.log.clone(), Model::new(Vec::new()));
        let state = block_on(rt.load(&self.host.parent, &self.task)).unwrap();
        state
            .core
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| {
                (
                    m.call_id.clone().unwrap().to_string(),
                    m.text.to_string(),
                    m.is_error,
                )
            })
            .collect()
    }

    fn core_kinds(&self, task: &TaskId) -> Vec<String> {
        block_on(self.log.read(task, 0))
            .unwrap()
            .iter()
            .filter(|e| e.record.extension == "core")
            .map(|e| e.record.kind.clone())
            .collect()
    }

    fn children(&self) -> Vec<TaskInfo> {
        block_on(self.log.tasks())
            .unwrap()
            .into_iter()
            .filter(|t| t.parent.as_ref() == Some(&self.task))
            .collect()
    }
}

#[test]
fn one_child_does_the_work_and_its_report_is_the_result() {
    let run = Run::new();
    let (stopped, outcome) =
        run.start(Model::new(vec![task_call("explore", "find the parser")]), 8);
    assert_eq!(stopped, run.task);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let results = run.results();
    assert_eq!(results.len(), 1);
    let (_, text, is_error) = &results[0];
    assert!(!is_error);
    assert!(
        text.starts_with("Subagent `explore` (task child1-"),
        "{text}"
    );
    assert!(text.ends_with("reports:\n\ndid: find the parser"), "{text}");
    assert_eq!(run.children().len(), 1);
}

#[test]
fn three_calls_in_one_reply_run_their_children_at_once() {
    let run = Run::new();
    let model = Model::new(vec![
        task_call("explore", "part one"),
        task_call("plan", "part two"),
        task_call("explore", "part three"),
    ]);
    let (_, outcome) = run.start(model.clone(), 3);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert!(
        model.most.load(Ordering::SeqCst) >= 2,
        "the children overlapped: {}",
        model.most.load(Ordering::SeqCst)
    );
    let results = run.results();
    let texts: Vec<&str> = results
        .iter()
        .map(|(_, t, _)| t.rsplit("\n\n").next().unwrap())
        .collect();
    assert_eq!(
        texts,
        vec!["did: part one", "did: part two", "did: part three"]
    );
    assert_eq!(run.children().len(), 3);
    let woken = run
        .core_kinds(&run.task)
        .iter()
        .filter(|k| *k == "children_finished")
        .count();
    assert_eq!(woken, 3, "each call woken exactly once");
}

#[test]
fn one_child_at_a_time_when_the_pool_is_one() {
    let run = Run::new();
    let model = Model::new(vec![
        task_call("explore", "a"),
        task_call("plan", "b"),
        task_call("explore", "c"),
    ]);
    run.start(model.clone(), 1);
    assert_eq!(model.most.load(Ordering::SeqCst), 1);
    assert_eq!(run.results().len(), 3);
}

#[test]
fn a_child_this_host_cannot_run_fails_alone_and_says_why_once() {
    let run = Run::new();
    let (_, outcome) = run.start(
        Model::new(vec![
            task_call("ghost", "haunt"),
            task_call("plan", "plan it"),
        ]),
        8,
    );
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let results = run.results();
    assert_eq!(results.len(), 2);
    let (_, ghost, ghost_error) = &results[0];
    assert!(ghost_error);
    assert!(
        ghost.starts_with("Task: subagent `ghost` (task child1-"),
        "{ghost}"
    );
    assert!(
        ghost.contains("did not finish: the child task failed: task `child1-")
            && ghost.contains("runs agent `ghost`, which this host does not define"),
        "{ghost}"
    );
    assert!(!results[1].2);
    // The failure is recorded on the child, once.
    let ghost_task = run
        .children()
        .into_iter()
        .find(|t| run.core_kinds(&t.id).contains(&"task_failed".to_owned()))
        .unwrap();
    let failed = run
        .core_kinds(&ghost_task.id)
        .iter()
        .filter(|k| *k == "task_failed")
        .count();
    assert_eq!(failed, 1);
}

fn background_call(agent: &str, prompt: &str) -> Value {
    let mut call = task_call(agent, prompt);
    call["background"] = json!(true);
    call
}

impl Run {
    /// The parent's goal and what was delivered to it.
    fn user_messages(&self) -> Vec<String> {
        let rt = self.runtime(self.log.clone(), Model::new(Vec::new()));
        let state = block_on(rt.load(&self.host.parent, &self.task)).unwrap();
        state
            .core
            .messages
            .iter()
            .filter(|m| matches!(m.role, Role::User | Role::Context))
            .map(|m| m.text.to_string())
            .collect()
    }
}

#[test]
fn a_background_child_returns_at_once_and_delivers_its_report_later() {
    let run = Run::new();
    let (_, outcome) = run.start(
        Model::new(vec![
            background_call("explore", "survey the tests"),
            background_call("ghost", "haunt"),
        ]),
        8,
    );
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let results = run.results();
    assert_eq!(results.len(), 2);
    for (_, text, is_error) in &results {
        assert!(!is_error, "{text}");
        assert!(text.contains("in the background as task child"), "{text}");
        assert!(text.ends_with("its report arrives as a message when it finishes."));
    }
    let delivered = run.user_messages();
    assert_eq!(delivered.len(), 3, "{delivered:?}");
    assert!(
        delivered[1].starts_with("Background subagent `explore` (task child")
            && delivered[1].ends_with("finished. Its report:\n\ndid: survey the tests"),
        "{}",
        delivered[1]
    );
    // A child that cannot run fails alone; the parent hears why once.
    assert!(
        delivered[2].starts_with("Background subagent `ghost` (task child")
            && delivered[2].contains("did not finish: the child task failed"),
        "{}",
        delivered[2]
    );
    let kinds = run.core_kinds(&run.task);
    let count = |kind: &str| kinds.iter().filter(|k| *k == kind).count();
    assert_eq!(count("background_started"), 2);
    assert_eq!(count("background_delivered"), 2);
    assert_eq!(count("children_finished"), 0);
    assert_eq!(run.children().len(), 2);
}

#[test]
fn a_background_flag_that_is_not_a_boolean_is_refused_naming_it() {
    let run = Run::new();
    let mut call = task_call("explore", "x");
    call["background"] = json!("yes");
    run.start(Model::new(vec![call]), 8);
    let results = run.results();
    assert_eq!(results.len(), 1);
    assert!(
        results[0].2
            && results[0]
                .1
                .contains("/background: \"yes\" is not of type \"boolean\""),
        "{:?}",
        results[0]
    );
    assert!(run.children().is_empty());
}

#[test]
fn an_empty_prompt_or_an_agent_outside_the_roster_is_refused() {
    let run = Run::new();
    run.start(
        Model::new(vec![task_call("explore", "  "), task_call("nobody", "x")]),
        8,
    );
    let results = run.results();
    assert_eq!(results.len(), 2);
    assert!(
        results[0].2 && results[0].1.contains("`prompt` is empty"),
        "{:?}",
        results[0]
    );
    assert!(
        results[1].2 && results[1].1.contains("nobody"),
        "{:?}",
        results[1]
    );
    assert!(run.children().is_empty());
}

#[test]
fn an_agent_without_a_roster_gets_no_task_tool() {
    // `Task` is the only control tool here: its offer list exists only with a roster.
    let offers_control = |session: &Session| {
        session
            .extensions
            .iter()
            .any(|e| e.name() == "core/control")
    };
    assert!(!offers_control(&parent_session(&[])));
    assert!(offers_control(&parent_session(&["explore"])));
}

#[test]
fn a_crash_while_children_run_resumes_each_call_exactly_once() {
    let calls = || vec![task_call("explore", "one"), task_call("plan", "two")];
    // Appends of a clean run bound where a crash can land.
    let clean = Run::new();
    clean.start(Model::new(calls()), 2);
    let appends = block_on(clean.log.tasks())
        .unwrap()
        .iter()
        .map(|t| block_on(clean.log.read(&t.id, 0)).unwrap().len())
        .sum::<usize>();
    for limit in 2..appends {
        let run = Run::new();
        let dying = Arc::new(CrashAfter::new(run.log.clone(), limit));
        let rt = run
            .runtime(dying, Model::new(calls()))
            .with_children_at_once(2);
        if block_on(rt.create(&run.host.parent, &run.task, "do the work")).is_err() {
            continue;
        }
        if block_on(rt.run_tree(&run.host, &run.task)).is_ok() {
            continue; // past the run's last append
        }
        run.clock.advance(5_000);
        let rt = run.runtime(run.log.clone(), Model::new(calls()));
        let (_, outcome) = block_on(rt.run_tree(&run.host, &run.task)).unwrap();
        assert!(
            matches!(outcome, RunOutcome::Ended { .. }),
            "limit {limit}: {outcome:?}"
        );
        let results = run.results();
        assert_eq!(results.len(), 2, "limit {limit}: {results:?}");
        for (call, text, _) in &results {
            assert_eq!(
                results.iter().filter(|(c, _, _)| c == call).count(),
                1,
                "limit {limit}: {call} answered once"
            );
            assert!(text.contains("did: "), "limit {limit}: {text}");
        }
        let kinds = run.core_kinds(&run.task);
        let woken = kinds.iter().filter(|k| *k == "children_finished").count();
        assert_eq!(woken, 2, "limit {limit}: {kinds:?}");
        assert_eq!(run.children().len(), 2, "limit {limit}");
        for child in run.children() {
            let ended = run
                .core_kinds(&child.id)
                .iter()
                .filter(|k| *k == "turn_ended")
                .count();
            assert_eq!(ended, 1, "limit {limit}: child {} ended once", child.id);
        }
    }
}

impl Run {
    /// Runs the queue dry with `workers` pool workers taking turns (each runs what it took to
    /// its stop, queues what that made runnable, and finishes the entry); returns how many
    /// runs each worker made.
    fn drain(&self, model: &Arc<Model>, workers: usize) -> Vec<usize> {
        let runtimes: Vec<Runtime> = (0..workers)
            .map(|n| {
                self.runtime(self.log.clone(), model.clone())
                    .with_worker(format!("w{n}"))
                    .as_pool_worker()
            })
            .collect();
        let mut runs = vec![0; workers];
        let mut idle = 0;
        let mut turn = 0;
        while idle < workers {
            let n = turn % workers;
            turn += 1;
            let Some(taken) = block_on(self.log.take(&format!("w{n}"), 1_000)).unwrap() else {
                idle += 1;
                continue;
            };
            idle = 0;
            runs[n] += 1;
            block_on(runtimes[n].run_queued(&self.host, self.log.as_ref(), &taken)).unwrap();
            assert!(runs.iter().sum::<usize>() < 100, "the queue never empties");
        }
        runs
    }
}

#[test]
fn a_queue_of_workers_runs_the_children_and_delivers_background_reports() {
    let run = Run::new();
    let model = Model::new(vec![
        task_call("explore", "part one"),
        task_call("plan", "part two"),
        background_call("explore", "survey"),
        task_call("ghost", "haunt"),
    ]);
    let rt = run.runtime(run.log.clone(), model.clone());
    block_on(rt.create(&run.host.parent, &run.task, "do the work")).unwrap();
    block_on(run.log.enqueue(&run.task, 0)).unwrap();
    let runs = run.drain(&model, 2);
    assert!(
        runs.iter().all(|n| *n > 0),
        "both workers ran tasks: {runs:?}"
    );
    // Every child ran through the queue, none by the runtime that started the parent.
    assert_eq!(run.children().len(), 4);
    let results = run.results();
    let texts: Vec<&str> = results.iter().map(|(_, t, _)| t.as_str()).collect();
    assert_eq!(results.len(), 4, "{texts:#?}");
    let one = |pred: &dyn Fn(&str) -> bool| texts.iter().filter(|t| pred(t)).count() == 1;
    assert!(one(&|t| t.ends_with("did: part one")), "{texts:#?}");
    assert!(one(&|t| t.ends_with("did: part two")), "{texts:#?}");
    assert!(one(&|t| t.contains("in the background")), "{texts:#?}");
    assert!(one(&|t| t.contains("ghost")), "{texts:#?}");
    let kinds = run.core_kinds(&run.task);
    let count = |kind: &str| kinds.iter().filter(|k| *k == kind).count();
    assert_eq!(
        count("children_finished"),
        3,
        "each call woken exactly once"
    );
    assert_eq!(count("background_delivered"), 1);
    let delivered = run.user_messages();
    assert!(
        delivered
            .iter()
            .any(|m| m.ends_with("finished. Its report:\n\ndid: survey")),
        "{delivered:#?}"
    );
    let state = block_on(rt.load(&run.host.parent, &run.task)).unwrap();
    assert!(
        matches!(state.core.turn, noeta_core::fold::TurnState::Ended { .. }),
        "{:?}",
        state.core.turn
    );
    assert_eq!(
        block_on(run.log.depth()).unwrap(),
        noeta_core::store::QueueDepth::default()
    );
}
