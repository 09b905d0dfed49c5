//! `Host`: a whole noeta host for one workspace — its settings, plugins and agent files, each
//! agent's session built on demand over shared plugin instances, and the store, model and
//! runtime that run them. The command line is one user of it; an embedder gets the same
//! behaviour from the same calls.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use noeta_core::extension::Extension;
use noeta_core::provider::Provider;
use noeta_core::runner::{Runtime, Sessions};
use noeta_core::session::{Instances, Session};
use noeta_core::store::{Clock, SystemClock};
use noeta_core::{Merged, PluginSet};
use serde_json::Value;

use crate::agent_files::{AgentFile, AgentFiles, read_agent_files};
use crate::backends::{OpenError, ProviderConfig, StoreUrl, Stores};
use crate::conventions::HostPaths;
use crate::host::{HostError, HostOptions};
use crate::secrets::{EnvSecrets, SecretStore, resolve_plugin_secrets};
use crate::settings::{Settings, SettingsFiles};

/// How to reach a model when nothing says: the message a host gives.
pub const NO_MODEL: &str = "no model is configured: set ANTHROPIC_API_KEY (Anthropic) or OPENAI_API_KEY (OpenAI; OPENAI_BASE_URL for a compatible server such as vLLM, Ollama or llama.cpp), or choose one in the settings (`[plugins.providers]` with `provider = \"anthropic\"` or `\"openai\"` and its `api_key`; `noeta run` and `chat` also take `--provider`); `noeta demo` shows noeta at work offline";

/// Receives a host's warnings (a plugin switched off for an agent, an agent this host cannot
/// run); the command line prints them.
pub type WarningSink = Arc<dyn Fn(&str) + Send + Sync>;

/// What a host is opened with.
#[derive(Clone)]
pub struct HostConfig {
    /// Where the host looks for things.
    pub paths: HostPaths,
    /// Linked plugins, extra plugin paths, the registry, strictness.
    pub options: HostOptions,
    /// Settings under every settings file (a frontend's own defaults).
    pub defaults: Settings,
    /// Settings over every settings file (a frontend's flags).
    pub flags: Settings,
    /// Where secret references (`{env:NAME}`, `{keyring:…}`) resolve.
    pub secrets: Arc<dyn SecretStore>,
    /// The worker name leases carry.
    pub worker: String,
    /// Says whether a lease's holder is gone, so its task is taken over at once
    /// ([`process_gone`] for workers named by [`process_worker`]).
    pub holder_gone: Option<Arc<noeta_core::runner::HolderGone>>,
    /// The resolver of remote MCP servers (`type = "host"` in `[plugins.mcp.servers.<alias>]`):
    /// asked by alias at every turn for the server's URL and headers, so no credential sits in
    /// a settings file or a manifest. `None`: such servers fail, saying the host has none.
    pub mcp_server_resolver: Option<Arc<dyn noeta_builtin_mcp::RemoteResolver>>,
    /// Whether sessions start their MCP servers (default yes); a listing (`noeta agents
    /// list`) starts none and offers no MCP tool.
    pub start_mcp_servers: bool,
    /// Who answers an MCP server's request for input in the middle of a call (a terminal
    /// asks the person); none: such requests are declined.
    pub mcp_elicitor: Option<Arc<dyn noeta_builtin_mcp::Elicitor>>,
    /// Where sign-ins to remote MCP servers are kept (`noeta mcp login` writes there); a
    /// kept sign-in's tokens are sent to its server. Default: files under `~/.noeta/mcp-sign-in`.
    pub mcp_tokens: Option<Arc<dyn noeta_builtin_mcp::TokenVault>>,
    /// The preview gateway the `app` built-in mounts apps on; without one, `open_app` is not
    /// offered.
    pub app_gateway: Option<Arc<noeta_builtin_app::Gateway>>,
    /// Whether the host binds a browser for the `browser` built-in (from `[plugins.browser]`;
    /// a local Chromium when one is installed). Without one, the browser tools are not offered.
    pub browser: bool,
}

