//! `[plugins.skills]`: which tiers mount, how `allowed-tools` is enforced, scripts, the listing budget.

use std::path::{Path, PathBuf};

use noeta_toolkit::{SettingsError, SettingsTable};
use serde_json::Value;

/// The default token budget of the skill listing.
pub(crate) const LISTING_BUDGET_TOKENS: usize = 2_000;

/// The default deadline of one skill script, in seconds.
pub(crate) const SCRIPT_TIMEOUT_SECS: u64 = 120;

/// The keys `[plugins.skills]` knows, for the unknown-key error.
const KNOWN: &[&str] = &[
    "extra_skill_dirs",
    "global_agents_skills_dir",
    "global_claude_skills_dir",
    "global_skills_dir",
    "skills_dir",
    "workspace_skills_trust",
    "tool_enforcement",
    "allow_skill_scripts",
    "listing_budget_tokens",
    "script_timeout_secs",
    "plugin_skill_dirs",
    "plugin_command_dirs",
];

/// A Claude Code plugin's commands directory, as the host hands it over.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PluginCommands {
    /// The plugin: its commands are `/<plugin>:<name>`.
    pub(crate) plugin: String,
    /// The directory of `*.md` commands.
    pub(crate) dir: PathBuf,
    /// `${CLAUDE_PLUGIN_ROOT}`.
    pub(crate) root: PathBuf,
    /// `${CLAUDE_PLUGIN_DATA}`.
    pub(crate) data: PathBuf,
    /// The plugin's `userConfig` options that are not sensitive, for `${user_config.KEY}`.
    #[serde(default)]
    pub(crate) options: std::collections::BTreeMap<String, String>,
}

/// A Claude Code plugin's skills directory, as the host hands it over.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PluginSkills {
    /// The plugin.
    pub(crate) plugin: String,
    /// The directory of skills.
    pub(crate) dir: PathBuf,
}

/// What is done with a call to a tool outside the `allowed-tools` of the active skills.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Enforcement {
    /// Nothing: `allowed-tools` is informational.
    #[default]
    Off,
    /// The call is denied.
    Deny,
    /// The user is asked.
    Approve,
}

/// Whether the workspace tiers need the trust store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum WorkspaceTrust {
    /// They always mount.
    #[default]
    Open,
    /// They mount only for a workspace the trust store lists.
    TrustStore,
}

/// An opt-in home tier: off, the conventional directory, or a directory named.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum HomeTier {
    /// Not mounted.
    #[default]
    Off,
    /// The conventional directory under the home directory.
    Default,
    /// This directory (absolute, or `~/…`).
    At(String),
}

/// The plugin's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Borrowed directories, each absolute or `~/…`, in precedence order (later wins).
    pub(crate) extra_skill_dirs: Vec<String>,
    /// `~/.agents/skills`.
    pub(crate) global_agents_skills_dir: HomeTier,
    /// `~/.claude/skills` (Claude Code's).
    pub(crate) global_claude_skills_dir: HomeTier,
    /// `~/.noeta/skills`.
    pub(crate) global_skills_dir: HomeTier,
    /// The operator's directory that replaces both workspace tiers (relative to the workspace,
    /// absolute, or `~/…`).
    pub(crate) skills_dir: Option<String>,
    /// Whether the workspace tiers need the trust store.
    pub(crate) workspace_skills_trust: WorkspaceTrust,
    /// `allowed-tools` enforcement.
    pub(crate) tool_enforcement: Enforcement,
    /// Whether `run_skill_script` is offered.
    pub(crate) allow_skill_scripts: bool,
    /// The listing's budget, in tokens.
    pub(crate) listing_budget_tokens: usize,
    /// The deadline of one script run.
    pub(crate) script_timeout_secs: u64,
    /// Claude Code plugins' skills directories (set by the host): the `plugin` tier.
    pub(crate) plugin_skill_dirs: Vec<PluginSkills>,
    /// Claude Code plugins' commands directories (set by the host).
    pub(crate) plugin_command_dirs: Vec<PluginCommands>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            extra_skill_dirs: Vec::new(),
            global_agents_skills_dir: HomeTier::Off,
            global_claude_skills_dir: HomeTier::Off,
            global_skills_dir: HomeTier::Off,
            skills_dir: None,
            workspace_skills_trust: WorkspaceTrust::Open,
            tool_enforcement: Enforcement::Off,
            allow_skill_scripts: false,
            listing_budget_tokens: LISTING_BUDGET_TOKENS,
            script_timeout_secs: SCRIPT_TIMEOUT_SECS,
            plugin_skill_dirs: Vec::new(),
            plugin_command_dirs: Vec::new(),
        }
    }
}

/// A path setting: absolute or `~/…` (and relative too when `relative_ok`).
fn path_text(
    table: &SettingsTable<'_>,
    key: &str,
    value: &Value,
    relative_ok: bool,
) -> Result<String, SettingsError> {
    let expected = if relative_ok {
        "a directory path"
    } else {
        "an absolute directory path or one starting with `~/`"
    };
    let text = value
        .as_str()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| table.expected(key, expected, value))?;
    if !relative_ok && !is_home_relative(text) && !Path::new(text).is_absolute() {
        return Err(table.expected(key, expected, value));
    }
    Ok(text.to_owned())
}

/// A home tier: `false`, `true` (the conventional directory), or a directory.
fn home_tier(table: &SettingsTable<'_>, key: &str) -> Result<Option<HomeTier>, SettingsError> {
    let Some(value) = table.get(key) else {
        return Ok(None);
    };
    match value {
        Value::Bool(false) => Ok(Some(HomeTier::Off)),
        Value::Bool(true) => Ok(Some(HomeTier::Default)),
        Value::String(_) => path_text(table, key, value, false).map(|p| Some(HomeTier::At(p))),
        other => Err(table.expected(key, "true, false, or an absolute directory path", other)),
    }
}

