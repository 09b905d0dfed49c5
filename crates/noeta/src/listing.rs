//! Listings the CLI prints (and the goldens hash): the surface table and the plugin set, as JSON
//! and as text. What only the goldens need is produced in xtask.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use noeta_core::merge::contribution_json;
use noeta_core::{
    ManifestContribution, MergeError, Merged, Origin, PluginSet, SurfaceOrder, SurfaceRegistry,
};
use serde_json::{Value, json};

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// The surface registry as pretty JSON, one object per surface in name order.
pub fn surfaces_json(registry: &SurfaceRegistry) -> String {
    pretty(&registry.to_json())
}

/// The surface registry as an aligned table.
pub fn surfaces_text(registry: &SurfaceRegistry) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<22} {:<9} {:<11} {:<14} {:<9} binding",
        "surface", "plane", "scope", "collision", "ordering"
    );
    for spec in registry.specs() {
        let _ = writeln!(
            out,
            "{:<22} {:<9} {:<11} {:<14} {:<9} {}",
            spec.name(),
            spec.plane(),
            spec.scope(),
            spec.collision(),
            spec.ordering(),
            spec.binding().map_or("-", |b| b.as_str())
        );
    }
    out
}

/// An origin as JSON: `{"crate": name}` or `{"file": path}`.
pub fn origin_json(origin: &Origin) -> Value {
    match origin {
        Origin::Crate(name) => json!({ "crate": name }),
        Origin::File(path) => json!({ "file": path.display().to_string() }),
    }
}

/// A plugin's contributions grouped by surface, each group in its surface's order.
fn grouped<'a>(
    registry: &SurfaceRegistry,
    contributions: &'a [ManifestContribution],
) -> BTreeMap<&'a str, Vec<&'a ManifestContribution>> {
    let mut groups: BTreeMap<&str, Vec<&ManifestContribution>> = BTreeMap::new();
    for c in contributions {
        groups.entry(c.surface.as_str()).or_default().push(c);
    }
    for (surface, entries) in &mut groups {
        let by_priority = registry
            .get(surface)
            .is_ok_and(|s| s.ordering() == SurfaceOrder::Priority);
        if by_priority {
            entries.sort_by(|a, b| (a.priority(), &a.name).cmp(&(b.priority(), &b.name)));
        } else {
            entries.sort_by(|a, b| a.name.cmp(&b.name));
        }
    }
    groups
}

/// The plugin set as JSON: plugins with their contributions by surface, problems, and collisions.
pub fn plugins_json(set: &PluginSet, merged: &Result<Merged, MergeError>) -> Value {
    let plugins: Vec<Value> = set
        .plugins()
        .map(|p| {
            let contributions: serde_json::Map<String, Value> =
                grouped(set.registry(), &p.manifest.contributions)
                    .into_iter()
                    .map(|(surface, entries)| {
                        let mounts = set.registry().get(surface).is_ok_and(|s| s.mounts_tools());
                        let list = entries
                            .into_iter()
                            .map(|c| contribution_json(c, mounts))
                            .collect();
                        (surface.to_owned(), Value::Array(list))
                    })
                    .collect();
            json!({
                "name": p.name(),
                "version": p.manifest.version,
                "requires-noeta": p.manifest.requires_noeta,
                "config-schema": p.manifest.config_schema,
                "source": p.source.as_str(),
                "origin": origin_json(&p.origin),
                "contributions": contributions,
            })
        })
        .collect();
    let problems: Vec<Value> = set
        .problems()
        .iter()
        .map(|problem| {
            json!({
                "plugin": problem.plugin,
                "source": problem.source.as_str(),
                "origin": origin_json(&problem.origin),
                "message": problem.to_string(),
            })
        })
        .collect();
    let collisions: Vec<Value> = match merged {
        Ok(_) => Vec::new(),
        Err(err) => err
            .collisions
            .iter()
            .map(|c| json!(c.to_string()))
            .collect(),
    };
    json!({ "plugins": plugins, "problems": problems, "collisions": collisions })
}

/// One line per contribution group: `surface  name, name (mounts A, B)`.
fn contribution_lines(set: &PluginSet, contributions: &[ManifestContribution], out: &mut String) {
    let groups = grouped(set.registry(), contributions);
    if groups.is_empty() {
        let _ = writeln!(out, "    (no contributions)");
    }
    for (surface, entries) in groups {
        // Tools a session pack mounts are listed together, after the pack's name.
        let mut by_pack: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for c in &entries {
            if let Some(pack) = c.mounted_by() {
                by_pack.entry(pack).or_default().push(&c.name);
            }
        }
        let declared = by_pack
            .into_iter()
            .map(|(pack, tools)| format!("{} (mounted by session pack {pack})", tools.join(", ")));
        let names: Vec<String> = entries
            .iter()
            .filter(|c| c.mounted_by().is_none())
            .map(|c| {
                let mut label = c.name.clone();
                if set.registry().get(surface).is_ok_and(|s| s.mounts_tools()) {
                    let tools = c.tool_names();
                    if tools != [c.name.clone()] {
                        label.push_str(&format!(" (mounts {})", tools.join(", ")));
                    }
                }
                if set
                    .registry()
                    .get(surface)
                    .is_ok_and(|s| s.ordering() == SurfaceOrder::Priority)
                {
                    label.push_str(&format!(" @{}", c.priority()));
                }
                label
            })
            .chain(declared)
            .collect();
        let _ = writeln!(out, "    {surface:<22} {}", names.join(", "));
    }
}

/// The plugin set as text for people.
pub fn plugins_text(set: &PluginSet, merged: &Result<Merged, MergeError>) -> String {
    let mut out = String::new();
    for p in set.plugins() {
        let _ = writeln!(
            out,
            "{} {} ({}, {})",
            p.name(),
            p.manifest.version.as_deref().unwrap_or("(no version)"),
            p.source,
            p.origin
        );
        contribution_lines(set, &p.manifest.contributions, &mut out);
    }
    if !set.problems().is_empty() {
        let _ = writeln!(out, "\nplugins that failed to load:");
        for problem in set.problems() {
            let _ = writeln!(out, "  {problem}");
        }
    }
    if let Err(err) = merged {
        let _ = writeln!(out, "\ncollisions:");
        for c in &err.collisions {
            let _ = writeln!(out, "  {c}");
        }
    }
    out
}
