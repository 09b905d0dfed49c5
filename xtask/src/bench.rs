//! `cargo xtask bench`: builds with the release profile and prints every figure it can measure.
//!
//! Figures are printed as `name: value unit`. Missing a target is not an
//! error; only failing to run is.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Runs the in-process benchmarks, then the whole-process figures of the release `noeta`.
/// `only`: just the bench of that name (`processes`: just the whole-process figures).
pub(crate) fn run(root: &Path, only: Option<&str>) -> Result<()> {
    for (package, bench) in [
        ("noeta", "load"),
        ("noeta", "sqlite"),
        ("noeta-builtin-storage", "pg_append"),
        ("noeta", "queue"),
        ("noeta-cli", "web"),
        ("noeta-core", "runner"),
        ("noeta-builtin-fs", "read_turn"),
        ("noeta", "agent_turn"),
        ("noeta-builtin-mcp", "call"),
        ("noeta-extproc", "roundtrip"),
        ("noeta-builtin-sandbox", "exec"),
        ("noeta-builtin-browser", "navigate"),
    ] {
        if only.is_some_and(|only| only != bench) {
            continue;
        }
        let status = Command::new(cargo())
            .args(["bench", "--quiet", "-p", package, "--bench", bench])
            .current_dir(root)
            .status()
            .with_context(|| format!("running the `{bench}` bench of `{package}`"))?;
        if !status.success() {
            bail!("the `{bench}` bench of `{package}` failed");
        }
    }
    if only.is_some_and(|only| only != "processes") {
        return Ok(());
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
    crate::processes::run(&binary)
}
