//! Runner and fold benchmarks with the in-memory store and the scripted provider, printed as `name: value unit`.
//!
//! Each step is one model call answered with one cheap read-only tool call, so
//! the figures are the runner's own overhead. Per-step times come from the
//! moments each reply is recorded.

use std::hint::black_box;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::fold::Folder;
use noeta_core::provider::ScriptedProvider;
use noeta_core::records::hydrate_all;
use noeta_core::runner::Runtime;
use noeta_core::session::{Session, bare_session};
use noeta_core::store::{Event, EventLog, ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use noeta_testkit::bench;
use serde_json::{Value, json};

struct Look;

#[async_trait]
impl Tool for Look {
    fn name(&self) -> &str {
        "Look"
    }
    fn description(&self) -> &str {
        "Looks."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    }
    fn flags(&self) -> ToolFlags {
        ToolFlags::read_only()
    }
    async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

/// Offers `Look` and stamps the moment each reply is recorded.
struct Bench {
    stamps: Mutex<Vec<Instant>>,
}

#[async_trait]
impl Extension for Bench {
    fn name(&self) -> &str {
        "bench"
    }
    fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        Ok(vec![Arc::new(Look)])
    }
    fn on_event(&self, _view: &View<'_>, event: &Event) -> HookResult<()> {
        if event.record.kind == "assistant_reply" {
            self.stamps
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Instant::now());
        }
        Ok(())
    }
}

struct Workload {
    log: Arc<MemoryEventLog>,
    content: Arc<MemoryContentStore>,
    session: Session,
    task: TaskId,
    stamps: Vec<Instant>,
    elapsed: Duration,
}

fn run_turn(steps: usize) -> Workload {
    let mut turns: Vec<Value> = (0..steps)
        .map(|_| json!({ "calls": [{ "name": "Look", "input": {} }] }))
        .collect();
    turns.push(json!({ "text": "done" }));
    let script = json!({ "turns": turns }).to_string();
    let provider =
        ScriptedProvider::from_json(&script, "bench").unwrap_or_else(|e| fail(&e.to_string()));
    let clock = ManualClock::at(0);
    let log = Arc::new(MemoryEventLog::new(clock));
    let content = Arc::new(MemoryContentStore::new());
    let bench = Arc::new(Bench {
        stamps: Mutex::new(Vec::new()),
    });
    let mut session = bare_session("bench", "You benchmark.");
    session.extensions.push(bench.clone());
    session.folder = Folder::new(&session.extensions, "bench");
    let runtime =
        Runtime::new(log.clone(), content.clone(), Arc::new(provider)).with_lease_ttl(u64::MAX / 4);
    let task = TaskId::new("bench").unwrap_or_else(|e| fail(&e.to_string()));
    block_on(runtime.create(&session, &task, "go")).unwrap_or_else(|e| fail(&e.to_string()));
    let start = Instant::now();
    let outcome = block_on(runtime.run(&session, &task)).unwrap_or_else(|e| fail(&e.to_string()));
    let elapsed = start.elapsed();
    black_box(outcome);
    let stamps = bench
        .stamps
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    Workload {
        log,
        content,
        session,
        task,
        stamps,
        elapsed,
    }
}

fn fail(message: &str) -> ! {
    eprintln!("bench failed: {message}");
    std::process::exit(1)
}

fn mean_us(durations: &[Duration]) -> f64 {
    durations.iter().map(Duration::as_secs_f64).sum::<f64>() / durations.len().max(1) as f64 * 1e6
}

fn step_durations(stamps: &[Instant]) -> Vec<Duration> {
    stamps.windows(2).map(|w| w[1] - w[0]).collect()
}

fn main() {
    let runs = bench::runs(5);
    let per_step = bench::sampled(runs, || run_turn(50).elapsed.as_secs_f64() * 1e6 / 51.0);
    bench::report("step_overhead_50_us", "us", 1, &per_step);

    // Medians over 1,000-step turns (at least nine: ten steps are a short window on a noisy
    // machine): the point is whether cost grows with history, so one noisy run must not
    // decide it.
    let mut first10 = Vec::new();
    let mut last10 = Vec::new();
    let mut first_half = Vec::new();
    let mut second_half = Vec::new();
    for _ in 0..runs.max(9) {
        let long = run_turn(1000);
        let steps = step_durations(&long.stamps);
        first10.push(mean_us(&steps[..10]));
        last10.push(mean_us(&steps[steps.len() - 10..]));
        let (head, tail) = steps.split_at(steps.len() / 2);
        first_half.push(mean_us(head));
        second_half.push(mean_us(tail));
    }
    bench::report("step_overhead_1000_first10_us", "us", 1, &first10);
    bench::report("step_overhead_1000_last10_us", "us", 1, &last10);
    bench::report("step_overhead_1000_first_half_us", "us", 1, &first_half);
    bench::report("step_overhead_1000_second_half_us", "us", 1, &second_half);

    let big = run_turn(2500);
    let raw = block_on(big.log.read(&big.task, 0)).unwrap_or_else(|e| fail(&e.to_string()));
    println!("fold_events: {} events", raw.len());
    let fold = bench::sampled(runs.max(7), || {
        let start = Instant::now();
        let mut events = raw.clone();
        block_on(hydrate_all(&mut events, big.content.as_ref()))
            .unwrap_or_else(|e| fail(&e.to_string()));
        let state = big
            .session
            .folder
            .fold(&events)
            .unwrap_or_else(|e| fail(&e.to_string()));
        let ms = start.elapsed().as_secs_f64() * 1e3;
        black_box(state);
        ms
    });
    bench::report("fold_10k_events_ms", "ms", 2, &fold);

    // The parts: reading (cloning) the events, and folding already-read events.
    let mut read = Vec::new();
    let mut fold_only = Vec::new();
    for _ in 0..runs.max(7) {
        let start = Instant::now();
        let events: Vec<Event> = raw.to_vec();
        read.push(start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        let state = big
            .session
            .folder
            .fold(&events)
            .unwrap_or_else(|e| fail(&e.to_string()));
        fold_only.push(start.elapsed().as_secs_f64() * 1e3);
        black_box(state);
    }
    bench::report("fold_10k_read_only_ms", "ms", 2, &read);
    bench::report("fold_10k_apply_only_ms", "ms", 2, &fold_only);
}
