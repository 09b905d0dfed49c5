//! `noeta worker`: runs the tasks of a store's queue, any number of processes on any number of
//! hosts at once.
//!
//! A worker takes a runnable task with its lease (`TaskQueue::take`), runs it to its stop as a
//! pool worker (`Runtime::run_queued`: a task pinned with a plugin this worker lacks is
//! refused and left to lapse for another), queues what the run made runnable (children, the
//! parent, the task itself), and finishes the entry. Each task runs in the workspace, with the
//! provider, model, permission mode and sandbox recorded when it was submitted
//! (`noeta run --detach`), the whole tree keeping its root's; a workspace that does not exist
//! on this host refuses the claim, which lapses for a worker of a host that has it.
//!
//! SIGTERM (or Ctrl-C) stops taking tasks; the runs in flight stop after their step and
//! release their leases, and their tasks stay queued for the next worker.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use noeta::backends::Stores;
use noeta::{Host, HostPaths};
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::store::{Queued, TaskId};
use serde_json::Value;
use tokio::sync::Mutex;

use crate::agent::{self, AgentArgs};
use crate::live::LiveText;
use crate::stdio::eoutln;

/// `noeta worker`'s choices.
#[derive(Debug, Clone)]
pub(crate) struct WorkerArgs {
    /// `--store`: the store whose queue is worked (default: the workspace's).
    pub(crate) store: Option<String>,
    /// `-n`: tasks run at once.
    pub(crate) slots: usize,
    /// `--lease-secs`: how long a task stays with a worker that stopped answering.
    pub(crate) lease_secs: u64,
    /// `--plugin-dir`.
    pub(crate) plugin_dirs: Vec<PathBuf>,
}

/// How often a worker says it is alive.
const BEAT: Duration = Duration::from_secs(5);

/// How long an idle slot waits for the queue before it looks again.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// What a submitted task recorded about how to run it (its root's `task_started.host`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct Recorded {
    workspace: Option<PathBuf>,
    provider: Option<String>,
    model: Option<String>,
    permission_mode: Option<String>,
    sandbox: Option<String>,
}

impl Recorded {
    fn from_facts(facts: &Value) -> Self {
        let text = |key: &str| facts[key].as_str().map(str::to_owned);
        Self {
            workspace: text("workspace").map(PathBuf::from),
            provider: text("provider"),
            model: text("model"),
            permission_mode: text("permission_mode"),
            sandbox: text("sandbox"),
        }
    }
}

/// A host and runtime for one workspace and model.
struct Runner {
    host: Arc<Host>,
    runtime: Runtime,
}

/// One worker: its slots share its runners.
pub(crate) struct Worker {
    name: String,
    home: Option<PathBuf>,
    own: HostPaths,
    args: WorkerArgs,
    stores: Stores,
    stop: Arc<AtomicBool>,
    /// Where the slots' reply text streams to (`noeta serve`'s followers).
    live: Option<LiveText>,
    runners: Mutex<HashMap<Recorded, Arc<Runner>>>,
}

/// `noeta worker [--store URL] [-n N]`.
pub(crate) async fn work(paths: &HostPaths, args: WorkerArgs) -> Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    let worker = open(paths, args, None, Arc::clone(&stop), None)?;
    tokio::spawn(stop_on_signal(stop));
    worker.run().await?;
    Ok(ExitCode::SUCCESS)
}

