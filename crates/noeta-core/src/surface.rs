//! Surfaces: the named extension points a contribution targets, and the registry the loader consults.
//!
//! A [`SurfaceSpec`] fully describes one surface: its plane, activation scope,
//! collision key, ordering, identity binding and the validator that checks a
//! resolved value. The loader, the merge and the resolver read these specs and
//! nothing else, so a host adds a surface by registering one spec on a copy of
//! [`standard_registry`] — never by editing the loader.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::Serialize;

use crate::value::{Resolved, ValueKind};

/// Which part of the system a surface belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Plane {
    /// Enters the compiled agent's identity; reaches an agent only where it activates the plugin.
    Identity,
    /// Behaviour, not identity.
    Wiring,
    /// Bound by the host; never per agent.
    Host,
}

/// Where a contribution takes effect once its plugin is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ActivationScope {
    /// Only for agents that activate the contributing plugin.
    PerAgent,
    /// In force for every agent in the process as soon as the plugin is loaded.
    Process,
    /// Bound by the host, never through activation.
    HostWired,
}

/// The namespace in which two contributions to one surface clash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CollisionKey {
    /// The contribution name.
    Name,
    /// The contribution name, read as a content kind.
    Kind,
    /// The contribution name, read as an alias.
    Alias,
    /// At most one contribution across the whole loaded set.
    SingleValued,
    /// Contributions never collide.
    None,
}

/// How the contributions to one surface are ordered after the merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SurfaceOrder {
    /// By `(plugin, name)`.
    Sorted,
    /// By the integer `priority` parameter (absent is 0), ties by `(plugin, name)`.
    Priority,
}

/// For identity-plane surfaces: which channel of the compiled agent the surface feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ActivationBinding {
    /// The agent's tools.
    Tool,
    /// The agent's spawnable roster.
    Agent,
    /// The agent's resident content kinds.
    ContentKind,
    /// Text appended to the agent's instructions.
    PromptFragment,
    /// The agent's decision policy.
    Policy,
    /// Reaches the agent through its own mechanism (control tools are mounted by their factories).
    Elsewhere,
}

macro_rules! spelled {
    ($ty:ident, $field:literal, { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The spelling used in manifests, JSON and messages.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $text),+ }
            }

            /// The spellings of every value, joined for messages.
            fn expected() -> String {
                Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = SurfaceError;

            fn from_str(s: &str) -> Result<Self, SurfaceError> {
                match s {
                    $($text => Ok($ty::$variant),)+
                    other => Err(SurfaceError::UnknownValue {
                        field: $field,
                        value: other.to_owned(),
                        expected: Self::expected(),
                    }),
                }
            }
        }

        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

spelled!(Plane, "plane", { Identity => "identity", Wiring => "wiring", Host => "host" });
spelled!(ActivationScope, "activation_scope", {
    PerAgent => "per-agent",
    Process => "process",
    HostWired => "host-wired",
});
spelled!(CollisionKey, "collision_key", {
    Name => "name",
    Kind => "kind",
    Alias => "alias",
    SingleValued => "single-valued",
    None => "none",
});
spelled!(SurfaceOrder, "ordering", { Sorted => "sorted", Priority => "priority" });
spelled!(ActivationBinding, "activation_binding", {
    Tool => "tool",
    Agent => "agent",
    ContentKind => "content_kind",
    PromptFragment => "prompt_fragment",
    Policy => "policy",
    Elsewhere => "elsewhere",
});

/// Checks that a resolved value is of the kind a surface takes; `Err` carries why not.
pub type Validator = Arc<dyn Fn(&Resolved) -> Result<(), String> + Send + Sync>;

