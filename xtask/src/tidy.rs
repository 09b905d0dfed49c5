//! `cargo xtask tidy`: the layering rules and repository conventions, checked mechanically.
//!
//! The rules read `cargo metadata`: the kernel depends on no workspace crate,
//! the toolkit on the kernel only, a built-in on the kernel and the toolkit
//! only (the testkit as a dev-dependency), and only the assembly depends on
//! built-ins. Also checked: every built-in directory is a well-formed plugin
//! crate, the generated built-in list is current, every Rust file opens with
//! a `//!` line, the kernel's sources name no built-in and import along its floors
//! (`floors.rs`), and no test is ignored.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::codegen;

const BUILTIN_PREFIX: &str = "noeta-builtin-";

struct Dep {
    name: String,
    kind: Option<String>,
}

struct Package {
    name: String,
    version: String,
    dir: PathBuf,
    deps: Vec<Dep>,
}

fn metadata(root: &Path) -> Result<Vec<Package>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let json: Value = serde_json::from_slice(&out.stdout)?;
    let mut packages = Vec::new();
    for p in json["packages"].as_array().into_iter().flatten() {
        let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap_or_default());
        packages.push(Package {
            name: p["name"].as_str().unwrap_or_default().to_owned(),
            version: p["version"].as_str().unwrap_or_default().to_owned(),
            dir: manifest.parent().map(Path::to_path_buf).unwrap_or_default(),
            deps: p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| Dep {
                    name: d["name"].as_str().unwrap_or_default().to_owned(),
                    kind: d["kind"].as_str().map(str::to_owned),
                })
                .collect(),
        });
    }
    Ok(packages)
}

/// Every problem found, as a line naming the crate or file at fault.
pub(crate) fn check(root: &Path) -> Result<Vec<String>> {
    let packages = metadata(root)?;
    let members: BTreeSet<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let mut problems = Vec::new();

    for p in &packages {
        let internal = |kinds: &[Option<&str>]| -> Vec<&str> {
            p.deps
                .iter()
                .filter(|d| members.contains(d.name.as_str()))
                .filter(|d| kinds.contains(&d.kind.as_deref()))
                .map(|d| d.name.as_str())
                .collect()
        };
        let all = [None, Some("dev"), Some("build")];
        let normal = [None, Some("build")];
        let deny = |problems: &mut Vec<String>, deps: Vec<&str>, allowed: &[&str], rule: &str| {
            for dep in deps {
                if !allowed.contains(&dep) {
                    problems.push(format!("`{}` depends on `{dep}`: {rule}", p.name));
                }
            }
        };
        match p.name.as_str() {
            "noeta-core" => {
                deny(
                    &mut problems,
                    internal(&normal),
                    &[],
                    "the kernel depends on no workspace crate",
                );
                deny(
                    &mut problems,
                    internal(&[Some("dev")]),
                    &["noeta-testkit"],
                    "the kernel's tests use the testkit only",
                );
            }
            "noeta-toolkit" => deny(
                &mut problems,
                internal(&all),
                &["noeta-core"],
                "the toolkit depends on the kernel only",
            ),
            name if name.starts_with(BUILTIN_PREFIX) => {
                deny(
                    &mut problems,
                    internal(&normal),
                    &["noeta-core", "noeta-toolkit"],
                    "a plugin never depends on another plugin or the host; built-ins use the kernel and the toolkit only",
                );
                deny(
                    &mut problems,
                    internal(&[Some("dev")]),
                    &["noeta-core", "noeta-toolkit", "noeta-testkit"],
                    "a built-in's tests use the kernel, the toolkit and the testkit only",
                );
            }
            "noeta" => {}
            other => {
                for dep in internal(&all) {
                    if dep.starts_with(BUILTIN_PREFIX) {
                        problems.push(format!(
                            "`{other}` depends on `{dep}`: only the assembly (`noeta`) depends on built-in crates"
                        ));
                    }
                }
            }
        }
    }

    let cli = packages.iter().find(|p| p.name == "noeta-cli");
    if !cli.is_some_and(|p| p.deps.iter().any(|d| d.name == "noeta" && d.kind.is_none())) {
        problems.push("`noeta-cli` must depend on the assembly `noeta`".to_owned());
    }

    check_builtins(root, &packages, &mut problems)?;
    check_sources(root, &mut problems)?;
    Ok(problems)
}

