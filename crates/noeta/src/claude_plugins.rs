//! Claude Code plugin directories: found where noeta plugins are (`~/.noeta/plugins`, a
//! trusted workspace's `.noeta/plugins`, `--plugin-dir`) and translated into what noeta
//! already has — agent files named `<plugin>:<name>`, markdown commands `/<plugin>:<name>`,
//! a skills directory, command hooks, MCP servers — with `${CLAUDE_PLUGIN_ROOT}` and
//! `${CLAUDE_PLUGIN_DATA}` substituted as Claude Code does.
//!
//! A directory is a Claude Code plugin when it has `.claude-plugin/plugin.json`, or any of
//! `skills/`, `agents/`, `commands/`, `hooks/hooks.json` and `.mcp.json`; a directory with a
//! `noeta-plugin.toml` is one too only when its manifest says `claude-code = true` (its parts
//! then go by the manifest's name). `plugin.json` gives the name (else the directory's), version, description and
//! extra component paths (`commands`, `agents`, `skills`: a path or a list; `hooks`,
//! `mcpServers`: a path or the object itself) and the `userConfig` options (`user_config.rs`).
//! A malformed one is a problem naming the file and field, and that plugin is skipped. A workspace plugin never starts an MCP server (a
//! cloned repository must not start one by itself).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::conventions::HostPaths;

/// The most a `plugin.json`, `hooks.json` or `.mcp.json` may hold.
const MAX_JSON_BYTES: u64 = 1024 * 1024;

/// Parts of a Claude Code plugin noeta does not load, by the directory or file that holds
/// them.
const NOT_LOADED: [(&str, &str); 5] = [
    ("monitors", "monitors"),
    ("bin", "bin/ executables"),
    (".lsp.json", "LSP servers"),
    ("themes", "themes"),
    ("output-styles", "output styles"),
];

/// Where a plugin was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `~/.noeta/plugins` or `--plugin-dir`.
    User,
    /// A trusted workspace's `.noeta/plugins`.
    Workspace,
}

/// One Claude Code plugin, as noeta uses it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClaudePlugin {
    /// `name` of `plugin.json`, else the directory's name.
    pub name: String,
    /// The plugin's directory (`${CLAUDE_PLUGIN_ROOT}`).
    pub root: PathBuf,
    /// `version`.
    pub version: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// Where it was found.
    pub scope: Scope,
    /// Directories of agent files.
    pub agents_dirs: Vec<PathBuf>,
    /// Directories of markdown commands.
    pub commands_dirs: Vec<PathBuf>,
    /// Directories of skills.
    pub skills_dirs: Vec<PathBuf>,
    /// The hooks configuration (Claude Code's `hooks` object), paths substituted and each
    /// command told `CLAUDE_PLUGIN_ROOT` and `CLAUDE_PLUGIN_DATA`.
    pub hooks: Option<Value>,
    /// MCP servers by the plugin's own alias, substituted (none for a workspace plugin).
    pub mcp_servers: Map<String, Value>,
    /// What it holds that noeta does not load, and MCP servers it did not start.
    pub skipped: Vec<String>,
    /// The options `userConfig` declares (their values come from `[plugins.<plugin>.config]`;
    /// see `user_config.rs`).
    pub user_config: std::collections::BTreeMap<String, crate::user_config::UserOption>,
}

impl ClaudePlugin {
    /// `${CLAUDE_PLUGIN_DATA}`: `~/.noeta/plugin-data/<plugin>/` (the plugin's root's
    /// `.data` without a home).
    pub fn data_dir(&self, paths: &HostPaths) -> PathBuf {
        paths.user_dir().map_or_else(
            || self.root.join(".data"),
            |d| d.join("plugin-data").join(&self.name),
        )
    }

    /// `text` with `${CLAUDE_PLUGIN_ROOT}` and `${CLAUDE_PLUGIN_DATA}` (made on first use)
    /// substituted.
    pub fn substitute(&self, text: &str, paths: &HostPaths) -> String {
        let mut text = text.replace("${CLAUDE_PLUGIN_ROOT}", &self.root.display().to_string());
        if text.contains("${CLAUDE_PLUGIN_DATA}") {
            let data = self.data_dir(paths);
            let _ = std::fs::create_dir_all(&data);
            text = text.replace("${CLAUDE_PLUGIN_DATA}", &data.display().to_string());
        }
        text
    }
}

