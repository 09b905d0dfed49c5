//! The runtime on the SQLite store, printed as `name: value unit`:
//!
//! - `read_turn_50_sqlite_per_step_us`: the read turn of the `fs` bench (50 scripted steps,
//!   each one `Read` of a different 20-line file, then a final answer) on a fresh SQLite file,
//!   the whole run's time divided by the 50 steps;
//! - `read_turn_50_sqlite_loaded_per_step_us`: the same while two threads keep both cores
//!   busy, and `read_turn_50_sqlite_loaded_ratio`, loaded over alone;
//! - `sqlite_steps_per_s_1_task` and `sqlite_steps_per_s_8_tasks`: one, then eight, read
//!   turns stepping at once on one store (each on its own thread, as the worker pool runs
//!   them), steps per second over all of them; writes of tasks stepping at once share
//!   commits, so the second should be well above the first;
//! - `resume_10k_sqlite_ms`: a task of about 10,000 events on a SQLite file, with a new user
//!   message waiting, is resumed the way a new `noeta` process resumes it: open the store, then
//!   a run, which folds the log (from its latest snapshot) and takes one more model step to
//!   the end of the turn.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use futures::executor::block_on;
use noeta::backends::SqliteStore;
use noeta_core::exec::LocalExecEnv;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::{Session, build_session};
use noeta_core::store::{SystemClock, TaskId};
use noeta_core::{
    ActivationRules, AgentOptions, LoadOptions, PluginSource, compile_agent, load_plugins,
    standard_registry,
};
use noeta_testkit::bench;
use serde_json::{Value, json};

const STEPS: usize = 50;
/// Threads spinning beside the loaded figure: one per core of the reference machine.
const LOAD_THREADS: usize = 2;
/// Steps of the long task: four events each (request, reply, call started, call finished).
const LONG_STEPS: usize = 2_000;

/// Keeps a core busy until `stop`.
fn spin(stop: &AtomicBool) {
    let mut x = 1u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..10_000 {
            x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
    }
}

fn fail(message: &str) -> ! {
    eprintln!("bench failed: {message}");
    std::process::exit(1)
}

/// An agent with `fs` alone, under the kernel's own loop (as the memory read-turn bench).
fn session() -> Session {
    let sources: Vec<PluginSource> = noeta::builtins::linked()
        .into_iter()
        .map(PluginSource::Linked)
        .collect();
    let set = load_plugins(&sources, &LoadOptions::new(standard_registry()))
        .unwrap_or_else(|e| fail(&e.to_string()));
    let merged = set.merged().unwrap_or_else(|e| fail(&e.to_string()));
    let mut options = AgentOptions::named("main");
    options.plugins = vec!["fs".into()];
    let compiled = compile_agent(&set, &merged, &options, &ActivationRules::default())
        .unwrap_or_else(|e| fail(&e.to_string()));
    build_session(&set, &compiled, &BTreeMap::new(), None).unwrap_or_else(|e| fail(&e.to_string()))
}

/// Writes the 50 files: 20 lines of 18 bytes each (360 bytes).
fn files(root: &Path) {
    for i in 0..STEPS {
        let body: String = (0..20)
            .map(|line| format!("file {i:02}, line {line:02}.\n"))
            .collect();
        std::fs::write(root.join(format!("f{i:02}.txt")), body)
            .unwrap_or_else(|e| fail(&e.to_string()));
    }
}

fn reads(steps: usize) -> Vec<Value> {
    (0..steps)
        .map(|i| json!({ "calls": [{ "name": "Read", "input": { "file_path": format!("f{:02}.txt", i % STEPS) } }] }))
        .collect()
}

fn model(turns: &[Value]) -> Arc<ScriptedProvider> {
    Arc::new(
        ScriptedProvider::from_json(&json!({ "turns": turns }).to_string(), "bench")
            .unwrap_or_else(|e| fail(&e.to_string())),
    )
}

fn open(db: &Path) -> Arc<SqliteStore> {
    Arc::new(SqliteStore::open(db, Arc::new(SystemClock)).unwrap_or_else(|e| fail(&e.to_string())))
}

fn runtime(db: &Path, root: &Path, model: Arc<ScriptedProvider>) -> Runtime {
    on(&open(db), root, model)
}

fn on(store: &Arc<SqliteStore>, root: &Path, model: Arc<ScriptedProvider>) -> Runtime {
    Runtime::new(store.clone(), store.clone(), model)
        .with_exec_env(Arc::new(LocalExecEnv::new(root)))
}

fn ended(outcome: &RunOutcome) {
    if !matches!(outcome, RunOutcome::Ended { .. }) {
        fail(&format!("the task did not end: {outcome:?}"));
    }
}

/// One read turn on a fresh database: the seconds from the first step to the final answer.
fn read_turn(session: &Session, root: &Path, db: &Path) -> f64 {
    read_turn_on(session, root, &open(db), "bench")
}

