//! Contribution value types: what a resolved ref may be on each standard surface besides a tool.
//!
//! Each hook takes one input struct so fields can be added without breaking
//! plugins. The runtime gives these values their call sites; this module only
//! fixes their shape.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::{Tool, ToolOutput};

/// A versioned reference to a component, pinned in an agent's identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ComponentRef {
    /// The component's name.
    pub name: String,
    /// Its version label.
    pub version: String,
}

impl ComponentRef {
    /// A reference to `name` at `version`.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
        }
    }
}

impl fmt::Display for ComponentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.name, self.version)
    }
}

/// A child agent an activating agent may spawn (the `agent` surface).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentDefinition {
    /// The name the roster and the `Task` tool use.
    pub name: String,
    /// When to use this agent, shown to the delegating model.
    pub description: String,
    /// The agent's system instructions.
    pub instructions: String,
    /// Model-visible tool names the agent may use; `None` allows every tool its plugins offer.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Plugins (or named extensions) the agent activates.
    #[serde(default)]
    pub plugins: Vec<String>,
    /// Agents this agent may spawn in turn.
    #[serde(default)]
    pub agents: Vec<String>,
    /// A preferred model, if any.
    #[serde(default)]
    pub model: Option<String>,
}

/// A resident content kind for the semi-stable segment (the `content_kind` surface).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentKindSpec {
    /// The kind's unique name.
    pub kind: String,
    /// Layout band; lower renders first.
    pub band: i64,
    /// A heading rendered above the kind's residents.
    pub title: String,
}

/// Where a guard is asked.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Checkpoint {
    /// Before a tool call runs.
    ToolCall {
        /// The model-visible tool name.
        tool: String,
        /// The call's input.
        input: Value,
    },
    /// Before a child task is created, whether a tool or a hook starts it.
    Spawn {
        /// The child agent's name.
        agent: String,
        /// The child's depth below the root task.
        depth: u32,
    },
    /// Before the turn ends.
    Finish,
}

/// The input of one guard check.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GuardInput {
    /// The task asking.
    pub task_id: String,
    /// The agent running the task.
    pub agent: String,
    /// What is about to happen.
    pub checkpoint: Checkpoint,
}

impl GuardInput {
    /// A check for `checkpoint` in `task_id`, run by `agent`.
    pub fn new(
        task_id: impl Into<String>,
        agent: impl Into<String>,
        checkpoint: Checkpoint,
    ) -> Self {
        Self {
            task_id: task_id.into(),
            agent: agent.into(),
            checkpoint,
        }
    }
}

/// A guard's answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Verdict {
    /// Let it happen; `approve` satisfies other guards' non-firm asks.
    Allow {
        /// Whether this allow vouches for the call.
        approve: bool,
    },
    /// Refuse, with the reason the model sees.
    Deny {
        /// Why.
        reason: String,
    },
    /// Ask a person first.
    Ask {
        /// What to ask.
        reason: String,
        /// A firm ask is not satisfied by another guard's approval.
        firm: bool,
    },
    /// Replace the call's input; the rewritten call is checked again.
    Rewrite {
        /// The new input.
        input: Value,
        /// Why it was rewritten.
        reason: String,
    },
}

/// A synchronous pre-act check (the `guard` surface, process-wide).
pub trait Guard: Send + Sync {
    /// Answers a checkpoint; `None` means no opinion.
    fn check(&self, input: &GuardInput) -> Option<Verdict>;
}

/// One committed event, as observers see it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ObservedEvent {
    /// The task's id.
    pub task_id: String,
    /// The event's sequence number in the task's log.
    pub seq: u64,
    /// The extension that recorded it (`core` for the kernel).
    pub extension: String,
    /// The record kind.
    pub kind: String,
    /// The record's payload.
    pub data: Value,
}

impl ObservedEvent {
    /// An event of `extension`/`kind` at `seq` in `task_id`.
    pub fn new(
        task_id: impl Into<String>,
        seq: u64,
        extension: impl Into<String>,
        kind: impl Into<String>,
        data: Value,
    ) -> Self {
        Self {
            task_id: task_id.into(),
            seq,
            extension: extension.into(),
            kind: kind.into(),
            data,
        }
    }
}

