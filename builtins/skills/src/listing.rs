//! The index as `noeta skills list` shows it: every tier directory, every indexed skill with its
//! tier and source, every skipped one with the reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::index::{self, SKILL_FILE};
use crate::settings::Settings;

/// One tier directory and whether it mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListedTier {
    /// The tier (`plugin`, `extra`, `global-agents`, `global-claude`, `global`,
    /// `workspace-agents`, `workspace-claude`, `workspace`).
    pub tier: String,
    /// What put the directory there: a plugin, a setting, or `workspace`.
    pub origin: String,
    /// The directory (empty when it needs a home directory there is not).
    pub path: PathBuf,
    /// `mounted`, or why it contributes nothing.
    pub state: String,
}

/// One indexed skill.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListedSkill {
    /// Its id (`<plugin>:<id>` for a Claude Code plugin's skill).
    pub name: String,
    /// Its `name` when that is a display name (the id is then its directory's name).
    pub display_name: Option<String>,
    /// The tier it comes from.
    pub tier: String,
    /// Its SKILL.md.
    pub path: PathBuf,
    /// Its description, as written (a block scalar keeps its line breaks).
    pub description: String,
    /// Its `version`, if any.
    pub version: Option<String>,
    /// Its listing priority (lower first).
    pub priority: i64,
    /// Whether the model may activate it (not `disable-model-invocation`).
    pub model_invocable: bool,
    /// Whether the user may activate it (`user-invocable`).
    pub user_invocable: bool,
    /// Its `allowed-tools`, if it declares them.
    pub allowed_tools: Option<Vec<String>>,
    /// The scripts it ships, relative to its directory.
    pub scripts: Vec<String>,
    /// SHA-256 of its SKILL.md.
    pub sha256: String,
    /// Its other frontmatter keys, as JSON.
    pub metadata: BTreeMap<String, Value>,
}

/// A skill that is not in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkippedSkill {
    /// The tier it was found in.
    pub tier: String,
    /// Its SKILL.md.
    pub path: PathBuf,
    /// Its name, when it was read that far.
    pub name: Option<String>,
    /// Why it is skipped (a bad frontmatter, a duplicate, a shadowing skill of a higher tier).
    pub reason: String,
    /// Skipped only because a higher tier has a skill of the same name: nothing is wrong with
    /// the file itself.
    pub shadowed: bool,
}

/// The whole index.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Listing {
    /// Every tier directory, lowest precedence first.
    pub tiers: Vec<ListedTier>,
    /// Every indexed skill, by name.
    pub skills: Vec<ListedSkill>,
    /// Every skipped skill, by tier then path.
    pub skipped: Vec<SkippedSkill>,
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

impl Listing {
    /// The listing as JSON; keys are sorted, so its serialisation is byte-deterministic.
    pub fn to_json(&self) -> Value {
        let tiers: Vec<Value> = self
            .tiers
            .iter()
            .map(|t| {
                json!({
                    "tier": t.tier,
                    "origin": t.origin,
                    "path": path_text(&t.path),
                    "state": t.state,
                })
            })
            .collect();
        let skills: Vec<Value> = self
            .skills
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "tier": s.tier,
                    "path": path_text(&s.path),
                    "description": s.description,
                    "version": s.version,
                    "priority": s.priority,
                    "model_invocable": s.model_invocable,
                    "user_invocable": s.user_invocable,
                    "allowed_tools": s.allowed_tools,
                    "scripts": s.scripts,
                    "sha256": s.sha256,
                    "metadata": s.metadata,
                })
            })
            .collect();
        let skipped: Vec<Value> = self
            .skipped
            .iter()
            .map(|s| {
                json!({
                    "tier": s.tier,
                    "path": path_text(&s.path),
                    "name": s.name,
                    "reason": s.reason,
                })
            })
            .collect();
        json!({ "tiers": tiers, "skills": skills, "skipped": skipped })
    }

    /// The listing for people.
    pub fn to_text(&self) -> String {
        let mut out = String::from("tiers (lowest precedence first):\n");
        if self.tiers.is_empty() {
            out.push_str("  none\n");
        }
        for t in &self.tiers {
            let path = if t.path.as_os_str().is_empty() {
                "(no path)".to_owned()
            } else {
                t.path.display().to_string()
            };
            out.push_str(&format!(
                "  {} {} ({}): {}\n",
                t.tier, path, t.origin, t.state
            ));
        }
        out.push_str(&format!("skills ({}):\n", self.skills.len()));
        for s in &self.skills {
            let mut notes = vec![s.tier.clone()];
            if !s.model_invocable {
                notes.push("user only".to_owned());
            }
            if !s.user_invocable {
                notes.push("model only".to_owned());
            }
            out.push_str(&format!(
                "  {} ({}) {}\n    {}\n",
                s.name,
                notes.join(", "),
                s.path.display(),
                crate::frontmatter::one_line(&s.description)
            ));
        }
        out.push_str(&format!("skipped ({}):\n", self.skipped.len()));
        for s in &self.skipped {
            out.push_str(&format!(
                "  {} ({}): {}\n",
                s.path.display(),
                s.tier,
                s.reason
            ));
        }
        out
    }
}

/// Indexes the skills as a session of this host would: `settings` is `[plugins.skills]` (JSON
/// null for none), `workspace` the workspace root, `home` the home directory, `plugin_dirs` the
/// `(plugin, path)` of every `skills` contribution in `(plugin, name)` order. Errors name the
/// setting, or the plugin whose path is relative.
pub fn index_for_listing(
    settings: &Value,
    workspace: Option<&Path>,
    home: Option<&Path>,
    plugin_dirs: &[(String, PathBuf)],
) -> Result<Listing, String> {
    let settings = Settings::parse(settings)?;
    let dirs = index::tier_dirs(&settings, workspace, home, plugin_dirs)?;
    let built = index::build(dirs);
    Ok(Listing {
        tiers: built
            .dirs
            .iter()
            .map(|d| ListedTier {
                tier: d.tier.as_str().to_owned(),
                origin: d.origin.clone(),
                path: d.path.clone(),
                state: d.state.describe(),
            })
            .collect(),
        skills: built
            .skills
            .values()
            .map(|s| ListedSkill {
                name: s.name.clone(),
                display_name: s.display_name.clone(),
                tier: s.tier.as_str().to_owned(),
                path: Path::new(&s.dir).join(SKILL_FILE),
                description: s.description.clone(),
                version: s.version.clone(),
                priority: s.priority,
                model_invocable: !s.disable_model_invocation,
                user_invocable: s.user_invocable,
                allowed_tools: s.allowed_tools.clone(),
                scripts: s.scripts.clone(),
                sha256: s.sha256.clone(),
                metadata: s.metadata.clone(),
            })
            .collect(),
        skipped: built
            .skipped
            .iter()
            .map(|s| SkippedSkill {
                tier: s.tier.as_str().to_owned(),
                path: s.path.clone(),
                name: s.name.clone(),
                reason: s.reason.clone(),
                shadowed: s.shadowed,
            })
            .collect(),
    })
}
