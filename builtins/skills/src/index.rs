//! The seven tiers, the directories each mounts, and the index built over them.
//!
//! A tier directory holds one skill per subdirectory (`<tier>/<skill>/SKILL.md`).
//! Within a tier the subdirectories are read in byte order of their names and
//! the first of two skills with one name wins; across tiers a higher tier's
//! skill shadows a lower tier's of the same name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use noeta_core::TrustStore;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::frontmatter::SkillFile;
use crate::settings::{HomeTier, Settings, WorkspaceTrust, expand};

/// The SKILL.md of a skill directory.
pub(crate) const SKILL_FILE: &str = "SKILL.md";

/// The largest SKILL.md read.
pub(crate) const MAX_SKILL_BYTES: u64 = 1024 * 1024;

/// The script suffixes `run_skill_script` runs, with their interpreter.
pub(crate) const INTERPRETERS: [(&str, &str); 4] = [
    ("sh", "bash"),
    ("py", "python3"),
    ("js", "node"),
    ("mjs", "node"),
];

/// The most scripts indexed per skill, and how deep they are looked for.
const MAX_SCRIPTS: usize = 64;
const MAX_SCRIPT_DEPTH: usize = 4;

/// The tiers, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Tier {
    /// Skills shipped with the plugin (none today).
    Builtin,
    /// Directories other plugins contribute on the `skills` surface.
    Plugin,
    /// `extra_skill_dirs`.
    Extra,
    /// `~/.agents/skills` (`global_agents_skills_dir`).
    GlobalAgents,
    /// `~/.claude/skills` (`global_claude_skills_dir`), Claude Code's.
    GlobalClaude,
    /// `~/.noeta/skills` (`global_skills_dir`).
    Global,
    /// `<workspace>/.agents/skills`.
    WorkspaceAgents,
    /// `<workspace>/.claude/skills`, Claude Code's.
    WorkspaceClaude,
    /// `<workspace>/.noeta/skills`, or the `skills_dir` override.
    Workspace,
}

impl Tier {
    /// The tier's name, as listings show it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Tier::Builtin => "builtin",
            Tier::Plugin => "plugin",
            Tier::Extra => "extra",
            Tier::GlobalAgents => "global-agents",
            Tier::GlobalClaude => "global-claude",
            Tier::Global => "global",
            Tier::WorkspaceAgents => "workspace-agents",
            Tier::WorkspaceClaude => "workspace-claude",
            Tier::Workspace => "workspace",
        }
    }
}

/// Why a tier directory contributes nothing, or that it is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DirState {
    Mounted,
    /// It does not exist (an empty tier, not an error).
    Missing,
    NotADirectory,
    /// It needs the home directory, and there is none.
    NoHome,
    /// The workspace is not trusted (not in the trust store, changed since, or the store cannot be read).
    Untrusted(String),
    Unreadable(String),
}

impl DirState {
    pub(crate) fn describe(&self) -> String {
        match self {
            DirState::Mounted => "mounted".to_owned(),
            DirState::Missing => "missing (an empty tier)".to_owned(),
            DirState::NotADirectory => "not a directory".to_owned(),
            DirState::NoHome => "the home directory is unknown".to_owned(),
            DirState::Untrusted(why) | DirState::Unreadable(why) => why.clone(),
        }
    }
}

/// One directory of one tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TierDir {
    pub(crate) tier: Tier,
    /// What put it there: a plugin's name, a setting, a convention.
    pub(crate) origin: String,
    /// A Claude Code plugin's name: its skills are `<plugin>:<id>`.
    pub(crate) namespace: Option<String>,
    pub(crate) path: PathBuf,
    pub(crate) state: DirState,
}

