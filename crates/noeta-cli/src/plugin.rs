//! `noeta plugin …`: installing plugins (the library side is `noeta::install`). `noeta
//! plugins …` shows what is loaded; this group changes what is on disk.

use std::process::ExitCode;

use anyhow::Result;
use noeta::HostPaths;
use noeta::install::{self, Installed, Scope};
use serde_json::json;

use crate::stdio::outln;

fn scope(project: bool) -> Scope {
    if project { Scope::Project } else { Scope::User }
}

/// One line about an installed plugin.
fn describe(plugin: &Installed) -> String {
    let mut line = format!(
        "{} {} ({}) from {}",
        plugin.name,
        plugin.version.as_deref().unwrap_or("(no version)"),
        plugin.kind,
        plugin.source
    );
    if let Some(commit) = &plugin.commit {
        line.push_str(&format!(", commit {commit}"));
    }
    line.push_str(&format!(
        ", content {}",
        &plugin.tree[..16.min(plugin.tree.len())]
    ));
    line
}

/// `noeta plugin add SOURCE [--project]`.
pub(crate) fn add(paths: &HostPaths, source: &str, project: bool) -> Result<ExitCode> {
    let installed = install::add(paths, source, scope(project))?;
    outln!("installed {}", describe(&installed));
    if project {
        outln!("it loads once the workspace is trusted (`noeta trust .`); nothing in it has run");
    } else {
        outln!("nothing in it has run; `noeta plugins list` shows what it brings");
    }
    Ok(ExitCode::SUCCESS)
}

/// `noeta plugin list [--json]`: both scopes.
pub(crate) fn list(paths: &HostPaths, json_out: bool) -> Result<ExitCode> {
    let mut any = false;
    for (label, scope) in [("user", Scope::User), ("project", Scope::Project)] {
        let Ok(installed) = install::list(paths, scope) else {
            continue;
        };
        for plugin in installed.values() {
            any = true;
            if json_out {
                let mut value = serde_json::to_value(plugin)?;
                value["scope"] = json!(label);
                outln!("{value}");
            } else {
                outln!("{} [{label}]", describe(plugin));
            }
        }
    }
    if !any && !json_out {
        outln!("no plugin installed with `noeta plugin add`");
    }
    Ok(ExitCode::SUCCESS)
}

/// `noeta plugin remove NAME [--project]`.
pub(crate) fn remove(paths: &HostPaths, name: &str, project: bool) -> Result<ExitCode> {
    let removed = install::remove(paths, name, scope(project))?;
    outln!("removed {}", removed.name);
    Ok(ExitCode::SUCCESS)
}

/// `noeta plugin update NAME COMMIT [--project]`.
pub(crate) fn update(
    paths: &HostPaths,
    name: &str,
    commit: &str,
    project: bool,
) -> Result<ExitCode> {
    let updated = install::update(paths, name, commit, scope(project))?;
    outln!("updated {}", describe(&updated));
    Ok(ExitCode::SUCCESS)
}

/// `noeta plugin marketplace add SOURCE`.
pub(crate) fn add_marketplace(paths: &HostPaths, source: &str) -> Result<ExitCode> {
    let market = install::add_marketplace(paths, source)?;
    outln!(
        "added marketplace {} ({}); install its plugins with `noeta plugin add <plugin>@{}`",
        market.name,
        market.dir.display(),
        market.name
    );
    Ok(ExitCode::SUCCESS)
}

/// `noeta plugin marketplace list`.
pub(crate) fn list_marketplaces(paths: &HostPaths) -> Result<ExitCode> {
    let markets = install::marketplaces(paths)?;
    if markets.is_empty() {
        outln!("no marketplace added");
    }
    for market in markets.values() {
        outln!("{} from {}", market.name, market.source);
        let file = market.dir.join(".claude-plugin").join("marketplace.json");
        let listing: serde_json::Value = noeta_core::files::read_text(&file, 16 * 1024 * 1024)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        for entry in listing["plugins"].as_array().into_iter().flatten() {
            outln!(
                "  {}  {}",
                entry["name"].as_str().unwrap_or("?"),
                entry["description"].as_str().unwrap_or("")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
