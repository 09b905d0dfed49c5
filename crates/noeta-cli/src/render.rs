//! How listings and errors are written for a person: an error with its causes, the Claude
//! Code plugins as text and as JSON, a plugin's contributions by surface, pretty JSON — shared
//! by `main.rs` and the commands (`check.rs`, `doctor.rs`) that print the same things.

use std::collections::BTreeMap;

use noeta_core::PluginSet;
use serde_json::{Value, json};

use crate::stdio::eoutln;

/// The error with each cause its message does not already include.
pub(crate) fn render_error(err: &anyhow::Error) -> String {
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

/// The Claude Code plugins as `plugins list --json` gives them.
pub(crate) fn claude_json(claude: &noeta::claude_plugins::ClaudePlugins) -> Value {
    json!({
        "plugins": claude.plugins.iter().map(|p| json!({
            "name": p.name,
            "version": p.version,
            "description": p.description,
            "root": p.root,
            "components": p.counts(),
            "not_loaded": p.skipped,
        })).collect::<Vec<_>>(),
        "problems": claude.problems,
    })
}

pub(crate) fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

pub(crate) fn warn_all(set: &PluginSet) {
    for warning in set.warnings() {
        eoutln!("warning: {warning}");
    }
}

pub(crate) fn surface_counts(set: &PluginSet, name: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    if let Some(plugin) = set.get(name) {
        for c in &plugin.manifest.contributions {
            *counts.entry(c.surface.clone()).or_insert(0) += 1;
        }
    }
    counts
}

/// The Claude Code plugins as `plugins list` shows them.
pub(crate) fn claude_text(claude: &noeta::claude_plugins::ClaudePlugins) -> String {
    let mut out = String::new();
    if !claude.plugins.is_empty() {
        out.push_str("\nClaude Code plugins:\n");
    }
    for plugin in &claude.plugins {
        out.push_str(&format!(
            "{} {} (claude-code, {}): {}\n",
            plugin.name,
            plugin.version.as_deref().unwrap_or("(no version)"),
            plugin.root.display(),
            plugin.summary()
        ));
    }
    if !claude.problems.is_empty() {
        out.push_str("\nClaude Code plugins that failed to load:\n");
        for problem in &claude.problems {
            out.push_str(&format!("  {problem}\n"));
        }
    }
    out
}