/// A skill of the index: what the listing, the tool and the gate need (recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IndexedSkill {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) tier: Tier,
    /// The skill's directory.
    pub(crate) dir: String,
    /// Its `name` when that is a display name (the id is then the directory's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) display_name: Option<String>,
    /// SHA-256 of the SKILL.md bytes.
    pub(crate) sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<String>,
    pub(crate) priority: i64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) disable_model_invocation: bool,
    pub(crate) user_invocable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) argument_hint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) allowed_tools: Option<Vec<String>>,
    /// Scripts it ships, relative to its directory with `/` separators, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) scripts: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) metadata: BTreeMap<String, Value>,
}

/// A skill that is not in the index, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skipped {
    pub(crate) tier: Tier,
    /// Its SKILL.md.
    pub(crate) path: PathBuf,
    /// Its name, when it got that far.
    pub(crate) name: Option<String>,
    pub(crate) reason: String,
    /// Skipped only because a higher tier has a skill of the same name (nothing is wrong with it).
    pub(crate) shadowed: bool,
}

/// The index over every tier.
#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    pub(crate) dirs: Vec<TierDir>,
    /// By name.
    pub(crate) skills: BTreeMap<String, IndexedSkill>,
    /// In tier order, then path order.
    pub(crate) skipped: Vec<Skipped>,
}

/// A home-tier directory: off, the convention under home, or one named.
fn home_dir(tier: &HomeTier, convention: &str, home: Option<&Path>) -> Option<Option<PathBuf>> {
    match tier {
        HomeTier::Off => None,
        HomeTier::Default => Some(home.map(|h| h.join(convention))),
        HomeTier::At(text) => Some(expand(text, home)),
    }
}

fn dir(tier: Tier, origin: impl Into<String>, path: Option<PathBuf>) -> TierDir {
    match path {
        Some(path) => {
            let state = match std::fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => DirState::Mounted,
                Ok(_) => DirState::NotADirectory,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => DirState::Missing,
                Err(err) => DirState::Unreadable(format!("cannot be read: {err}")),
            };
            TierDir {
                tier,
                origin: origin.into(),
                namespace: None,
                path,
                state,
            }
        }
        None => TierDir {
            tier,
            origin: origin.into(),
            namespace: None,
            path: PathBuf::new(),
            state: DirState::NoHome,
        },
    }
}

/// Whether the workspace tiers may mount, and why not.
fn workspace_trusted(settings: &Settings, workspace: &Path, home: Option<&Path>) -> Option<String> {
    if settings.workspace_skills_trust == WorkspaceTrust::Open {
        return None;
    }
    let Some(home) = home else {
        return Some(
            "untrusted: workspace_skills_trust is `trust-store` and the home directory (which holds the trust store) is unknown"
                .to_owned(),
        );
    };
    match TrustStore::of_home(home) {
        Ok(store) => store.workspace(workspace).why_not().map(|why| {
            format!(
                "untrusted: workspace_skills_trust is `trust-store` and {why} (`noeta trust {}` it)",
                workspace.display()
            )
        }),
        Err(err) => Some(format!("untrusted: {err}")),
    }
}

/// Refuses a relative plugin-contributed path, naming the plugin: a manifest's location says
/// nothing reliable about what it would be relative to.
pub(crate) fn check_plugin_dirs(plugin_dirs: &[(String, PathBuf)]) -> Result<(), String> {
    match plugin_dirs.iter().find(|(_, path)| !path.is_absolute()) {
        Some((plugin, path)) => Err(format!(
            "plugin `{plugin}`: the skills path `{}` is relative — a skills path must be absolute",
            path.display()
        )),
        None => Ok(()),
    }
}

