//! Activation and identity: compile an agent's options and the plugins it activates into an [`AgentSpec`].
//!
//! The spec has canonical bytes (RFC 8785) and a SHA-256 identity hash: the
//! same inputs give the same bytes on every run and machine. Compilation is
//! table-driven by each identity surface's activation binding, so a
//! host-registered identity surface reaches the spec without a kernel edit.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::canonical;
use crate::contrib::{AgentDefinition, ComponentRef, ControlToolMount, SessionBuildContext};
use crate::loader::PluginSet;
use crate::merge::Merged;
use crate::panics::panic_message;
use crate::resolve::{Resolution, ResolveError, ResolvedEntry};
use crate::surface::names;
use crate::surface::{ActivationBinding, Plane};
use crate::tool::{Tool, ToolFlags, tool_schema_hash};
use crate::value::Resolved;

/// What the host says about one agent.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// The agent's name.
    pub name: String,
    /// Its base instructions; prompt fragments are appended.
    pub instructions: String,
    /// Plugins it activates by name.
    pub plugins: Vec<String>,
    /// Child agents it names for its roster (from any loaded plugin's `agent` contributions).
    pub agents: Vec<String>,
    /// An allow-list of model-visible tool names; `None` keeps every tool its plugins offer.
    pub tools: Option<Vec<String>>,
    /// A policy given by the host; colliding with an activated policy plugin is an error.
    pub policy: Option<ComponentRef>,
    /// Per-plugin settings, handed to control-tool factories.
    pub config: BTreeMap<String, Value>,
    /// Agents the host defines outside plugins (agent files), by name: `agents` (and a child's
    /// own roster) may name them, and they enter the roster as a plugin's definition would.
    pub local_agents: BTreeMap<String, Arc<AgentDefinition>>,
}

impl AgentOptions {
    /// Options for an agent called `name`.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// The options of a child agent defined by a plugin.
    pub fn from_definition(definition: &AgentDefinition) -> Self {
        Self {
            name: definition.name.clone(),
            instructions: definition.instructions.clone(),
            plugins: definition.plugins.clone(),
            agents: definition.agents.clone(),
            tools: definition.tools.clone(),
            policy: None,
            config: BTreeMap::new(),
            local_agents: BTreeMap::new(),
        }
    }
}

/// Host-level activation rules: what every agent gets without asking.
#[derive(Debug, Clone)]
pub struct ActivationRules {
    /// Plugins active for every agent (when loaded).
    pub always_on: BTreeSet<String>,
    /// The policy pinned when neither the options nor a plugin give one.
    pub default_policy: ComponentRef,
}

impl Default for ActivationRules {
    fn default() -> Self {
        Self {
            always_on: BTreeSet::new(),
            default_policy: ComponentRef::new("core", "1"),
        }
    }
}

/// A tool in an agent's identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ToolIdentity {
    /// The model-visible name.
    pub name: String,
    /// The plugin offering it.
    pub plugin: String,
    /// SHA-256 of its canonical name, description and schema.
    pub schema_sha256: String,
}

/// A prompt fragment in an agent's identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FragmentIdentity {
    /// The contributing plugin.
    pub plugin: String,
    /// The fragment's name.
    pub name: String,
}

/// A content kind in an agent's identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContentKindIdentity {
    /// The kind.
    pub kind: String,
    /// Its layout band.
    pub band: i64,
    /// The contributing plugin.
    pub plugin: String,
}

/// A mounted control tool in an agent's identity, in schema render order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ControlToolIdentity {
    /// The model-visible name.
    pub name: String,
    /// The schema priority.
    pub priority: i64,
    /// The contributing plugin.
    pub plugin: String,
    /// SHA-256 of the mounted tool's canonical name, description and input schema.
    pub schema_sha256: String,
}

/// The compiled identity of one agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentSpec {
    /// The agent's name.
    pub name: String,
    /// Instructions with prompt fragments appended in `(plugin, name)` order.
    pub instructions: String,
    /// The pinned policy.
    pub policy: ComponentRef,
    /// Tools, sorted by name.
    pub tools: Vec<ToolIdentity>,
    /// Activated plugins, sorted.
    pub plugins: Vec<String>,
    /// Agents it may spawn, sorted (internal `__` agents excluded).
    pub spawnable: Vec<String>,
    /// Prompt fragments in `(plugin, name)` order.
    pub prompt_fragments: Vec<FragmentIdentity>,
    /// Content kinds in merged order.
    pub content_kinds: Vec<ContentKindIdentity>,
    /// Control tools in `(priority, name)` order.
    pub control_tools: Vec<ControlToolIdentity>,
    /// The agent's allow-list of model-visible tool names, sorted; `None` keeps every tool.
    /// It bounds every tool the agent is offered ([`AgentSpec::allows`]): contributions' and
    /// session packs' tools when the session is built, and every step's offer — MCP and
    /// control tools included — when the runner composes a request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
}