/// Errors raised while describing or registering surfaces.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SurfaceError {
    /// A spelled field value is not in its vocabulary.
    #[error("`{value}` is not a valid {field} — expected one of: {expected}")]
    UnknownValue {
        /// The field being parsed.
        field: &'static str,
        /// The value that was given.
        value: String,
        /// The accepted spellings.
        expected: String,
    },
    /// A surface name is empty or not a plain identifier.
    #[error("surface name `{name}` is not valid — use lowercase letters, digits and `_`")]
    BadName {
        /// The rejected name.
        name: String,
    },
    /// An identity-plane surface without an activation binding would vanish between resolve and compile.
    #[error(
        "surface `{name}` is identity-plane but declares no activation_binding — pick one of tool, agent, content_kind, prompt_fragment, policy or elsewhere"
    )]
    MissingBinding {
        /// The surface.
        name: String,
    },
    /// Only identity-plane surfaces bind into the compiled agent.
    #[error(
        "surface `{name}` is {plane}-plane but declares activation_binding={binding} — only identity-plane surfaces bind into an agent"
    )]
    UnexpectedBinding {
        /// The surface.
        name: String,
        /// Its plane.
        plane: Plane,
        /// The binding it declared.
        binding: ActivationBinding,
    },
    /// Two surfaces with one name.
    #[error("surface `{name}` is already registered — surface names must be unique (no override)")]
    Duplicate {
        /// The surface.
        name: String,
    },
    /// Only two process-wide channels exist (guards and observers).
    #[error(
        "surface `{name}` is process-scoped, but the registry already has two process-scoped surfaces ({existing}) — a third has no runtime channel"
    )]
    ThirdProcessScoped {
        /// The surface being registered.
        name: String,
        /// The two already registered.
        existing: String,
    },
    /// A lookup for a surface that is not registered.
    #[error("unknown surface `{name}` — not registered (known: {known})")]
    Unknown {
        /// The requested name.
        name: String,
        /// The registered names, sorted.
        known: String,
    },
}

/// One surface, fully described.
#[derive(Clone)]
pub struct SurfaceSpec {
    name: String,
    plane: Plane,
    scope: ActivationScope,
    collision: CollisionKey,
    ordering: SurfaceOrder,
    binding: Option<ActivationBinding>,
    validator: Validator,
}

impl fmt::Debug for SurfaceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SurfaceSpec")
            .field("name", &self.name)
            .field("plane", &self.plane)
            .field("scope", &self.scope)
            .field("collision", &self.collision)
            .field("ordering", &self.ordering)
            .field("binding", &self.binding)
            .finish_non_exhaustive()
    }
}

/// Builds a [`SurfaceSpec`]; [`SurfaceSpecBuilder::build`] runs the construction checks.
#[derive(Clone)]
pub struct SurfaceSpecBuilder {
    spec: SurfaceSpec,
}

impl SurfaceSpecBuilder {
    /// Sets the collision key (default `name`).
    pub fn collision(mut self, key: CollisionKey) -> Self {
        self.spec.collision = key;
        self
    }

    /// Sets the ordering (default `sorted`).
    pub fn ordering(mut self, ordering: SurfaceOrder) -> Self {
        self.spec.ordering = ordering;
        self
    }

    /// Sets the identity binding (identity-plane surfaces only).
    pub fn binding(mut self, binding: ActivationBinding) -> Self {
        self.spec.binding = Some(binding);
        self
    }

    /// Sets the validator run on every resolved value (default: accepts anything).
    pub fn validator(
        mut self,
        validator: impl Fn(&Resolved) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.spec.validator = Arc::new(validator);
        self
    }

    /// Checks the spec: a valid name, a binding exactly when the plane is identity.
    pub fn build(self) -> Result<SurfaceSpec, SurfaceError> {
        let spec = self.spec;
        let name_ok = !spec.name.is_empty()
            && spec
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !name_ok {
            return Err(SurfaceError::BadName { name: spec.name });
        }
        match (spec.plane, spec.binding) {
            (Plane::Identity, None) => Err(SurfaceError::MissingBinding { name: spec.name }),
            (plane, Some(binding)) if plane != Plane::Identity => {
                Err(SurfaceError::UnexpectedBinding {
                    name: spec.name,
                    plane,
                    binding,
                })
            }
            _ => Ok(spec),
        }
    }
}

impl SurfaceSpec {
    /// Starts a spec with collision `name`, ordering `sorted`, no binding and a permissive validator.
    pub fn builder(name: &str, plane: Plane, scope: ActivationScope) -> SurfaceSpecBuilder {
        SurfaceSpecBuilder {
            spec: SurfaceSpec {
                name: name.to_owned(),
                plane,
                scope,
                collision: CollisionKey::Name,
                ordering: SurfaceOrder::Sorted,
                binding: None,
                validator: Arc::new(|_| Ok(())),
            },
        }
    }

    /// The name a manifest writes.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The plane.
    pub fn plane(&self) -> Plane {
        self.plane
    }

    /// The activation scope.
    pub fn scope(&self) -> ActivationScope {
        self.scope
    }

    /// The collision key.
    pub fn collision(&self) -> CollisionKey {
        self.collision
    }

    /// The ordering.
    pub fn ordering(&self) -> SurfaceOrder {
        self.ordering
    }

