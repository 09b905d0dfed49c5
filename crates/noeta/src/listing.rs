//! Listings shared by the CLI and the goldens: the surface table and the plugin set, as JSON and as text.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use noeta_core::merge::contribution_json;
use noeta_core::{
    LoadOptions, ManifestContribution, MergeError, Merged, Origin, PluginSet, PluginSource,
    SurfaceOrder, SurfaceRegistry, load_plugins, standard_registry,
};
use serde_json::{Value, json};

use crate::host::HostError;

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

/// The built-ins' merged contribution listing (the golden): surface → ordered entries.
pub fn builtin_contributions_json() -> Result<String, HostError> {
    let sources: Vec<PluginSource> = crate::builtins::linked()
        .into_iter()
        .map(PluginSource::Linked)
        .collect();
    let set = load_plugins(&sources, &LoadOptions::new(standard_registry()))?;
    let merged = set.merged()?;
    Ok(pretty(&merged.to_json()))
}

/// `options` compiled against the built-ins alone, with the host's activation rules, and the
/// plugin set it was compiled from.
pub fn builtin_agent(
    options: &noeta_core::AgentOptions,
) -> Result<(PluginSet, noeta_core::CompiledAgent), HostError> {
    let sources: Vec<PluginSource> = crate::builtins::linked()
        .into_iter()
        .map(PluginSource::Linked)
        .collect();
    let set = load_plugins(&sources, &LoadOptions::new(standard_registry()))?;
    let merged = set.merged()?;
    let compiled =
        noeta_core::compile_agent(&set, &merged, options, &crate::host::activation_rules())?;
    Ok((set, compiled))
}

/// An agent activating every built-in, compiled against the built-ins alone.
fn all_builtins_agent() -> Result<(PluginSet, noeta_core::CompiledAgent), HostError> {
    let mut options = noeta_core::AgentOptions::named("goldens");
    options.plugins = crate::builtins::NAMES
        .iter()
        .map(|n| (*n).to_owned())
        .collect();
    builtin_agent(&options)
}

/// An extension's name and the tools it offers.
type Offered = (String, Vec<Arc<dyn noeta_core::Tool>>);

/// Each extension of `session` in call order with the tools it offers a fresh task.
fn offered_tools(session: &noeta_core::session::Session) -> Result<Vec<Offered>, HostError> {
    let task = noeta_core::store::TaskId::new("goldens")
        .map_err(|err| HostError::Listing(err.to_string()))?;
    let state = noeta_core::fold::TaskState::default();
    let view = noeta_core::extension::View::new(&task, "goldens", &state, &[], &session.extensions);
    session
        .extensions
        .iter()
        .map(|ext| {
            let tools = ext.tools(&view).map_err(|err| {
                HostError::Listing(format!("`{}` tools failed: {err}", ext.name()))
            })?;
            Ok((ext.name().to_owned(), tools))
        })
        .collect()
}

fn tool_json(tool: &dyn noeta_core::Tool) -> Value {
    json!({
        "name": tool.name(),
        "description": tool.description(),
        "input_schema": tool.input_schema(),
    })
}

/// The control tools every built-in mounts, in schema render order (the golden).
pub fn control_tool_schemas_json() -> Result<String, HostError> {
    let (_, agent) = all_builtins_agent()?;
    let list: Vec<Value> = agent
        .control_tools
        .iter()
        .map(|mount| tool_json(mount.tool.as_ref()))
        .collect();
    Ok(pretty(&Value::Array(list)))
}

/// Every built-in tool's name, description and input schema, by name (the golden): the tool
/// and control-tool surfaces, and what the session packs mount with default settings.
pub fn builtin_tool_schemas_json() -> Result<String, HostError> {
    let (set, agent) = all_builtins_agent()?;
    let session = crate::host::build_session(&set, &agent, &BTreeMap::new())?;
    let mounted: Vec<Arc<dyn noeta_core::Tool>> = offered_tools(&session)?
        .into_iter()
        .flat_map(|(_, tools)| tools)
        .collect();
    let mut tools: Vec<(String, Value)> = agent
        .tools
        .values()
        .chain(mounted.iter())
        .map(|tool| (tool.name().to_owned(), tool_json(tool.as_ref())))
        .chain(
            agent
                .control_tools
                .iter()
                .map(|m| (m.tool.name().to_owned(), tool_json(m.tool.as_ref()))),
        )
        .collect();
    tools.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(pretty(&Value::Array(
        tools.into_iter().map(|(_, v)| v).collect(),
    )))
}

/// The layout of a session of every built-in plus `extra` plugins (the golden): the session
/// packs in their loop order (priority, plugin, name), the extension list in call order with
/// the tools each offers, and the resident content kinds in layout order. `extra` is how the
/// golden adds a third-party pack at a band of its own.
pub fn session_layout_text(
    extra: Vec<noeta_core::LinkedPlugin>,
    config: &BTreeMap<String, Value>,
) -> Result<String, HostError> {
    let sources: Vec<PluginSource> = crate::builtins::linked()
        .into_iter()
        .chain(extra)
        .map(PluginSource::Linked)
        .collect();
    let set = load_plugins(&sources, &LoadOptions::new(standard_registry()))?;
    let merged = set.merged()?;
    let mut options = noeta_core::AgentOptions::named("goldens");
    options.plugins = set.names().into_iter().map(str::to_owned).collect();
    let compiled =
        noeta_core::compile_agent(&set, &merged, &options, &crate::host::activation_rules())?;
    let session = crate::host::build_session(&set, &compiled, config)?;
    let mut out = String::from("session packs, in build order:\n");
    for entry in compiled.resolution.for_surface("session_pack") {
        out.push_str(&format!(
            "  {:>4}  {}/{}\n",
            entry.contribution.priority(),
            entry.plugin,
            entry.contribution.name
        ));
    }
    out.push_str("extensions, in call order (tools offered):\n");
    for (name, tools) in offered_tools(&session)? {
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        if names.is_empty() {
            out.push_str(&format!("  {name}\n"));
        } else {
            out.push_str(&format!("  {name} ({})\n", names.join(", ")));
        }
    }
    out.push_str("resident content kinds, in layout order:\n");
    for kind in &session.kinds {
        out.push_str(&format!("  {:>4}  {}\n", kind.band, kind.kind));
    }
    Ok(out)
}
