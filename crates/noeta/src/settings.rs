//! Layered settings: `config.toml` from the machine, the user and the project, then flags.
//!
//! Layers, lowest first: the machine file [`MACHINE_SETTINGS`], the user's
//! `~/.noeta/config.toml`, the project's `<workspace>/.noeta/config.toml`, then a [`Settings`]
//! value the CLI builds from its flags. `[plugins.<name>]` tables merge key by key (nested
//! tables recursively, arrays replace), `[agents.<name>] add_plugins` lists are unioned, and
//! the machine layer's `[policy]` overrides every other layer.
//!
//! Parameters are kept as written: a secret reference (`{env:NAME}`, `{keyring:service/user}`)
//! stays a reference in [`Settings::config`], so plugin pins hash the reference and never the
//! secret; `crate::secrets` resolves references when a plugin instance is built.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use noeta_core::AgentOptions;
use serde_json::{Map, Value};

use crate::conventions::{ALWAYS_ON, HostPaths, looseness, non_removable};
use crate::layers::{merge_params, merge_value};
use crate::project_trust::{self, ProjectTrust};

/// Where the machine settings live (the path is injectable through [`SettingsFiles::machine`]).
pub const MACHINE_SETTINGS: &str = "/etc/noeta/config.toml";

/// The origin named in errors about settings built from command-line flags.
pub const FLAGS_ORIGIN: &str = "command-line flags";

/// The agent key of `[agents."*"]`: additions for every agent.
pub const EVERY_AGENT: &str = "*";

/// The names that come with `react` and so can never be turned off by settings or agent files.
pub const REACT_PARTS: [&str; 3] = [
    "react",
    noeta_builtin_react::TOOL_SEARCH,
    noeta_builtin_react::STRUCTURED_OUTPUT,
];

/// The most bytes a settings file or an agent file may hold.
pub const MAX_SETTINGS_BYTES: u64 = 1024 * 1024;

/// The settings layer a text comes from. Only [`Layer::Machine`] may hold `[policy]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// `/etc/noeta/config.toml`.
    Machine,
    /// `~/.noeta/config.toml`.
    User,
    /// `<workspace>/.noeta/config.toml`.
    Project,
    /// Settings the CLI builds from its flags, merged last.
    Flags,
}

/// The three settings files, lowest layer first, and whether the project's may make noeta do
/// things (see [`crate::project_trust`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsFiles {
    /// The machine file (normally [`MACHINE_SETTINGS`]).
    pub machine: PathBuf,
    /// `~/.noeta/config.toml` (none without a home directory).
    pub user: Option<PathBuf>,
    /// `<workspace>/.noeta/config.toml`.
    pub project: PathBuf,
    /// Whether the workspace is trusted: untrusted, its file keeps only what an untrusted
    /// project may set.
    pub project_trust: ProjectTrust,
}

impl SettingsFiles {
    /// The files of a host: the machine file at [`MACHINE_SETTINGS`], the user's and the
    /// project's, with the workspace's trust from the trust store.
    pub fn new(paths: &HostPaths) -> Self {
        Self {
            machine: PathBuf::from(MACHINE_SETTINGS),
            user: paths.user_dir().map(|d| d.join("config.toml")),
            project: paths.workspace.join(".noeta").join("config.toml"),
            project_trust: ProjectTrust::of(paths),
        }
    }

    /// The same files with the project's trust decided by the caller (an embedder that trusts
    /// its workspaces itself, tests of the layering).
    pub fn with_project_trust(mut self, trust: ProjectTrust) -> Self {
        self.project_trust = trust;
        self
    }

    /// The same files with the machine file at `path`.
    pub fn with_machine(mut self, path: impl Into<PathBuf>) -> Self {
        self.machine = path.into();
        self
    }
}