/// The Claude Code plugins of a host, and the ones that could not be read.
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct ClaudePlugins {
    /// The plugins, in the order found (user, `--plugin-dir`, workspace), each name once.
    pub plugins: Vec<ClaudePlugin>,
    /// Each plugin skipped, naming its file and field.
    pub problems: Vec<String>,
    /// Hooks configured in JSON outside plugins, each file's events: `~/.noeta/hooks.json`,
    /// and — in a trusted workspace — `.noeta/hooks.json`, `.claude/settings.json` and
    /// `.claude/settings.local.json` (their `hooks`).
    pub hook_files: Vec<(PathBuf, Value)>,
    /// Files not read, with why (an untrusted workspace's hooks).
    pub warnings: Vec<String>,
}

impl ClaudePlugins {
    /// The plugins' skills directories, as `[plugins.skills] plugin_skill_dirs` takes them.
    pub fn skill_dirs_setting(&self) -> Vec<Value> {
        self.plugins
            .iter()
            .flat_map(|p| {
                p.skills_dirs
                    .iter()
                    .map(|d| serde_json::json!({ "plugin": p.name, "dir": d }))
            })
            .collect()
    }

    /// The plugins' commands directories, as `[plugins.skills] plugin_command_dirs` takes
    /// them (with the `${CLAUDE_PLUGIN_ROOT}` and `${CLAUDE_PLUGIN_DATA}` of each).
    pub fn command_dirs_setting(&self, paths: &HostPaths) -> Vec<Value> {
        self.plugins
            .iter()
            .flat_map(|p| {
                p.commands_dirs.iter().map(|d| {
                    serde_json::json!({
                        "plugin": p.name,
                        "dir": d,
                        "root": p.root,
                        "data": p.data_dir(paths),
                    })
                })
            })
            .collect()
    }
}

/// What a noeta plugin's manifest in `dir` says of its Claude Code parts.
struct NoetaManifest {
    name: Option<String>,
    version: Option<String>,
    /// `claude-code = true`: its Claude Code parts load as part of it.
    claude_code: bool,
}

/// The noeta manifest in `dir`, if there is a readable one.
fn noeta_manifest(dir: &Path) -> Option<NoetaManifest> {
    let text = noeta_core::files::read_text(
        &dir.join(noeta_core::MANIFEST_FILE),
        noeta_core::manifest::MAX_MANIFEST_BYTES,
    )
    .ok()?;
    let table: toml::Table = toml::from_str(&text).ok()?;
    let text_of = |key: &str| {
        table
            .get(key)
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
    };
    Some(NoetaManifest {
        name: text_of("name"),
        version: text_of("version"),
        claude_code: table
            .get("claude-code")
            .or_else(|| table.get("claude_code"))
            .and_then(toml::Value::as_bool)
            .unwrap_or(false),
    })
}

/// Whether `dir` is laid out as a Claude Code plugin. A directory with a `noeta-plugin.toml`
/// is a noeta plugin, and one of these too only when its manifest says `claude-code = true`.
pub fn is_claude_plugin(dir: &Path) -> bool {
    if dir.join(noeta_core::MANIFEST_FILE).exists() {
        return noeta_manifest(dir).is_some_and(|m| m.claude_code);
    }
    if dir.join(".claude-plugin").join("plugin.json").is_file() {
        return true;
    }
    ["skills", "agents", "commands"]
        .iter()
        .any(|d| dir.join(d).is_dir())
        || dir.join("hooks").join("hooks.json").is_file()
        || dir.join(".mcp.json").is_file()
}

