//! `noeta skills list`: every indexed skill with its tier and source, and every skipped one with
//! the reason, indexed as a session in this workspace would index them.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use noeta::{HostOptions, HostPaths};
use serde_json::Value;

use crate::agent::{self, AgentArgs};
use crate::stdio::{eoutln, out};

/// Lists the skills; `--json` prints byte-deterministic JSON (sorted keys, fixed orders).
pub(crate) fn list(paths: &HostPaths, plugin_dirs: Vec<PathBuf>, json: bool) -> Result<ExitCode> {
    let args = AgentArgs {
        plugin_dirs: plugin_dirs.clone(),
        ..AgentArgs::default()
    };
    let settings = agent::settings(paths, &args)?;
    let options = HostOptions {
        paths: plugin_dirs,
        ..HostOptions::default()
    };
    let set = settings.load_host(paths, &options)?;
    for warning in set.warnings() {
        eoutln!("warning: {warning}");
    }
    let merged = set.merged()?;
    // Every loaded plugin's `skills` contributions, in (plugin, name) order.
    let dirs: Vec<(String, PathBuf)> = merged
        .for_surface("skills")
        .iter()
        .filter_map(|e| {
            e.contribution
                .path
                .as_ref()
                .map(|p| (e.plugin.clone(), PathBuf::from(p)))
        })
        .collect();
    let mut config = settings
        .config()
        .get("skills")
        .cloned()
        .unwrap_or(Value::Null);
    // The Claude Code plugins' `skills/` directories, as the host hands them to a session.
    let claude_skills = noeta::claude_plugins::discover(paths, &options.paths).skill_dirs_setting();
    if !claude_skills.is_empty() {
        if !config.is_object() {
            config = Value::Object(serde_json::Map::new());
        }
        config["plugin_skill_dirs"] = Value::Array(claude_skills);
    }
    let listing = noeta::skills::index_for_listing(
        &config,
        Some(&paths.workspace),
        paths.home.as_deref(),
        &dirs,
    )
    .map_err(anyhow::Error::msg)?;
    if json {
        let mut text = serde_json::to_string_pretty(&listing.to_json())?;
        text.push('\n');
        out!("{text}");
    } else {
        out!("{}", listing.to_text());
    }
    Ok(ExitCode::SUCCESS)
}
