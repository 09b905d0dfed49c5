//! The kernel's test harness: an in-memory store on a manual clock, runtimes over it with a
//! scripted model, a log whose appends and renewals a test can watch or fail (one that dies
//! after a number of appends among them), and the session of an agent
//! activating given plugins.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::Runtime;
use noeta_core::session::{Session, SessionError, build_session};
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

/// What a [`Tapped`] log's hooks see of an append: the lease and the batch.
pub type AppendTap = dyn Fn(&Lease, &[Record]) -> Result<(), StoreError> + Send + Sync;

/// What a [`Tapped`] log's hooks see of a renewal: the lease.
pub type RenewTap = dyn Fn(&Lease) -> Result<(), StoreError> + Send + Sync;

/// A log over another that lets a test watch appends and renewals, or fail them as a store
/// would: each hook runs first, and its error is the call's (the inner log is then not
/// called). The one delegating wrapper the tests need.
pub struct Tapped {
    inner: Arc<dyn EventLog>,
    append: Box<AppendTap>,
    renew: Box<RenewTap>,
}

impl std::fmt::Debug for Tapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tapped").finish_non_exhaustive()
    }
}

impl Tapped {
    /// `inner`, with hooks that let everything through.
    pub fn over(inner: Arc<dyn EventLog>) -> Self {
        Self {
            inner,
            append: Box::new(|_, _| Ok(())),
            renew: Box::new(|_| Ok(())),
        }
    }

    /// Runs `tap` before every append.
    #[must_use]
    pub fn on_append(
        mut self,
        tap: impl Fn(&Lease, &[Record]) -> Result<(), StoreError> + Send + Sync + 'static,
    ) -> Self {
        self.append = Box::new(tap);
        self
    }

    /// Runs `tap` before every renewal.
    #[must_use]
    pub fn on_renew(
        mut self,
        tap: impl Fn(&Lease) -> Result<(), StoreError> + Send + Sync + 'static,
    ) -> Self {
        self.renew = Box::new(tap);
        self
    }
}

#[async_trait]
impl EventLog for Tapped {
    async fn create_task(&self, task: &TaskId, parent: Option<&TaskId>) -> Result<(), StoreError> {
        self.inner.create_task(task, parent).await
    }
    async fn claim(&self, task: &TaskId, worker: &str, ttl_ms: u64) -> Result<Lease, StoreError> {
        self.inner.claim(task, worker, ttl_ms).await
    }
    async fn take_over(
        &self,
        task: &TaskId,
        worker: &str,
        ttl_ms: u64,
        from: &str,
    ) -> Result<Lease, StoreError> {
        self.inner.take_over(task, worker, ttl_ms, from).await
    }
    async fn renew(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StoreError> {
        (self.renew)(lease)?;
        self.inner.renew(lease, ttl_ms).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.release(lease).await
    }
    async fn append(&self, lease: &Lease, batch: &[Record]) -> Result<u64, StoreError> {
        (self.append)(lease, batch)?;
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

/// A log that stops writing after a number of appends, as a worker that died: every later
/// append fails with a backend error `the worker died` and writes nothing.
#[derive(Debug)]
pub struct CrashAfter;

impl CrashAfter {
    /// `inner`, dying after `appends` appends.
    #[expect(
        clippy::new_ret_no_self,
        reason = "a crashing log is a tapped one; the name says what it does"
    )]
    pub fn new(inner: Arc<MemoryEventLog>, appends: usize) -> Tapped {
        let left = Mutex::new(appends);
        Tapped::over(inner).on_append(move |_, _| {
            let mut left = left.lock().unwrap_or_else(PoisonError::into_inner);
            if *left == 0 {
                return Err(StoreError::Backend {
                    message: "the worker died".into(),
                });
            }
            *left -= 1;
            Ok(())
        })
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
    try_session_of(sources, plugins, config).expect("the session builds")
}

/// [`session_of`], giving back the error when the session does not build: for tests of
/// parameters a plugin refuses.
///
/// # Errors
///
/// When a session pack or control tool refuses `config` (or fails otherwise) as the session is
/// built.
///
/// # Panics
///
/// When the plugins do not load, merge or compile (a test helper).
#[expect(
    clippy::expect_used,
    reason = "a test helper: failing loudly is the point"
)]
pub fn try_session_of(
    sources: Vec<LinkedPlugin>,
    plugins: &[&str],
    config: &BTreeMap<String, Value>,
) -> Result<Session, SessionError> {
    let sources: Vec<PluginSource> = sources.into_iter().map(PluginSource::Linked).collect();
    let set =
        load_plugins(&sources, &LoadOptions::new(standard_registry())).expect("the plugins load");
    let merged = set.merged().expect("the plugins merge");
    let mut options = AgentOptions::named("main");
    options.plugins = plugins.iter().map(|p| (*p).to_owned()).collect();
    let compiled = compile_agent(&set, &merged, &options, &ActivationRules::default())
        .expect("the agent compiles");
    build_session(&set, &compiled, config, None)
}