/// The agent files' own models, as [`Host::agent_models`] finds them.
#[derive(Default)]
#[non_exhaustive]
pub struct AgentModels {
    /// Each agent that runs on a model of its own, with its provider.
    pub models: Vec<(String, Arc<dyn Provider>)>,
    /// Why agents run on the run's model instead, each note with the agents it concerns (one
    /// note for every agent file naming an alias the provider cannot serve).
    pub notes: Vec<(Vec<String>, String)>,
}

impl std::fmt::Debug for HostConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostConfig")
            .field("paths", &self.paths)
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

impl HostConfig {
    /// A host for `paths`: default options, no defaults or flags, secrets from the
    /// environment, worker `local`.
    pub fn new(paths: HostPaths) -> Self {
        let mcp_tokens = crate::sign_ins::file_vault(&paths);
        Self {
            paths,
            options: HostOptions::default(),
            defaults: Settings::default(),
            flags: Settings::default(),
            secrets: Arc::new(EnvSecrets::new()),
            worker: "local".to_owned(),
            holder_gone: None,
            mcp_server_resolver: None,
            start_mcp_servers: true,
            mcp_elicitor: None,
            mcp_tokens,
            app_gateway: None,
            browser: false,
        }
    }

    /// The merged settings: the defaults, then the machine, user and project `config.toml`,
    /// then the flags.
    pub fn settings(&self) -> Result<Settings, HostError> {
        self.settings_noting().map(|(settings, _)| settings)
    }

    /// [`HostConfig::settings`], and what an untrusted project's settings lost (one warning).
    pub fn settings_noting(&self) -> Result<(Settings, Vec<String>), HostError> {
        let mut settings = self.defaults.clone();
        let (files, notes) = Settings::load_noting(&SettingsFiles::new(&self.paths), &self.flags)?;
        settings.merge(files);
        Ok((settings, notes))
    }
}

/// A host for one workspace: plugins loaded and merged once, every agent's session built on
/// first use over one set of plugin instances, with the host's own extensions (a terminal's
/// printer and approver) appended to each.
pub struct Host {
    config: HostConfig,
    settings: Settings,
    set: PluginSet,
    merged: Merged,
    files: AgentFiles,
    /// The Claude Code plugin directories found, translated when a session is built.
    claude: crate::claude_plugins::ClaudePlugins,
    instances: Instances,
    extensions: Vec<Arc<dyn Extension>>,
    warn: WarningSink,
    notices: Option<WarningSink>,
    exec: Arc<noeta_core::exec::LocalExecEnv>,
    /// Where commands run: `exec` itself, or the sandbox the settings bind over it.
    commands: Arc<dyn noeta_core::exec::ExecEnv>,
    /// The sandbox the settings bind (none: `local`).
    sandbox: Option<crate::sandbox::Chosen>,
    built: Mutex<BTreeMap<String, Arc<Session>>>,
    /// The servers of the `.mcp.json` files, read when a session is first built.
    mcp_json: std::sync::OnceLock<serde_json::Map<String, Value>>,
    /// The Claude Code plugins' `userConfig` values, by plugin (read once; each problem one
    /// warning).
    user_values: std::sync::OnceLock<BTreeMap<String, crate::user_config::UserValues>>,
    /// What an untrusted workspace's files lost (see [`Host::trust_notes`]).
    trust_notes: Vec<String>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("config", &self.config)
            .field("plugins", &self.set.names())
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Reads the settings, loads and merges the plugins, and reads the agent files. The
    /// loader's warnings are in [`plugins`](Self::plugins)`.warnings()`.
    pub fn open(config: HostConfig) -> Result<Self, HostError> {
        let (settings, mut trust_notes) = config.settings_noting()?;
        let mut options = config.options.clone();
        if options.programs.is_none() {
            options.programs = Some(crate::host::program_plugins(Arc::clone(&config.secrets)));
        }
        let set = settings.load_host(&config.paths, &options)?;
        let merged = set.merged()?;
        let mut files = read_agent_files(&config.paths);
        trust_notes.extend(crate::project_trust::untrusted_agent_files(
            &config.paths,
            &settings,
            &mut files,
        ));
        let claude = crate::claude_plugins::discover(&config.paths, &config.options.paths);
        for plugin in &claude.plugins {
            crate::agent_files::add_plugin_agents(&plugin.name, &plugin.agents_dirs, &mut files);
        }
        let mut local = noeta_core::exec::LocalExecEnv::new(config.paths.workspace.clone());
        // Commands carry this process's mark, so a later one can end what a dead one left.
        if let Some(dir) = config.paths.user_dir() {
            local = local.with_ledger(&dir.join("run"));
        }
        let exec = Arc::new(local);
        let (commands, sandbox) =
            crate::sandbox::bind(&settings, &set, &merged, Arc::clone(&exec))?;
        let mut instances = Instances::new().with_host_value(
            noeta_core::exec::COMMAND_ENV,
            noeta_core::HostValue::new(Arc::clone(&commands)),
        );
        if let Some(gateway) = &config.app_gateway {
            instances = instances.with_host_value(
                noeta_builtin_app::GATEWAY,
                noeta_builtin_app::host_value(Arc::clone(gateway)),
            );
        }
        if config.browser
            && let Some(backend) = crate::browser::bind(&settings, &config.paths, sandbox.as_ref())?
        {
            instances = instances.with_host_value(
                noeta_builtin_browser::BACKEND,
                noeta_builtin_browser::host_value(backend),
            );
        }
        let instances = crate::sign_ins::mcp_host_values(&config, instances);
        Ok(Self {
            config,
            settings,
            set,
            merged,
            files,
            claude,
            instances,
            extensions: Vec::new(),
            warn: Arc::new(|text| tracing::warn!("{text}")),
            notices: None,
            exec,
            commands,
            sandbox,
            built: Mutex::new(BTreeMap::new()),
            mcp_json: std::sync::OnceLock::new(),
            user_values: std::sync::OnceLock::new(),
            trust_notes,
        })
    }