/// Whether an allow-list admits a tool named `name`: the list names it; or it is an MCP tool
/// (`mcp__<server>__<tool>`) and the list names its server (`mcp__<server>`, or
/// `mcp__<server>__*`), or every MCP tool (`mcp__*`), as Claude Code's agent files name them;
/// or the tool says it passes agent lists (`past_agent_lists`: runtime mechanics such as
/// structured output, not capabilities).
pub fn allow_list_admits(allowed: &[String], name: &str, flags: &ToolFlags) -> bool {
    if flags.past_agent_lists || allowed.iter().any(|a| a == name) {
        return true;
    }
    let Some(rest) = name.strip_prefix("mcp__") else {
        return false;
    };
    allowed.iter().any(|entry| {
        if entry == "mcp__*" {
            return true;
        }
        let Some(server) = entry
            .strip_prefix("mcp__")
            .map(|s| s.strip_suffix("__*").unwrap_or(s))
        else {
            return false;
        };
        !server.is_empty()
            && !server.contains("__")
            && rest
                .strip_prefix(server)
                .is_some_and(|tool| tool.starts_with("__"))
    })
}

impl AgentSpec {
    /// Whether the agent may be offered a tool named `name` (see [`allow_list_admits`]).
    pub fn allows(&self, name: &str, flags: &ToolFlags) -> bool {
        self.allowed_tools
            .as_deref()
            .is_none_or(|allowed| allow_list_admits(allowed, name, flags))
    }

    /// The RFC 8785 canonical bytes of the spec.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        serde_json::to_value(self)
            .map(|v| canonical::to_bytes(&v))
            .unwrap_or_default()
    }

    /// SHA-256 hex of the canonical bytes: the agent's identity.
    pub fn identity_hash(&self) -> String {
        canonical::sha256_hex(&self.canonical_bytes())
    }
}

/// An agent compiled against a plugin set: its identity and the values it runs with.
#[derive(Debug, Clone)]
pub struct CompiledAgent {
    /// The identity.
    pub spec: AgentSpec,
    /// Everything resolved for it, by surface.
    pub resolution: Resolution,
    /// Its tools, by name.
    pub tools: BTreeMap<String, Arc<dyn Tool>>,
    /// Its mounted control tools, in schema render order `(priority, name)`.
    pub control_tools: Vec<ControlToolMount>,
    /// Its roster's definitions, by name.
    pub roster: BTreeMap<String, Arc<AgentDefinition>>,
}

/// Why an agent could not be compiled. Messages name the agent, and the child for a child's list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// An activation names no loaded plugin.
    #[error(
        "unknown plugin activation `{name}` on {agent} — not in the loaded plugin set (loaded: {known}); load it before activating, or fix the name"
    )]
    UnknownActivation {
        /// The name.
        name: String,
        /// Which agent (and child) lists it.
        agent: String,
        /// The loaded plugin names.
        known: String,
    },
    /// An activation names a plugin that failed to load.
    #[error("plugin `{name}` activated on {agent} could not be loaded: {problem}")]
    BrokenPlugin {
        /// The plugin.
        name: String,
        /// Which agent activates it.
        agent: String,
        /// The load problem.
        problem: String,
    },
    /// An activation names a disabled built-in.
    #[error("plugin `{name}` activated on {agent} is disabled (disabled_builtins)")]
    Disabled {
        /// The plugin.
        name: String,
        /// Which agent activates it.
        agent: String,
    },
    /// A roster entry names no loaded agent contribution.
    #[error("unknown child agent `{name}` on {agent} (known agents: {known})")]
    UnknownAgent {
        /// The name.
        name: String,
        /// Which agent lists it.
        agent: String,
        /// The agent contributions of the loaded set.
        known: String,
    },
    /// Resolution failed for something the agent uses.
    #[error("{agent} cannot be built: {}", errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Resolve {
        /// The agent.
        agent: String,
        /// Every resolution failure.
        errors: Vec<ResolveError>,
    },
    /// Two policy sources.
    #[error(
        "policy is single-valued on {agent} but supplied by {first} and {second} — no override"
    )]
    PolicyConflict {
        /// The agent.
        agent: String,
        /// One source.
        first: String,
        /// The other.
        second: String,
    },
    /// A value's own name differs from what its contribution declares.
    #[error(
        "plugin `{plugin}`: {surface} `{contribution}` declares the name(s) {declared} but its value is named `{actual}`"
    )]
    NameMismatch {
        /// The plugin.
        plugin: String,
        /// The surface.
        surface: String,
        /// The contribution.
        contribution: String,
        /// The declared names.
        declared: String,
        /// The value's name.
        actual: String,
    },
    /// Two tools with one model-visible name reach one agent.
    #[error("tool `{tool}` on {agent} is offered by both {first} and {second} — no override")]
    ToolClash {
        /// The tool name.
        tool: String,
        /// The agent.
        agent: String,
        /// One offerer.
        first: String,
        /// The other.
        second: String,
    },
    /// A control-tool factory refused its settings.
    #[error(
        "plugin `{plugin}`: control tool `{contribution}` cannot be built for {agent}: {reason}"
    )]
    FactoryFailed {
        /// The plugin.
        plugin: String,
        /// The contribution.
        contribution: String,
        /// The agent.
        agent: String,
        /// Why.
        reason: String,
    },
    /// A control-tool factory panicked.
    #[error(
        "plugin `{plugin}`: control tool factory `{contribution}` panicked while building {agent}: {message}"
    )]
    FactoryPanicked {
        /// The plugin.
        plugin: String,
        /// The contribution.
        contribution: String,
        /// The agent.
        agent: String,
        /// The panic payload.
        message: String,
    },
}

