//! `cargo xtask bench`: builds with the release profile and prints every figure it can measure.
//!
//! Figures are printed as `name: value unit`. Missing a target is not an
//! error; only failing to run is.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Runs the in-process benchmarks, then times the release `noeta plugins list` as a whole process.
pub(crate) fn run(root: &Path) -> Result<()> {
    for (package, bench) in [
        ("noeta", "load"),
        ("noeta", "sqlite"),
        ("noeta-builtin-storage", "pg_append"),
        ("noeta", "queue"),
        ("noeta-cli", "web"),
        ("noeta-core", "runner"),
        ("noeta-builtin-fs", "read_turn"),
        ("noeta-builtin-mcp", "call"),
        ("noeta-extproc", "roundtrip"),
        ("noeta-builtin-sandbox", "exec"),
        ("noeta-builtin-browser", "navigate"),
    ] {
        let status = Command::new(cargo())
            .args(["bench", "--quiet", "-p", package, "--bench", bench])
            .current_dir(root)
            .status()
            .with_context(|| format!("running the `{bench}` bench of `{package}`"))?;
        if !status.success() {
            bail!("the `{bench}` bench of `{package}` failed");
        }
    }
    let status = Command::new(cargo())
        .args(["build", "--quiet", "--release", "-p", "noeta-cli"])
        .current_dir(root)
        .status()
        .context("building the release noeta binary")?;
    if !status.success() {
        bail!("building the release noeta binary failed");
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| root.join("target").display().to_string());
    let binary = Path::new(&target).join("release").join("noeta");
    let home = std::env::temp_dir().join(format!("noeta-bench-home-{}", std::process::id()));
    std::fs::create_dir_all(&home)?;
    let mut samples = Vec::new();
    for _ in 0..50 {
        let start = Instant::now();
        let out = Command::new(&binary)
            .args(["plugins", "list"])
            .env("HOME", &home)
            .current_dir(&home)
            .output()
            .with_context(|| format!("running {}", binary.display()))?;
        let elapsed = start.elapsed();
        if !out.status.success() {
            bail!(
                "`noeta plugins list` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        samples.push(elapsed.as_secs_f64() * 1000.0);
    }
    let _ = std::fs::remove_dir_all(&home);
    samples.sort_by(f64::total_cmp);
    println!(
        "noeta_plugins_list_process_median_ms: {:.2} ms",
        samples[samples.len() / 2]
    );
    println!("noeta_plugins_list_process_min_ms: {:.2} ms", samples[0]);
    Ok(())
}