/// Why settings could not be read (agent files have [`crate::AgentFileError`]). Every message names the file (or
/// [`FLAGS_ORIGIN`]); messages about a key name its table and the key too.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// A file exists but cannot be read.
    #[error("cannot read {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A settings file is larger than one may be.
    #[error("{file} is {size} bytes, over the {limit}-byte limit of a settings or agent file")]
    TooLarge {
        /// The file.
        file: String,
        /// Its size, or at least how much was read.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A settings file is not valid TOML.
    #[error("{file}: invalid TOML at line {line}, column {column}: {message}")]
    Toml {
        /// The file.
        file: String,
        /// The line (1-based).
        line: usize,
        /// The column (1-based, in characters).
        column: usize,
        /// What TOML says.
        message: String,
    },
    /// A table or key nobody reads.
    #[error("{file}: unknown key `{key}` in {table} (known: {expected})")]
    UnknownKey {
        /// The file.
        file: String,
        /// The table (`[agents.main]`, `the top level`, `the frontmatter`).
        table: String,
        /// The key.
        key: String,
        /// The keys that are read there.
        expected: &'static str,
    },
    /// A plugin's key written at the top level of a settings file.
    #[error(
        "{file}: `{key}` is not a top-level key: it belongs under `[plugins.{plugin}]` (write \
         `[plugins.{plugin}]` on the line above it)"
    )]
    MisplacedKey {
        /// The file.
        file: String,
        /// The key.
        key: String,
        /// The plugin whose table takes it.
        plugin: &'static str,
    },
    /// A key holds a value of the wrong type.
    #[error("{file}: `{key}` in {table} must be {expected}, not {value}")]
    WrongType {
        /// The file.
        file: String,
        /// The table.
        table: String,
        /// The key (with an index for a list item: `add_plugins[1]`).
        key: String,
        /// What it must be.
        expected: &'static str,
        /// The value found, as written.
        value: String,
    },
    /// `[policy]` outside the machine settings.
    #[error(
        "{file}: [policy] is only read from the machine settings ({MACHINE_SETTINGS}); `allowed_plugins` and `blocked_plugins` cannot be set by a user, a project or a flag"
    )]
    PolicyOutsideMachine {
        /// The file.
        file: String,
    },
    /// A setting would turn off a plugin that cannot be turned off.
    #[error(
        "{file}: `{key}` in {table} would turn off `{plugin}`, which cannot be disabled: {why}"
    )]
    NonRemovable {
        /// The file.
        file: String,
        /// The table.
        table: String,
        /// The key.
        key: &'static str,
        /// The plugin.
        plugin: String,
        /// Why it must stay.
        why: String,
    },
}

/// Why `name` can never be turned off, when it cannot.
pub(crate) fn why_non_removable(name: &str) -> Option<String> {
    if let Some(why) = non_removable().remove(name) {
        return Some(why);
    }
    if REACT_PARTS.contains(&name) {
        return Some(format!("`{name}` comes with the always-on `react` plugin"));
    }
    crate::named::plugin_of(name)
        .filter(|_| !crate::named::may_switch_off(name))
        .map(|plugin| {
            format!(
                "`{name}` is a part of `{plugin}` that cannot be switched off by itself (switch \
                 `{plugin}` off, or set its parameters)"
            )
        })
}

/// Merged settings: plugin parameters, on/off switches, per-agent additions and machine policy.
///
/// Build it with [`Settings::load`] (files plus flags) or [`Settings::parse`]; for flags, start
/// from [`Settings::default`] and use [`Settings::set_param`], [`Settings::set_enabled`] and
/// [`Settings::add_plugin`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// `[plugins.<name>]` parameters (without `enabled`), as written.
    plugins: BTreeMap<String, Map<String, Value>>,
    /// `[plugins.<name>] enabled`, the last layer's word.
    switches: BTreeMap<String, bool>,
    /// `[agents.<name>] add_plugins`: for each agent, the added plugins and their parameters.
    agents: BTreeMap<String, BTreeMap<String, Map<String, Value>>>,
    /// `[agents.<name>] include_agent_files`, the last layer's word.
    include_agent_files: BTreeMap<String, bool>,
    /// Machine `[policy] allowed_plugins`.
    allowed: Option<BTreeSet<String>>,
    /// Machine `[policy] blocked_plugins`.
    blocked: BTreeSet<String>,
}

const TOP_KEYS: &str = "plugins, agents, policy";
const AGENT_KEYS: &str = "add_plugins, include_agent_files";
const POLICY_KEYS: &str = "allowed_plugins, blocked_plugins";