/// Every Claude Code plugin of the host: in `~/.noeta/plugins`, each of `extra` (a plugin
/// or a directory of plugins), and the workspace's `.noeta/plugins` when it is trusted.
pub fn discover(paths: &HostPaths, extra: &[PathBuf]) -> ClaudePlugins {
    let mut found = ClaudePlugins::default();
    let mut candidates: Vec<(PathBuf, Scope)> = Vec::new();
    let children = |dir: &Path, scope: Scope, out: &mut Vec<(PathBuf, Scope)>| {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        out.extend(dirs.into_iter().map(|d| (d, scope)));
    };
    if let Some(dir) = paths.user_plugin_dir() {
        children(&dir, Scope::User, &mut candidates);
    }
    for path in extra {
        if is_claude_plugin(path) {
            candidates.push((path.clone(), Scope::User));
        } else if path.is_dir() {
            children(path, Scope::User, &mut candidates);
        }
    }
    let workspace = paths.workspace_plugin_dir();
    if paths.user_plugin_dir().as_deref() != Some(workspace.as_path())
        && paths
            .trust_store()
            .is_ok_and(|store| store.is_trusted(&workspace))
    {
        children(&workspace, Scope::Workspace, &mut candidates);
    }
    read_hook_files(paths, &mut found);
    for (dir, scope) in candidates {
        if !is_claude_plugin(&dir) {
            continue;
        }
        match read(&dir, scope, paths) {
            Ok(plugin) => {
                // What of its hooks is not used, each line naming the file and the hook.
                if let Some(hooks) = &plugin.hooks {
                    match noeta_builtin_governance::hook_notes(hooks) {
                        Ok(notes) => found.warnings.extend(notes),
                        Err(problem) => {
                            found.problems.push(format!(
                                "Claude Code plugin `{}` at {} is skipped: {problem}",
                                plugin.name,
                                dir.display()
                            ));
                            continue;
                        }
                    }
                }
                if let Some(first) = found.plugins.iter().find(|p| p.name == plugin.name) {
                    found.problems.push(format!(
                        "Claude Code plugin `{}` at {} is skipped: {} has that name",
                        plugin.name,
                        dir.display(),
                        first.root.display()
                    ));
                } else {
                    found.plugins.push(plugin);
                }
            }
            Err(problem) => found.problems.push(problem),
        }
    }
    found
}

/// The hooks written in JSON outside plugins (see [`ClaudePlugins::hook_files`]).
fn read_hook_files(paths: &HostPaths, found: &mut ClaudePlugins) {
    let mut files: Vec<PathBuf> = paths
        .user_dir()
        .map(|d| d.join("hooks.json"))
        .into_iter()
        .collect();
    let workspace_files = [
        paths.workspace.join(".noeta").join("hooks.json"),
        paths.workspace.join(".claude").join("settings.json"),
        paths.workspace.join(".claude").join("settings.local.json"),
    ];
    let present: Vec<PathBuf> = workspace_files
        .into_iter()
        .filter(|f| f.is_file() && !files.contains(f))
        .collect();
    if !present.is_empty() {
        let trust = crate::ProjectTrust::of(paths);
        if trust.is_trusted() {
            files.extend(present);
        } else {
            for file in present {
                found.warnings.push(trust.not_read(
                    &file.display().to_string(),
                    "hooks",
                    "runs a command",
                ));
            }
        }
    }
    for file in files.into_iter().filter(|f| f.is_file()) {
        match read_json(&file) {
            Ok(json) => {
                // `{"hooks": {...}}` (hooks.json, settings.json) or the events themselves.
                let events = json.get("hooks").cloned().unwrap_or_else(|| {
                    if file.ends_with("settings.json") || file.ends_with("settings.local.json") {
                        Value::Null
                    } else {
                        json.clone()
                    }
                });
                match events {
                    Value::Null => {}
                    Value::Object(mut events) => {
                        name_sources(&mut events, &file);
                        let events = Value::Object(events);
                        match noeta_builtin_governance::hook_notes(&events) {
                            Ok(notes) => found.warnings.extend(notes),
                            Err(problem) => {
                                found.problems.push(problem);
                                continue;
                            }
                        }
                        found.hook_files.push((file, events));
                    }
                    _ => found.problems.push(format!(
                        "{}: `hooks` must be an object of events",
                        file.display()
                    )),
                }
            }
            Err(problem) => found.problems.push(problem),
        }
    }
}

