//! The read-turn benchmark, printed as `name: value unit`: a task of 50 scripted steps, each
//! one `Read` of a different 20-line (~350-byte) file, then a final answer, on the in-memory
//! store. The figure is the whole run's time divided by the 50 steps.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use futures::executor::block_on;
use noeta_core::exec::LocalExecEnv;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::{Session, build_session};
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_core::{
    ActivationRules, AgentOptions, LoadOptions, PluginSource, compile_agent, load_plugins,
    standard_registry,
};
use noeta_testkit::bench;
use serde_json::{Value, json};

const STEPS: usize = 50;

fn fail(message: &str) -> ! {
    eprintln!("bench failed: {message}");
    std::process::exit(1)
}

fn session() -> Session {
    let set = load_plugins(
        &[PluginSource::Linked(noeta_builtin_fs::plugin())],
        &LoadOptions::new(standard_registry()),
    )
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

/// One run of the workload: the seconds from the first step to the final answer.
fn run(session: &Session, root: &Path) -> f64 {
    let mut turns: Vec<Value> = (0..STEPS)
        .map(|i| json!({ "calls": [{ "name": "Read", "input": { "file_path": format!("f{i:02}.txt") } }] }))
        .collect();
    turns.push(json!({ "text": "done" }));
    let provider = ScriptedProvider::from_json(&json!({ "turns": turns }).to_string(), "bench")
        .unwrap_or_else(|e| fail(&e.to_string()));
    let runtime = Runtime::new(
        Arc::new(MemoryEventLog::new(ManualClock::at(0))),
        Arc::new(MemoryContentStore::new()),
        Arc::new(provider),
    )
    .with_exec_env(Arc::new(LocalExecEnv::new(root)))
    .with_lease_ttl(u64::MAX / 4);
    let task = TaskId::new("bench").unwrap_or_else(|e| fail(&e.to_string()));
    block_on(runtime.create(session, &task, "read them all"))
        .unwrap_or_else(|e| fail(&e.to_string()));
    let start = Instant::now();
    let outcome = block_on(runtime.run(session, &task)).unwrap_or_else(|e| fail(&e.to_string()));
    let elapsed = start.elapsed().as_secs_f64();
    if !matches!(outcome, RunOutcome::Ended { .. }) {
        fail(&format!("the task did not end: {outcome:?}"));
    }
    black_box(elapsed)
}

fn main() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&e.to_string()));
    files(dir.path());
    let session = session();
    // One warm-up run (allocators, caches, the page cache), then the samples; more for a
    // profiler: `NOETA_BENCH_RUNS=2000 perf record …`.
    let per_step = bench::sampled(bench::runs(9), || {
        run(&session, dir.path()) * 1e6 / STEPS as f64
    });
    bench::report("read_turn_50_memory_per_step_us", "us", 1, &per_step);
}
