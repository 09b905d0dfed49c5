//! In-process benchmark: load, merge and resolve the built-in plugin set, printed as `name: value unit`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use noeta::{HostOptions, HostPaths};

const ROUNDS: usize = 500;

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

fn main() {
    let scratch = std::env::temp_dir().join(format!("noeta-bench-{}", std::process::id()));
    let paths = HostPaths {
        home: None,
        workspace: scratch,
    };
    let options = HostOptions::default();
    let mut load_merge = Vec::with_capacity(ROUNDS);
    let mut load_merge_resolve = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let Ok(set) = noeta::load(&paths, &options) else {
            eprintln!("loading the built-ins failed");
            std::process::exit(1);
        };
        let Ok(merged) = set.merged() else {
            eprintln!("merging the built-ins failed");
            std::process::exit(1);
        };
        load_merge.push(start.elapsed());
        let errors = set.resolve_everything(&merged);
        load_merge_resolve.push(start.elapsed());
        if !errors.is_empty() {
            eprintln!("resolving the built-ins failed: {errors:?}");
            std::process::exit(1);
        }
        black_box(&set);
    }
    println!("plugins_load_merge_us: {:.1} us", median(load_merge));
    println!(
        "plugins_load_merge_resolve_us: {:.1} us",
        median(load_merge_resolve)
    );
}