/// A post-commit callback (the `observer` surface, process-wide). It may not change anything.
pub trait Observer: Send + Sync {
    /// Sees one committed event. A failure is logged and skipped by the runtime.
    fn observe(&self, event: &ObservedEvent) -> Result<(), String>;
}

/// Read access to the folded state of a task, by extension name.
pub trait StateView: Send + Sync {
    /// The folded state of one extension, if it has any.
    fn ext_state(&self, name: &str) -> Option<&Value>;
}

/// The input of a reminder render.
#[non_exhaustive]
pub struct ReminderInput<'a> {
    /// The agent composing the request.
    pub agent: &'a str,
    /// The folded state of the extensions.
    pub state: &'a dyn StateView,
    /// The kernel's folded state (the conversation, the turn, counts).
    pub core: &'a crate::fold::CoreState,
    /// The agents this one may spawn.
    pub roster: &'a [String],
}

impl<'a> ReminderInput<'a> {
    /// A render for `agent` over `state` and `core`, with no roster.
    pub fn new(agent: &'a str, state: &'a dyn StateView, core: &'a crate::fold::CoreState) -> Self {
        Self {
            agent,
            state,
            core,
            roster: &[],
        }
    }

    /// The same input for an agent that may spawn `roster`.
    pub fn with_roster(mut self, roster: &'a [String]) -> Self {
        self.roster = roster;
        self
    }
}

/// A pure render of the folded view at the tail of each request (the `reminder` surface). Never recorded.
pub trait Reminder: Send + Sync {
    /// The reminder text, or `None` when it does not apply now.
    fn render(&self, input: &ReminderInput<'_>) -> Option<String>;
}

/// The seams at which reminder providers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Seam {
    /// A user message arrives.
    TurnIntake,
    /// A task starts.
    TaskSeed,
}

impl Seam {
    /// Parses a manifest spelling.
    pub fn parse(text: &str) -> Option<Seam> {
        match text {
            "turn_intake" => Some(Seam::TurnIntake),
            "task_seed" => Some(Seam::TaskSeed),
            _ => None,
        }
    }
}

/// The input of a reminder provider.
#[non_exhaustive]
pub struct ProviderInput<'a> {
    /// The seam being run.
    pub seam: Seam,
    /// The newest user message, at turn intake.
    pub user_message: Option<&'a str>,
    /// The folded state.
    pub state: &'a dyn StateView,
}

impl<'a> ProviderInput<'a> {
    /// An input at `seam`.
    pub fn new(seam: Seam, user_message: Option<&'a str>, state: &'a dyn StateView) -> Self {
        Self {
            seam,
            user_message,
            state,
        }
    }
}

/// A reminder produced at a seam; it is recorded, so a resume folds it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvidedReminder {
    /// The text the model sees.
    pub text: String,
}

/// Produces recorded reminders at named seams (the `reminder_provider` surface).
#[async_trait]
pub trait ReminderProvider: Send + Sync {
    /// Produces zero or more reminders; an error fails the turn.
    async fn provide(&self, input: ProviderInput<'_>) -> Result<Vec<ProvidedReminder>, String>;
}

/// The input of a tool-result transform.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TransformInput {
    /// The tool that ran.
    pub tool: String,
    /// The call's input.
    pub input: Value,
    /// The result so far.
    pub output: ToolOutput,
}

impl TransformInput {
    /// The result `output` of calling `tool` with `input`.
    pub fn new(tool: impl Into<String>, input: Value, output: ToolOutput) -> Self {
        Self {
            tool: tool.into(),
            input,
            output,
        }
    }
}

/// Rewrites a tool result before it is recorded (the `tool_result_transform` surface).
pub trait ToolResultTransform: Send + Sync {
    /// The new result; an error fails the call closed.
    fn transform(&self, input: TransformInput) -> Result<ToolOutput, String>;
}

/// The decision-loop factory (the `policy` surface). Its ref is pinned in every compiled agent.
pub trait PolicyFactory: Send + Sync {
    /// The identity of the policy this factory builds.
    fn policy_ref(&self) -> ComponentRef;

    /// Builds the policy for one agent's session.
    fn build(&self) -> Arc<dyn crate::policy::Policy>;
}

