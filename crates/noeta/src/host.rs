//! Loading a host's plugin set: its sources and options, the trust store, the settings' load
//! gates, the activation rules and the session build (where it looks and which built-ins it
//! always runs are `conventions.rs`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use crate::conventions::{ALWAYS_ON, HostPaths, non_removable};
use crate::settings::Settings;

use noeta_core::{
    ActivationRules, AgentOptions, LinkedPlugin, LoadError, LoadOptions, MergeError, PluginSet,
    PluginSource, SurfaceRegistry, TrustError, load_plugins, standard_registry,
};

/// What a host asks of loading beyond the defaults.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Linked third-party plugin crates.
    pub linked: Vec<LinkedPlugin>,
    /// Extra plugin directories or manifests for this run (`--plugin-dir`, `plugins check PATH`).
    pub paths: Vec<PathBuf>,
    /// The surface registry (a copy of the standard one, possibly extended).
    pub registry: SurfaceRegistry,
    /// When set, only these third-party plugins load.
    pub enabled: Option<BTreeSet<String>>,
    /// Third-party plugins that do not load (switched off by the settings).
    pub disabled: BTreeSet<String>,
    /// Built-ins to drop.
    pub disabled_builtins: BTreeSet<String>,
    /// Refuse plugins whose `requires-noeta` excludes this kernel.
    pub strict: bool,
    /// Load the built-ins (on by default).
    pub builtins: bool,
    /// The runner of plugin programs (plugins with an `[extension]` table); unset, one whose
    /// `env` secret references resolve from the environment.
    pub programs: Option<noeta_extproc::ProgramPlugins>,
}

/// The runner of plugin programs whose `[extension] env` secret references resolve through
/// `secrets`.
pub(crate) fn program_plugins(
    secrets: Arc<dyn crate::secrets::SecretStore>,
) -> noeta_extproc::ProgramPlugins {
    noeta_extproc::ProgramPlugins::new(program_env(secrets))
}

/// Resolves an `[extension] env` value (a secret reference or plain text) through `secrets`.
pub(crate) fn program_env(
    secrets: Arc<dyn crate::secrets::SecretStore>,
) -> noeta_extproc::EnvResolver {
    Arc::new(move |value: &str| {
        match crate::secrets::resolve_secrets(&serde_json::Value::from(value), secrets.as_ref()) {
            Ok(serde_json::Value::String(text)) => Ok(text),
            Ok(other) => Ok(other.to_string()),
            Err(err) => Err(err.to_string()),
        }
    })
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            linked: Vec::new(),
            paths: Vec::new(),
            registry: standard_registry(),
            enabled: None,
            disabled: BTreeSet::new(),
            disabled_builtins: BTreeSet::new(),
            strict: false,
            builtins: true,
            programs: None,
        }
    }
}

