//! The `noeta` command: lists the surface registry, lists and checks plugins, and manages plugin trust.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use noeta::listing;
use noeta::{HostOptions, HostPaths};
use noeta_core::{MergeError, Merged, PluginSet};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(
    name = "noeta",
    version,
    about = "A durable agent runtime whose every capability is a plugin"
)]
struct Cli {
    /// An extra plugin directory, plugin directory of directories, or manifest file for this run (repeatable)
    #[arg(long = "plugin-dir", global = true, value_name = "DIR")]
    plugin_dirs: Vec<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the surface registry: every surface with its plane, scope, collision key, ordering and binding
    Surfaces {
        /// Print JSON on stdout
        #[arg(long)]
        json: bool,
    },
    /// List and check plugins
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// Trust a workspace plugin directory (or a workspace) so its plugins load; never prompts
    Trust {
        /// The directory to trust
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum PluginsCommand {
    /// Every loaded plugin with its source, version and contributions by surface
    List {
        /// Print JSON on stdout
        #[arg(long)]
        json: bool,
    },
    /// Load and merge plugins (plus the given manifests) without running them; exit 1 on any problem
    Check {
        /// Refuse plugins whose requires-noeta excludes this kernel, and fail on any warning
        #[arg(long)]
        strict: bool,
        /// Also resolve every ref and report those no compiled resolver knows
        #[arg(long)]
        resolve: bool,
        /// Print JSON on stdout
        #[arg(long)]
        json: bool,
        /// Manifest files or plugin directories to check as well
        paths: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", render_error(&err));
            ExitCode::FAILURE
        }
    }
}

/// The error with each cause its message does not already include.
fn render_error(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

fn run(cli: Cli) -> Result<ExitCode> {
    let paths = HostPaths::from_env().context("cannot determine the current directory")?;
    match cli.command {
        Command::Surfaces { json } => {
            let registry = noeta_core::standard_registry();
            if json {
                print!("{}", listing::surfaces_json(&registry));
            } else {
                print!("{}", listing::surfaces_text(&registry));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Plugins {
            command: PluginsCommand::List { json },
        } => {
            let options = HostOptions {
                paths: cli.plugin_dirs,
                ..HostOptions::default()
            };
            let set = noeta::load(&paths, &options)?;
            warn_all(&set);
            let merged = set.merged();
            if json {
                print!("{}", pretty(&listing::plugins_json(&set, &merged)));
            } else {
                print!("{}", listing::plugins_text(&set, &merged));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Plugins {
            command:
                PluginsCommand::Check {
                    strict,
                    resolve,
                    json,
                    paths: extra,
                },
        } => {
            let mut options = HostOptions {
                paths: cli.plugin_dirs,
                strict,
                ..HostOptions::default()
            };
            options.paths.extend(extra);
            let set = noeta::load(&paths, &options)?;
            // The human report lists the warnings itself; JSON keeps stdout for the machine.
            if json {
                warn_all(&set);
            }
            check(&set, strict, resolve, json)
        }
        Command::Trust { dir } => {
            let mut store = paths.trust_store()?;
            if paths.trust_store_path().is_none() {
                anyhow::bail!("no home directory ($HOME is unset): cannot locate the trust store");
            }
            let trusted = store.grant(&dir)?;
            println!(
                "trusted {} (trust store {})",
                trusted.display(),
                store.path().display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

fn warn_all(set: &PluginSet) {
    for warning in set.warnings() {
        eprintln!("warning: {warning}");
    }
}

fn surface_counts(set: &PluginSet, name: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    if let Some(plugin) = set.get(name) {
        for c in &plugin.manifest.contributions {
            *counts.entry(c.surface.clone()).or_insert(0) += 1;
        }
    }
    counts
}

fn check(set: &PluginSet, strict: bool, resolve: bool, json: bool) -> Result<ExitCode> {
    let merged: Result<Merged, MergeError> = set.merged();
    let mut problems: Vec<String> = set.problems().iter().map(ToString::to_string).collect();
    match &merged {
        Ok(merged) if resolve => {
            problems.extend(
                set.resolve_everything(merged)
                    .iter()
                    .map(ToString::to_string),
            );
        }
        Ok(_) => {}
        Err(err) => problems.extend(err.collisions.iter().map(ToString::to_string)),
    }
    let warnings: Vec<String> = set.warnings().iter().map(ToString::to_string).collect();
    let ok = problems.is_empty() && (!strict || warnings.is_empty());

    if json {
        let plugins: Vec<Value> = set
            .plugins()
            .map(|p| {
                json!({
                    "name": p.name(),
                    "version": p.manifest.version,
                    "source": p.source.as_str(),
                    "origin": listing::origin_json(&p.origin),
                    "contributions": surface_counts(set, p.name()),
                })
            })
            .collect();
        let report = json!({
            "ok": ok,
            "plugins": plugins,
            "warnings": warnings,
            "problems": problems,
        });
        print!("{}", pretty(&report));
    } else {
        for p in set.plugins() {
            let counts = surface_counts(set, p.name());
            let summary = if counts.is_empty() {
                "no contributions".to_owned()
            } else {
                counts
                    .iter()
                    .map(|(s, n)| format!("{s} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            println!(
                "checked {} {} ({}, {}): {summary}",
                p.name(),
                p.manifest.version.as_deref().unwrap_or("(no version)"),
                p.source,
                p.origin
            );
        }
        for warning in &warnings {
            println!("warning: {warning}");
        }
        for problem in &problems {
            println!("problem: {problem}");
        }
        println!(
            "{} plugin(s) checked, {} warning(s), {} problem(s){}",
            set.plugins().count(),
            warnings.len(),
            problems.len(),
            if strict { " (strict)" } else { "" }
        );
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
