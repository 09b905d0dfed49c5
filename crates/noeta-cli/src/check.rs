//! `noeta plugins check`: the report of what loads, merges and (with `--resolve`) resolves,
//! including the handshake of every plugin program.

use std::process::ExitCode;

use anyhow::Result;
use noeta_core::{MergeError, Merged, PluginSet};
use serde_json::{Value, json};

use crate::render::{claude_json, pretty, surface_counts};
use crate::stdio::{out, outln};
use noeta::listing;

/// A plugin program's handshake as `plugins check --resolve --json` shows it.
fn program_json(check: &noeta::programs::ProgramCheck) -> Value {
    match &check.handshake {
        Err(why) => json!({ "ok": false, "error": why }),
        Ok(handshake) => {
            let exports: serde_json::Map<String, Value> = handshake
                .exports
                .iter()
                .map(|(name, export)| {
                    let tools: Vec<&str> = export.tools.iter().map(|t| t.name.as_str()).collect();
                    (
                        name.clone(),
                        json!({ "hooks": export.hooks, "folds": export.folds, "tools": tools }),
                    )
                })
                .collect();
            json!({ "ok": check.unlisted.is_empty(), "exports": exports })
        }
    }
}

pub(crate) fn check(
    set: &PluginSet,
    claude: &noeta::claude_plugins::ClaudePlugins,
    extra_problems: Vec<String>,
    programs: &[noeta::programs::ProgramCheck],
    strict: bool,
    resolve: bool,
    json: bool,
) -> Result<ExitCode> {
    let merged: Result<Merged, MergeError> = set.merged();
    let mut problems: Vec<String> = set.problems().iter().map(ToString::to_string).collect();
    problems.extend(extra_problems);
    problems.extend(
        programs
            .iter()
            .flat_map(noeta::programs::ProgramCheck::problems),
    );
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
    // Claude Code plugins' and hook files' warnings (a hook noeta does not run) count too.
    let warnings: Vec<String> = set
        .warnings()
        .iter()
        .map(ToString::to_string)
        .chain(claude.warnings.iter().cloned())
        .collect();
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
                    "program": programs
                        .iter()
                        .find(|c| c.plugin == p.name())
                        .map(program_json),
                })
            })
            .collect();
        let report = json!({
            "ok": ok,
            "plugins": plugins,
            "claude_code_plugins": claude_json(claude)["plugins"],
            "warnings": warnings,
            "problems": problems,
        });
        out!("{}", pretty(&report));
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
            outln!(
                "checked {} {} ({}, {}): {summary}",
                p.name(),
                p.manifest.version.as_deref().unwrap_or("(no version)"),
                p.source,
                p.origin
            );
            for check in programs.iter().filter(|c| c.plugin == p.name()) {
                for line in check.summary() {
                    outln!("  {line}");
                }
            }
        }
        for plugin in &claude.plugins {
            outln!(
                "checked {} {} (claude-code, {}): {}",
                plugin.name,
                plugin.version.as_deref().unwrap_or("(no version)"),
                plugin.root.display(),
                plugin.summary()
            );
        }
        for warning in &warnings {
            outln!("warning: {warning}");
        }
        for problem in &problems {
            outln!("problem: {problem}");
        }
        outln!(
            "{} plugin(s) checked, {} warning(s), {} problem(s){}",
            set.plugins().count() + claude.plugins.len(),
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
