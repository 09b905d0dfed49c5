//! In-process benchmark: load, merge and resolve the built-in plugin set, printed as `name: value unit`.

use std::hint::black_box;
use std::time::Instant;

use noeta::{HostOptions, HostPaths};
use noeta_testkit::bench;

const WARMUP: usize = 50;
const ROUNDS: usize = 500;

fn main() {
    let scratch = std::env::temp_dir().join(format!("noeta-bench-{}", std::process::id()));
    let paths = HostPaths {
        home: None,
        workspace: scratch,
    };
    let options = HostOptions::default();
    let mut load_merge = Vec::with_capacity(ROUNDS);
    let mut load_merge_resolve = Vec::with_capacity(ROUNDS);
    // The first rounds warm up; the rest are split into runs.
    for round in 0..WARMUP + ROUNDS {
        let start = Instant::now();
        let Ok(set) = noeta::load(&paths, &options) else {
            eprintln!("loading the built-ins failed");
            std::process::exit(1);
        };
        let Ok(merged) = set.merged() else {
            eprintln!("merging the built-ins failed");
            std::process::exit(1);
        };
        let merged_at = start.elapsed();
        let errors = set.resolve_everything(&merged);
        let resolved_at = start.elapsed();
        if round >= WARMUP {
            load_merge.push(merged_at.as_secs_f64() * 1e6);
            load_merge_resolve.push(resolved_at.as_secs_f64() * 1e6);
        }
        if !errors.is_empty() {
            eprintln!("resolving the built-ins failed: {errors:?}");
            std::process::exit(1);
        }
        black_box(&set);
    }
    let runs = bench::runs(5);
    bench::report(
        "plugins_load_merge_us",
        "us",
        1,
        &bench::run_medians(&load_merge, runs),
    );
    bench::report(
        "plugins_load_merge_resolve_us",
        "us",
        1,
        &bench::run_medians(&load_merge_resolve, runs),
    );
}
