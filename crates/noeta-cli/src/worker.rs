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

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use noeta::backends::Stores;
use noeta::{HostPaths, Tasks};
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::store::Queued;

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
    /// Whether its start lists the plugins and pins it runs with (an operator's log); else one
    /// line says how many.
    pub(crate) plugins_shown: bool,
}

/// How often a worker says it is alive.
const BEAT: Duration = Duration::from_secs(5);

/// How long an idle slot waits for the queue before it looks again.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// One worker: its slots share the host operations' runners (one per recorded run).
pub(crate) struct Worker {
    name: String,
    own: HostPaths,
    args: WorkerArgs,
    tasks: Arc<Tasks>,
    stop: Arc<AtomicBool>,
}

/// `noeta worker [--store URL] [-n N]`.
pub(crate) async fn work(paths: &HostPaths, args: WorkerArgs) -> Result<ExitCode> {
    check(&args)?;
    let stop = Arc::new(AtomicBool::new(false));
    let name = noeta::process_worker("worker");
    let stores = noeta::open_store(paths, args.store.as_deref())?;
    let tasks = Arc::new(tasks(paths, &args, stores, &name, &stop, None));
    let worker = open(paths, args, tasks, name, Arc::clone(&stop))?;
    tokio::spawn(stop_on_signal(stop));
    worker.run().await?;
    Ok(ExitCode::SUCCESS)
}

/// Refuses choices a worker cannot work with.
pub(crate) fn check(args: &WorkerArgs) -> Result<()> {
    if args.slots == 0 {
        bail!("-n must be at least 1 (the number of tasks this worker runs at once)");
    }
    if args.lease_secs == 0 {
        bail!("--lease-secs must be at least 1");
    }
    Ok(())
}

/// The host operations of a worker named `name` over `stores`: each host configured as
/// `noeta run` configures one (with `args`' plugin directories), each runtime holding leases
/// of `--lease-secs` as a pool worker that stops once `stop` is set, its reply text streamed
/// to `live` (`noeta serve`'s followers).
pub(crate) fn tasks(
    paths: &HostPaths,
    args: &WorkerArgs,
    stores: Stores,
    name: &str,
    stop: &Arc<AtomicBool>,
    live: Option<&LiveText>,
) -> Tasks {
    let base = AgentArgs {
        store: args.store.clone(),
        plugin_dirs: args.plugin_dirs.clone(),
        ..AgentArgs::default()
    };
    let lease_ttl = args.lease_secs.saturating_mul(1_000);
    let stop = Arc::clone(stop);
    let sink = live.map(LiveText::sink);
    Tasks::new(
        paths.clone(),
        stores,
        agent::configure(base, name.to_owned()),
    )
    .with_runtime_shape(Arc::new(move |runtime: Runtime| {
        let runtime = runtime
            .with_lease_ttl(lease_ttl)
            .as_pool_worker()
            .with_stop(Arc::clone(&stop));
        match &sink {
            Some(sink) => runtime.with_text_sink(Arc::clone(sink)),
            None => runtime,
        }
    }))
}

/// A worker named `name` running the tasks of `tasks`' store, stopping once `stop` is set; its
/// identity, plugins and pins are logged.
pub(crate) fn open(
    paths: &HostPaths,
    args: WorkerArgs,
    tasks: Arc<Tasks>,
    name: String,
    stop: Arc<AtomicBool>,
) -> Result<Arc<Worker>> {
    check(&args)?;
    eoutln!(
        "worker {name}: store {}, {} task(s) at once, leases of {} s",
        tasks.stores().url,
        args.slots,
        args.lease_secs
    );
    // The workspace's own host, opened now to say what it runs (and kept for its tasks).
    let host = tasks.host(&noeta::TaskRun::default())?;
    if args.plugins_shown {
        list_plugins(&host);
    } else {
        eoutln!(
            "  {} plugin(s), {} skipped (`noeta plugins list` shows them)",
            host.plugins().plugins().count(),
            host.plugins().problems().len()
        );
    }
    Ok(Arc::new(Worker {
        name,
        own: paths.clone(),
        args,
        tasks,
        stop,
    }))
}

/// The plugins and pins `host` runs with, one per line.
fn list_plugins(host: &noeta::Host) {
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
        if let Err(err) = self.tasks.stores().queue.gone(&self.name).await {
            eoutln!("worker {}: could not sign off: {err}", self.name);
        }
        eoutln!("worker {} stopped", self.name);
        Ok(())
    }
}

/// Waits for SIGTERM or Ctrl-C (SIGINT), whichever comes first: both stop the process the
/// same way.
pub(crate) async fn terminate_or_interrupt() {
    let keyed = keyed_interrupts().notified();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = keyed => {}
            }
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
            () = keyed => {}
        }
    }
    #[cfg(not(unix))]
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = keyed => {}
    }
}

/// Ctrl-C typed at the line editor (which takes it as a key, not a signal).
fn keyed_interrupts() -> &'static tokio::sync::Notify {
    static KEYED: std::sync::OnceLock<tokio::sync::Notify> = std::sync::OnceLock::new();
    KEYED.get_or_init(tokio::sync::Notify::new)
}

/// Interrupts whatever waits for Ctrl-C now, as the signal would: the line editor's Ctrl-C.
pub(crate) fn interrupt() {
    keyed_interrupts().notify_waiters();
}

/// Sets `stop` on SIGTERM or Ctrl-C.
pub(crate) async fn stop_on_signal(stop: Arc<AtomicBool>) {
    terminate_or_interrupt().await;
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
            if let Err(err) = self
                .tasks
                .stores()
                .queue
                .beat(&self.name, &self.about())
                .await
            {
                tracing::warn!(worker = %self.name, "could not say the worker is alive: {err}");
            }
            tokio::time::sleep(BEAT).await;
        }
    }

    /// One slot: takes a task, runs it, and again, until the worker stops.
    async fn slot(self: Arc<Self>) {
        let ttl = self.args.lease_secs.saturating_mul(1_000);
        while !self.stopping() {
            match self.tasks.stores().queue.take(&self.name, ttl).await {
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
            () = self.tasks.stores().queue.wait(max) => {}
            () = stop => {}
        }
    }

    /// Runs one task taken from the queue.
    async fn run_one(&self, queued: Queued) {
        let task = queued.lease.task.clone();
        let started = Instant::now();
        let runner = match self.tasks.runner(&task).await {
            Ok(runner) => runner,
            Err(err) => {
                // The lease is left to lapse, so a worker that can run it takes it.
                eoutln!("worker {}: task {task} not run here: {err:#}", self.name);
                return;
            }
        };
        let ran = runner
            .runtime
            .run_queued(
                runner.host.as_ref(),
                self.tasks.stores().queue.as_ref(),
                &queued,
            )
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