/// A worker over `stores` (or the store `args` names), stopping once `stop` is set; its
/// identity, plugins and pins are logged.
pub(crate) fn open(
    paths: &HostPaths,
    args: WorkerArgs,
    stores: Option<Stores>,
    stop: Arc<AtomicBool>,
    live: Option<LiveText>,
) -> Result<Arc<Worker>> {
    if args.slots == 0 {
        bail!("-n must be at least 1 (the number of tasks this worker runs at once)");
    }
    if args.lease_secs == 0 {
        bail!("--lease-secs must be at least 1");
    }
    let name = noeta::process_worker("worker");
    let base = AgentArgs {
        store: args.store.clone(),
        plugin_dirs: args.plugin_dirs.clone(),
        ..AgentArgs::default()
    };
    let host = Host::open(agent::config(paths, &base)?)?;
    let stores = match stores {
        Some(stores) => stores,
        None => host.open_store(args.store.as_deref())?,
    };
    eoutln!(
        "worker {name}: store {}, {} task(s) at once, leases of {} s",
        stores.url,
        args.slots,
        args.lease_secs
    );
    for plugin in host.plugins().plugins() {
        eoutln!(
            "  plugin {} {} ({:?})",
            plugin.name(),
            plugin.manifest.version.as_deref().unwrap_or("(no version)"),
            plugin.source
        );
    }
    for problem in host.plugins().problems() {
        eoutln!("  plugin skipped: {problem}");
    }
    if let Ok(session) = host.session("main") {
        for pin in &session.pins {
            eoutln!(
                "  pin {} {} {} ({})",
                pin.name,
                pin.version,
                pin.source,
                pin.params
            );
        }
    }
    Ok(Arc::new(Worker {
        name,
        home: paths.home.clone(),
        own: paths.clone(),
        args,
        stores,
        stop,
        live,
        runners: Mutex::new(HashMap::new()),
    }))
}

impl Worker {
    /// Runs the slots until the worker stops, then signs off.
    pub(crate) async fn run(self: Arc<Self>) -> Result<()> {
        let beat = tokio::spawn(Arc::clone(&self).beat());
        let slots: Vec<_> = (0..self.args.slots)
            .map(|_| tokio::spawn(Arc::clone(&self).slot()))
            .collect();
        for slot in slots {
            slot.await.context("a worker slot ended abnormally")?;
        }
        beat.abort();
        if let Err(err) = self.stores.queue.gone(&self.name).await {
            eoutln!("worker {}: could not sign off: {err}", self.name);
        }
        eoutln!("worker {} stopped", self.name);
        Ok(())
    }
}

/// Sets `stop` on SIGTERM or Ctrl-C.
pub(crate) async fn stop_on_signal(stop: Arc<AtomicBool>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            stop.store(true, Ordering::SeqCst);
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    eoutln!("stopping: the runs in flight finish their step and let their tasks go");
    stop.store(true, Ordering::SeqCst);
}

impl Worker {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn about(&self) -> String {
        format!(
            "{} slot(s), noeta {}, workspace {}",
            self.args.slots,
            env!("CARGO_PKG_VERSION"),
            self.own.workspace.display()
        )
    }

    /// Says the worker is alive every few seconds.
    async fn beat(self: Arc<Self>) {
        loop {
            if let Err(err) = self.stores.queue.beat(&self.name, &self.about()).await {
                tracing::warn!(worker = %self.name, "could not say the worker is alive: {err}");
            }
            tokio::time::sleep(BEAT).await;
        }
    }

    /// One slot: takes a task, runs it, and again, until the worker stops.
    async fn slot(self: Arc<Self>) {
        let ttl = self.args.lease_secs.saturating_mul(1_000);
        while !self.stopping() {
            match self.stores.queue.take(&self.name, ttl).await {
                Ok(Some(queued)) => self.run_one(queued).await,
                Ok(None) => self.idle(IDLE_WAIT).await,
                Err(err) => {
                    eoutln!("worker {}: taking a task failed: {err}", self.name);
                    self.idle(IDLE_WAIT).await;
                }
            }
        }
    }

    /// Waits for the queue, or for the worker to stop.
    async fn idle(&self, max: Duration) {
        let stop = async {
            while !self.stopping() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            () = self.stores.queue.wait(max) => {}
            () = stop => {}
        }
    }