/// Errors that stop a host from loading its plugins.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The trust store is unreadable or malformed.
    #[error(transparent)]
    Trust(#[from] TrustError),
    /// Loading failed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Contributions collide.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// An agent cannot be compiled.
    #[error(transparent)]
    Compile(#[from] noeta_core::CompileError),
    /// An agent's session cannot be built.
    #[error(transparent)]
    Session(#[from] noeta_core::session::SessionError),
    /// A secret reference in the settings cannot be resolved.
    #[error(transparent)]
    Secret(#[from] crate::secrets::SecretError),
    /// No agent has this name.
    #[error("no agent named `{name}` (known: {known})")]
    UnknownAgent {
        /// The name asked for.
        name: String,
        /// The known names.
        known: String,
    },
    /// The agent asked for is defined by an agent file that does not load.
    #[error("agent `{name}` cannot be used: {error}")]
    AgentFile {
        /// The agent's name (its file's stem).
        name: String,
        /// Why the file does not load (naming it).
        error: String,
    },
    /// An extension failed while a listing asked it for its part.
    #[error("listing: {0}")]
    Listing(String),
    /// A settings file or an agent file cannot be used.
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    /// The model cannot be set up.
    #[error("{0}")]
    Model(String),
    /// The sandbox the settings name cannot be bound.
    #[error("{0}")]
    Sandbox(String),
    /// The browser backend the settings ask for cannot be bound.
    #[error("{0}")]
    Browser(String),
    /// The store cannot be opened.
    #[error(
        "cannot open the store{}: {cause}",
        url.as_ref().map(|u| format!(" `{u}`")).unwrap_or_default()
    )]
    Store {
        /// The store URL given, if any.
        url: Option<String>,
        /// Why.
        cause: noeta_builtin_storage::OpenError,
    },
}

/// The sources a host loads, in a fixed order (which never changes the merged result).
pub fn sources(paths: &HostPaths, options: &HostOptions) -> Vec<PluginSource> {
    let mut sources = Vec::new();
    if options.builtins {
        sources.extend(
            crate::builtins::linked()
                .into_iter()
                .map(PluginSource::Linked),
        );
    }
    sources.extend(options.linked.iter().cloned().map(PluginSource::Linked));
    sources.extend(options.paths.iter().cloned().map(PluginSource::Path));
    if let Some(dir) = paths.user_plugin_dir() {
        sources.push(PluginSource::UserDir(dir));
    }
    let workspace_dir = paths.workspace_plugin_dir();
    if paths.user_plugin_dir().as_deref() != Some(workspace_dir.as_path()) {
        sources.push(PluginSource::WorkspaceDir(workspace_dir));
    }
    sources
}

/// Loads the host's plugin set: built-ins, linked crates, explicit paths, user and trusted workspace plugins.
pub fn load(paths: &HostPaths, options: &HostOptions) -> Result<PluginSet, HostError> {
    let mut load_options = LoadOptions::new(options.registry.clone());
    load_options.enabled = options.enabled.clone();
    load_options.disabled = options.disabled.clone();
    load_options.disabled_builtins = options.disabled_builtins.clone();
    load_options.non_removable = non_removable();
    load_options.strict = options.strict;
    load_options.trust = paths.trust_store()?;
    let programs = options
        .programs
        .clone()
        .unwrap_or_else(|| program_plugins(Arc::new(crate::secrets::EnvSecrets::new())));
    load_options.command_plugins = Some(Arc::new(programs));
    Ok(load_plugins(&sources(paths, options), &load_options)?)
}

/// The host's activation rules: the always-on built-ins, and `react`'s decision loop as the
/// policy of every agent no policy plugin drives.
pub fn activation_rules() -> ActivationRules {
    ActivationRules {
        always_on: ALWAYS_ON.iter().map(|s| (*s).to_owned()).collect(),
        default_policy: noeta_builtin_react::policy_ref(),
    }
}

/// Builds the session of an agent compiled under [`activation_rules`]: `react`'s decision loop
/// runs it unless a policy plugin is active.
pub fn build_session(
    set: &PluginSet,
    compiled: &noeta_core::CompiledAgent,
    config: &std::collections::BTreeMap<String, serde_json::Value>,
) -> Result<noeta_core::session::Session, noeta_core::session::SessionError> {
    noeta_core::session::build_session(
        set,
        compiled,
        config,
        Some(noeta_builtin_react::default_policy()),
    )
}

/// [`build_session`] over settings that may hold secret references (`{env:NAME}`,
/// `{keyring:service/user}`): the plugin pins hash the references, the plugins' packs get the
/// secrets, resolved from `secrets` now, when their instances are built.
pub fn build_session_with_secrets(
    set: &PluginSet,
    compiled: &noeta_core::CompiledAgent,
    config: &std::collections::BTreeMap<String, serde_json::Value>,
    secrets: &dyn crate::secrets::SecretStore,
) -> Result<noeta_core::session::Session, HostError> {
    build_host_session(
        set,
        compiled,
        config,
        secrets,
        &noeta_core::session::Instances::new(),
    )
}

/// [`build_session_with_secrets`] over a host's `instances`: every agent built over them that
/// uses a plugin with the same parameters shares one instance of it.
pub fn build_host_session(
    set: &PluginSet,
    compiled: &noeta_core::CompiledAgent,
    config: &std::collections::BTreeMap<String, serde_json::Value>,
    secrets: &dyn crate::secrets::SecretStore,
    instances: &noeta_core::session::Instances,
) -> Result<noeta_core::session::Session, HostError> {
    let resolved = crate::secrets::resolve_config(config, secrets)?;
    Ok(noeta_core::session::build_session_shared(
        set,
        compiled,
        config,
        &resolved,
        Some(noeta_builtin_react::default_policy()),
        instances,
    )?)
}

/// The options of the agent called `name`: `main` is the default agent (the official preset),
/// any other name an `agent` contribution of a loaded plugin (an unknown name lists the known
/// ones).
pub fn agent_options(
    set: &PluginSet,
    merged: &noeta_core::Merged,
    name: &str,
) -> Result<AgentOptions, HostError> {
    if name == "main" {
        return Ok(default_agent());
    }
    let entries = merged.for_surface("agent");
    let Some(entry) = entries.iter().find(|e| e.contribution.name == name) else {
        let mut known: Vec<&str> = entries
            .iter()
            .map(|e| e.contribution.name.as_str())
            .filter(|n| !n.starts_with("__"))
            .collect();
        if !known.contains(&"main") {
            known.insert(0, "main");
        }
        return Err(HostError::UnknownAgent {
            name: name.to_owned(),
            known: known.join(", "),
        });
    };
    match set.resolve_contribution(&entry.plugin, "agent", name) {
        Ok(noeta_core::Resolved::Agent(def)) => Ok(AgentOptions::from_definition(&def)),
        Ok(_) => Err(HostError::Listing(format!(
            "agent `{name}` of plugin `{}` does not resolve to an agent definition",
            entry.plugin
        ))),
        Err(err) => Err(HostError::Listing(err.to_string())),
    }
}

/// The default agent `main`: the official preset (activating [`DEFAULT_PLUGINS`], with
/// `explore`, `general-purpose` and `plan` on its roster).
pub fn default_agent() -> AgentOptions {
    AgentOptions::from_definition(&noeta_builtin_presets::main_agent())
}

/// The default agent's instructions.
pub const MAIN_INSTRUCTIONS: &str = noeta_builtin_presets::MAIN_INSTRUCTIONS;

/// The settings' load gates, applied to a host's loading.
impl Settings {
    /// Applies the load gates these settings can express to a host's options: built-ins that
    /// are off join `disabled_builtins`; under a machine allow-list only allowed third-party
    /// plugins that are not off may load (`enabled`). Third-party plugins switched off or
    /// blocked without an allow-list need their names: [`Settings::load_host`] does both.
    pub fn apply_to_host(&self, options: &mut HostOptions) {
        for name in crate::builtins::NAMES {
            if !self.is_enabled(name) {
                options.disabled_builtins.insert(name.to_owned());
            }
        }
        // Every other name the settings switch off (or the machine blocks) is a third-party
        // plugin that does not load.
        options.disabled.extend(
            self.disabled()
                .into_iter()
                .filter(|name| !crate::builtins::NAMES.contains(&name.as_str())),
        );
        if let Some(allowed) = &self.allowed() {
            let permitted: BTreeSet<String> = allowed
                .iter()
                .filter(|name| self.is_enabled(name))
                .cloned()
                .collect();
            options.enabled = Some(match options.enabled.take() {
                Some(enabled) => enabled.intersection(&permitted).cloned().collect(),
                None => permitted,
            });
        }
    }

    /// Loads the host's plugin set with these settings' gates ([`Settings::apply_to_host`]),
    /// in one load. No plugin code runs.
    pub fn load_host(
        &self,
        paths: &HostPaths,
        options: &HostOptions,
    ) -> Result<PluginSet, HostError> {
        let mut options = options.clone();
        self.apply_to_host(&mut options);
        crate::host::load(paths, &options)
    }
}