fn agent_label(agent: &str, parent: Option<&str>) -> String {
    match parent {
        Some(parent) => format!("agent `{agent}` (child of `{parent}`)"),
        None => format!("agent `{agent}`"),
    }
}

fn join_or_none<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let list: Vec<&str> = names.collect();
    if list.is_empty() {
        "none".to_owned()
    } else {
        list.join(", ")
    }
}

/// Checks each activation name against the loaded set.
fn check_activations(set: &PluginSet, names: &[String], agent: &str) -> Result<(), CompileError> {
    for name in names {
        if set.contains(name) {
            continue;
        }
        if let Some(problem) = set.problem_for(name) {
            return Err(CompileError::BrokenPlugin {
                name: name.clone(),
                agent: agent.to_owned(),
                problem: problem.to_string(),
            });
        }
        if set.disabled_builtins().contains(name) {
            return Err(CompileError::Disabled {
                name: name.clone(),
                agent: agent.to_owned(),
            });
        }
        return Err(CompileError::UnknownActivation {
            name: name.clone(),
            agent: agent.to_owned(),
            known: join_or_none(set.names().into_iter()),
        });
    }
    Ok(())
}

/// The `agent`-bound surfaces' contributions of the whole set, by contribution name.
fn agent_catalogue<'a>(
    set: &'a PluginSet,
    merged: &'a Merged,
) -> BTreeMap<&'a str, (&'a str, &'a str)> {
    let mut catalogue = BTreeMap::new();
    for spec in set.registry().specs() {
        if spec.binding() != Some(ActivationBinding::Agent) {
            continue;
        }
        for entry in merged.for_surface(spec.name()) {
            catalogue.insert(
                entry.contribution.name.as_str(),
                (entry.plugin.as_str(), spec.name()),
            );
        }
    }
    catalogue
}

fn resolve_agent(
    set: &PluginSet,
    plugin: &str,
    surface: &str,
    name: &str,
    agent: &str,
) -> Result<Arc<AgentDefinition>, CompileError> {
    let value = set
        .resolve_contribution(plugin, surface, name)
        .map_err(|err| CompileError::Resolve {
            agent: agent.to_owned(),
            errors: vec![err],
        })?;
    match value {
        Resolved::Agent(def) if def.name == name => Ok(def),
        Resolved::Agent(def) => Err(CompileError::NameMismatch {
            plugin: plugin.to_owned(),
            surface: surface.to_owned(),
            contribution: name.to_owned(),
            declared: format!("`{name}`"),
            actual: def.name.clone(),
        }),
        _ => Err(CompileError::Resolve {
            agent: agent.to_owned(),
            errors: vec![ResolveError::Invalid {
                plugin: plugin.to_owned(),
                surface: surface.to_owned(),
                name: name.to_owned(),
                reason: "not an agent definition".to_owned(),
            }],
        }),
    }
}