/// What a session pack and a control-tool factory see when an agent's session is built.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionBuildContext {
    /// The agent being built.
    pub agent: String,
    /// Every plugin the agent activates, sorted.
    pub plugins: Vec<String>,
    /// The agent's spawnable roster, sorted.
    pub roster: Vec<String>,
    /// The roster's definitions (what each agent is for, its tools), in roster order.
    pub roster_agents: Vec<Arc<AgentDefinition>>,
    /// Per-plugin settings, by plugin name.
    pub config: BTreeMap<String, Value>,
    /// The policy the agent runs under (its pinned identity).
    pub policy: ComponentRef,
    /// The agent's allow-list of model-visible tool names (`None`: every tool). The session
    /// build drops pack tools not on it; a pack may also skip building them.
    pub tools: Option<Vec<String>>,
    /// The directories of skill packs every loaded plugin contributes (the `skills` surface),
    /// as `(plugin, path)` in `(plugin, name)` order.
    pub skills_dirs: Vec<(String, std::path::PathBuf)>,
    /// The in-process MCP servers loaded (the `mcp_server` surface) as `(alias, plugin)`, in
    /// alias order: they share one alias namespace with the servers a pack addresses by
    /// alias, so such a pack refuses a clash naming both sides.
    pub mcp_servers: Vec<(String, String)>,
    /// What the host hands to session packs by name (an embedder's services), as set on the
    /// [`crate::session::Instances`] the session is built over.
    pub host_values: HostValues,
}

/// Values a host hands to session packs by name: services only an embedder has (a resolver of
/// remote endpoints, a client of its own). Set with
/// [`crate::session::Instances::with_host_value`]; a pack reads one with [`HostValues::get`].
/// Cloning shares them.
#[derive(Clone, Default)]
pub struct HostValues(Arc<BTreeMap<String, crate::value::HostValue>>);

impl HostValues {
    /// The value named `name`, if there is one and it is a `T`.
    pub fn get<T: std::any::Any + Send + Sync>(&self, name: &str) -> Option<&T> {
        self.0.get(name).and_then(|value| value.downcast::<T>())
    }

    /// Sets `name` to `value` (replacing a value of that name).
    pub(crate) fn insert(&mut self, name: String, value: crate::value::HostValue) {
        Arc::make_mut(&mut self.0).insert(name, value);
    }
}

impl fmt::Debug for HostValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl SessionBuildContext {
    /// A context for `agent`.
    pub fn new(agent: impl Into<String>) -> Self {
        Self {
            agent: agent.into(),
            plugins: Vec::new(),
            roster: Vec::new(),
            roster_agents: Vec::new(),
            config: BTreeMap::new(),
            policy: crate::policy::minimal_policy_ref(),
            tools: None,
            skills_dirs: Vec::new(),
            mcp_servers: Vec::new(),
            host_values: HostValues::default(),
        }
    }

    /// Whether the agent's allow-list lets `tool` through (always, without a list).
    pub fn allows_tool(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|a| a == tool))
    }

    /// Whether the agent activates `plugin`.
    pub fn activates(&self, plugin: &str) -> bool {
        self.plugins.iter().any(|p| p == plugin)
    }

    /// One plugin's settings (JSON null when it has none).
    pub fn config(&self, plugin: &str) -> &Value {
        self.config.get(plugin).unwrap_or(&Value::Null)
    }
}

/// What a session pack contributes to one agent's session.
#[derive(Default, Clone)]
#[non_exhaustive]
pub struct PackContribution {
    /// Tools, inserted in pack band order.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Resident content kinds.
    pub content_kinds: Vec<ContentKindSpec>,
    /// Control tools the pack mounts, with their schema priority.
    pub control_tools: Vec<(i64, Arc<dyn ControlToolFactory>)>,
    /// Extensions the pack adds to the session, in order.
    pub extensions: Vec<Arc<dyn crate::extension::Extension>>,
}

impl PackContribution {
    /// The empty contribution a pack returns when it does not apply.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Whether the pack contributed nothing.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
            && self.content_kinds.is_empty()
            && self.control_tools.is_empty()
            && self.extensions.is_empty()
    }
}

