//! What the namespace sandbox costs a command, printed as `name: value unit`: a trivial
//! command (`true`) run to its end through the local environment and through `bubblewrap`
//! (its namespaces and mounts, and the pids cgroup it joins).

use std::sync::Arc;
use std::time::Instant;

use futures::executor::block_on;
use noeta_core::exec::{ExecCommand, ExecEnv, LocalExecEnv};
use noeta_testkit::bench;
use serde_json::json;

const RUNS: usize = 50;

fn fail(message: &str) -> ! {
    eprintln!("bench failed: {message}");
    std::process::exit(1)
}

/// `RUNS` runs of `true` after one warm-up, in milliseconds.
fn samples_ms(env: &dyn ExecEnv) -> Vec<f64> {
    let command = ExecCommand::new("true", Vec::<String>::new());
    bench::sampled(RUNS, || {
        let start = Instant::now();
        let out = block_on(env.run(&command)).unwrap_or_else(|e| fail(&e.to_string()));
        if out.status != Some(0) {
            fail(&format!(
                "`true` ended with {:?} in {}",
                out.status,
                env.name()
            ));
        }
        start.elapsed().as_secs_f64() * 1e3
    })
}

fn main() {
    let workspace = tempfile::tempdir().unwrap_or_else(|e| fail(&e.to_string()));
    let local = Arc::new(LocalExecEnv::new(workspace.path()));
    let provider = noeta_builtin_sandbox::bubblewrap();
    let sandbox = provider
        .0
        .build(Arc::clone(&local) as _, &json!({ "max_processes": 64 }))
        .unwrap_or_else(|e| fail(&e));
    let runs = bench::runs(5);
    bench::report(
        "local_exec_ms",
        "ms",
        2,
        &bench::run_medians(&samples_ms(local.as_ref()), runs),
    );
    bench::report(
        "sandbox_bwrap_exec_ms",
        "ms",
        2,
        &bench::run_medians(&samples_ms(sandbox.as_ref()), runs),
    );
}
