//! `[plugins.skills]`: which tiers mount, how `allowed-tools` is enforced, scripts, the listing budget.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The default token budget of the skill listing.
pub(crate) const LISTING_BUDGET_TOKENS: usize = 2_000;

/// The default deadline of one skill script, in seconds.
pub(crate) const SCRIPT_TIMEOUT_SECS: u64 = 120;

/// The keys `[plugins.skills]` knows, for the unknown-key error.
const KNOWN: &str = "extra_skill_dirs, global_agents_skills_dir, global_skills_dir, skills_dir, workspace_skills_trust, tool_enforcement, allow_skill_scripts, listing_budget_tokens, script_timeout_secs";

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
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            extra_skill_dirs: Vec::new(),
            global_agents_skills_dir: HomeTier::Off,
            global_skills_dir: HomeTier::Off,
            skills_dir: None,
            workspace_skills_trust: WorkspaceTrust::Open,
            tool_enforcement: Enforcement::Off,
            allow_skill_scripts: false,
            listing_budget_tokens: LISTING_BUDGET_TOKENS,
            script_timeout_secs: SCRIPT_TIMEOUT_SECS,
        }
    }
}

/// `settings [plugins.skills] <key>: expected <what>, got `<value>``.
fn bad(key: &str, expected: &str, value: &Value) -> String {
    format!("settings [plugins.skills] {key}: expected {expected}, got `{value}`")
}

/// A path setting: absolute or `~/…` (and relative too when `relative_ok`).
fn path_text(key: &str, value: &Value, relative_ok: bool) -> Result<String, String> {
    let expected = if relative_ok {
        "a directory path"
    } else {
        "an absolute directory path or one starting with `~/`"
    };
    let text = value
        .as_str()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| bad(key, expected, value))?;
    if !relative_ok && !is_home_relative(text) && !Path::new(text).is_absolute() {
        return Err(bad(key, expected, value));
    }
    Ok(text.to_owned())
}

fn home_tier(key: &str, value: &Value) -> Result<HomeTier, String> {
    match value {
        Value::Bool(false) => Ok(HomeTier::Off),
        Value::Bool(true) => Ok(HomeTier::Default),
        Value::String(_) => path_text(key, value, false).map(HomeTier::At),
        other => Err(bad(
            key,
            "true, false, or an absolute directory path",
            other,
        )),
    }
}

fn positive(key: &str, value: &Value) -> Result<u64, String> {
    value
        .as_u64()
        .filter(|n| *n > 0)
        .ok_or_else(|| bad(key, "a positive integer", value))
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
        let mut settings = Self::default();
        let table = match config {
            Value::Null => return Ok(settings),
            Value::Object(table) => table,
            other => {
                return Err(format!(
                    "settings [plugins.skills]: expected a table, got `{other}`"
                ));
            }
        };
        for (key, value) in table {
            match key.as_str() {
                "extra_skill_dirs" => {
                    let items = value
                        .as_array()
                        .ok_or_else(|| bad(key, "a list of absolute directory paths", value))?;
                    settings.extra_skill_dirs = items
                        .iter()
                        .map(|item| path_text(key, item, false))
                        .collect::<Result<_, _>>()?;
                }
                "global_agents_skills_dir" => {
                    settings.global_agents_skills_dir = home_tier(key, value)?;
                }
                "global_skills_dir" => settings.global_skills_dir = home_tier(key, value)?,
                "skills_dir" => settings.skills_dir = Some(path_text(key, value, true)?),
                "workspace_skills_trust" => {
                    settings.workspace_skills_trust = match value.as_str() {
                        Some("open") => WorkspaceTrust::Open,
                        Some("trust-store") => WorkspaceTrust::TrustStore,
                        _ => return Err(bad(key, "`open` or `trust-store`", value)),
                    };
                }
                "tool_enforcement" => {
                    settings.tool_enforcement = match value.as_str() {
                        Some("off") => Enforcement::Off,
                        Some("deny") => Enforcement::Deny,
                        Some("approve") => Enforcement::Approve,
                        _ => return Err(bad(key, "`off`, `deny` or `approve`", value)),
                    };
                }
                "allow_skill_scripts" => {
                    settings.allow_skill_scripts = value
                        .as_bool()
                        .ok_or_else(|| bad(key, "true or false", value))?;
                }
                "listing_budget_tokens" => {
                    settings.listing_budget_tokens = usize::try_from(positive(key, value)?)
                        .map_err(|_| bad(key, "a positive integer", value))?;
                }
                "script_timeout_secs" => settings.script_timeout_secs = positive(key, value)?,
                other => {
                    return Err(format!(
                        "settings [plugins.skills]: unknown key `{other}` (known: {KNOWN})"
                    ));
                }
            }
        }
        Ok(settings)
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
