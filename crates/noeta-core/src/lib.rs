//! The noeta kernel.
//!
//! Plugins meet the kernel through declared surfaces and one [`Extension`](extension)
//! interface. This crate owns both halves of that meeting and names no built-in
//! plugin: built-ins register exactly like third-party crates.
//!
//! - Declaration: the [surface registry](surface), the [manifest](manifest)
//!   format, [loading](loader) and the [trust store](trust), the
//!   collision-checked [merge](merge), [resolution](resolve) of refs into
//!   [contribution values](value), and the compiled [agent identity](identity).
//! - Runtime: [stores](store) (a lease-fenced event log per task and a content
//!   store), the kernel's [records](records), the [fold](fold), the
//!   [session build](session) that joins contributions into one extension
//!   list, the [policy](policy), model [providers](provider) (with the scripted
//!   one), and the [runner](runner).

pub mod canonical;
pub mod contrib;
pub mod dates;
pub mod exec;
pub mod extension;
pub mod files;
pub mod fold;
pub mod hooks;
pub mod identity;
pub mod loader;
pub mod manifest;
pub mod merge;
pub mod model;
mod panics;
pub mod plugin_command;
pub mod policy;
pub mod provider;
pub mod records;
pub mod resolve;
pub mod runner;
pub mod sandbox;
pub mod session;
pub mod store;
pub mod surface;
pub mod tool;
pub mod trust;
pub mod value;
pub mod version;

pub use contrib::{
    AgentDefinition, Checkpoint, ComponentRef, ContentKindSpec, ControlToolFactory,
    ControlToolMount, Guard, GuardInput, HostValues, MCP_TOOL_NAME_MAX, McpServerSpec,
    ObservedEvent, Observer, PackContribution, PolicyFactory, ProvidedReminder, ProviderInput,
    Reminder, ReminderInput, ReminderProvider, Seam, SessionBuildContext, SessionPackFactory,
    StateView, ToolResultTransform, TransformInput, Verdict, mcp_tool_name,
};
pub use identity::{
    ActivationRules, AgentOptions, AgentSpec, CompileError, CompiledAgent, compile_agent,
};
pub use loader::{
    LinkedPlugin, LoadError, LoadOptions, LoadProblem, LoadWarning, LoadedPlugin, PluginSet,
    PluginSource, ProblemError, RefTable, ResolveRequest, Resolver, SourceKind, load_plugins,
};
pub use manifest::{MANIFEST_FILE, ManifestContribution, ManifestError, Origin, PluginManifest};
pub use merge::{Collision, MergeError, Merged, MergedEntry};
pub use resolve::{Resolution, ResolveError, ResolvedEntry};
pub use surface::{
    ActivationBinding, ActivationScope, CollisionKey, Plane, STANDARD_SURFACES, SurfaceError,
    SurfaceOrder, SurfaceRegistry, SurfaceSpec, standard_registry,
};
pub use tool::{Risk, Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
pub use trust::{TrustError, TrustStore, WorkspaceTrust};
pub use value::{HostValue, Resolved, ValueKind};
pub use version::{KERNEL_VERSION, kernel_version};
