//! What a workspace's own files may make noeta do before the user trusts the workspace: the one
//! place that says which project settings need trust.
//!
//! A cloned repository — or the model, or a sandboxed command, writing into the workspace —
//! must not be able to start processes, loosen the sandbox or the permission asks, or change
//! providers, endpoints, keys or the servers noeta runs. Until `noeta trust` pins the workspace
//! (and for as long as its pinned files are unchanged, [`noeta_core::WorkspaceTrust`]), the
//! project layer of the settings (`<workspace>/.noeta/config.toml`) and the plugin parameters of
//! the project's agent files keep only what [`may_set`] and [`may_switch`] allow; the rest is
//! ignored with one warning naming the file, the keys and the command that trusts. Whatever
//! starts processes elsewhere — `.mcp.json`, hook files, project plugins, commands' `` !`…` ``
//! lines — is not read at all until then (each reader asks [`ProjectTrust`]). The machine
//! `[policy]` keeps the last word either way.

use noeta_core::WorkspaceTrust;

use crate::conventions::HostPaths;

/// The keys an untrusted project may set, by plugin or named extension (`*`: every key): they
/// tune what runs and never start a process, reach elsewhere, loosen an ask or the sandbox, or
/// name a provider, an endpoint or a key. `permission_mode` is taken only when it is no looser
/// than the mode beneath (see [`crate::Settings`]).
const UNTRUSTED_MAY_SET: &[(&str, &[&str])] = &[
    ("react", &["*"]),
    ("compaction", &["*"]),
    ("structured_output", &["*"]),
    ("tool_search", &["*"]),
    ("recall_history", &["*"]),
    ("workspace", &["*"]),
    ("instructions", &["*"]),
    ("environment", &["*"]),
    ("governance", &["deny", "permission_mode"]),
    ("permissions", &["deny", "permission_mode"]),
    (
        "web",
        &[
            "max_bytes",
            "max_content_chars",
            "cache_ttl_secs",
            "user_agent",
            "timeout_secs",
        ],
    ),
    ("fs", &["write_mode", "background_ends_with_turn"]),
    ("memory", &["read_only"]),
    ("skills", &["listing_budget_tokens", "script_timeout_secs"]),
    (
        "markdown_commands",
        &["listing_budget_tokens", "script_timeout_secs"],
    ),
    ("delegation", &["listing_budget_tokens"]),
    ("subagents", &["listing_budget_tokens"]),
    ("browser", &["width", "height", "timeout_ms"]),
    ("mcp", &["defer_above", "startup_wait_ms"]),
];

/// Keys an untrusted project may set to one value only, the strict one: files are not written
/// unless the user's settings say so, memory is not written at all.
const ONLY_STRICT: &[(&str, &str, Strict)] = &[
    ("fs", "write_mode", Strict::Text("dry_run")),
    ("memory", "read_only", Strict::Flag(true)),
];

/// The one value a key of [`ONLY_STRICT`] may take.
#[derive(Debug, Clone, Copy)]
enum Strict {
    Text(&'static str),
    Flag(bool),
}

/// What switching these off would loosen: the asks, the guards, the hooks and the sandbox.
const GUARDS: [&str; 6] = [
    "governance",
    "permissions",
    "hooks",
    "budget",
    "repetition_guard",
    "sandbox",
];

/// Whether an untrusted project may set `key` of `[plugins.<plugin>]` (or of an agent file's
/// parameters for `plugin`) to `value`. Budgets and the repetition guard are not among them:
/// raising a limit the user set is loosening it.
pub(crate) fn may_set(plugin: &str, key: &str, value: &serde_json::Value) -> bool {
    if let Some((_, _, strict)) = ONLY_STRICT
        .iter()
        .find(|(name, k, _)| *name == plugin && *k == key)
    {
        return match strict {
            Strict::Text(text) => value.as_str() == Some(*text),
            Strict::Flag(flag) => value.as_bool() == Some(*flag),
        };
    }
    UNTRUSTED_MAY_SET
        .iter()
        .any(|(name, keys)| *name == plugin && (keys.contains(&"*") || keys.contains(&key)))
}

/// Whether an untrusted project's agent file may activate `plugin`: only what the default
/// agent runs with, and what is on for every agent anyway.
pub(crate) fn may_activate(plugin: &str) -> bool {
    crate::DEFAULT_PLUGINS.contains(&plugin) || crate::ALWAYS_ON.contains(&plugin)
}

/// Whether an untrusted project may switch `plugin` on (`on`) or off: off, unless it is a guard
/// or the sandbox; on, never (a plugin switched on may start processes).
pub(crate) fn may_switch(plugin: &str, on: bool) -> bool {
    !on && !GUARDS.contains(&plugin)
}

/// Drops from an agent file of an untrusted project the plugin parameters that need trust
/// (`permission_mode` looser than `mode`, the mode the settings give its agent, included): the
/// names of what it dropped, as `plugins.mcp.servers`.
pub(crate) fn keep_untrusted_params(file: &mut crate::AgentFile, mode: &str) -> Vec<String> {
    let mut ignored = Vec::new();
    file.plugins.retain(|plugin| {
        let keep =
            may_activate(plugin) || crate::named::plugin_of(plugin).is_some_and(may_activate);
        if !keep {
            ignored.push(format!("plugins[{plugin}]"));
        }
        keep
    });
    for (plugin, params) in &mut file.params {
        let Some(params) = params.as_object_mut() else {
            continue;
        };
        params.retain(|key, value| {
            let looser_mode = key == "permission_mode"
                && value.as_str().is_none_or(|m| {
                    crate::conventions::looseness(m) > crate::conventions::looseness(mode)
                });
            let keep = may_set(plugin, key, value) && !looser_mode;
            if !keep {
                ignored.push(format!("plugins.{plugin}.{key}"));
            }
            keep
        });
    }
    ignored
}

/// The agent files of an untrusted workspace (`.claude/agents`, `.noeta/agents`) keep only the
/// plugin parameters an untrusted project may set; one line per file that lost any.
pub(crate) fn untrusted_agent_files(
    paths: &crate::conventions::HostPaths,
    settings: &crate::Settings,
    files: &mut crate::AgentFiles,
) -> Vec<String> {
    let trust = crate::ProjectTrust::of(paths);
    if trust.is_trusted() {
        return Vec::new();
    }
    let user_agents = paths.user_dir().map(|d| d.join("agents"));
    let project_dirs: Vec<std::path::PathBuf> = [
        paths.workspace.join(".claude").join("agents"),
        paths.workspace.join(".noeta").join("agents"),
    ]
    .into_iter()
    .filter(|d| Some(d) != user_agents.as_ref())
    .collect();
    let mut notes = Vec::new();
    for file in &mut files.agents {
        if !project_dirs.iter().any(|d| file.path.starts_with(d)) {
            continue;
        }
        let mode = settings
            .permission_mode(&file.name)
            .unwrap_or_else(|| "default".to_owned());
        let ignored = keep_untrusted_params(file, &mode);
        if !ignored.is_empty() {
            notes.push(trust.ignored(&file.path.display().to_string(), &ignored));
        }
    }
    notes
}

/// How the workspace of a host stands: whether its own files may make noeta do things.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectTrust {
    state: WorkspaceTrust,
    /// The directory to name in `noeta trust …`.
    workspace: String,
}