/// The session-construction half of a capability (the `session_pack` surface). It self-gates.
///
/// A pack is an instance of its plugin: sessions built over one
/// [`Instances`](crate::session::Instances) share it between every agent that uses the plugin with the same
/// parameters. So a pack is built from `ctx.config(<its plugin>)` alone, and reads what differs
/// between agents and tasks at run time (the view, the tool context); one whose build reads
/// more of the context (the agent, its plugins, roster, policy or tool list, another plugin's
/// parameters) says so through [`reads_agent`](Self::reads_agent) and is then built per agent.
pub trait SessionPackFactory: Send + Sync {
    /// The pack for this session, or [`PackContribution::empty`] when it does not apply.
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String>;

    /// Whether the build reads the context beyond its own plugin's parameters (then one
    /// instance is built per agent, not per parameters). The control tools the pack mounts are
    /// built with it and count here too.
    fn reads_agent(&self) -> bool {
        false
    }
}

/// A mounted control tool: a model-facing schema whose calls the tool behind it turns into an
/// engine decision (spawning children, asking a person, patching recorded state).
#[derive(Clone)]
pub struct ControlToolMount {
    /// The tool the call runs: its name, description and schema are the mount's.
    pub tool: Arc<dyn Tool>,
    /// The extension that folds the records the tool writes (joins the session after the
    /// control tools), when the control tool keeps state.
    pub extension: Option<Arc<dyn crate::extension::Extension>>,
}

impl ControlToolMount {
    /// Mounts `tool`.
    pub fn new(tool: Arc<dyn Tool>) -> Self {
        Self {
            tool,
            extension: None,
        }
    }

    /// Brings the extension that folds the tool's records.
    pub fn with_extension(mut self, extension: Arc<dyn crate::extension::Extension>) -> Self {
        self.extension = Some(extension);
        self
    }

    /// The model-visible name.
    pub fn name(&self) -> &str {
        self.tool.name()
    }
}

impl fmt::Debug for ControlToolMount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ControlToolMount({})", self.tool.name())
    }
}

/// Builds a control tool for one session, or declines (the `control_tool` surface). Mounting is enablement.
pub trait ControlToolFactory: Send + Sync {
    /// The mount, `None` when the control tool does not apply to this session, or why its
    /// settings are wrong (naming the field).
    fn build(&self, ctx: &SessionBuildContext) -> Result<Option<ControlToolMount>, String>;
}

/// An in-process MCP server (the `mcp_server` surface): its tools join every agent's tool set
/// at compile time, each named [`mcp_tool_name`]`(alias, tool)` (the alias is the
/// contribution's name), so they enter the compiled identity. Each tool's `run` is the way to
/// the server: a plugin holding an MCP server builds these tools as calls over an in-memory
/// transport through an MCP client, so the server is spoken to as a remote one is.
#[derive(Clone)]
pub struct McpServerSpec {
    /// The server's own name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The tools it serves, each under the name the server gives it.
    pub tools: Vec<Arc<dyn Tool>>,
}

/// The longest tool name every model provider accepts.
pub const MCP_TOOL_NAME_MAX: usize = 64;

/// The model-visible name of tool `tool` of the MCP server known as `alias`:
/// `mcp__<alias>__<tool>`, characters a provider refuses in a name replaced by `_`, and a name
/// longer than [`MCP_TOOL_NAME_MAX`] cut and ended with `_` and eight hex digits of its full
/// form's SHA-256, so it stays unique and is the same in every process. One rule for in-process
/// and remote servers.
pub fn mcp_tool_name(alias: &str, tool: &str) -> String {
    let full = format!("mcp__{alias}__{tool}");
    let clean: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= MCP_TOOL_NAME_MAX && clean == full {
        return clean;
    }
    // Cleaning may have made two names one, and cutting surely may: the hash keeps them apart.
    let hash = crate::canonical::sha256_hex(full.as_bytes());
    let keep = clean.len().min(MCP_TOOL_NAME_MAX - 9);
    format!("{}_{}", &clean[..keep], &hash[..8])
}

impl fmt::Debug for McpServerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
        f.debug_struct("McpServerSpec")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("tools", &tools)
            .finish()
    }
}