    /// Runs one task taken from the queue.
    async fn run_one(&self, queued: Queued) {
        let task = queued.lease.task.clone();
        let started = Instant::now();
        let runner = match self.runner_for(&task).await {
            Ok(runner) => runner,
            Err(err) => {
                // The lease is left to lapse, so a worker that can run it takes it.
                eoutln!("worker {}: task {task} not run here: {err:#}", self.name);
                return;
            }
        };
        let ran = runner
            .runtime
            .run_queued(runner.host.as_ref(), self.stores.queue.as_ref(), &queued)
            .await;
        let took = started.elapsed();
        let ran = match ran {
            Ok(ran) => ran,
            Err(err) => {
                // The task stays queued; its lease lapses for the next worker.
                eoutln!("worker {}: task {task}: {err}", self.name);
                return;
            }
        };
        tracing::info!(
            target: "noeta::metrics",
            task = %task,
            worker = %self.name,
            queue_wait_ms = queued.waited_ms,
            run_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            "task run"
        );
        if agent::leaves_task_done(&ran.outcome) {
            runner.host.command_env().task_done(task.as_str());
        }
        eoutln!(
            "task {task}: {} ({} ms, waited {} ms)",
            outcome_text(&ran.outcome),
            took.as_millis(),
            queued.waited_ms
        );
    }

    /// The runner for `task`: its tree's recorded workspace and model.
    async fn runner_for(&self, task: &TaskId) -> Result<Arc<Runner>> {
        let recorded = self.recorded(task).await?;
        let mut runners = self.runners.lock().await;
        if let Some(runner) = runners.get(&recorded) {
            return Ok(Arc::clone(runner));
        }
        let workspace = recorded
            .workspace
            .clone()
            .unwrap_or_else(|| self.own.workspace.clone());
        if !workspace.is_dir() {
            bail!(
                "its workspace `{}` does not exist on this host",
                workspace.display()
            );
        }
        let paths = HostPaths {
            home: self.home.clone(),
            workspace,
        };
        let args = AgentArgs {
            provider: recorded.provider.clone(),
            model: recorded.model.clone(),
            permission_mode: recorded.permission_mode.clone(),
            sandbox: recorded.sandbox.clone(),
            store: self.args.store.clone(),
            plugin_dirs: self.args.plugin_dirs.clone(),
            ..AgentArgs::default()
        };
        let config = noeta::HostConfig {
            worker: self.name.clone(),
            holder_gone: Some(Arc::new(noeta::process_gone)),
            ..agent::config(&paths, &args)?
        };
        let host = Host::open(config)?;
        let model = host.open_model(args.provider.as_deref(), args.model.as_deref())?;
        let mut runtime = host.runtime(&self.stores, Arc::clone(&model));
        for (agent, provider) in host.agent_models(&model).models {
            runtime = runtime.with_agent_model(agent, provider);
        }
        let mut runtime = runtime
            .with_lease_ttl(self.args.lease_secs.saturating_mul(1_000))
            .as_pool_worker()
            .with_stop(Arc::clone(&self.stop));
        if let Some(live) = &self.live {
            runtime = runtime.with_text_sink(live.sink());
        }
        let runner = Arc::new(Runner {
            host: Arc::new(host),
            runtime,
        });
        runners.insert(recorded, Arc::clone(&runner));
        Ok(runner)
    }

    /// What the root of `task`'s tree recorded about how to run it.
    async fn recorded(&self, task: &TaskId) -> Result<Recorded> {
        let log = &self.stores.log;
        let mut root = task.clone();
        while let Some(parent) = log.info(&root).await?.parent {
            root = parent;
        }
        let first = log.read(&root, 0).await?.into_iter().next();
        let facts = first
            .filter(|e| e.record.extension == "core" && e.record.kind == "task_started")
            .map(|e| e.record.data["host"].clone())
            .unwrap_or_default();
        Ok(Recorded::from_facts(&facts))
    }
}

/// A run's outcome in a few words.
fn outcome_text(outcome: &RunOutcome) -> String {
    match outcome {
        RunOutcome::Ended { .. } => "turn ended".to_owned(),
        RunOutcome::Parked { question, .. } => format!("waiting: {question}"),
        RunOutcome::TurnFailed { reason } => format!("turn failed: {reason}"),
        RunOutcome::TaskFailed { reason } => format!("failed: {reason}"),
        RunOutcome::Idle => "nothing to do".to_owned(),
        RunOutcome::Stopped => "stopped; queued for the next worker".to_owned(),
        _ => "stopped".to_owned(),
    }
}