/// Every tier directory, lowest precedence first. A relative plugin-contributed path is an
/// error naming the plugin.
pub(crate) fn tier_dirs(
    settings: &Settings,
    workspace: Option<&Path>,
    home: Option<&Path>,
    plugin_dirs: &[(String, PathBuf)],
) -> Result<Vec<TierDir>, String> {
    check_plugin_dirs(plugin_dirs)?;
    let mut dirs = Vec::new();
    // The built-in tier ships no skills today.
    for (plugin, path) in plugin_dirs {
        dirs.push(dir(Tier::Plugin, plugin.clone(), Some(path.clone())));
    }
    // Claude Code plugins' skills, named `<plugin>:<id>` so two plugins never collide.
    for skills in &settings.plugin_skill_dirs {
        let mut d = dir(
            Tier::Plugin,
            skills.plugin.clone(),
            Some(skills.dir.clone()),
        );
        d.namespace = Some(skills.plugin.clone());
        dirs.push(d);
    }
    for (i, text) in settings.extra_skill_dirs.iter().enumerate() {
        dirs.push(dir(
            Tier::Extra,
            format!("extra_skill_dirs[{i}]"),
            expand(text, home),
        ));
    }
    if let Some(path) = home_dir(&settings.global_agents_skills_dir, ".agents/skills", home) {
        dirs.push(dir(Tier::GlobalAgents, "global_agents_skills_dir", path));
    }
    if let Some(path) = home_dir(&settings.global_claude_skills_dir, ".claude/skills", home) {
        dirs.push(dir(Tier::GlobalClaude, "global_claude_skills_dir", path));
    }
    if let Some(path) = home_dir(&settings.global_skills_dir, ".noeta/skills", home) {
        dirs.push(dir(Tier::Global, "global_skills_dir", path));
    }
    let mut workspace_dirs = Vec::new();
    match (&settings.skills_dir, workspace) {
        (Some(text), _) => {
            let pinned = match (expand(text, home), workspace) {
                (Some(p), Some(ws)) if p.is_relative() => {
                    dir(Tier::Workspace, "skills_dir", Some(ws.join(p)))
                }
                (Some(p), None) if p.is_relative() => TierDir {
                    tier: Tier::Workspace,
                    origin: "skills_dir".to_owned(),
                    namespace: None,
                    path: p,
                    state: DirState::Unreadable(
                        "relative to the workspace, and there is none".to_owned(),
                    ),
                },
                (path, _) => dir(Tier::Workspace, "skills_dir", path),
            };
            workspace_dirs.push(pinned);
        }
        (None, Some(ws)) => {
            workspace_dirs.push(dir(
                Tier::WorkspaceAgents,
                "workspace",
                Some(ws.join(".agents").join("skills")),
            ));
            workspace_dirs.push(dir(
                Tier::WorkspaceClaude,
                "workspace",
                Some(ws.join(".claude").join("skills")),
            ));
            workspace_dirs.push(dir(
                Tier::Workspace,
                "workspace",
                Some(ws.join(".noeta").join("skills")),
            ));
        }
        (None, None) => {}
    }
    if let Some(why) = workspace.and_then(|ws| workspace_trusted(settings, ws, home)) {
        for d in &mut workspace_dirs {
            if d.state == DirState::Mounted {
                d.state = DirState::Untrusted(why.clone());
            }
        }
    }
    dirs.extend(workspace_dirs);
    Ok(dirs)
}

/// `path` relative to `base` with `/` separators.
fn relative(path: &Path, base: &Path) -> Option<String> {
    let rel = path.strip_prefix(base).ok()?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(parts.join("/"))
}