fn check_builtins(root: &Path, packages: &[Package], problems: &mut Vec<String>) -> Result<()> {
    let dirs = codegen::builtin_dirs(root)?;
    let assembly = packages.iter().find(|p| p.name == "noeta");
    for dir in &dirs {
        let package_name = format!("{BUILTIN_PREFIX}{dir}");
        let path = root.join("builtins").join(dir);
        let Some(package) = packages.iter().find(|p| p.dir == path) else {
            problems.push(format!("builtins/{dir} is not a workspace member"));
            continue;
        };
        if package.name != package_name {
            problems.push(format!(
                "builtins/{dir}: package is named `{}`, expected `{package_name}`",
                package.name
            ));
        }
        if !path.join("README.md").is_file() {
            problems.push(format!("builtins/{dir}: README.md is missing"));
        }
        let manifest_path = path.join(noeta_core::MANIFEST_FILE);
        match noeta_core::manifest::read_manifest(&manifest_path, &noeta_core::standard_registry())
        {
            Ok(manifest) => {
                if manifest.name != *dir {
                    problems.push(format!(
                        "builtins/{dir}/noeta-plugin.toml: plugin name `{}` differs from its directory",
                        manifest.name
                    ));
                }
                if manifest.version.as_deref() != Some(package.version.as_str()) {
                    problems.push(format!(
                        "builtins/{dir}/noeta-plugin.toml: version {:?} differs from the crate version {}",
                        manifest.version, package.version
                    ));
                }
            }
            Err(err) => problems.push(format!("builtins/{dir}: {err}")),
        }
        if !assembly.is_some_and(|a| {
            a.deps
                .iter()
                .any(|d| d.name == package_name && d.kind.is_none())
        }) {
            problems.push(format!(
                "crates/noeta/Cargo.toml does not depend on `{package_name}`"
            ));
        }
    }
    let generated = std::fs::read_to_string(root.join(codegen::TARGET)).unwrap_or_default();
    if generated != codegen::generate(&dirs) {
        problems.push(format!(
            "{} is stale — run `cargo xtask codegen`",
            codegen::TARGET
        ));
    }
    Ok(())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            if path
                .file_name()
                .is_some_and(|n| n == "target" || n == "golden")
            {
                continue;
            }
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The standard printing macros, which panic on a closed or full standard output; the command
/// line prints through its own (`crates/noeta-cli/src/stdio.rs`).
const PANICKING_PRINTS: [&str; 4] = ["println!(", "eprintln!(", " print!(", "eprint!("];

/// The most lines a kernel source file may have.
const MAX_KERNEL_FILE_LINES: usize = 900;

/// The kernel files that may catch a panic: the hook dispatcher, and resolver and factory calls.
const CATCHING_KERNEL_FILES: [&str; 3] = [
    "crates/noeta-core/src/hooks.rs",
    "crates/noeta-core/src/resolve.rs",
    "crates/noeta-core/src/identity.rs",
];

fn check_sources(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    let mut files = Vec::new();
    for dir in ["crates", "builtins", "xtask", "tests", "examples"] {
        rust_files(&root.join(dir), &mut files)?;
    }
    files.sort();
    let ignore_attribute = ["#[", "ignore"].concat();
    let should_panic = ["#[", "should_panic"].concat();
    let catch = ["catch", "_unwind"].concat();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        let shown = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        if !text.starts_with("//!") {
            problems.push(format!(
                "{shown}: must open with a `//!` line saying what it is for"
            ));
        }
        if text.contains(&ignore_attribute) {
            problems.push(format!("{shown}: ignored tests are not allowed"));
        }
        if text.contains(&should_panic) {
            problems.push(format!(
                "{shown}: `should_panic` tests are not allowed; assert on the error instead"
            ));
        }
        if shown.starts_with("crates/noeta-cli/src/") && shown != "crates/noeta-cli/src/stdio.rs" {
            for needle in PANICKING_PRINTS {
                if text.contains(needle) {
                    problems.push(format!(
                        "{shown}: `{needle}` panics when standard output is closed or full; use the macros of crates/noeta-cli/src/stdio.rs"
                    ));
                }
            }
        }
        if let Some(relative) = shown.strip_prefix("crates/noeta-core/src/") {
            problems.extend(crate::floors::problems(relative, &shown, &text));
            let lines = text.lines().count();
            if lines > MAX_KERNEL_FILE_LINES {
                problems.push(format!(
                    "{shown}: {lines} lines, over the kernel's limit of {MAX_KERNEL_FILE_LINES}; split it along its concerns"
                ));
            }
            if text.contains(&catch) && !CATCHING_KERNEL_FILES.contains(&shown.as_str()) {
                problems.push(format!(
                    "{shown}: catches panics itself; plugin code is called through the hook dispatcher (crates/noeta-core/src/hooks.rs)"
                ));
            }
        }
        if shown.starts_with("crates/noeta-core/") {
            for needle in ["noeta_builtin", "noeta-builtin"] {
                if text.contains(needle) {
                    problems.push(format!(
                        "{shown}: the kernel names no built-in (found `{needle}`)"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_is_tidy() {
        let problems = check(&crate::root()).unwrap();
        assert!(
            problems.is_empty(),
            "tidy problems:\n{}",
            problems.join("\n")
        );
    }

    #[test]
    fn the_generated_builtin_list_matches_the_directories() {
        let names = codegen::builtin_dirs(&crate::root()).unwrap();
        assert_eq!(names.len(), 18, "{names:?}");
        let text = codegen::generate(&names);
        assert!(text.contains("noeta_builtin_todo_write::plugin().as_builtin()"));
        assert!(text.contains("do not edit"));
    }
}