impl Settings {
    /// Reads the three files of `files` (a missing file is an empty layer) and merges `flags` last.
    /// An untrusted project's file keeps only what [`project_trust`] allows; see
    /// [`Settings::load_noting`] for the warning that says what it lost.
    pub fn load(files: &SettingsFiles, flags: &Settings) -> Result<Self, SettingsError> {
        Self::load_noting(files, flags).map(|(settings, _)| settings)
    }

    /// [`Settings::load`], and the warnings to show: an untrusted project's settings that are
    /// ignored, in one line naming the file, the keys and the command that trusts.
    pub fn load_noting(
        files: &SettingsFiles,
        flags: &Settings,
    ) -> Result<(Self, Vec<String>), SettingsError> {
        let mut notes = Vec::new();
        let mut settings = Self::read(&files.machine, Layer::Machine)?;
        if let Some(user) = &files.user {
            settings.merge(Self::read(user, Layer::User)?);
        }
        // A workspace that is the home directory has one file for both layers.
        if files.user.as_deref() != Some(files.project.as_path()) {
            let mut project = Self::read(&files.project, Layer::Project)?;
            if !files.project_trust.is_trusted() {
                let ignored = project.keep_untrusted(&settings);
                if !ignored.is_empty() {
                    notes.push(
                        files
                            .project_trust
                            .ignored(&files.project.display().to_string(), &ignored),
                    );
                }
            }
            settings.merge(project);
        }
        settings.merge(flags.clone());
        Ok((settings, notes))
    }

    /// Drops from this layer (an untrusted project's) what needs trust, given the layers
    /// beneath (`lower`): the names of what it dropped, as `[plugins.mcp] servers`.
    fn keep_untrusted(&mut self, lower: &Settings) -> Vec<String> {
        let mut ignored = Vec::new();
        let lower_mode = lower
            .permission_mode(EVERY_AGENT)
            .unwrap_or_else(|| "default".to_owned());
        for (plugin, params) in &mut self.plugins {
            params.retain(|key, value| {
                let looser_mode = key == "permission_mode"
                    && value
                        .as_str()
                        .is_none_or(|mode| looseness(mode) > looseness(&lower_mode));
                let keep = project_trust::may_set(plugin, key, value) && !looser_mode;
                if !keep {
                    ignored.push(format!("{} {key}", table_label(&["plugins", plugin])));
                }
                keep
            });
        }
        self.plugins.retain(|_, params| !params.is_empty());
        self.switches.retain(|plugin, on| {
            let keep = project_trust::may_switch(plugin, *on);
            if !keep {
                ignored.push(format!("{} enabled", table_label(&["plugins", plugin])));
            }
            keep
        });
        for agent in std::mem::take(&mut self.agents).keys() {
            ignored.push(format!("{} add_plugins", table_label(&["agents", agent])));
        }
        ignored
    }

    /// Reads one settings file as `layer`; a missing file is an empty layer.
    pub fn read(path: &Path, layer: Layer) -> Result<Self, SettingsError> {
        Self::parse(&read_text(path)?, &path.display().to_string(), layer)
    }

