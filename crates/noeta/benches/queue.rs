//! The task queue on PostgreSQL, printed as `name: value unit`, against a durable local server
//! the benchmark starts:
//!
//! - `queue_claim_us`: one `take` of a queue of 1,000 runnable tasks — the oldest entry whose
//!   task no live lease holds, locked with `FOR UPDATE SKIP LOCKED`, and the task's lease set,
//!   in one transaction;
//! - `worker_throughput_1w_tasks_per_s`, `worker_throughput_2w_tasks_per_s` and
//!   `worker_throughput_tasks_per_s` (4 workers): 1,000 trivial scripted tasks (one model step,
//!   a text answer) drained from the queue by that many workers, each with connections of its
//!   own as a worker process has, each task taken, run as a pool worker runs it
//!   (`Runtime::run_queued`: claim, fold, step, queue its wakes, finish, release), start to
//!   empty queue.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use noeta::backends::PgStore;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::{Runtime, Sessions};
use noeta_core::session::{Session, build_session};
use noeta_core::store::{EventLog, QueueDepth, TaskId, TaskQueue};
use noeta_core::{
    ActivationRules, AgentOptions, LoadOptions, PluginSource, compile_agent, load_plugins,
    standard_registry,
};
use noeta_testkit::bench;
use noeta_testkit::pg::PgServer;
use serde_json::json;

const TASKS: usize = 1_000;

fn fail(message: &str) -> ! {
    eprintln!("bench failed: {message}");
    std::process::exit(1)
}

fn ok<T, E: std::fmt::Display>(result: Result<T, E>) -> T {
    result.unwrap_or_else(|e| fail(&e.to_string()))
}

/// `main` with `fs` alone, as the other runtime benches.
fn session() -> Arc<Session> {
    let sources: Vec<PluginSource> = noeta::builtins::linked()
        .into_iter()
        .map(PluginSource::Linked)
        .collect();
    let set = ok(load_plugins(
        &sources,
        &LoadOptions::new(standard_registry()),
    ));
    let merged = ok(set.merged());
    let mut options = AgentOptions::named("main");
    options.plugins = vec!["fs".into()];
    let compiled = ok(compile_agent(
        &set,
        &merged,
        &options,
        &ActivationRules::default(),
    ));
    Arc::new(ok(build_session(&set, &compiled, &BTreeMap::new(), None)))
}

struct One(Arc<Session>);

impl Sessions for One {
    fn session(&self, _agent: &str) -> Option<Arc<Session>> {
        Some(Arc::clone(&self.0))
    }
}

fn model() -> Arc<ScriptedProvider> {
    Arc::new(ok(ScriptedProvider::from_json(
        &json!({ "turns": [{ "text": "done" }] }).to_string(),
        "bench",
    )))
}

fn runtime(store: &Arc<PgStore>, worker: &str) -> Runtime {
    Runtime::new(store.clone(), store.clone(), model())
        .with_worker(worker)
        .as_pool_worker()
}

/// A fresh database holding `TASKS` tasks, each created with its goal and queued.
fn queued_database(pg: &PgServer, session: &Session) -> String {
    let url = ok(pg.database());
    let store = Arc::new(ok(PgStore::connect(&url, None)));
    let maker = runtime(&store, "maker");
    for n in 0..TASKS {
        let task = ok(TaskId::new(format!("task-{n:04}")));
        ok(block_on(maker.create(session, &task, "say done")));
        ok(block_on(store.enqueue(&task, 0)));
    }
    url
}

fn claim_us(pg: &PgServer, session: &Session) -> f64 {
    let url = queued_database(pg, session);
    let store = ok(PgStore::connect(&url, None));
    let mut took = Duration::ZERO;
    let mut taken = 0;
    loop {
        let start = Instant::now();
        let Some(queued) = ok(block_on(store.take("bench", 600_000))) else {
            break;
        };
        took += start.elapsed();
        taken += 1;
        ok(block_on(store.finish(&queued)));
    }
    if taken != TASKS {
        fail(&format!("{taken} of {TASKS} tasks were taken"));
    }
    took.as_secs_f64() * 1e6 / TASKS as f64
}

fn throughput(pg: &PgServer, session: &Arc<Session>, workers: usize) -> f64 {
    let url = queued_database(pg, session);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for w in 0..workers {
            let url = url.clone();
            let sessions = One(Arc::clone(session));
            scope.spawn(move || {
                let store = Arc::new(ok(PgStore::connect(&url, None)));
                let name = format!("worker-{w}");
                let runtime = runtime(&store, &name);
                loop {
                    match ok(block_on(store.take(&name, 60_000))) {
                        Some(queued) => {
                            ok(block_on(runtime.run_queued(
                                &sessions,
                                store.as_ref(),
                                &queued,
                            )));
                        }
                        None if ok(block_on(store.depth())) == QueueDepth::default() => return,
                        None => std::thread::sleep(Duration::from_millis(1)),
                    }
                }
            });
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    let store = ok(PgStore::connect(&url, None));
    let ended = ok(block_on(store.tasks()))
        .iter()
        .filter(|t| t.head >= 5)
        .count();
    if ended != TASKS {
        fail(&format!("{ended} of {TASKS} tasks ran"));
    }
    TASKS as f64 / elapsed
}

fn main() {
    let pg = PgServer::start(true).unwrap_or_else(|e| fail(&e));
    let session = session();
    let runs = bench::runs(5);
    let claims = bench::sampled(runs, || claim_us(&pg, &session));
    bench::report("queue_claim_us", "us", 1, &claims);
    for (workers, name) in [
        (1, "worker_throughput_1w_tasks_per_s"),
        (2, "worker_throughput_2w_tasks_per_s"),
        (4, "worker_throughput_tasks_per_s"),
    ] {
        let rates = bench::sampled(runs, || throughput(&pg, &session, workers));
        bench::report(name, "tasks/s", 0, &rates);
    }
}