/// Each group of `events` (a hooks object) told where it was written, `<file>:
/// hooks.<Event>[i]`, so the `governance` built-in's warnings and errors about it name the
/// file rather than the settings the host merges it into.
fn name_sources(events: &mut Map<String, Value>, file: &Path) {
    for (event, groups) in events.iter_mut() {
        for (i, group) in groups.as_array_mut().into_iter().flatten().enumerate() {
            if let Value::Object(group) = group {
                group.insert(
                    noeta_builtin_governance::HOOK_SOURCE_KEY.to_owned(),
                    Value::String(format!("{}: hooks.{event}[{i}]", file.display())),
                );
            }
        }
    }
}

/// Reads a JSON file (at most [`MAX_JSON_BYTES`]).
fn read_json(file: &Path) -> Result<Value, String> {
    let text = match noeta_core::manifest::read_capped(file, MAX_JSON_BYTES) {
        Ok(Ok(text)) => text,
        Ok(Err(size)) => {
            return Err(format!(
                "{}: {size} bytes, over the {MAX_JSON_BYTES}-byte limit",
                file.display()
            ));
        }
        Err(err) => return Err(format!("{}: {err}", file.display())),
    };
    serde_json::from_str(&text).map_err(|err| {
        format!(
            "{}: not valid JSON at line {}, column {}: {err}",
            file.display(),
            err.line(),
            err.column()
        )
    })
}

/// A component path field: a string or a list of strings, each relative to the root.
fn paths_field(
    manifest: &Value,
    key: &str,
    root: &Path,
    file: &Path,
) -> Result<Vec<PathBuf>, String> {
    let wrong = || {
        format!(
            "{}: `{key}` must be a path or a list of paths relative to the plugin",
            file.display()
        )
    };
    let items: Vec<&Value> = match manifest.get(key) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(_)) => vec![&manifest[key]],
        Some(Value::Array(items)) => items.iter().collect(),
        Some(_) => return Err(wrong()),
    };
    items
        .into_iter()
        .map(|item| item.as_str().map(|p| root.join(p)).ok_or_else(wrong))
        .collect()
}

/// A text field of `plugin.json`.
fn text_field(manifest: &Value, key: &str, file: &Path) -> Result<Option<String>, String> {
    match manifest.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("{}: `{key}` must be text", file.display())),
    }
}