impl ProjectTrust {
    /// The trust of `paths`' workspace, from the trust store (an unreadable store trusts
    /// nothing; loading plugins reports it).
    pub fn of(paths: &HostPaths) -> Self {
        let state = paths
            .trust_store()
            .map_or(WorkspaceTrust::Untrusted, |store| {
                store.workspace(&paths.workspace)
            });
        Self {
            state,
            workspace: paths.workspace.display().to_string(),
        }
    }

    /// A workspace in `state` (for tests and embedders that decide trust themselves).
    pub fn new(state: WorkspaceTrust, workspace: impl Into<String>) -> Self {
        Self {
            state,
            workspace: workspace.into(),
        }
    }

    /// Whether the workspace's files may make noeta do things.
    pub fn is_trusted(&self) -> bool {
        self.state.is_trusted()
    }

    /// How it stands.
    pub fn state(&self) -> &WorkspaceTrust {
        &self.state
    }

    /// The one warning about `file`, whose `ignored` keys need trust.
    pub fn ignored(&self, file: &str, ignored: &[String]) -> String {
        let why = self
            .state
            .why_not()
            .unwrap_or_else(|| "the workspace is not trusted".to_owned());
        format!(
            "{file}: {why}, so these settings are ignored: {} — `noeta trust {}` to use them",
            ignored.join(", "),
            self.workspace
        )
    }

    /// The warning about `file`, whose `what` (`hooks`, …; empty for the whole file) is not
    /// read until the workspace is trusted, since it would `act` (`starts a server`).
    pub fn not_read(&self, file: &str, what: &str, act: &str) -> String {
        let why = self
            .state
            .why_not()
            .unwrap_or_else(|| "the workspace is not trusted".to_owned());
        let what = if what.is_empty() {
            String::new()
        } else {
            format!("{what} ")
        };
        format!(
            "{file}: {what}not read, since {why} (a cloned repository never {act} by itself) — \
             `noeta trust {}` to use it",
            self.workspace
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_starts_processes_loosens_asks_or_names_endpoints_needs_trust() {
        for (plugin, key) in [
            ("mcp", "servers"),
            ("sandbox", "provider"),
            ("sandbox", "network"),
            ("governance", "allow"),
            ("governance", "hooks"),
            ("governance", "hooks_cwd"),
            ("governance", "edit_tools"),
            ("hooks", "PreToolUse"),
            ("providers", "base_url"),
            ("providers", "api_key"),
            ("serve", "token"),
            ("app", "proxy_hosts"),
            ("web", "search_endpoint"),
            ("browser", "executable"),
            ("fs", "write_roots"),
            ("fs", "shell_env_inherit"),
            ("memory", "dir"),
            ("skills", "allow_skill_scripts"),
            ("skills", "workspace_skills_trust"),
            ("some-third-party", "anything"),
            ("budget", "max_iterations"),
            ("governance", "budget"),
        ] {
            assert!(
                !may_set(plugin, key, &serde_json::Value::Null),
                "[plugins.{plugin}] {key}"
            );
        }
        assert!(!may_set("fs", "write_mode", &serde_json::json!("apply")));
        assert!(may_set("fs", "write_mode", &serde_json::json!("dry_run")));
        assert!(!may_set("memory", "read_only", &serde_json::json!(false)));
        assert!(may_set("memory", "read_only", &serde_json::json!(true)));
        for (plugin, key) in [
            ("react", "compaction"),
            ("governance", "deny"),
            ("governance", "permission_mode"),
            ("mcp", "defer_above"),
        ] {
            assert!(
                may_set(plugin, key, &serde_json::Value::Null),
                "[plugins.{plugin}] {key}"
            );
        }
        assert!(may_switch("web", false));
        assert!(!may_switch("web", true));
        assert!(!may_switch("governance", false));
        assert!(!may_switch("sandbox", false));
        assert!(!may_switch("hooks", false));
    }
}
