//! What a resolved contribution may be: one enum over every surface's value kind.

use std::any::Any;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::contrib::{
    AgentDefinition, ContentKindSpec, ControlToolFactory, Guard, McpServerSpec, Observer,
    PolicyFactory, Reminder, ReminderProvider, SessionPackFactory, ToolResultTransform,
};
use crate::tool::Tool;

/// A value only the host knows how to use (provider and sandbox adapters, host surfaces).
#[derive(Clone)]
pub struct HostValue {
    type_name: &'static str,
    value: Arc<dyn Any + Send + Sync>,
}

impl HostValue {
    /// Wraps a host-side value.
    pub fn new<T: Any + Send + Sync>(value: T) -> Self {
        Self {
            type_name: std::any::type_name::<T>(),
            value: Arc::new(value),
        }
    }

    /// The Rust type name of the wrapped value, for messages.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The wrapped value, if it is a `T`.
    pub fn downcast<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.value.downcast_ref::<T>()
    }
}

/// The kind of a resolved value, named in validator messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ValueKind {
    /// A [`Tool`].
    Tool,
    /// An [`AgentDefinition`].
    Agent,
    /// A [`ContentKindSpec`].
    ContentKind,
    /// Prompt text.
    PromptFragment,
    /// A [`PolicyFactory`].
    Policy,
    /// A [`Guard`].
    Guard,
    /// An [`Observer`].
    Observer,
    /// A host-resolved model provider adapter.
    Provider,
    /// A [`ReminderProvider`].
    ReminderProvider,
    /// A [`Reminder`].
    Reminder,
    /// A [`ToolResultTransform`].
    ToolResultTransform,
    /// An [`McpServerSpec`].
    McpServer,
    /// An absolute directory of skill packs.
    SkillsPath,
    /// A host-resolved sandbox adapter.
    SandboxProvider,
    /// A [`SessionPackFactory`].
    SessionPack,
    /// A [`ControlToolFactory`].
    ControlTool,
    /// A value for a host-registered surface.
    Host,
}

impl ValueKind {
    /// A phrase for messages ("a tool", "an agent definition").
    pub fn describe(self) -> &'static str {
        match self {
            ValueKind::Tool => "a tool",
            ValueKind::Agent => "an agent definition",
            ValueKind::ContentKind => "a content kind",
            ValueKind::PromptFragment => "a prompt fragment",
            ValueKind::Policy => "a policy factory",
            ValueKind::Guard => "a guard",
            ValueKind::Observer => "an observer",
            ValueKind::Provider => "a provider adapter",
            ValueKind::ReminderProvider => "a reminder provider",
            ValueKind::Reminder => "a reminder",
            ValueKind::ToolResultTransform => "a tool-result transform",
            ValueKind::McpServer => "an in-process MCP server",
            ValueKind::SkillsPath => "a skills path",
            ValueKind::SandboxProvider => "a sandbox adapter",
            ValueKind::SessionPack => "a session-pack factory",
            ValueKind::ControlTool => "a control-tool factory",
            ValueKind::Host => "a host value",
        }
    }
}

/// A resolved contribution value.
#[derive(Clone)]
#[non_exhaustive]
pub enum Resolved {
    /// For `tool`.
    Tool(Arc<dyn Tool>),
    /// For `agent`.
    Agent(Arc<AgentDefinition>),
    /// For `content_kind`.
    ContentKind(Arc<ContentKindSpec>),
    /// For `prompt_fragment`.
    PromptFragment(String),
    /// For `policy`.
    Policy(Arc<dyn PolicyFactory>),
    /// For `guard`.
    Guard(Arc<dyn Guard>),
    /// For `observer`.
    Observer(Arc<dyn Observer>),
    /// For `provider`.
    Provider(HostValue),
    /// For `reminder_provider`.
    ReminderProvider(Arc<dyn ReminderProvider>),
    /// For `reminder`.
    Reminder(Arc<dyn Reminder>),
    /// For `tool_result_transform`.
    ToolResultTransform(Arc<dyn ToolResultTransform>),
    /// For `mcp_server`.
    McpServer(Arc<McpServerSpec>),
    /// For `skills`.
    SkillsPath(PathBuf),
    /// For `sandbox_provider`.
    SandboxProvider(HostValue),
    /// For `session_pack`.
    SessionPack(Arc<dyn SessionPackFactory>),
    /// For `control_tool`.
    ControlTool(Arc<dyn ControlToolFactory>),
    /// For a host-registered surface.
    Host(HostValue),
}

impl Resolved {
    /// The kind of this value.
    pub fn kind(&self) -> ValueKind {
        match self {
            Resolved::Tool(_) => ValueKind::Tool,
            Resolved::Agent(_) => ValueKind::Agent,
            Resolved::ContentKind(_) => ValueKind::ContentKind,
            Resolved::PromptFragment(_) => ValueKind::PromptFragment,
            Resolved::Policy(_) => ValueKind::Policy,
            Resolved::Guard(_) => ValueKind::Guard,
            Resolved::Observer(_) => ValueKind::Observer,
            Resolved::Provider(_) => ValueKind::Provider,
            Resolved::ReminderProvider(_) => ValueKind::ReminderProvider,
            Resolved::Reminder(_) => ValueKind::Reminder,
            Resolved::ToolResultTransform(_) => ValueKind::ToolResultTransform,
            Resolved::McpServer(_) => ValueKind::McpServer,
            Resolved::SkillsPath(_) => ValueKind::SkillsPath,
            Resolved::SandboxProvider(_) => ValueKind::SandboxProvider,
            Resolved::SessionPack(_) => ValueKind::SessionPack,
            Resolved::ControlTool(_) => ValueKind::ControlTool,
            Resolved::Host(_) => ValueKind::Host,
        }
    }

    /// Checks what a value of the right kind must also satisfy (non-empty names and text).
    pub fn check_shape(&self) -> Result<(), String> {
        let blank = |what: &str| Err(format!("illegal contribution value ({what} is empty)"));
        match self {
            Resolved::Tool(tool) if tool.name().trim().is_empty() => blank("the tool name"),
            Resolved::Agent(agent) if agent.name.trim().is_empty() => blank("the agent name"),
            Resolved::ContentKind(kind) if kind.kind.trim().is_empty() => blank("the content kind"),
            Resolved::PromptFragment(text) if text.trim().is_empty() => blank("the prompt text"),
            Resolved::SkillsPath(path) if path.as_os_str().is_empty() => blank("the skills path"),
            Resolved::SkillsPath(path) if !path.is_absolute() => Err(format!(
                "illegal contribution value (the skills path `{}` is not absolute)",
                path.display()
            )),
            Resolved::McpServer(server) if server.name.trim().is_empty() => {
                blank("the MCP server name")
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Debug for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resolved::Tool(tool) => write!(f, "Tool({})", tool.name()),
            Resolved::Agent(agent) => write!(f, "Agent({})", agent.name),
            Resolved::ContentKind(kind) => write!(f, "ContentKind({})", kind.kind),
            Resolved::PromptFragment(text) => write!(f, "PromptFragment({} bytes)", text.len()),
            Resolved::SkillsPath(path) => write!(f, "SkillsPath({})", path.display()),
            Resolved::Provider(v) | Resolved::SandboxProvider(v) | Resolved::Host(v) => {
                write!(f, "{:?}({})", self.kind(), v.type_name())
            }
            other => write!(f, "{:?}", other.kind()),
        }
    }
}