fn read_turn_on(session: &Session, root: &Path, store: &Arc<SqliteStore>, name: &str) -> f64 {
    let mut turns = reads(STEPS);
    turns.push(json!({ "text": "done" }));
    let runtime = on(store, root, model(&turns));
    let task = TaskId::new(name).unwrap_or_else(|e| fail(&e.to_string()));
    block_on(runtime.create(session, &task, "read them all"))
        .unwrap_or_else(|e| fail(&e.to_string()));
    let start = Instant::now();
    let outcome = block_on(runtime.run(session, &task)).unwrap_or_else(|e| fail(&e.to_string()));
    let elapsed = start.elapsed().as_secs_f64();
    ended(&outcome);
    black_box(elapsed)
}

fn main() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&e.to_string()));
    files(dir.path());
    let session = session();

    let mut n = 0;
    let per_step = bench::sampled(bench::runs(7), || {
        n += 1;
        let db = dir.path().join(format!("turn-{n}.db"));
        read_turn(&session, dir.path(), &db) * 1e6 / STEPS as f64
    });
    let alone = bench::report("read_turn_50_sqlite_per_step_us", "us", 1, &per_step);

    // The same with both cores kept busy by spinning threads beside it.
    let loaded = {
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..LOAD_THREADS {
                scope.spawn(|| spin(&stop));
            }
            let samples = bench::sampled(bench::runs(7), || {
                n += 1;
                let db = dir.path().join(format!("turn-{n}.db"));
                read_turn(&session, dir.path(), &db) * 1e6 / STEPS as f64
            });
            stop.store(true, Ordering::Relaxed);
            samples
        })
    };
    let loaded = bench::report("read_turn_50_sqlite_loaded_per_step_us", "us", 1, &loaded);
    println!("read_turn_50_sqlite_loaded_ratio: {:.2} x", loaded / alone);

    // Tasks stepping at once on one store: steps per second over all of them.
    let mut round = 0;
    for tasks in [1, 8] {
        let rates = bench::sampled(bench::runs(5), || {
            round += 1;
            let store = open(&dir.path().join(format!("many-{round}.db")));
            let start = Instant::now();
            std::thread::scope(|scope| {
                let root = dir.path();
                for t in 0..tasks {
                    let (session, store) = (&session, &store);
                    scope.spawn(move || read_turn_on(session, root, store, &format!("task-{t}")));
                }
            });
            (tasks * STEPS) as f64 / start.elapsed().as_secs_f64()
        });
        let name = if tasks == 1 {
            "sqlite_steps_per_s_1_task".to_owned()
        } else {
            format!("sqlite_steps_per_s_{tasks}_tasks")
        };
        bench::report(&name, "steps/s", 0, &rates);
    }

    // The long task, written once.
    let db = dir.path().join("long.db");
    let mut turns = reads(LONG_STEPS);
    turns.push(json!({ "text": "read" }));
    turns.push(json!({ "text": "one more" }));
    let task = TaskId::new("long").unwrap_or_else(|e| fail(&e.to_string()));
    {
        let runtime = runtime(&db, dir.path(), model(&turns));
        block_on(runtime.create(&session, &task, "read them all"))
            .unwrap_or_else(|e| fail(&e.to_string()));
        ended(&block_on(runtime.run(&session, &task)).unwrap_or_else(|e| fail(&e.to_string())));
    }
    let events = {
        let store =
            SqliteStore::open(&db, Arc::new(SystemClock)).unwrap_or_else(|e| fail(&e.to_string()));
        block_on(noeta_core::store::EventLog::info(&store, &task))
            .unwrap_or_else(|e| fail(&e.to_string()))
            .head
    };
    println!("resume_events: {events} events");
    // Each sample resumes a copy of the database as it was, so every sample does the same work;
    // the model (a script of 2,000 turns here) is made outside the timing, as a real one is cheap.
    let scripted = model(&turns);
    let mut i = 0;
    let samples = bench::sampled(bench::runs(5), || {
        i += 1;
        let copy = dir.path().join(format!("resume-{i}.db"));
        std::fs::copy(&db, &copy).unwrap_or_else(|e| fail(&e.to_string()));
        for suffix in ["-wal", "-shm"] {
            let from = dir.path().join(format!("long.db{suffix}"));
            if from.exists() {
                std::fs::copy(&from, dir.path().join(format!("resume-{i}.db{suffix}")))
                    .unwrap_or_else(|e| fail(&e.to_string()));
            }
        }
        block_on(runtime(&copy, dir.path(), scripted.clone()).send(&session, &task, "one more"))
            .unwrap_or_else(|e| fail(&e.to_string()));
        let start = Instant::now();
        let runtime = runtime(&copy, dir.path(), scripted.clone());
        let outcome =
            block_on(runtime.run(&session, &task)).unwrap_or_else(|e| fail(&e.to_string()));
        let ms = start.elapsed().as_secs_f64() * 1e3;
        ended(&outcome);
        ms
    });
    bench::report("resume_10k_sqlite_ms", "ms", 2, &samples);
}