/// Compiles one agent against a loaded, merged plugin set.
pub fn compile_agent(
    set: &PluginSet,
    merged: &Merged,
    options: &AgentOptions,
    rules: &ActivationRules,
) -> Result<CompiledAgent, CompileError> {
    let agent = agent_label(&options.name, None);
    check_activations(set, &options.plugins, &agent)?;
    let mut activated: BTreeSet<String> = options.plugins.iter().cloned().collect();
    for name in &rules.always_on {
        if set.contains(name) {
            activated.insert(name.clone());
        } else if let Some(problem) = set.problem_for(name) {
            // An always-on plugin that failed to load must not vanish silently from every agent.
            return Err(CompileError::BrokenPlugin {
                name: name.clone(),
                agent: agent.clone(),
                problem: problem.to_string(),
            });
        }
    }

    let resolution =
        set.resolve_for(merged, &activated)
            .map_err(|errors| CompileError::Resolve {
                agent: agent.clone(),
                errors,
            })?;

    // The roster: agents named by the options, plus those contributed by activated plugins.
    let catalogue = agent_catalogue(set, merged);
    let mut roster: BTreeMap<String, Arc<AgentDefinition>> = BTreeMap::new();
    for name in &options.agents {
        if let Some(local) = options.local_agents.get(name) {
            roster.insert(name.clone(), Arc::clone(local));
            continue;
        }
        let Some((plugin, surface)) = catalogue.get(name.as_str()) else {
            return Err(CompileError::UnknownAgent {
                name: name.clone(),
                agent: agent.clone(),
                known: join_or_none(
                    catalogue
                        .keys()
                        .copied()
                        .chain(options.local_agents.keys().map(String::as_str)),
                ),
            });
        };
        roster.insert(
            name.clone(),
            resolve_agent(set, plugin, surface, name, &agent)?,
        );
    }
    for (surface, binding) in identity_surfaces(set) {
        if binding != ActivationBinding::Agent {
            continue;
        }
        for entry in resolution.for_surface(&surface) {
            if let Resolved::Agent(def) = &entry.value {
                expect_named(entry, &def.name)?;
                roster.insert(entry.contribution.name.clone(), Arc::clone(def));
            }
        }
    }
    for (child, def) in &roster {
        let child_label = agent_label(child, Some(&options.name));
        // A built-in switched off for this host is the child's to run without (or fail on)
        // when its own session is built; it does not keep the parent from compiling.
        let active: Vec<String> = def
            .plugins
            .iter()
            .filter(|name| !set.disabled_builtins().contains(*name))
            .cloned()
            .collect();
        check_activations(set, &active, &child_label)?;
        for grandchild in &def.agents {
            if !catalogue.contains_key(grandchild.as_str())
                && !options.local_agents.contains_key(grandchild)
            {
                return Err(CompileError::UnknownAgent {
                    name: grandchild.clone(),
                    agent: child_label,
                    known: join_or_none(
                        catalogue
                            .keys()
                            .copied()
                            .chain(options.local_agents.keys().map(String::as_str)),
                    ),
                });
            }
        }
    }
    let spawnable: Vec<String> = roster
        .keys()
        .filter(|n| !n.starts_with("__"))
        .cloned()
        .collect();

    let mut policy: Option<(String, ComponentRef)> = options
        .policy
        .clone()
        .map(|p| ("the agent's options".to_owned(), p));
    let mut tools: ToolMap = BTreeMap::new();
    let mut fragments: Vec<(&ResolvedEntry, &str)> = Vec::new();
    let mut content_kinds = Vec::new();
    let mut control_entries: Vec<&ResolvedEntry> = Vec::new();

    for (surface, binding) in identity_surfaces(set) {
        for entry in resolution.for_surface(&surface) {
            match (binding, &entry.value) {
                (ActivationBinding::Tool, Resolved::Tool(tool)) => {
                    let declared = entry.contribution.tool_names();
                    if !declared.iter().any(|n| n == tool.name()) {
                        return Err(CompileError::NameMismatch {
                            plugin: entry.plugin.clone(),
                            surface: surface.clone(),
                            contribution: entry.contribution.name.clone(),
                            declared: declared
                                .iter()
                                .map(|n| format!("`{n}`"))
                                .collect::<Vec<_>>()
                                .join(", "),
                            actual: tool.name().to_owned(),
                        });
                    }
                    let offerer = Offerer::plugin(&entry.plugin);
                    add_tool(&mut tools, &agent, offerer, Arc::clone(tool))?;
                }
                (ActivationBinding::PromptFragment, Resolved::PromptFragment(text)) => {
                    fragments.push((entry, text.as_str()));
                }
                (ActivationBinding::ContentKind, Resolved::ContentKind(kind)) => {
                    // The collision key is the contribution name, so the kind must carry it.
                    expect_named(entry, &kind.kind)?;
                    content_kinds.push(ContentKindIdentity {
                        kind: kind.kind.clone(),
                        band: kind.band,
                        plugin: entry.plugin.clone(),
                    });
                }
                (ActivationBinding::Policy, Resolved::Policy(factory)) => {
                    let source = format!("active plugin `{}`", entry.plugin);
                    if let Some((first, _)) = &policy {
                        return Err(CompileError::PolicyConflict {
                            agent: agent.clone(),
                            first: first.clone(),
                            second: source,
                        });
                    }
                    policy = Some((source, factory.policy_ref()));
                }
                (ActivationBinding::Elsewhere, Resolved::ControlTool(_)) => {
                    control_entries.push(entry);
                }
                _ => {}
            }
        }
    }

    // In-process MCP servers are host-wired, but their tools join every agent's tool set.
    for entry in resolution.for_surface(names::MCP_SERVER) {
        if let Resolved::McpServer(server) = &entry.value {
            for tool in &server.tools {
                let named: Arc<dyn Tool> = Arc::new(McpNamed {
                    name: crate::contrib::mcp_tool_name(&entry.contribution.name, tool.name()),
                    inner: Arc::clone(tool),
                });
                let offerer = Offerer {
                    plugin: entry.plugin.clone(),
                    label: format!(
                        "mcp server `{}` of plugin `{}`",
                        entry.contribution.name, entry.plugin
                    ),
                };
                add_tool(&mut tools, &agent, offerer, named)?;
            }
        }
    }
    if let Some(allowed) = &options.tools {
        tools.retain(|name, (_, tool)| allow_list_admits(allowed, name, &tool.flags()));
    }

    fragments.sort_by(|a, b| {
        (&a.0.plugin, &a.0.contribution.name).cmp(&(&b.0.plugin, &b.0.contribution.name))
    });
    let mut instructions = options.instructions.clone();
    for (_, text) in &fragments {
        if !instructions.is_empty() {
            instructions.push_str("\n\n");
        }
        instructions.push_str(text);
    }

    // The allow-list as identity pins it: sorted, each name once.
    let allowed_tools: Option<Vec<String>> = options.tools.as_ref().map(|names| {
        let set: BTreeSet<String> = names.iter().cloned().collect();
        set.into_iter().collect()
    });
    let ctx = {
        let mut ctx = SessionBuildContext::new(options.name.clone());
        ctx.plugins = activated.iter().cloned().collect();
        ctx.roster = spawnable.clone();
        ctx.roster_agents = spawnable
            .iter()
            .filter_map(|name| roster.get(name).cloned())
            .collect();
        ctx.config = options.config.clone();
        ctx.tools = allowed_tools.clone();
        ctx
    };
    let mounted = mount_control_tools(&control_entries, &ctx, &agent, &tools)?;
    let (control_tools, control_values): (Vec<ControlToolIdentity>, Vec<ControlToolMount>) =
        mounted.into_iter().unzip();

    let spec = AgentSpec {
        name: options.name.clone(),
        instructions,
        policy: policy.map_or_else(|| rules.default_policy.clone(), |(_, p)| p),
        tools: tools
            .iter()
            .map(|(name, (offerer, tool))| ToolIdentity {
                name: name.clone(),
                plugin: offerer.plugin.clone(),
                schema_sha256: tool_schema_hash(tool.as_ref()),
            })
            .collect(),
        allowed_tools,
        plugins: activated.into_iter().collect(),
        spawnable,
        prompt_fragments: fragments
            .iter()
            .map(|(e, _)| FragmentIdentity {
                plugin: e.plugin.clone(),
                name: e.contribution.name.clone(),
            })
            .collect(),
        content_kinds,
        control_tools,
    };
    Ok(CompiledAgent {
        spec,
        resolution,
        tools: tools.into_iter().map(|(n, (_, t))| (n, t)).collect(),
        control_tools: control_values,
        roster,
    })
}