    /// What the workspace's own files would have the host do that it does not, since the
    /// workspace is not trusted (or changed since it was): one line per file.
    pub fn trust_notes(&self) -> &[String] {
        &self.trust_notes
    }

    /// Appends `extension` to every session this host builds (after the agent's own).
    pub fn with_extension(mut self, extension: Arc<dyn Extension>) -> Self {
        self.extensions.push(extension);
        self
    }

    /// Sends the host's warnings to `sink` (by default they are logged).
    pub fn with_warnings(mut self, sink: WarningSink) -> Self {
        self.warn = sink;
        self
    }

    /// Sends what the model's provider says while it works (each retry, with its wait and
    /// why) to `sink`; without one it is only logged.
    pub fn with_notices(mut self, sink: WarningSink) -> Self {
        self.notices = Some(sink);
        self
    }

    /// What the host was opened with.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// The merged settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The loaded plugin set (with its warnings and problems).
    pub fn plugins(&self) -> &PluginSet {
        &self.set
    }

    /// The merged contributions.
    pub fn merged(&self) -> &Merged {
        &self.merged
    }

    /// Where the host's runtimes run commands (the workspace): a frontend ends every running
    /// command with [`LocalExecEnv::stop_all`](noeta_core::exec::LocalExecEnv::stop_all) when
    /// the user interrupts.
    pub fn exec_env(&self) -> &Arc<noeta_core::exec::LocalExecEnv> {
        &self.exec
    }

    /// The environment commands run in: the local one, or the sandbox wrapping it (its
    /// `name()` says which).
    pub fn command_env(&self) -> &Arc<dyn noeta_core::exec::ExecEnv> {
        &self.commands
    }

    /// Removes what the bound sandbox left behind for this workspace (`noeta sandbox prune`):
    /// its name and what it removed. `local` leaves nothing behind.
    pub fn prune_sandbox(&self) -> Result<(String, Vec<String>), HostError> {
        let Some(chosen) = &self.sandbox else {
            return Ok((crate::sandbox::LOCAL.to_owned(), Vec::new()));
        };
        let removed = chosen
            .provider
            .0
            .prune(&chosen.params, &self.config.paths.workspace)
            .map_err(|why| HostError::Sandbox(format!("sandbox `{}`: {why}", chosen.name)))?;
        Ok((chosen.name.clone(), removed))
    }

    /// The agent files that load.
    pub fn agent_files(&self) -> &[AgentFile] {
        &self.files.agents
    }

