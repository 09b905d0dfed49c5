//! The read turn as `noeta run` runs it, printed as `name: value unit`:
//! `read_turn_50_cli_agent_per_step_us` is the 50-step turn of the `fs` bench (each step one
//! `Read` of a different 20-line file, then a final answer) run by agent `main` of a host
//! assembled as the CLI assembles it — every always-on built-in loaded, their hooks on every
//! step — on the in-memory store; the whole run's time divided by the 50 steps. The `fs`
//! bench's `read_turn_50_memory_per_step_us` loads `fs` alone: this is the like-for-like figure.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use futures::executor::block_on;
use noeta::{Host, HostConfig, HostPaths};
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::RunOutcome;
use noeta_core::store::TaskId;
use noeta_testkit::bench;
use serde_json::{Value, json};

const STEPS: usize = 50;

fn fail(message: &str) -> ! {
    eprintln!("bench failed: {message}");
    std::process::exit(1)
}

fn ok<T, E: std::fmt::Display>(result: Result<T, E>) -> T {
    result.unwrap_or_else(|e| fail(&e.to_string()))
}

/// Writes the 50 files: 20 lines of 18 bytes each (360 bytes).
fn files(root: &Path) {
    for i in 0..STEPS {
        let body: String = (0..20)
            .map(|line| format!("file {i:02}, line {line:02}.\n"))
            .collect();
        ok(std::fs::write(root.join(format!("f{i:02}.txt")), body));
    }
}

/// One turn on a fresh in-memory store: the seconds from the first step to the final answer.
fn run(host: &Host, n: usize) -> f64 {
    let mut turns: Vec<Value> = (0..STEPS)
        .map(|i| json!({ "calls": [{ "name": "Read", "input": { "file_path": format!("f{i:02}.txt") } }] }))
        .collect();
    turns.push(json!({ "text": "done" }));
    let model = Arc::new(ok(ScriptedProvider::from_json(
        &json!({ "turns": turns }).to_string(),
        "bench",
    )));
    let stores = ok(host.open_store(Some("memory:")));
    let runtime = host.runtime(&stores, model).with_lease_ttl(u64::MAX / 4);
    let session = ok(host.session("main"));
    let task = ok(TaskId::new(format!("bench-{n}")));
    ok(block_on(runtime.create(&session, &task, "read them all")));
    let start = Instant::now();
    let outcome = ok(block_on(runtime.run(&session, &task)));
    let elapsed = start.elapsed().as_secs_f64();
    if !matches!(outcome, RunOutcome::Ended { .. }) {
        fail(&format!("the task did not end: {outcome:?}"));
    }
    black_box(elapsed)
}

fn main() {
    let dir = ok(tempfile::tempdir());
    files(dir.path());
    let paths = HostPaths {
        home: Some(dir.path().to_owned()),
        workspace: dir.path().to_owned(),
    };
    let host = ok(Host::open(HostConfig::new(paths)));
    // One warm-up run (allocators, caches, the page cache), then the samples; more for a
    // profiler: `NOETA_BENCH_RUNS=300 perf record …`.
    let mut n = 0;
    let per_step = bench::sampled(bench::runs(9), || {
        let elapsed = run(&host, n);
        n += 1;
        elapsed * 1e6 / STEPS as f64
    });
    bench::report("read_turn_50_cli_agent_per_step_us", "us", 1, &per_step);
}