    /// Parses the text of one layer; `origin` (a path, or [`FLAGS_ORIGIN`]) names it in errors.
    pub fn parse(text: &str, origin: &str, layer: Layer) -> Result<Self, SettingsError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let table: toml::Table = toml::from_str(text).map_err(|err| {
            let (line, column) = err
                .span()
                .map_or((0, 0), |span| line_column(text, span.start));
            SettingsError::Toml {
                file: origin.to_owned(),
                line,
                column,
                message: err.message().trim().to_owned(),
            }
        })?;
        let mut settings = Self::default();
        let at = Origin { file: origin };
        for (key, value) in &table {
            match key.as_str() {
                "plugins" => settings.parse_plugins(&at, value)?,
                "agents" => settings.parse_agents(&at, value)?,
                "policy" if layer == Layer::Machine => settings.parse_policy(&at, value)?,
                "policy" => {
                    return Err(SettingsError::PolicyOutsideMachine {
                        file: origin.to_owned(),
                    });
                }
                _ => {
                    return Err(match misplaced(key).filter(|_| !value.is_table()) {
                        Some(plugin) => SettingsError::MisplacedKey {
                            file: origin.to_owned(),
                            key: key.clone(),
                            plugin,
                        },
                        None => at.unknown("the top-level table", key, TOP_KEYS),
                    });
                }
            }
        }
        Ok(settings)
    }

    fn parse_plugins(&mut self, at: &Origin<'_>, value: &toml::Value) -> Result<(), SettingsError> {
        let plugins = as_table(at, "the top-level table", "plugins", value)?;
        for (name, value) in plugins {
            let table_name = table_label(&["plugins", name]);
            let table = as_table(at, "[plugins]", name, value)?;
            let mut params = Map::new();
            for (key, value) in table {
                if key == "enabled" {
                    let Some(enabled) = value.as_bool() else {
                        return Err(at.wrong_type(&table_name, key, "true or false", value));
                    };
                    if !enabled && let Some(why) = why_non_removable(name) {
                        return Err(at.non_removable(&table_name, "enabled", name, why));
                    }
                    self.switches.insert(name.clone(), enabled);
                } else {
                    params.insert(key.clone(), to_json(at, &table_name, key, value)?);
                }
            }
            merge_params(self.plugins.entry(name.clone()).or_default(), params);
        }
        Ok(())
    }

    fn parse_agents(&mut self, at: &Origin<'_>, value: &toml::Value) -> Result<(), SettingsError> {
        let agents = as_table(at, "the top-level table", "agents", value)?;
        for (agent, value) in agents {
            let table_name = table_label(&["agents", agent]);
            let table = as_table(at, "[agents]", agent, value)?;
            for (key, value) in table {
                if key == "include_agent_files" {
                    let Some(include) = value.as_bool() else {
                        return Err(at.wrong_type(&table_name, key, "true or false", value));
                    };
                    self.include_agent_files.insert(agent.clone(), include);
                    continue;
                }
                if key != "add_plugins" {
                    return Err(at.unknown(&table_name, key, AGENT_KEYS));
                }
                let Some(items) = value.as_array() else {
                    return Err(at.wrong_type(
                        &table_name,
                        key,
                        "a list of plugin names or one-key tables `{ name = { params } }`",
                        value,
                    ));
                };
                let added = self.agents.entry(agent.clone()).or_default();
                for (index, item) in items.iter().enumerate() {
                    let item_key = format!("add_plugins[{index}]");
                    let (name, params) = add_plugins_item(at, &table_name, &item_key, item)?;
                    merge_params(added.entry(name).or_default(), params);
                }
            }
        }
        Ok(())
    }

    fn parse_policy(&mut self, at: &Origin<'_>, value: &toml::Value) -> Result<(), SettingsError> {
        let table = as_table(at, "the top-level table", "policy", value)?;
        for (key, value) in table {
            let names = string_list(at, "[policy]", key, value)?;
            match key.as_str() {
                "allowed_plugins" => {
                    let allowed = self.allowed.get_or_insert_with(BTreeSet::new);
                    allowed.extend(names);
                }
                "blocked_plugins" => {
                    for name in &names {
                        if let Some(why) = why_non_removable(name) {
                            return Err(at.non_removable("[policy]", "blocked_plugins", name, why));
                        }
                    }
                    self.blocked.extend(names);
                }
                _ => return Err(at.unknown("[policy]", key, POLICY_KEYS)),
            }
        }
        Ok(())
    }

    /// Merges a later layer over this one: parameters key by key (nested objects recursively,
    /// arrays and other values replace), `enabled` by the later word, `add_plugins` unioned.
    /// Policy lists can only come from the machine layer; two allow-lists keep the names in both.
    pub fn merge(&mut self, later: Settings) {
        for (name, params) in later.plugins {
            merge_params(self.plugins.entry(name).or_default(), params);
        }
        self.switches.extend(later.switches);
        self.include_agent_files.extend(later.include_agent_files);
        for (agent, added) in later.agents {
            let mine = self.agents.entry(agent).or_default();
            for (plugin, params) in added {
                merge_params(mine.entry(plugin).or_default(), params);
            }
        }
        if let Some(later_allowed) = later.allowed {
            self.allowed = Some(match self.allowed.take() {
                Some(mine) => mine.intersection(&later_allowed).cloned().collect(),
                None => later_allowed,
            });
        }
        self.blocked.extend(later.blocked);
    }

    /// Sets one parameter of a plugin (a flag). `key = "enabled"` takes a boolean and switches
    /// the plugin like [`Settings::set_enabled`].
    pub fn set_param(
        &mut self,
        plugin: &str,
        key: &str,
        value: Value,
    ) -> Result<(), SettingsError> {
        if key == "enabled" {
            let Some(enabled) = value.as_bool() else {
                return Err(SettingsError::WrongType {
                    file: FLAGS_ORIGIN.to_owned(),
                    table: table_label(&["plugins", plugin]),
                    key: key.to_owned(),
                    expected: "true or false",
                    value: short(&value.to_string()),
                });
            };
            return self.set_enabled(plugin, enabled);
        }
        let mut params = Map::new();
        params.insert(key.to_owned(), value);
        merge_params(self.plugins.entry(plugin.to_owned()).or_default(), params);
        Ok(())
    }

    /// Turns a plugin on or off for every agent (a flag). `react` and its parts are refused.
    pub fn set_enabled(&mut self, plugin: &str, enabled: bool) -> Result<(), SettingsError> {
        if !enabled && let Some(why) = why_non_removable(plugin) {
            return Err(SettingsError::NonRemovable {
                file: FLAGS_ORIGIN.to_owned(),
                table: table_label(&["plugins", plugin]),
                key: "enabled",
                plugin: plugin.to_owned(),
                why,
            });
        }
        self.switches.insert(plugin.to_owned(), enabled);
        Ok(())
    }

    /// Whether some `[agents.<name>] add_plugins` names `plugin`.
    pub fn adds_plugin(&self, plugin: &str) -> bool {
        self.agents.values().any(|added| added.contains_key(plugin))
    }

    /// Adds a plugin to an agent (`*` for every agent), like `add_plugins` (a flag).
    pub fn add_plugin(&mut self, agent: &str, plugin: &str) {
        self.agents
            .entry(agent.to_owned())
            .or_default()
            .entry(plugin.to_owned())
            .or_default();
    }

    /// The merged parameters of one plugin (without `enabled`), as written.
    pub fn params(&self, plugin: &str) -> Option<&Map<String, Value>> {
        self.plugins.get(plugin)
    }

    /// The merged `[plugins.*]` parameters of every plugin that is on, as JSON objects, with
    /// secret references as written. Plugins whose table holds nothing but `enabled` are absent.
    pub fn config(&self) -> BTreeMap<String, Value> {
        self.plugins
            .iter()
            .filter(|(name, params)| !params.is_empty() && self.is_enabled(name))
            .map(|(name, params)| (name.clone(), Value::Object(params.clone())))
            .collect()
    }

    /// Whether `name` may be on: not switched off by `enabled = false`, not blocked, and (under
    /// an allow-list) allowed or always on.
    pub fn is_enabled(&self, name: &str) -> bool {
        self.is_permitted(name) && self.switches.get(name) != Some(&false)
    }

    /// Whether machine policy lets `name` be on (whatever the other layers say).
    pub fn is_permitted(&self, name: &str) -> bool {
        if self.blocked.contains(name) {
            return false;
        }
        self.allowed
            .as_ref()
            .is_none_or(|allowed| allowed.contains(name) || ALWAYS_ON.contains(&name))
    }

    /// The machine's `[policy] allowed_plugins`, when it sets one.
    pub(crate) fn allowed(&self) -> Option<&BTreeSet<String>> {
        self.allowed.as_ref()
    }

    /// Every plugin these settings name that is off: `enabled = false` and blocked plugins.
    /// Under an allow-list, anything not allowed is off too (see [`Settings::is_enabled`]).
    pub fn disabled(&self) -> BTreeSet<String> {
        let named = self
            .switches
            .keys()
            .chain(&self.blocked)
            .chain(self.plugins.keys())
            .chain(self.agents.values().flat_map(BTreeMap::keys));
        named.filter(|n| !self.is_enabled(n)).cloned().collect()
    }

    /// The machine allow-list, if the machine settings give one.
    pub fn allowed_plugins(&self) -> Option<&BTreeSet<String>> {
        self.allowed.as_ref()
    }

    /// The machine block-list.
    pub fn blocked_plugins(&self) -> &BTreeSet<String> {
        &self.blocked
    }

    /// Whether agent `agent`'s roster takes in every agent file (`[agents.<name>]
    /// include_agent_files`, else `[agents."*"]`'s); `None` when no layer says.
    pub fn include_agent_files(&self, agent: &str) -> Option<bool> {
        self.include_agent_files
            .get(agent)
            .or_else(|| self.include_agent_files.get(EVERY_AGENT))
            .copied()
    }

    /// The plugins `add_plugins` adds to `agent` (its own table's and `*`'s), sorted, before
    /// policy and switches are applied.
    pub fn added_plugins(&self, agent: &str) -> Vec<String> {
        let mut names = BTreeSet::new();
        for key in [EVERY_AGENT, agent] {
            if let Some(added) = self.agents.get(key) {
                names.extend(added.keys().cloned());
            }
        }
        names.into_iter().collect()
    }

    /// The permission mode agent `agent` starts in by these settings (`[plugins.governance]`,
    /// its `permissions` table, `add_plugins` parameters), `None` when no layer sets one;
    /// `bypassPermissions` when `governance`, which asks, is switched off.
    pub fn permission_mode(&self, agent: &str) -> Option<String> {
        if !self.is_enabled("governance") || !self.is_enabled("permissions") {
            return Some("bypassPermissions".to_owned());
        }
        let mut options = AgentOptions::named(agent);
        options.plugins.push("governance".to_owned());
        self.apply_to(&mut options);
        options
            .config
            .get("governance")?
            .get("permission_mode")?
            .as_str()
            .map(str::to_owned)
    }

    /// Applies the settings to one agent's options: adds `add_plugins` for its name and `*`
    /// after its own plugins, drops every plugin that is off, and sets `config` to the merged
    /// `[plugins.*]` parameters, then `add_plugins` parameters (`*`, then the agent's), then
    /// the parameters the options already carry (an agent file's), each merged key by key
    /// over the one before. Returns the plugins it dropped from the activation list.
    pub fn apply_to(&self, options: &mut AgentOptions) -> Vec<String> {
        let mut plugins: Vec<String> = Vec::new();
        for name in options
            .plugins
            .iter()
            .cloned()
            .chain(self.added_plugins(&options.name))
        {
            if !plugins.contains(&name) {
                plugins.push(name);
            }
        }
        let (kept, dropped): (Vec<String>, Vec<String>) =
            plugins.into_iter().partition(|name| self.is_enabled(name));
        options.plugins = kept;

        let mut config = self.config();
        for key in [EVERY_AGENT, options.name.as_str()] {
            let Some(added) = self.agents.get(key) else {
                continue;
            };
            for (plugin, params) in added {
                if !params.is_empty() {
                    merge_value(
                        config.entry(plugin.clone()).or_insert(Value::Null),
                        Value::Object(params.clone()),
                    );
                }
            }
        }
        for (plugin, value) in std::mem::take(&mut options.config) {
            merge_value(config.entry(plugin).or_insert(Value::Null), value);
        }
        // Named extensions' tables are slices of their plugins' parameters.
        crate::named::fold(&mut config, &mut options.plugins, &|name| {
            !self.is_enabled(name)
        });
        config.retain(|name, _| self.is_enabled(name));
        options.config = config;
        dropped
    }
}