/// Every string in `value` passed through `f`.
pub(crate) fn map_strings(value: &Value, f: &dyn Fn(&str) -> String) -> Value {
    match value {
        Value::String(s) => Value::String(f(s)),
        Value::Array(items) => Value::Array(items.iter().map(|v| map_strings(v, f)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), map_strings(v, f)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `text` in single quotes for `sh`.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Reads one plugin directory.
fn read(root: &Path, scope: Scope, paths: &HostPaths) -> Result<ClaudePlugin, String> {
    let file = root.join(".claude-plugin").join("plugin.json");
    let manifest = if file.is_file() {
        let manifest = read_json(&file)?;
        if !manifest.is_object() {
            return Err(format!("{}: not a JSON object", file.display()));
        }
        manifest
    } else {
        Value::Object(Map::new())
    };
    // A noeta plugin's Claude Code parts go by its manifest's name and version.
    let noeta = noeta_manifest(root);
    let noeta_name = noeta.as_ref().and_then(|m| m.name.clone());
    let name = match noeta_name.or(text_field(&manifest, "name", &file)?) {
        Some(name) => name,
        None => root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "{}: `name` `{name}` is not a plugin name (letters, digits, `-`, `_`, `.`)",
            file.display()
        ));
    }
    if let Some(author) = manifest.get("author")
        && !(author.is_object() || author.is_string() || author.is_null())
    {
        return Err(format!(
            "{}: `author` must be an object or text",
            file.display()
        ));
    }
    let with_default = |dir: &str, key: &str| -> Result<Vec<PathBuf>, String> {
        let mut dirs = Vec::new();
        if root.join(dir).is_dir() {
            dirs.push(root.join(dir));
        }
        for extra in paths_field(&manifest, key, root, &file)? {
            if !dirs.contains(&extra) {
                dirs.push(extra);
            }
        }
        Ok(dirs)
    };
    let mut plugin = ClaudePlugin {
        name,
        root: root.to_owned(),
        version: match noeta.and_then(|m| m.version) {
            Some(version) => Some(version),
            None => text_field(&manifest, "version", &file)?,
        },
        description: text_field(&manifest, "description", &file)?,
        scope,
        agents_dirs: with_default("agents", "agents")?,
        commands_dirs: with_default("commands", "commands")?,
        skills_dirs: with_default("skills", "skills")?,
        hooks: None,
        mcp_servers: Map::new(),
        skipped: Vec::new(),
        user_config: crate::user_config::parse(&manifest, &file)?,
    };
    // Hooks: hooks/hooks.json, then `hooks` of plugin.json (a path or the object).
    let mut hook_tables = Vec::new();
    let default_hooks = root.join("hooks").join("hooks.json");
    if default_hooks.is_file() {
        hook_tables.push((read_json(&default_hooks)?, default_hooks.clone()));
    }
    match manifest.get("hooks") {
        None | Some(Value::Null) => {}
        Some(Value::String(path)) => {
            let path = root.join(path);
            if path != default_hooks {
                hook_tables.push((read_json(&path)?, path));
            }
        }
        Some(table @ Value::Object(_)) => hook_tables.push((table.clone(), file.clone())),
        Some(_) => {
            return Err(format!(
                "{}: `hooks` must be a path or a hooks object",
                file.display()
            ));
        }
    }
    let mut hooks = Map::new();
    let exports = format!(
        "export CLAUDE_PLUGIN_ROOT={} CLAUDE_PLUGIN_DATA={}; ",
        sh_quote(&root.display().to_string()),
        sh_quote(&plugin.data_dir(paths).display().to_string())
    );
    for (table, from) in hook_tables {
        // `{"hooks": {...}}` as hooks.json writes it, or the events themselves.
        let events = table.get("hooks").cloned().unwrap_or(table);
        let Value::Object(events) = events else {
            return Err(format!(
                "{}: `hooks` must be an object of events",
                from.display()
            ));
        };
        let mut events = events;
        name_sources(&mut events, &from);
        for (event, groups) in events {
            let mut groups = map_strings(&groups, &|s| plugin.substitute(s, paths));
            // Each command learns where its plugin is, as Claude Code's hook processes do.
            crate::user_config::for_each_hook(&mut groups, &mut |hook| {
                if let Some(Value::String(command)) = hook.get_mut("command") {
                    *command = format!("{exports}{command}");
                }
            });
            let entry = hooks
                .entry(event)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let (Value::Array(all), Value::Array(more)) = (entry, groups) {
                all.extend(more);
            } else {
                return Err(format!(
                    "{}: the groups of a hook event must be a list",
                    from.display()
                ));
            }
        }
    }
    if !hooks.is_empty() {
        // The hooks are told `CLAUDE_PLUGIN_DATA`; it exists when they run.
        let _ = std::fs::create_dir_all(plugin.data_dir(paths));
        plugin.hooks = Some(Value::Object(hooks));
    }
    // MCP servers: .mcp.json, then `mcpServers` of plugin.json (a path or the servers), read
    // as a `.mcp.json` is (`${VAR}` from the environment), the plugin's own variables first.
    let root_text = root.display().to_string();
    let data_dir = plugin.data_dir(paths);
    let env = |name: &str| match name {
        // Left for the options' values, applied with the settings (`user_config.rs`).
        option if option.starts_with("user_config.") => Some(format!("${{{option}}}")),
        "CLAUDE_PLUGIN_ROOT" => Some(root_text.clone()),
        "CLAUDE_PLUGIN_DATA" => {
            let _ = std::fs::create_dir_all(&data_dir);
            Some(data_dir.display().to_string())
        }
        other => std::env::var(other).ok(),
    };
    let mut server_tables = Vec::new();
    let mcp_json = root.join(".mcp.json");
    if mcp_json.is_file() {
        server_tables.push(crate::mcp_json::read(&mcp_json, &env)?);
    }
    match manifest.get("mcpServers") {
        None | Some(Value::Null) => {}
        Some(Value::String(path)) => {
            server_tables.push(crate::mcp_json::read(&root.join(path), &env)?);
        }
        Some(table @ Value::Object(_)) => {
            let shown = format!("{} `mcpServers`", file.display());
            server_tables.push(crate::mcp_json::servers_in(table.clone(), &shown, &env)?);
        }
        Some(_) => {
            return Err(format!(
                "{}: `mcpServers` must be a path or an object of servers",
                file.display()
            ));
        }
    }
    for (servers, ignored) in server_tables {
        plugin.skipped.extend(ignored);
        for (alias, server) in servers {
            if scope == Scope::Workspace {
                plugin.skipped.push(format!(
                    "MCP server `{alias}` (a workspace plugin never starts one)"
                ));
                continue;
            }
            plugin.mcp_servers.insert(alias, server);
        }
    }
    for (part, what) in NOT_LOADED {
        if root.join(part).exists() {
            plugin.skipped.push(what.to_owned());
        }
    }
    Ok(plugin)
}

/// How many `*.md` files `dir` holds, with its subdirectories `levels` deep.
fn count_markdown(dir: &Path, levels: usize) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .map(|p| {
            if p.is_dir() {
                if levels > 0 {
                    count_markdown(&p, levels - 1)
                } else {
                    0
                }
            } else {
                usize::from(p.extension().is_some_and(|e| e == "md") && p.is_file())
            }
        })
        .sum()
}