/// Whether `text` starts with `~/` (or is `~`).
fn is_home_relative(text: &str) -> bool {
    text == "~" || text.starts_with("~/")
}

/// `text` with a leading `~` replaced by `home`; `None` when it needs a home there is not.
pub(crate) fn expand(text: &str, home: Option<&Path>) -> Option<PathBuf> {
    if text == "~" {
        return home.map(Path::to_path_buf);
    }
    match text.strip_prefix("~/") {
        Some(rest) => home.map(|h| h.join(rest)),
        None => Some(PathBuf::from(text)),
    }
}

impl Settings {
    /// Reads `[plugins.skills]` (`null`: the defaults); every error names the plugin, the key
    /// and the value.
    pub(crate) fn parse(config: &Value) -> Result<Self, String> {
        let table = SettingsTable::new("skills", config, KNOWN)?;
        let defaults = Self::default();
        let extra_skill_dirs =
            match table.array("extra_skill_dirs", "a list of absolute directory paths")? {
                Some(items) => items
                    .iter()
                    .map(|item| path_text(&table, "extra_skill_dirs", item, false))
                    .collect::<Result<_, _>>()?,
                None => defaults.extra_skill_dirs,
            };
        let skills_dir = match table.get("skills_dir") {
            Some(value) => Some(path_text(&table, "skills_dir", value, true)?),
            None => defaults.skills_dir,
        };
        Ok(Self {
            extra_skill_dirs,
            global_agents_skills_dir: home_tier(&table, "global_agents_skills_dir")?
                .unwrap_or(defaults.global_agents_skills_dir),
            global_claude_skills_dir: home_tier(&table, "global_claude_skills_dir")?
                .unwrap_or(defaults.global_claude_skills_dir),
            global_skills_dir: home_tier(&table, "global_skills_dir")?
                .unwrap_or(defaults.global_skills_dir),
            skills_dir,
            workspace_skills_trust: table
                .one_of(
                    "workspace_skills_trust",
                    &[
                        ("open", WorkspaceTrust::Open),
                        ("trust-store", WorkspaceTrust::TrustStore),
                    ],
                )?
                .unwrap_or(defaults.workspace_skills_trust),
            tool_enforcement: table
                .one_of(
                    "tool_enforcement",
                    &[
                        ("off", Enforcement::Off),
                        ("deny", Enforcement::Deny),
                        ("approve", Enforcement::Approve),
                    ],
                )?
                .unwrap_or(defaults.tool_enforcement),
            allow_skill_scripts: table
                .bool("allow_skill_scripts")?
                .unwrap_or(defaults.allow_skill_scripts),
            listing_budget_tokens: table
                .positive("listing_budget_tokens")?
                .unwrap_or(defaults.listing_budget_tokens),
            script_timeout_secs: table
                .positive("script_timeout_secs")?
                .unwrap_or(defaults.script_timeout_secs),
            plugin_skill_dirs: table
                .read(
                    "plugin_skill_dirs",
                    "a list of `{ plugin, dir }` tables",
                    |v| serde_json::from_value(v.clone()).ok(),
                )?
                .unwrap_or_default(),
            plugin_command_dirs: table
                .read(
                    "plugin_command_dirs",
                    "a list of `{ plugin, dir, root, data }` tables",
                    |v| serde_json::from_value(v.clone()).ok(),
                )?
                .unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_mount_only_the_workspace_tiers() {
        let s = Settings::parse(&Value::Null).unwrap();
        assert_eq!(s, Settings::default());
        assert_eq!(s.global_skills_dir, HomeTier::Off);
        assert_eq!(s.global_agents_skills_dir, HomeTier::Off);
        assert_eq!(s.tool_enforcement, Enforcement::Off);
    }

    #[test]
    fn every_key_is_read() {
        let s = Settings::parse(&json!({
            "extra_skill_dirs": ["/a", "~/b"],
            "global_agents_skills_dir": true,
            "global_skills_dir": "/srv/skills",
            "skills_dir": "team/skills",
            "workspace_skills_trust": "trust-store",
            "tool_enforcement": "approve",
            "allow_skill_scripts": true,
            "listing_budget_tokens": 50,
            "script_timeout_secs": 5,
        }))
        .unwrap();
        assert_eq!(s.extra_skill_dirs, vec!["/a", "~/b"]);
        assert_eq!(s.global_agents_skills_dir, HomeTier::Default);
        assert_eq!(s.global_skills_dir, HomeTier::At("/srv/skills".into()));
        assert_eq!(s.skills_dir.as_deref(), Some("team/skills"));
        assert_eq!(s.workspace_skills_trust, WorkspaceTrust::TrustStore);
        assert_eq!(s.tool_enforcement, Enforcement::Approve);
        assert!(s.allow_skill_scripts);
        assert_eq!(s.listing_budget_tokens, 50);
        assert_eq!(s.script_timeout_secs, 5);
    }

    #[test]
    fn home_expansion() {
        let home = Path::new("/home/u");
        assert_eq!(expand("~/x", Some(home)), Some(PathBuf::from("/home/u/x")));
        assert_eq!(expand("~", Some(home)), Some(PathBuf::from("/home/u")));
        assert_eq!(expand("~/x", None), None);
        assert_eq!(expand("/abs", None), Some(PathBuf::from("/abs")));
    }
}