    /// The Claude Code plugins found (and the ones that could not be read).
    pub fn claude_plugins(&self) -> &crate::claude_plugins::ClaudePlugins {
        &self.claude
    }

    /// The agent files that do not load, each with why; each fails only itself.
    pub fn agent_file_problems(&self) -> &[(std::path::PathBuf, crate::AgentFileError)] {
        &self.files.problems
    }

    /// The session of agent `name`: an agent file of that name, else an `agent` contribution
    /// (`main`: the official preset), with the settings applied; built once.
    pub fn session(&self, name: &str) -> Result<Arc<Session>, HostError> {
        if let Some(session) = self.lock().get(name) {
            return Ok(Arc::clone(session));
        }
        let agent = self.agent(name, true)?;
        let compiled = noeta_core::compile_agent(
            &self.set,
            &self.merged,
            &agent,
            &crate::host::activation_rules(),
        )?;
        let mut session = crate::host::build_host_session(
            &self.set,
            &compiled,
            &agent.config,
            self.config.secrets.as_ref(),
            &self.instances,
        )?;
        for extension in &self.extensions {
            session = session.with_host_extension(Arc::clone(extension));
        }
        let session = Arc::new(session);
        self.lock().insert(name.to_owned(), Arc::clone(&session));
        Ok(session)
    }

    /// The options of agent `name` with the settings applied and the `.mcp.json` servers added
    /// (`warn`: say which plugins the settings switch off).
    fn agent(&self, name: &str, warn: bool) -> Result<noeta_core::AgentOptions, HostError> {
        let mut agent = match self.files.agents.iter().find(|f| f.name == name) {
            Some(file) => file.options(),
            None => {
                // An agent file of this name that does not load says why, rather than
                // "no agent named …".
                if let Some((_, err)) = self.files.problems.iter().find(|(path, _)| {
                    path.file_stem()
                        .is_some_and(|stem| stem.to_string_lossy() == name)
                }) {
                    return Err(HostError::AgentFile {
                        name: name.to_owned(),
                        error: err.to_string(),
                    });
                }
                crate::host::agent_options(&self.set, &self.merged, name)?
            }
        };
        // Any roster may name an agent file.
        agent.local_agents = self
            .files
            .agents
            .iter()
            .filter(|file| file.name != name)
            .map(|file| (file.name.clone(), Arc::new(file.definition())))
            .collect();
        // Agent files are subagents of `main` (as Claude Code's are), unless the settings say
        // otherwise; any agent may take them in with `include_agent_files = true`.
        if self
            .settings
            .include_agent_files(name)
            .unwrap_or(name == "main")
        {
            for file in &self.files.agents {
                if file.name != name && !agent.agents.contains(&file.name) {
                    agent.agents.push(file.name.clone());
                }
            }
        }
        // On-disk plugins join the agents their manifest's `add-to` names (a linked crate's
        // `add-to` does nothing: a dependency never changes anyone's agents by itself).
        for plugin in self.set.plugins() {
            let joins = !plugin.source.is_linked()
                && plugin.manifest.add_to.iter().any(|a| a == "*" || a == name);
            if joins && !agent.plugins.iter().any(|p| p == plugin.name()) {
                agent.plugins.push(plugin.name().to_owned());
            }
        }
        for dropped in self.settings.apply_to(&mut agent) {
            if warn {
                (self.warn)(&format!(
                    "plugin `{dropped}` is switched off by the settings; agent `{name}` runs without it"
                ));
            }
        }
        self.add_mcp_json(&mut agent);
        self.add_claude_plugins(&mut agent);
        Ok(agent)
    }

    /// The `mcp` plugin's parameters for agent `name`, as its session gets them: the settings'
    /// servers, the `.mcp.json` servers beneath, secret references resolved (for `noeta mcp
    /// list` and `doctor`).
    pub fn mcp_params(&self, name: &str) -> Result<Value, HostError> {
        let agent = self.agent(name, false)?;
        let params = agent.config.get("mcp").cloned().unwrap_or(Value::Null);
        Ok(resolve_plugin_secrets(
            "mcp",
            &params,
            self.config.secrets.as_ref(),
        )?)
    }