    /// The identity binding, for identity-plane surfaces.
    pub fn binding(&self) -> Option<ActivationBinding> {
        self.binding
    }

    /// Whether contributions mount model-visible tools (`tool`- and `elsewhere`-bound surfaces),
    /// so their `tools` names share one namespace across the loaded set.
    pub fn mounts_tools(&self) -> bool {
        matches!(
            self.binding,
            Some(ActivationBinding::Tool | ActivationBinding::Elsewhere)
        )
    }

    /// Runs the validator on a resolved value.
    pub fn validate(&self, value: &Resolved) -> Result<(), String> {
        (self.validator)(value)
    }

    /// The spec as the JSON object `noeta surfaces` prints and the golden locks.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "plane": self.plane,
            "activation_scope": self.scope,
            "collision_key": self.collision,
            "ordering": self.ordering,
            "activation_binding": self.binding,
        })
    }
}

/// Maps surface names to specs. Cloning gives an independent copy.
#[derive(Clone, Debug, Default)]
pub struct SurfaceRegistry {
    specs: BTreeMap<String, SurfaceSpec>,
}

impl SurfaceRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// An independent copy, for a host that adds its own surfaces.
    pub fn copy(&self) -> Self {
        self.clone()
    }

    /// Adds a surface. A duplicate name and a third process-scoped surface are refused.
    pub fn register(&mut self, spec: SurfaceSpec) -> Result<(), SurfaceError> {
        if self.specs.contains_key(spec.name()) {
            return Err(SurfaceError::Duplicate {
                name: spec.name.clone(),
            });
        }
        if spec.scope == ActivationScope::Process {
            let existing: Vec<&str> = self
                .specs
                .values()
                .filter(|s| s.scope == ActivationScope::Process)
                .map(|s| s.name())
                .collect();
            if existing.len() >= 2 {
                return Err(SurfaceError::ThirdProcessScoped {
                    name: spec.name.clone(),
                    existing: existing.join(", "),
                });
            }
        }
        self.specs.insert(spec.name.clone(), spec);
        Ok(())
    }

    /// The spec of a registered surface; an unknown name lists the known ones.
    pub fn get(&self, name: &str) -> Result<&SurfaceSpec, SurfaceError> {
        self.specs.get(name).ok_or_else(|| SurfaceError::Unknown {
            name: name.to_owned(),
            known: self.known(),
        })
    }

    /// Whether a surface is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.specs.contains_key(name)
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.specs.keys().map(String::as_str).collect()
    }

    /// Registered specs, sorted by name.
    pub fn specs(&self) -> impl Iterator<Item = &SurfaceSpec> {
        self.specs.values()
    }

    /// The registered names joined for messages.
    pub(crate) fn known(&self) -> String {
        if self.specs.is_empty() {
            "none".to_owned()
        } else {
            self.names().join(", ")
        }
    }

    /// The registry as a JSON array of surface objects, sorted by name.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Array(self.specs().map(SurfaceSpec::to_json).collect())
    }
}

fn expect_kind(kind: ValueKind) -> impl Fn(&Resolved) -> Result<(), String> + Send + Sync {
    move |value| {
        if value.kind() == kind {
            value.check_shape()
        } else {
            Err(format!(
                "illegal contribution value (must be {}); got {}",
                kind.describe(),
                value.kind().describe()
            ))
        }
    }
}

/// The standard surfaces' names, so code that means a surface names it once.
pub mod names {
    /// `tool`.
    pub const TOOL: &str = "tool";
    /// `agent`.
    pub const AGENT: &str = "agent";
    /// `content_kind`.
    pub const CONTENT_KIND: &str = "content_kind";
    /// `prompt_fragment`.
    pub const PROMPT_FRAGMENT: &str = "prompt_fragment";
    /// `policy`.
    pub const POLICY: &str = "policy";
    /// `guard`.
    pub const GUARD: &str = "guard";
    /// `observer`.
    pub const OBSERVER: &str = "observer";
    /// `provider`.
    pub const PROVIDER: &str = "provider";
    /// `reminder_provider`.
    pub const REMINDER_PROVIDER: &str = "reminder_provider";
    /// `reminder`.
    pub const REMINDER: &str = "reminder";
    /// `tool_result_transform`.
    pub const TOOL_RESULT_TRANSFORM: &str = "tool_result_transform";
    /// `mcp_server`.
    pub const MCP_SERVER: &str = "mcp_server";
    /// `skills`.
    pub const SKILLS: &str = "skills";
    /// `sandbox_provider`.
    pub const SANDBOX_PROVIDER: &str = "sandbox_provider";
    /// `session_pack`.
    pub const SESSION_PACK: &str = "session_pack";
    /// `control_tool`.
    pub const CONTROL_TOOL: &str = "control_tool";
}