/// A value whose own name must equal its contribution's name (agents, content kinds).
fn expect_named(entry: &ResolvedEntry, actual: &str) -> Result<(), CompileError> {
    if entry.contribution.name == actual {
        return Ok(());
    }
    Err(CompileError::NameMismatch {
        plugin: entry.plugin.clone(),
        surface: entry.contribution.surface.clone(),
        contribution: entry.contribution.name.clone(),
        declared: format!("`{}`", entry.contribution.name),
        actual: actual.to_owned(),
    })
}

fn identity_surfaces(set: &PluginSet) -> Vec<(String, ActivationBinding)> {
    set.registry()
        .specs()
        .filter(|s| s.plane() == Plane::Identity)
        .filter_map(|s| s.binding().map(|b| (s.name().to_owned(), b)))
        .collect()
}

/// Who offers a tool: the plugin (recorded in the identity) and a label for messages.
struct Offerer {
    plugin: String,
    label: String,
}

impl Offerer {
    fn plugin(plugin: &str) -> Self {
        Self {
            plugin: plugin.to_owned(),
            label: format!("plugin `{plugin}`"),
        }
    }
}

type ToolMap = BTreeMap<String, (Offerer, Arc<dyn Tool>)>;

fn add_tool(
    tools: &mut ToolMap,
    agent: &str,
    offerer: Offerer,
    tool: Arc<dyn Tool>,
) -> Result<(), CompileError> {
    let name = tool.name().to_owned();
    if let Some((first, _)) = tools.get(&name) {
        return Err(CompileError::ToolClash {
            tool: name,
            agent: agent.to_owned(),
            first: first.label.clone(),
            second: offerer.label,
        });
    }
    tools.insert(name, (offerer, tool));
    Ok(())
}

