//! The lease heartbeat: a claim keeps its task through model calls, tool runs and store hiccups
//! longer than its lease, and a real loss stops the run at once, saying who took the task.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{CommandReply, CommandSpec, Extension, HookResult, View};
use noeta_core::fold::Folder;
use noeta_core::model::{ModelReply, ModelRequest};
use noeta_core::model::{StopReason, Usage};
use noeta_core::provider::{Provider, ProviderError, ScriptedProvider};
use noeta_core::records::CoreRecord;
use noeta_core::runner::{RunError, RunOutcome, Runtime};
use noeta_core::session::{Session, bare_session};
use noeta_core::store::{
    Clock, EventLog, ManualClock, MemoryContentStore, MemoryEventLog, StoreError, SystemClock,
    TaskId,
};
use noeta_core::{Tool, ToolContext, ToolError, ToolOutput};
use noeta_testkit::harness::Tapped;
use serde_json::{Value, json};

/// The lease every test here runs with: short, so a slow call outlives it several times.
const TTL_MS: u64 = 200;

fn task() -> TaskId {
    TaskId::new("slow").unwrap()
}

fn script(turns: Value) -> Arc<dyn Provider> {
    let text = json!({ "turns": turns }).to_string();
    Arc::new(ScriptedProvider::from_json(&text, "test script").unwrap())
}

fn replies(log: &dyn EventLog) -> Vec<String> {
    block_on(log.read(&task(), 0))
        .unwrap()
        .iter()
        .filter_map(|e| match CoreRecord::from_record(&e.record) {
            Some(Ok(CoreRecord::AssistantReply { text, .. })) => Some(text.into()),
            _ => None,
        })
        .collect()
}

/// How many renewals a log saw.
#[derive(Clone, Default)]
struct Renewals(Arc<AtomicUsize>);

impl Renewals {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A log that counts renewals and fails the first `failing` of them as a store would.
fn counting_renewals(clock: Arc<dyn Clock>, failing: usize) -> (Arc<Tapped>, Renewals) {
    let renewals = Renewals::default();
    let seen = renewals.clone();
    let log = Tapped::over(Arc::new(MemoryEventLog::new(clock))).on_renew(move |_| {
        if seen.0.fetch_add(1, Ordering::SeqCst) < failing {
            return Err(StoreError::Backend {
                message: "database is locked".into(),
            });
        }
        Ok(())
    });
    (Arc::new(log), renewals)
}

fn runtime(log: Arc<dyn EventLog>, provider: Arc<dyn Provider>) -> Runtime {
    Runtime::new(log, Arc::new(MemoryContentStore::new()), provider).with_lease_ttl(TTL_MS)
}

fn run(rt: &Runtime, session: &Session) -> Result<RunOutcome, RunError> {
    block_on(rt.create(session, &task(), "Take your time."))?;
    block_on(rt.run(session, &task()))
}

#[test]
fn a_model_reply_slower_than_the_lease_is_recorded() {
    let (log, renewals) = counting_renewals(Arc::new(SystemClock), 0);
    let rt = runtime(
        log.clone(),
        script(json!([{ "text": "worth the wait", "delay_ms": 4 * TTL_MS }])),
    );
    let session = bare_session("main", "You are patient.");
    let outcome = run(&rt, &session).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(replies(log.as_ref()), ["worth the wait"]);
    assert!(
        renewals.count() >= 3,
        "the heartbeat renewed the lease while the model was working ({} renewals)",
        renewals.count()
    );
}

/// A tool that works for a while without renewing the lease itself.
struct Slow;

#[async_trait]
impl Tool for Slow {
    fn name(&self) -> &str {
        "Slow"
    }
    fn description(&self) -> &str {
        "works for a while"
    }
    fn input_schema(&self) -> Value {
        json!({ "type": "object" })
    }
    async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        futures_timer::Delay::new(Duration::from_millis(4 * TTL_MS)).await;
        Ok(ToolOutput::text("done at last"))
    }
}

/// Offers one tool.
struct Offers(Arc<dyn Tool>);

#[async_trait]
impl Extension for Offers {
    fn name(&self) -> &str {
        "offers"
    }
    fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        Ok(vec![Arc::clone(&self.0)])
    }
}

fn session_with(tool: Arc<dyn Tool>) -> Session {
    let mut session = bare_session("main", "You are patient.");
    session.extensions.push(Arc::new(Offers(tool)));
    session.folder = Folder::new(&session.extensions, "lease-test");
    session
}

#[test]
fn a_tool_slower_than_the_lease_keeps_the_task() {
    let (log, _) = counting_renewals(Arc::new(SystemClock), 0);
    let rt = runtime(
        log.clone(),
        script(json!([
            { "calls": [{ "name": "Slow", "input": {} }] },
            { "text": "it finished" }
        ])),
    );
    let outcome = run(&rt, &session_with(Arc::new(Slow))).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let events = block_on(log.read(&task(), 0)).unwrap();
    let finished = events
        .iter()
        .find_map(|e| match CoreRecord::from_record(&e.record) {
            Some(Ok(CoreRecord::CallFinished { text, .. })) => Some(text),
            _ => None,
        });
    assert_eq!(finished.as_deref(), Some("done at last"));
    assert_eq!(replies(log.as_ref()).last().unwrap(), "it finished");
}

#[test]
fn renewals_the_store_fails_for_a_while_are_tried_again() {
    // The first three renewals fail as a busy database would; the fourth goes through well
    // inside the lease (the failed ones are retried every sixteenth of it).
    let (log, renewals) = counting_renewals(Arc::new(SystemClock), 3);
    let rt = runtime(
        log.clone(),
        script(json!([{ "text": "made it", "delay_ms": 3 * TTL_MS }])),
    );
    let outcome = run(&rt, &bare_session("main", "You are patient.")).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(replies(log.as_ref()), ["made it"]);
    assert!(renewals.count() > 3, "{} renewals", renewals.count());
}