/// The text of a settings file, at most [`MAX_SETTINGS_BYTES`]; a missing file is empty.
pub(crate) fn read_text(path: &Path) -> Result<String, SettingsError> {
    let file = path.display().to_string();
    match noeta_core::manifest::read_capped(path, MAX_SETTINGS_BYTES) {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(size)) => Err(SettingsError::TooLarge {
            file,
            size,
            limit: MAX_SETTINGS_BYTES,
        }),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(source) => Err(SettingsError::Read { file, source }),
    }
}

/// The file a value comes from, for errors.
struct Origin<'a> {
    file: &'a str,
}

/// The plugin whose table takes `key`, for keys people write at the top level by mistake (the
/// model's settings, as other tools keep them there).
fn misplaced(key: &str) -> Option<&'static str> {
    matches!(
        key,
        "model" | "provider" | "api_key" | "base_url" | "max_output_tokens" | "model_aliases"
    )
    .then_some("providers")
}

impl Origin<'_> {
    fn unknown(&self, table: &str, key: &str, expected: &'static str) -> SettingsError {
        SettingsError::UnknownKey {
            file: self.file.to_owned(),
            table: table.to_owned(),
            key: key.to_owned(),
            expected,
        }
    }

    fn wrong_type(
        &self,
        table: &str,
        key: &str,
        expected: &'static str,
        value: &toml::Value,
    ) -> SettingsError {
        SettingsError::WrongType {
            file: self.file.to_owned(),
            table: table.to_owned(),
            key: key.to_owned(),
            expected,
            value: short(&value.to_string()),
        }
    }

    fn non_removable(
        &self,
        table: &str,
        key: &'static str,
        plugin: &str,
        why: String,
    ) -> SettingsError {
        SettingsError::NonRemovable {
            file: self.file.to_owned(),
            table: table.to_owned(),
            key,
            plugin: plugin.to_owned(),
            why,
        }
    }
}