/// The scripts under `dir`: files with a runnable suffix, hidden entries and symbolic links
/// skipped, sorted.
pub(crate) fn scripts(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, at: &Path, depth: usize, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(at) else {
            return;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            if out.len() >= MAX_SCRIPTS {
                return;
            }
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() && depth < MAX_SCRIPT_DEPTH {
                walk(base, &path, depth + 1, out);
            } else if kind.is_file() && interpreter(&path).is_some() {
                out.extend(relative(&path, base));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, 1, &mut out);
    out.sort();
    out
}

/// The interpreter of a script, by its suffix.
pub(crate) fn interpreter(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?;
    INTERPRETERS
        .iter()
        .find(|(suffix, _)| *suffix == ext)
        .map(|(_, program)| *program)
}

/// Reads one SKILL.md: its bytes, as text.
pub(crate) fn read_skill_file(path: &Path) -> Result<(Vec<u8>, String), String> {
    let bytes = match noeta_core::files::read_bounded(path, MAX_SKILL_BYTES) {
        Ok(bytes) => bytes,
        Err(noeta_core::files::FileError::TooLarge { size, .. }) => {
            return Err(format!(
                "SKILL.md has {size} bytes, over the {MAX_SKILL_BYTES}-byte limit"
            ));
        }
        Err(err) => return Err(format!("cannot read SKILL.md: {}", err.into_io())),
    };
    let text = noeta_core::files::text(path, bytes.clone())
        .map_err(|_| "SKILL.md is not UTF-8 text".to_owned())?;
    Ok((bytes, text))
}

/// The skills of one tier directory, in byte order of their directory names; duplicates of an
/// earlier name in the same directory are skipped.
fn scan(d: &TierDir, skills: &mut Vec<IndexedSkill>, skipped: &mut Vec<Skipped>) {
    let Ok(entries) = std::fs::read_dir(&d.path) else {
        return;
    };
    let mut subdirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.join(SKILL_FILE).is_file())
        .collect();
    subdirs.sort();
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for sub in subdirs {
        let file = sub.join(SKILL_FILE);
        let skip = |name: Option<String>, reason: String| Skipped {
            tier: d.tier,
            path: file.clone(),
            name,
            reason,
            shadowed: false,
        };
        let parsed = read_skill_file(&file)
            .and_then(|(bytes, text)| SkillFile::parse(&text).map(|f| (bytes, f)));
        let (bytes, mut f) = match parsed {
            Ok(ok) => ok,
            Err(reason) => {
                skipped.push(skip(None, reason));
                continue;
            }
        };
        let dir_name = sub
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let display_name = match f.id(&dir_name) {
            Ok((id, display)) => {
                f.name = match &d.namespace {
                    Some(plugin) => format!("{plugin}:{id}"),
                    None => id,
                };
                display
            }
            Err(reason) => {
                skipped.push(skip(None, reason));
                continue;
            }
        };
        if let Some(first) = seen.get(&f.name) {
            skipped.push(skip(
                Some(f.name.clone()),
                format!(
                    "duplicate name `{}`: `{}` in the same tier comes first",
                    f.name,
                    first.display()
                ),
            ));
            continue;
        }
        seen.insert(f.name.clone(), file.clone());
        skills.push(IndexedSkill {
            name: f.name,
            description: f.description,
            tier: d.tier,
            dir: sub.to_string_lossy().into_owned(),
            display_name,
            sha256: noeta_core::canonical::sha256_hex(&bytes),
            version: f.version,
            priority: f.priority,
            disable_model_invocation: f.disable_model_invocation,
            user_invocable: f.user_invocable,
            argument_hint: f.argument_hint,
            allowed_tools: f.allowed_tools,
            scripts: scripts(&sub),
            metadata: f.metadata,
        });
    }
}

/// Indexes every mounted tier directory; a higher tier shadows a lower one's skill of the same
/// name (the shadowed one is skipped with the reason).
pub(crate) fn build(dirs: Vec<TierDir>) -> Index {
    let mut index = Index::default();
    for d in &dirs {
        if d.state != DirState::Mounted {
            continue;
        }
        let mut found = Vec::new();
        scan(d, &mut found, &mut index.skipped);
        for skill in found {
            if let Some(lower) = index.skills.remove(&skill.name) {
                index.skipped.push(Skipped {
                    tier: lower.tier,
                    path: Path::new(&lower.dir).join(SKILL_FILE),
                    name: Some(lower.name.clone()),
                    reason: format!(
                        "shadowed by the {} tier's `{}` at `{}`",
                        skill.tier.as_str(),
                        skill.name,
                        Path::new(&skill.dir).join(SKILL_FILE).display()
                    ),
                    shadowed: true,
                });
            }
            index.skills.insert(skill.name.clone(), skill);
        }
    }
    index
        .skipped
        .sort_by(|a, b| (a.tier, &a.path).cmp(&(b.tier, &b.path)));
    index.dirs = dirs;
    index
}