/// A mounted control tool: its identity entry and the tool its calls run.
type Mounted = (ControlToolIdentity, ControlToolMount);

fn mount_control_tools(
    entries: &[&ResolvedEntry],
    ctx: &SessionBuildContext,
    agent: &str,
    tools: &ToolMap,
) -> Result<Vec<Mounted>, CompileError> {
    let mut mounted: Vec<Mounted> = Vec::new();
    for entry in entries {
        let Resolved::ControlTool(factory) = &entry.value else {
            continue;
        };
        let built = catch_unwind(AssertUnwindSafe(|| factory.build(ctx)))
            .map_err(|payload| CompileError::FactoryPanicked {
                plugin: entry.plugin.clone(),
                contribution: entry.contribution.name.clone(),
                agent: agent.to_owned(),
                message: panic_message(payload.as_ref()),
            })?
            .map_err(|reason| CompileError::FactoryFailed {
                plugin: entry.plugin.clone(),
                contribution: entry.contribution.name.clone(),
                agent: agent.to_owned(),
                reason,
            })?;
        let Some(mount) = built else { continue };
        let name = mount.name().to_owned();
        let declared = entry.contribution.tool_names();
        if !declared.contains(&name) {
            return Err(CompileError::NameMismatch {
                plugin: entry.plugin.clone(),
                surface: entry.contribution.surface.clone(),
                contribution: entry.contribution.name.clone(),
                declared: declared
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                actual: name,
            });
        }
        let this = format!("plugin `{}`", entry.plugin);
        if let Some((first, _)) = tools.get(&name) {
            return Err(CompileError::ToolClash {
                tool: name,
                agent: agent.to_owned(),
                first: first.label.clone(),
                second: this,
            });
        }
        if let Some((first, _)) = mounted.iter().find(|(m, _)| m.name == name) {
            return Err(CompileError::ToolClash {
                tool: name,
                agent: agent.to_owned(),
                first: format!("plugin `{}`", first.plugin),
                second: this,
            });
        }
        mounted.push((
            ControlToolIdentity {
                name,
                priority: entry.contribution.priority(),
                plugin: entry.plugin.clone(),
                schema_sha256: tool_schema_hash(mount.tool.as_ref()),
            },
            mount,
        ));
    }
    mounted.sort_by(|(a, _), (b, _)| (a.priority, &a.name).cmp(&(b.priority, &b.name)));
    Ok(mounted)
}

/// An MCP server's tool under its agent-visible name `mcp__<alias>__<tool>`.
struct McpNamed {
    name: String,
    inner: Arc<dyn Tool>,
}

#[async_trait::async_trait]
impl Tool for McpNamed {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        self.inner.description()
    }

    fn input_schema(&self) -> Value {
        self.inner.input_schema()
    }

    fn flags(&self) -> crate::tool::ToolFlags {
        self.inner.flags()
    }

    async fn run(
        &self,
        input: Value,
        ctx: &crate::tool::ToolContext,
    ) -> Result<crate::tool::ToolOutput, crate::tool::ToolError> {
        self.inner.run(input, ctx).await
    }
}