/// One-line, bounded rendering of a value for an error message.
pub(crate) fn short(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 80 {
        let cut: String = line.chars().take(77).collect();
        format!("{cut}...")
    } else {
        line
    }
}

/// `[plugins.fs]`, `[agents."*"]`: a TOML table header, quoting keys that are not bare.
fn table_label(parts: &[&str]) -> String {
    let keys: Vec<String> = parts
        .iter()
        .map(|part| {
            let bare = !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if bare {
                (*part).to_owned()
            } else {
                format!("{part:?}")
            }
        })
        .collect();
    format!("[{}]", keys.join("."))
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn as_table<'v>(
    at: &Origin<'_>,
    table: &str,
    key: &str,
    value: &'v toml::Value,
) -> Result<&'v toml::Table, SettingsError> {
    value
        .as_table()
        .ok_or_else(|| at.wrong_type(table, key, "a table", value))
}

fn string_list(
    at: &Origin<'_>,
    table: &str,
    key: &str,
    value: &toml::Value,
) -> Result<Vec<String>, SettingsError> {
    let expected = "a list of plugin names";
    let items = value
        .as_array()
        .ok_or_else(|| at.wrong_type(table, key, expected, value))?;
    items
        .iter()
        .map(|item| {
            item.as_str()
                .map(str::to_owned)
                .ok_or_else(|| at.wrong_type(table, key, expected, value))
        })
        .collect()
}

