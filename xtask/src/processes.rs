//! The whole-process figures of `cargo xtask bench`: the release `noeta` binary started as a
//! user starts it, stdout and stderr to `/dev/null`, timed from spawn to exit.
//!
//! - `run_zero_step_process_ms`: `noeta run` of a turn whose one model call answers at once
//!   (memory store, agent `main`, the bundled scripted model): what starting a task costs.
//! - `run_zero_step_peak_rss_kib`: the largest peak resident set of those runs
//!   (`getrusage(RUSAGE_CHILDREN)` in a small process that starts nothing else, `peak-rss`).
//! - `read_turn_50_cli_process_ms` and `cli_step_marginal_us`: the same with 50 steps of one
//!   `Read` each, and (T(50 steps) − T(0 steps)) / 50 — what a step costs through the CLI —
//!   of each round's pair of runs (the two take turns).
//! - `plugins_check_process_ms`: `noeta plugins check --resolve`, the declaration path.
//! - `noeta_plugins_list_process_ms`: `noeta plugins list`.
//!
//! Each timed figure is the median of `RUNS` runs (or rounds) after `WARMUPS`, printed with
//! `NAME_spread_pct` (their range as a percentage of the median) by
//! `noeta_testkit::bench::report`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use noeta_testkit::bench::report;
use serde_json::json;

const WARMUPS: usize = 3;
const RUNS: usize = 21;
const STEPS: usize = 50;

/// A home and workspace for the runs: the model scripts and the 50 files read.
pub(crate) fn scratch() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("noeta-bench-process-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("zero.json"),
        json!({ "turns": [{ "text": "done" }] }).to_string(),
    )?;
    let mut turns: Vec<_> = (0..STEPS)
        .map(|i| json!({ "calls": [{ "name": "Read", "input": { "file_path": format!("f{i:02}.txt") } }] }))
        .collect();
    turns.push(json!({ "text": "done" }));
    std::fs::write(
        dir.join("fifty.json"),
        json!({ "turns": turns }).to_string(),
    )?;
    for i in 0..STEPS {
        let body: String = (0..20)
            .map(|line| format!("file {i:02}, line {line:02}.\n"))
            .collect();
        std::fs::write(dir.join(format!("f{i:02}.txt")), body)?;
    }
    Ok(dir)
}

/// `program` run in `dir` (also its home) with no model keys, nothing on standard input.
pub(crate) fn in_scratch(program: &Path, dir: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .env("HOME", dir)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .current_dir(dir)
        .stdin(Stdio::null());
    command
}

/// `noeta ARGS` in `dir`, as a user runs it, its output to `/dev/null`.
fn command(binary: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut command = in_scratch(binary, dir);
    command
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// The milliseconds of each of `RUNS` runs of `noeta ARGS`, after `WARMUPS`, for each `ARGS`
/// of `commands`: they take turns, one run each a round, so a change in the machine's load
/// falls on all of them alike rather than on whichever ran at the time (two figures'
/// difference is only as steady as that).
fn times(binary: &Path, dir: &Path, commands: &[&[&str]]) -> Result<Vec<Vec<f64>>> {
    let mut samples = vec![Vec::with_capacity(RUNS); commands.len()];
    for i in 0..WARMUPS + RUNS {
        for (args, samples) in commands.iter().zip(&mut samples) {
            let start = Instant::now();
            let status = command(binary, dir, args)
                .status()
                .with_context(|| format!("running {}", binary.display()))?;
            let ms = start.elapsed().as_secs_f64() * 1e3;
            if !status.success() {
                bail!("`noeta {}` failed ({status})", args.join(" "));
            }
            if i >= WARMUPS {
                samples.push(ms);
            }
        }
    }
    Ok(samples)
}

pub(crate) const ZERO: &[&str] = &[
    "run",
    "--store",
    "memory:",
    "--provider",
    "scripted:zero.json",
    "say done",
];

pub(crate) const FIFTY: &[&str] = &[
    "run",
    "--store",
    "memory:",
    "--provider",
    "scripted:fifty.json",
    "read the files",
];

/// Measures and prints every whole-process figure.
pub(crate) fn run(binary: &Path) -> Result<()> {
    let dir = scratch()?;
    let measured = measure(binary, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    measured
}

fn measure(binary: &Path, dir: &Path) -> Result<()> {
    let turns = times(binary, dir, &[ZERO, FIFTY])?;
    report("run_zero_step_process_ms", "ms", 2, &turns[0]);
    report("read_turn_50_cli_process_ms", "ms", 2, &turns[1]);
    // A round's two runs are taken together, so each round gives the step's cost once.
    let marginal: Vec<f64> = turns[0]
        .iter()
        .zip(&turns[1])
        .map(|(zero, fifty)| (fifty - zero) * 1e3 / STEPS as f64)
        .collect();
    report("cli_step_marginal_us", "us", 1, &marginal);
    println!(
        "run_zero_step_peak_rss_kib: {} KiB",
        peak_rss(binary, dir, ZERO)?
    );
    let plugins = times(
        binary,
        dir,
        &[&["plugins", "check", "--resolve"], &["plugins", "list"]],
    )?;
    report("plugins_check_process_ms", "ms", 2, &plugins[0]);
    report("noeta_plugins_list_process_ms", "ms", 2, &plugins[1]);
    Ok(())
}

/// The largest peak resident set, in KiB, of `WARMUPS + RUNS` runs of `noeta ARGS`, measured
/// by the small `peak-rss` binary of this package (see it for why not by this one).
fn peak_rss(binary: &Path, dir: &Path, args: &[&str]) -> Result<u64> {
    let status = Command::new(crate::bench::cargo())
        .args(["build", "--quiet", "-p", "xtask", "--bin", "peak-rss"])
        .current_dir(crate::root())
        .status()
        .context("building the peak-rss helper")?;
    if !status.success() {
        bail!("building the peak-rss helper failed");
    }
    let exe = std::env::current_exe().context("finding the xtask binary")?;
    let helper = exe.with_file_name("peak-rss");
    let out = in_scratch(&helper, dir)
        .arg((WARMUPS + RUNS).to_string())
        .arg(binary)
        .args(args)
        .output()
        .with_context(|| format!("running {}", helper.display()))?;
    if !out.status.success() {
        bail!(
            "measuring the peak resident set failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .context("reading the peak resident set")
}