    /// The `.mcp.json` servers beneath the `mcp` plugin's settings: an alias the settings name
    /// keeps the settings' server. Read once per host; each problem is one warning.
    fn add_mcp_json(&self, agent: &mut noeta_core::AgentOptions) {
        let servers = self.mcp_json.get_or_init(|| {
            let (servers, warnings) = crate::mcp_json::servers(&self.config.paths);
            for warning in warnings {
                (self.warn)(&warning);
            }
            servers
        });
        if servers.is_empty() || !self.settings.is_enabled("mcp") {
            return;
        }
        let mcp = agent
            .config
            .entry("mcp".to_owned())
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Value::Object(table) = mcp {
            let named = table
                .entry("servers".to_owned())
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Value::Object(named) = named {
                for (alias, server) in servers {
                    named.entry(alias.clone()).or_insert_with(|| server.clone());
                }
            }
        }
    }

    /// The `userConfig` values of each Claude Code plugin that declares options.
    fn user_values(&self) -> &BTreeMap<String, crate::user_config::UserValues> {
        self.user_values.get_or_init(|| {
            let mut all = BTreeMap::new();
            for plugin in &self.claude.plugins {
                if plugin.user_config.is_empty() {
                    continue;
                }
                let (values, warnings) = crate::user_config::UserValues::read(
                    &plugin.name,
                    &plugin.user_config,
                    &self
                        .settings
                        .params(&plugin.name)
                        .map(|p| Value::Object(p.clone()))
                        .unwrap_or(Value::Null),
                );
                for warning in warnings {
                    (self.warn)(&warning);
                }
                for (alias, server) in &plugin.mcp_servers {
                    let mut inside = Vec::new();
                    collect_strings(server, &mut |text| {
                        inside.extend(values.sensitive_inside(text));
                    });
                    for key in inside {
                        (self.warn)(&format!(
                            "plugin `{}`: MCP server `{alias}` uses the sensitive option `{key}` \
                             inside a longer value; a secret reference is resolved only as a \
                             whole value, so there it stays unresolved",
                            plugin.name
                        ));
                    }
                }
                all.insert(plugin.name.clone(), values);
            }
            all
        })
    }

