//! The kernel's test harness: an in-memory store on a manual clock, runtimes over it with a
//! scripted model, a log that dies after a number of appends, and the session of an agent
//! activating given plugins.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::Runtime;
use noeta_core::session::{Session, build_session};
use noeta_core::store::{
    Event, EventLog, Lease, ManualClock, MemoryContentStore, MemoryEventLog, Record, Snapshot,
    StoreError, TaskId, TaskInfo,
};
use noeta_core::{
    ActivationRules, AgentOptions, LinkedPlugin, LoadOptions, PluginSource, compile_agent,
    load_plugins, standard_registry,
};
use serde_json::{Value, json};

/// An in-memory store on a manual clock (starting at 1,000 ms).
#[derive(Debug)]
pub struct Harness {
    /// The clock the store's leases are timed by.
    pub clock: Arc<ManualClock>,
    /// The event log.
    pub log: Arc<MemoryEventLog>,
    /// The content store.
    pub content: Arc<MemoryContentStore>,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// An empty store.
    pub fn new() -> Self {
        let clock = ManualClock::at(1_000);
        Self {
            log: Arc::new(MemoryEventLog::new(clock.clone())),
            content: Arc::new(MemoryContentStore::new()),
            clock,
        }
    }

    /// A runtime over this store whose model plays `turns` (a one-second lease).
    pub fn runtime(&self, turns: Value) -> Runtime {
        self.runtime_over(self.log.clone(), turns)
    }

    /// A runtime over `log` (this store, or a wrapper of it) whose model plays `turns`.
    ///
    /// # Panics
    ///
    /// When `turns` is not a valid script (a test helper).
    #[expect(
        clippy::expect_used,
        reason = "a test helper: failing loudly is the point"
    )]
    pub fn runtime_over(&self, log: Arc<dyn EventLog>, turns: Value) -> Runtime {
        let script = json!({ "turns": turns }).to_string();
        let provider = ScriptedProvider::from_json(&script, "test script")
            .expect("the test's model script is valid");
        Runtime::new(log, self.content.clone(), Arc::new(provider)).with_lease_ttl(1_000)
    }

    /// Every event of `task`.
    ///
    /// # Panics
    ///
    /// When the task does not exist (a test helper).
    #[expect(
        clippy::expect_used,
        reason = "a test helper: failing loudly is the point"
    )]
    pub fn events(&self, task: &TaskId) -> Vec<Event> {
        block_on(self.log.read(task, 0)).expect("the task exists")
    }

    /// The kinds of `task`'s `core` records, in order.
    pub fn core_kinds(&self, task: &TaskId) -> Vec<String> {
        self.events(task)
            .iter()
            .filter(|e| e.record.extension == "core")
            .map(|e| e.record.kind.clone())
            .collect()
    }
}

/// A log that stops writing after a number of appends, as a worker that died: every later
/// append fails with a backend error `the worker died` and writes nothing.
#[derive(Debug)]
pub struct CrashAfter {
    inner: Arc<MemoryEventLog>,
    left: Mutex<usize>,
}

impl CrashAfter {
    /// `inner`, dying after `appends` appends.
    pub fn new(inner: Arc<MemoryEventLog>, appends: usize) -> Self {
        Self {
            inner,
            left: Mutex::new(appends),
        }
    }
}

#[async_trait]
impl EventLog for CrashAfter {
    async fn create_task(&self, task: &TaskId, parent: Option<&TaskId>) -> Result<(), StoreError> {
        self.inner.create_task(task, parent).await
    }
    async fn claim(&self, task: &TaskId, worker: &str, ttl_ms: u64) -> Result<Lease, StoreError> {
        self.inner.claim(task, worker, ttl_ms).await
    }
    async fn renew(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StoreError> {
        self.inner.renew(lease, ttl_ms).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.release(lease).await
    }
    async fn append(&self, lease: &Lease, batch: &[Record]) -> Result<u64, StoreError> {
        {
            let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
            if *left == 0 {
                return Err(StoreError::Backend {
                    message: "the worker died".into(),
                });
            }
            *left -= 1;
        }
        self.inner.append(lease, batch).await
    }
    async fn read(&self, task: &TaskId, after: u64) -> Result<Vec<Event>, StoreError> {
        self.inner.read(task, after).await
    }
    async fn info(&self, task: &TaskId) -> Result<TaskInfo, StoreError> {
        self.inner.info(task).await
    }
    async fn tasks(&self) -> Result<Vec<TaskInfo>, StoreError> {
        self.inner.tasks().await
    }
    async fn put_snapshot(&self, task: &TaskId, snapshot: &Snapshot) -> Result<(), StoreError> {
        self.inner.put_snapshot(task, snapshot).await
    }
    async fn snapshot(&self, task: &TaskId) -> Result<Option<Snapshot>, StoreError> {
        self.inner.snapshot(task).await
    }
}

/// The session of agent `main` activating `plugins` of the linked `sources`, with `config` as
/// the plugins' parameters, under the kernel's own rules (no always-on plugins, the minimal
/// policy): what a built-in's own tests run its contributions in.
///
/// # Panics
///
/// When the plugins do not load, merge, compile or build (a test helper).
#[expect(
    clippy::expect_used,
    reason = "a test helper: failing loudly is the point"
)]
pub fn session_of(
    sources: Vec<LinkedPlugin>,
    plugins: &[&str],
    config: &BTreeMap<String, Value>,
) -> Session {
    let sources: Vec<PluginSource> = sources.into_iter().map(PluginSource::Linked).collect();
    let set =
        load_plugins(&sources, &LoadOptions::new(standard_registry())).expect("the plugins load");
    let merged = set.merged().expect("the plugins merge");
    let mut options = AgentOptions::named("main");
    options.plugins = plugins.iter().map(|p| (*p).to_owned()).collect();
    let compiled = compile_agent(&set, &merged, &options, &ActivationRules::default())
        .expect("the agent compiles");
    build_session(&set, &compiled, config, None).expect("the session builds")
}
