//! The noeta host assembly: links the built-in plugins and loads a host's plugin set.
//!
//! This is the only crate that depends on the built-in crates. It knows the
//! host's conventions — where user and workspace plugins live, the trust
//! store, which built-ins every agent gets — and hands everything else to
//! `noeta-core`. Hosts that link their own third-party plugin crates pass them
//! in [`HostOptions::linked`].

pub mod agent_files;
mod assembly;
pub mod backends;
mod browser;
pub mod builtins;
pub mod claude_plugins;
mod conventions;
pub mod frontends;
mod holders;
mod host;
pub mod install;
mod layers;
pub mod listing;
pub mod mcp_json;
pub mod named;
pub mod programs;
pub mod project_trust;
pub mod sandbox;
pub mod secrets;
pub mod settings;
pub mod settings_edit;
pub mod sign_ins;
mod spelling;
pub mod task_run;
pub mod tasks;
pub mod user_config;

pub use agent_files::{AgentFile, AgentFileError, AgentFiles, load_agent_files, read_agent_files};
pub use assembly::{AgentModels, Host, HostConfig, NO_MODEL, WarningSink, open_store, store_file};
pub use conventions::{ALWAYS_ON, DEFAULT_PLUGINS, HostPaths, looseness, non_removable};
pub use holders::{process_gone, process_worker};
pub use host::{
    HostError, HostOptions, MAIN_INSTRUCTIONS, activation_rules, agent_options, build_host_session,
    build_session, build_session_with_secrets, default_agent, load, sources,
};
pub use project_trust::ProjectTrust;
pub use task_run::{TaskRun, new_task_id};
pub use tasks::{Answer, ModelNotes, TaskOpError, TaskRunner, Tasks};
/// MCP servers as the `mcp` built-in connects them, for `noeta mcp list` and `doctor`: its
/// settings, its servers' states, the resolver an embedding host gives `type = "host"`
/// servers, the elicitor who answers a server's requests for input, and the sign-in to remote
/// servers with the vault its tokens are kept in. Nothing else of the plugin is reached from here.
pub mod mcp {
    pub use noeta_builtin_mcp::{
        Elicited, Elicitor, FileVault, Mcp, Remote, RemoteResolver, Server, ServerStatus, Settings,
        SignIn, SignedIn, TokenVault, Transport, elicitation_defaults, sign_in, sign_out,
        tool_name,
    };
}
/// The preview gateway the `app` built-in mounts apps on (a host starts one and passes it in
/// [`HostConfig::app_gateway`]).
pub mod app {
    pub use noeta_builtin_app::{GATEWAY, Gateway, host_value};
}
/// The browser backend of the `browser` built-in (bound from `[plugins.browser]` when
/// [`HostConfig::browser`] is set).
pub mod browser_backend {
    pub use noeta_builtin_browser::{BACKEND, Backend, Config, Launch, host_value};
}
/// The skills index as `noeta skills list` shows it.
pub use noeta_builtin_skills::listing as skills;
pub use secrets::{EnvSecrets, SecretError, SecretStore, resolve_secrets};
pub use settings::{Layer, Settings, SettingsError, SettingsFiles};