    /// The Claude Code plugins' parts in the plugins that read them: skills directories and
    /// markdown commands to `skills`, hooks to `governance`, MCP servers to `mcp` (beneath the
    /// settings' and `.mcp.json`'s, as `plugin_<plugin>_<server>`).
    fn add_claude_plugins(&self, agent: &mut noeta_core::AgentOptions) {
        let plugins = &self.claude.plugins;
        if plugins.is_empty() && self.claude.hook_files.is_empty() {
            return;
        }
        let table = |agent: &mut noeta_core::AgentOptions, name: &str| {
            let entry = agent
                .config
                .entry(name.to_owned())
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(serde_json::Map::new());
            }
        };
        if self.settings.is_enabled("skills") {
            table(agent, "skills");
            let skills = self.claude.skill_dirs_setting();
            let mut commands = self.claude.command_dirs_setting(&self.config.paths);
            // The options that are not sensitive, for `${user_config.KEY}` in command files.
            for entry in &mut commands {
                let values = entry
                    .get("plugin")
                    .and_then(Value::as_str)
                    .and_then(|p| self.user_values().get(p));
                if let (Some(values), Value::Object(entry)) = (values, entry) {
                    entry.insert("options".to_owned(), Value::Object(values.public()));
                }
            }
            if let Some(Value::Object(skills_table)) = agent.config.get_mut("skills") {
                skills_table.insert("plugin_skill_dirs".to_owned(), Value::Array(skills));
                skills_table.insert("plugin_command_dirs".to_owned(), Value::Array(commands));
            }
        }
        // Hooks: the JSON files' (user, then a trusted workspace's), then each plugin's,
        // after the settings' own.
        let plugin_hooks: Vec<Value> = plugins
            .iter()
            .filter_map(|p| {
                let hooks = p.hooks.as_ref()?;
                Some(match self.user_values().get(&p.name) {
                    Some(values) => values.in_hooks(hooks),
                    None => hooks.clone(),
                })
            })
            .collect();
        let hook_tables: Vec<&Value> = self
            .claude
            .hook_files
            .iter()
            .map(|(_, events)| events)
            .chain(plugin_hooks.iter())
            .collect();
        if self.settings.is_enabled("governance") && !hook_tables.is_empty() {
            table(agent, "governance");
            if let Some(Value::Object(governance)) = agent.config.get_mut("governance") {
                let hooks = governance
                    .entry("hooks".to_owned())
                    .or_insert_with(|| Value::Object(serde_json::Map::new()));
                if let Value::Object(hooks) = hooks {
                    for table in &hook_tables {
                        for (event, groups) in table.as_object().into_iter().flatten() {
                            let list = hooks
                                .entry(event.clone())
                                .or_insert_with(|| Value::Array(Vec::new()));
                            if let (Value::Array(list), Value::Array(groups)) = (list, groups) {
                                list.extend(groups.iter().cloned());
                            }
                        }
                    }
                }
            }
        }
        if self.settings.is_enabled("mcp") && plugins.iter().any(|p| !p.mcp_servers.is_empty()) {
            table(agent, "mcp");
            if let Some(Value::Object(mcp)) = agent.config.get_mut("mcp") {
                let named = mcp
                    .entry("servers".to_owned())
                    .or_insert_with(|| Value::Object(serde_json::Map::new()));
                if let Value::Object(named) = named {
                    for plugin in plugins {
                        for (alias, server) in &plugin.mcp_servers {
                            let alias = format!("plugin_{}_{alias}", plugin.name).replace(
                                |c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                                "_",
                            );
                            let server = match self.user_values().get(&plugin.name) {
                                Some(values) => {
                                    crate::claude_plugins::map_strings(server, &|text| {
                                        values.in_spec(text)
                                    })
                                }
                                None => server.clone(),
                            };
                            named.entry(alias).or_insert(server);
                        }
                    }
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Session>>> {
        self.built.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `[plugins.<name>]` tables of the settings that name neither a loaded plugin nor one
    /// of `extensions` (the named extensions of the sessions built so far), each with the
    /// nearest known name when one is close enough to be a typo.
    pub fn unknown_tables<'e>(
        &self,
        extensions: impl IntoIterator<Item = &'e str>,
    ) -> Vec<(String, Option<String>)> {
        let mut known: std::collections::BTreeSet<String> =
            self.set.names().into_iter().map(str::to_owned).collect();
        known.extend(crate::settings::REACT_PARTS.iter().map(|n| (*n).to_owned()));
        known.extend(extensions.into_iter().map(str::to_owned));
        known.extend(crate::named::names().into_iter().map(str::to_owned));
        // Read by the host's own commands: `noeta serve`'s token.
        known.insert("serve".to_owned());
        // A Claude Code plugin's table holds its `userConfig` values (`config`).
        known.extend(self.claude.plugins.iter().map(|p| p.name.clone()));
        self.settings
            .config()
            .into_keys()
            .filter(|table| !known.contains(table))
            .map(|table| {
                let near = crate::spelling::closest(&table, &known).map(str::to_owned);
                (table, near)
            })
            .collect()
    }

    /// The on-disk plugins no agent activates: no `add-to` in their manifest, and neither the
    /// agent `session` runs, an agent file nor `[agents.<name>] add_plugins` names them. A
    /// plugin added to `~/.noeta/plugins` without `add-to` loads and does nothing, which a
    /// person should be told.
    pub fn unused_plugins(&self, session: &Session) -> Vec<String> {
        self.set
            .plugins()
            .filter(|p| !p.source.is_linked() && p.manifest.add_to.is_empty())
            .map(|p| p.name().to_owned())
            .filter(|name| {
                !session.spec.plugins.contains(name)
                    && !self.settings.adds_plugin(name)
                    && !self
                        .files
                        .agents
                        .iter()
                        .any(|f| f.plugins.iter().any(|p| p == name))
            })
            .collect()
    }

    /// The skills index of this workspace, as an agent's session builds it and `noeta skills
    /// list` shows it: every indexed skill, and every skipped one with why (`shadowed` when only
    /// a higher tier's skill of the same name hides it).
    pub fn skills(&self) -> Result<noeta_builtin_skills::listing::Listing, String> {
        let config = self
            .settings
            .config()
            .get("skills")
            .cloned()
            .unwrap_or(Value::Null);
        let dirs: Vec<(String, std::path::PathBuf)> = self
            .merged
            .for_surface(noeta_core::surface::names::SKILLS)
            .iter()
            .filter_map(|e| {
                e.contribution
                    .path
                    .as_ref()
                    .map(|p| (e.plugin.clone(), std::path::PathBuf::from(p)))
            })
            .collect();
        noeta_builtin_skills::listing::index_for_listing(
            &config,
            Some(&self.config.paths.workspace),
            self.config.paths.home.as_deref(),
            &dirs,
        )
    }

    /// The store named by `url` (default `<workspace>/.noeta/noeta.db`).
    pub fn open_store(&self, url: Option<&str>) -> Result<Stores, HostError> {
        open_store(&self.config.paths, url)
    }

    /// The agent files' own models (`model:`), for [`noeta_core::runner::Runtime::with_agent_model`]:
    /// each one `run_model`'s provider knows, opened like the run's; and, by agent, one note
    /// for each that runs on the run's model instead (an alias such as `sonnet`, a model the provider
    /// does not list, or a provider with no models to choose from). `inherit` is the run's.
    pub fn agent_models(&self, run_model: &Arc<dyn Provider>) -> AgentModels {
        let mut models = Vec::new();
        let mut notes = Vec::new();
        let provider = run_model.name();
        // `[plugins.providers] model_aliases`, read as `open_model` reads the table (a bad one
        // has failed the run's model already).
        let params = self
            .settings
            .params("providers")
            .map(|p| Value::Object(p.clone()))
            .unwrap_or(Value::Null);
        let overrides = resolve_plugin_secrets("providers", &params, self.config.secrets.as_ref())
            .ok()
            .and_then(|params| noeta_builtin_providers::model_aliases_from_settings(&params).ok())
            .unwrap_or_default();
        // An alias the provider cannot serve: one note for all the files that use it.
        let mut unserved: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for file in &self.files.agents {
            let Some(written) = file.model.as_deref().filter(|m| *m != "inherit") else {
                continue;
            };
            let model = if noeta_builtin_providers::is_model_alias(written) {
                match noeta_builtin_providers::resolve_model_alias(provider, written, &overrides) {
                    Some(model) => model,
                    None => {
                        unserved
                            .entry(written.to_owned())
                            .or_default()
                            .push(file.name.clone());
                        continue;
                    }
                }
            } else {
                written.to_owned()
            };
            let model = model.as_str();
            let on_run = |why: String| {
                let named = if model == written {
                    format!("`model: {model}`")
                } else {
                    format!("`model: {written}` (`{model}`)")
                };
                format!(
                    "agent `{}` ({}): {named} {why}; it runs on the run's model `{}`",
                    file.name,
                    file.path.display(),
                    run_model.model()
                )
            };
            if model == run_model.model() {
                continue;
            }
            if !noeta_builtin_providers::knows_model(provider, model) {
                let why = format!("is not a model the `{provider}` provider knows");
                notes.push((vec![file.name.clone()], on_run(why)));
                continue;
            }
            match self.open_model(Some(provider), Some(model)) {
                Ok(opened) => models.push((file.name.clone(), opened)),
                Err(err) => {
                    let why = format!("cannot be opened ({err})");
                    notes.push((vec![file.name.clone()], on_run(why)));
                }
            }
        }
        for (alias, agents) in unserved {
            let shown: Vec<String> = agents.iter().take(3).map(|a| format!("`{a}`")).collect();
            let more = match agents.len().saturating_sub(shown.len()) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            let note = format!(
                "`model: {alias}` (agent{} {}{more}) names no model of the `{provider}` provider; \
                 {} on the run's model `{}` — map it with `[plugins.providers] model_aliases`",
                if agents.len() == 1 { "" } else { "s" },
                shown.join(", "),
                if agents.len() == 1 {
                    "it runs"
                } else {
                    "they run"
                },
                run_model.model()
            );
            notes.push((agents, note));
        }
        AgentModels { models, notes }
    }

    /// The model: `provider`, else `[plugins.providers] provider`, else the first provider
    /// with a key in the environment; configured by `[plugins.providers]` (its secret
    /// references resolved now), then `model`.
    pub fn open_model(
        &self,
        provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Arc<dyn Provider>, HostError> {
        let params = self
            .settings
            .params("providers")
            .map(|p| Value::Object(p.clone()))
            .unwrap_or(Value::Null);
        let params = resolve_plugin_secrets("providers", &params, self.config.secrets.as_ref())?;
        let (named, mut config) =
            crate::backends::from_settings(&params, ProviderConfig::default())
                .map_err(HostError::Model)?;
        let spec = match (provider, named) {
            (Some(spec), named) => {
                // The settings describe their own provider: its key, address, model and price
                // must not travel to another one.
                if named.is_some_and(|named| named != spec) {
                    config = ProviderConfig {
                        max_retries: config.max_retries,
                        max_retry_time: config.max_retry_time,
                        connect_timeout: config.connect_timeout,
                        idle_timeout: config.idle_timeout,
                        ..ProviderConfig::default()
                    };
                }
                spec.to_owned()
            }
            (None, Some(spec)) => spec,
            (None, None) => match crate::backends::detect_from_env() {
                Some(name) => name.to_owned(),
                None => return Err(HostError::Model(NO_MODEL.to_owned())),
            },
        };
        if let Some(sink) = &self.notices {
            let sink = Arc::clone(sink);
            config.notify = Some(crate::backends::Notify::new(move |line| sink(line)));
        }
        if model.is_some() && model.map(str::to_owned) != config.model {
            // A price set for the settings' model is not this one's.
            config.model = model.map(str::to_owned);
            config.price = None;
        }
        crate::backends::open_provider(&spec, config)
            .map_err(|err| HostError::Model(format!("cannot set up provider `{spec}`: {err}")))
    }

    /// A runtime over `stores` and `model`, as this host's worker, running commands in the
    /// workspace.
    pub fn runtime(&self, stores: &Stores, model: Arc<dyn Provider>) -> Runtime {
        let runtime = Runtime::new(Arc::clone(&stores.log), Arc::clone(&stores.content), model)
            .with_worker(self.config.worker.clone())
            .with_exec_env(Arc::clone(&self.commands));
        match &self.config.holder_gone {
            Some(gone) => runtime.with_holder_check(Arc::clone(gone)),
            None => runtime,
        }
    }
}

impl Sessions for Host {
    fn session(&self, agent: &str) -> Option<Arc<Session>> {
        match Host::session(self, agent) {
            Ok(session) => Some(session),
            Err(err) => {
                // The child fails alone, and its parent hears that this host cannot run it.
                (self.warn)(&format!("agent `{agent}` cannot run here: {err}"));
                None
            }
        }
    }
}

/// The store named by `url` in `paths`' workspace (default `<workspace>/.noeta/noeta.db`), for
/// commands that read a store without running an agent.
pub fn open_store(paths: &HostPaths, url: Option<&str>) -> Result<Stores, HostError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    crate::backends::open_store(url, &paths.workspace, clock).map_err(|err| HostError::Store {
        url: url.map(noeta_builtin_storage::redact_url),
        cause: err,
    })
}

/// The SQLite file `url` names in `paths`' workspace (default `<workspace>/.noeta/noeta.db`), for
/// commands that check or salvage the file itself. A store held in memory has no file: that is
/// the error.
pub fn store_file(paths: &HostPaths, url: Option<&str>) -> Result<std::path::PathBuf, HostError> {
    let store_error = |cause| HostError::Store {
        url: url.map(noeta_builtin_storage::redact_url),
        cause,
    };
    let parsed = match url {
        Some(url) => StoreUrl::parse(url, &paths.workspace).map_err(store_error)?,
        None => StoreUrl::default_for(&paths.workspace),
    };
    match parsed {
        StoreUrl::Sqlite(path) => Ok(path),
        other => Err(store_error(OpenError::BadUrl {
            url: other.to_string(),
            reason: "it names a store held in memory, which has no file to check or salvage — \
                     use `sqlite:PATH`"
                .to_owned(),
        })),
    }
}

/// Calls `f` with every string in `value`.
fn collect_strings(value: &Value, f: &mut dyn FnMut(&str)) {
    match value {
        Value::String(text) => f(text),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, f)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, f)),
        _ => {}
    }
}