/// One `add_plugins` item: a name, or a one-key table `{ name = { params } }`.
fn add_plugins_item(
    at: &Origin<'_>,
    table: &str,
    key: &str,
    item: &toml::Value,
) -> Result<(String, Map<String, Value>), SettingsError> {
    let expected = "a plugin name or a one-key table `{ name = { params } }`";
    if let Some(name) = item.as_str() {
        return Ok((name.to_owned(), Map::new()));
    }
    let Some(single) = item.as_table().filter(|t| t.len() == 1) else {
        return Err(at.wrong_type(table, key, expected, item));
    };
    let Some((name, params)) = single.iter().next() else {
        return Err(at.wrong_type(table, key, expected, item));
    };
    let Some(params) = params.as_table() else {
        return Err(at.wrong_type(table, key, expected, item));
    };
    let mut map = Map::new();
    for (param, value) in params {
        if param == "enabled" {
            return Err(at.unknown(
                table,
                &format!("{key}.{name}.enabled"),
                "plugin parameters; switch a plugin off with `[plugins.<name>] enabled = false`",
            ));
        }
        let path = format!("{key}.{name}.{param}");
        map.insert(param.clone(), to_json(at, table, &path, value)?);
    }
    Ok((name.clone(), map))
}

/// A TOML value as JSON (`noeta_core::manifest::toml_to_json`: a date or time becomes its TOML
/// text; a non-finite float is refused, naming its key).
fn to_json(
    at: &Origin<'_>,
    table: &str,
    key: &str,
    value: &toml::Value,
) -> Result<Value, SettingsError> {
    noeta_core::manifest::toml_to_json(value, key).map_err(|n| {
        at.wrong_type(
            table,
            &n.path,
            "a finite number",
            &toml::Value::Float(n.value),
        )
    })
}