#[test]
fn a_store_that_never_renews_stops_the_run_with_its_own_error() {
    let (log, _) = counting_renewals(Arc::new(SystemClock), usize::MAX);
    let rt = runtime(
        log.clone(),
        script(json!([{ "text": "never written", "delay_ms": 20 * TTL_MS }])),
    );
    let started = std::time::Instant::now();
    let err = run(&rt, &bare_session("main", "You are patient.")).unwrap_err();
    assert!(
        matches!(&err, RunError::Store(StoreError::Backend { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("database is locked"), "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(10 * TTL_MS),
        "stopped once the lease would have lapsed, not when the reply came ({:?})",
        started.elapsed()
    );
    assert!(replies(log.as_ref()).is_empty());
}

/// A model that, while it thinks, lets the lease run out on the store's clock and (optionally)
/// has another worker claim the task; it then takes far longer than the heartbeat's period.
struct Overtaken {
    clock: Arc<ManualClock>,
    log: Arc<MemoryEventLog>,
    thief: Option<&'static str>,
    finished: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Provider for Overtaken {
    fn name(&self) -> &str {
        "overtaken"
    }
    fn model(&self) -> &str {
        "overtaken"
    }
    fn context_window(&self) -> u64 {
        100_000
    }
    async fn complete(&self, _request: &ModelRequest) -> Result<ModelReply, ProviderError> {
        let _guard = DropFlag(Arc::clone(&self.dropped));
        self.clock.advance(TTL_MS + 1);
        if let Some(thief) = self.thief {
            self.log.claim(&task(), thief, 60_000).await.unwrap();
        }
        futures_timer::Delay::new(Duration::from_secs(10)).await;
        self.finished.store(true, Ordering::SeqCst);
        Ok(ModelReply {
            text: "too late".into(),
            calls: Vec::new(),
            stop: Some(StopReason::EndTurn),
            usage: Usage::default(),
            reasoning: Vec::new(),
        })
    }
}

fn overtaken(thief: Option<&'static str>) -> (RunError, Arc<MemoryEventLog>, Arc<AtomicBool>) {
    let clock = ManualClock::at(1_000);
    let log = Arc::new(MemoryEventLog::new(clock.clone()));
    let finished = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let provider = Overtaken {
        clock,
        log: log.clone(),
        thief,
        finished: finished.clone(),
        dropped: dropped.clone(),
    };
    let rt = runtime(log.clone(), Arc::new(provider));
    let started = std::time::Instant::now();
    let err = run(&rt, &bare_session("main", "You are patient.")).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the run stopped at the heartbeat, not when the model answered"
    );
    assert!(dropped.load(Ordering::SeqCst), "the model call was dropped");
    (err, log, finished)
}

#[test]
fn another_worker_taking_the_task_mid_call_stops_the_run_naming_it() {
    let (err, log, finished) = overtaken(Some("worker-2"));
    assert!(
        matches!(&err, RunError::LeaseLost { holder: Some(h), .. } if h == "worker-2"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "lost the lease on task `slow` to worker `worker-2`, which claimed the task; stopping without writing"
    );
    assert!(!finished.load(Ordering::SeqCst));
    assert!(replies(log.as_ref()).is_empty(), "nothing more was written");
}

#[test]
fn a_lease_that_lapsed_is_reported_as_lapsed() {
    let (err, log, _) = overtaken(None);
    assert!(
        matches!(&err, RunError::LeaseLost { holder: None, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("lapsed before this worker renewed it"),
        "{err}"
    );
    assert!(replies(log.as_ref()).is_empty());
}

#[test]
fn a_slash_command_slower_than_the_lease_keeps_the_task() {
    /// Offers `/wait`, which takes four lease lengths.
    struct Waits(Arc<Mutex<usize>>);

    #[async_trait]
    impl Extension for Waits {
        fn name(&self) -> &str {
            "waits"
        }
        fn commands(&self, _view: &View<'_>) -> HookResult<Vec<CommandSpec>> {
            Ok(vec![CommandSpec {
                name: "wait".into(),
                description: "waits".into(),
            }])
        }
        async fn run_command(
            &self,
            view: &View<'_>,
            _name: &str,
            _args: &str,
        ) -> HookResult<CommandReply> {
            futures_timer::Delay::new(Duration::from_millis(4 * TTL_MS)).await;
            *self.0.lock().unwrap() += 1;
            view.record("waits", "waited", json!({}));
            Ok(CommandReply::Show("waited".into()))
        }
    }

    let (log, _) = counting_renewals(Arc::new(SystemClock), 0);
    let rt = runtime(log.clone(), script(json!([{ "text": "hi" }])));
    let ran = Arc::new(Mutex::new(0));
    let mut session = bare_session("main", "You are patient.");
    session.extensions.push(Arc::new(Waits(ran.clone())));
    session.folder = Folder::new(&session.extensions, "lease-test");
    block_on(rt.create(&session, &task(), "hello")).unwrap();
    let said = block_on(rt.run_command(&session, &task(), "wait", "")).unwrap();
    assert_eq!(said, CommandReply::Show("waited".into()));
    assert_eq!(*ran.lock().unwrap(), 1);
    let kinds: Vec<String> = block_on(log.read(&task(), 0))
        .unwrap()
        .iter()
        .map(|e| e.record.kind.clone())
        .collect();
    assert!(kinds.iter().any(|k| k == "waited"), "{kinds:?}");
}