impl ClaudePlugin {
    /// What it brings, counted: agents, commands, skills, hooks by event, MCP servers.
    pub fn counts(&self) -> Value {
        // Agents are read from their directory itself; commands four levels down (their
        // subdirectories only organise them).
        let agents: usize = self.agents_dirs.iter().map(|d| count_markdown(d, 0)).sum();
        let commands: usize = self
            .commands_dirs
            .iter()
            .map(|d| count_markdown(d, 4))
            .sum();
        let skills: usize = self
            .skills_dirs
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .filter_map(Result::ok)
            .filter(|e| e.path().join("SKILL.md").is_file())
            .count();
        let hooks: Map<String, Value> = self
            .hooks
            .iter()
            .filter_map(Value::as_object)
            .flatten()
            .map(|(event, groups)| {
                let n: usize = groups
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|g| g.get("hooks").and_then(Value::as_array).map_or(0, Vec::len))
                    .sum();
                (event.clone(), Value::from(n))
            })
            .collect();
        serde_json::json!({
            "agents": agents,
            "commands": commands,
            "skills": skills,
            "hooks": hooks,
            "mcp_servers": self.mcp_servers.keys().collect::<Vec<_>>(),
        })
    }

    /// [`counts`](Self::counts) in one line.
    pub fn summary(&self) -> String {
        let counts = self.counts();
        let hooks: Vec<String> = counts["hooks"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(event, n)| format!("{event} {n}"))
            .collect();
        let mut line = format!(
            "agents {}, commands {}, skills {}, hooks {}, MCP servers {}",
            counts["agents"],
            counts["commands"],
            counts["skills"],
            if hooks.is_empty() {
                "0".to_owned()
            } else {
                hooks.join(" ")
            },
            self.mcp_servers.len()
        );
        if !self.skipped.is_empty() {
            line.push_str(&format!("; not loaded: {}", self.skipped.join(", ")));
        }
        line
    }
}

/// Whether `path` (given to `plugins check` or `--plugin-dir`) holds no plugin of either
/// kind: no `noeta-plugin.toml`, not a Claude Code plugin, and no child that is one.
pub fn holds_no_plugin(path: &Path) -> bool {
    let is_plugin = |p: &Path| p.join(noeta_core::MANIFEST_FILE).is_file() || is_claude_plugin(p);
    if path.is_file() || is_plugin(path) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return true;
    };
    !entries
        .filter_map(Result::ok)
        .any(|e| e.path().is_dir() && is_plugin(&e.path()))
}
