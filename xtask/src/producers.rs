//! What the goldens hash, produced from the built-ins alone: their merged contributions, the
//! control-tool and tool schemas, a session's layout, and the default agent compiled.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;
use noeta_core::{LoadOptions, PluginSet, PluginSource, load_plugins, standard_registry};
use serde_json::{Value, json};

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// The built-ins' merged contribution listing (the golden): surface → ordered entries.
pub(crate) fn builtin_contributions_json() -> Result<String> {
    let set = builtin_set(Vec::new())?;
    Ok(pretty(&set.merged()?.to_json()))
}

/// The built-ins, plus `extra` linked plugins, loaded against the standard registry.
fn builtin_set(extra: Vec<noeta_core::LinkedPlugin>) -> Result<PluginSet> {
    let sources: Vec<PluginSource> = noeta::builtins::linked()
        .into_iter()
        .chain(extra)
        .map(PluginSource::Linked)
        .collect();
    Ok(load_plugins(
        &sources,
        &LoadOptions::new(standard_registry()),
    )?)
}

/// `options` compiled against the built-ins alone, with the host's activation rules, and the
/// plugin set it was compiled from.
pub(crate) fn builtin_agent(
    options: &noeta_core::AgentOptions,
) -> Result<(PluginSet, noeta_core::CompiledAgent)> {
    let set = builtin_set(Vec::new())?;
    let merged = set.merged()?;
    let compiled = noeta_core::compile_agent(&set, &merged, options, &noeta::activation_rules())?;
    Ok((set, compiled))
}

/// An agent activating every built-in, compiled against the built-ins alone.
fn all_builtins_agent() -> Result<(PluginSet, noeta_core::CompiledAgent)> {
    let mut options = noeta_core::AgentOptions::named("goldens");
    options.plugins = noeta::builtins::NAMES
        .iter()
        .map(|n| (*n).to_owned())
        .collect();
    builtin_agent(&options)
}

/// An extension's name and the tools it offers.
type Offered = (String, Vec<Arc<dyn noeta_core::Tool>>);

/// Each extension of `session` in call order with the tools it offers a fresh task.
fn offered_tools(session: &noeta_core::session::Session) -> Result<Vec<Offered>> {
    let task = noeta_core::store::TaskId::new("goldens")
        .map_err(|err| anyhow::anyhow!(err.to_string()))?;
    let state = noeta_core::fold::TaskState::default();
    let view = noeta_core::extension::View::new(&task, "goldens", &state, &[], &session.extensions);
    session
        .extensions
        .iter()
        .map(|ext| {
            let tools = ext
                .tools(&view)
                .map_err(|err| anyhow::anyhow!(format!("`{}` tools failed: {err}", ext.name())))?;
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
pub(crate) fn control_tool_schemas_json() -> Result<String> {
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
pub(crate) fn builtin_tool_schemas_json() -> Result<String> {
    let (set, agent) = all_builtins_agent()?;
    let session = noeta::build_session(&set, &agent, &BTreeMap::new())?;
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
pub(crate) fn session_layout_text(
    extra: Vec<noeta_core::LinkedPlugin>,
    config: &BTreeMap<String, Value>,
) -> Result<String> {
    let set = builtin_set(extra)?;
    let merged = set.merged()?;
    let mut options = noeta_core::AgentOptions::named("goldens");
    options.plugins = set.names().into_iter().map(str::to_owned).collect();
    let compiled = noeta_core::compile_agent(&set, &merged, &options, &noeta::activation_rules())?;
    // The host's backends, so the packs that need one offer their tools: a preview gateway,
    // and a browser backend that is never contacted (its browser starts on a first call).
    let browser = noeta::browser_backend::Config {
        launch: noeta::browser_backend::Launch::Attach {
            url: "ws://127.0.0.1:9/golden".to_owned(),
        },
        profiles: std::path::PathBuf::from("/var/empty"),
        allowed_hosts: Vec::new(),
        width: 1280,
        height: 800,
        timeout: std::time::Duration::from_secs(30),
        wrapper: Vec::new(),
    };
    let instances = noeta_core::session::Instances::new()
        .with_host_value(
            noeta::app::GATEWAY,
            noeta::app::host_value(noeta::app::Gateway::start()?),
        )
        .with_host_value(
            noeta::browser_backend::BACKEND,
            noeta::browser_backend::host_value(Arc::new(noeta::browser_backend::Backend::new(
                browser,
            ))),
        );
    let session = noeta::build_host_session(
        &set,
        &compiled,
        config,
        &noeta::EnvSecrets::new(),
        &instances,
    )?;
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