/// The sixteen standard surfaces, in the catalogue's declaration order.
fn standard_specs() -> Vec<SurfaceSpecBuilder> {
    use ActivationBinding as B;
    use ActivationScope::{HostWired, PerAgent, Process};
    use CollisionKey as C;
    use Plane::{Host, Identity, Wiring};
    use SurfaceOrder::Priority;
    let s = SurfaceSpec::builder;
    vec![
        s(names::TOOL, Identity, PerAgent)
            .binding(B::Tool)
            .validator(expect_kind(ValueKind::Tool)),
        s(names::AGENT, Identity, PerAgent)
            .binding(B::Agent)
            .validator(expect_kind(ValueKind::Agent)),
        s(names::CONTENT_KIND, Identity, PerAgent)
            .collision(C::Kind)
            .binding(B::ContentKind)
            .validator(expect_kind(ValueKind::ContentKind)),
        s(names::PROMPT_FRAGMENT, Identity, PerAgent)
            .binding(B::PromptFragment)
            .validator(expect_kind(ValueKind::PromptFragment)),
        s(names::POLICY, Identity, PerAgent)
            .collision(C::SingleValued)
            .binding(B::Policy)
            .validator(expect_kind(ValueKind::Policy)),
        s(names::GUARD, Wiring, Process)
            .collision(C::None)
            .validator(expect_kind(ValueKind::Guard)),
        s(names::OBSERVER, Wiring, Process)
            .collision(C::None)
            .validator(expect_kind(ValueKind::Observer)),
        s(names::PROVIDER, Wiring, HostWired)
            .collision(C::SingleValued)
            .validator(expect_kind(ValueKind::Provider)),
        s(names::REMINDER_PROVIDER, Wiring, PerAgent)
            .validator(expect_kind(ValueKind::ReminderProvider)),
        s(names::REMINDER, Wiring, PerAgent)
            .ordering(Priority)
            .validator(expect_kind(ValueKind::Reminder)),
        s(names::TOOL_RESULT_TRANSFORM, Wiring, PerAgent)
            .ordering(Priority)
            .validator(expect_kind(ValueKind::ToolResultTransform)),
        s(names::MCP_SERVER, Host, HostWired)
            .collision(C::Alias)
            .validator(expect_kind(ValueKind::McpServer)),
        s(names::SKILLS, Host, HostWired)
            .collision(C::None)
            .validator(expect_kind(ValueKind::SkillsPath)),
        s(names::SANDBOX_PROVIDER, Host, HostWired)
            .validator(expect_kind(ValueKind::SandboxProvider)),
        s(names::SESSION_PACK, Wiring, PerAgent)
            .ordering(Priority)
            .validator(expect_kind(ValueKind::SessionPack)),
        s(names::CONTROL_TOOL, Identity, PerAgent)
            .ordering(Priority)
            .binding(B::Elsewhere)
            .validator(expect_kind(ValueKind::ControlTool)),
    ]
}

/// The names of the sixteen standard surfaces, in the catalogue's declaration order.
pub const STANDARD_SURFACES: [&str; 16] = [
    names::TOOL,
    names::AGENT,
    names::CONTENT_KIND,
    names::PROMPT_FRAGMENT,
    names::POLICY,
    names::GUARD,
    names::OBSERVER,
    names::PROVIDER,
    names::REMINDER_PROVIDER,
    names::REMINDER,
    names::TOOL_RESULT_TRANSFORM,
    names::MCP_SERVER,
    names::SKILLS,
    names::SANDBOX_PROVIDER,
    names::SESSION_PACK,
    names::CONTROL_TOOL,
];

/// A fresh registry holding the sixteen standard surfaces; every call builds a new one.
pub fn standard_registry() -> SurfaceRegistry {
    let mut registry = SurfaceRegistry::new();
    for builder in standard_specs() {
        let registered = builder.build().and_then(|spec| registry.register(spec));
        // The standard table is static data covered by tests; a failure here is a kernel bug.
        debug_assert!(registered.is_ok(), "standard surface table is invalid");
    }
    registry
}
