//! The trust store: which workspaces (and workspace plugin directories) may make noeta do
//! things, pinned to what they held when they were trusted.
//!
//! A JSON file (by default `~/.noeta/trust.json`): `{"trusted": [{"path": …, "pins": {file:
//! sha256}}]}`. Paths are canonicalised on write and on compare: `~` expanded, made absolute,
//! symlinks resolved. A missing store trusts nothing; a malformed one is an error, never read
//! as empty.
//!
//! Trust is pinned to content, as direnv's `allow` is: granting records the SHA-256 of every
//! file through which a project can make noeta start processes or loosen what it asks
//! ([`pins`]: its settings, `.mcp.json`, hook files, each of its plugins whole, its agent files
//! and commands). When any of them changes — the model, a sandboxed command or a `git pull`
//! wrote it — the workspace is [`WorkspaceTrust::Changed`] and trusted no more until the user
//! trusts it again. An entry written before content was pinned (a bare path) is
//! [`WorkspaceTrust::Unpinned`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The files of a project that decide what it can make noeta do, relative to the workspace:
/// its settings, MCP servers and hooks (noeta's and Claude Code's), and below.
const PINNED: [&str; 5] = [
    ".noeta/config.toml",
    ".mcp.json",
    ".noeta/hooks.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
];

/// Directories pinned whole: each of the project's plugins (`.noeta/plugins/<name>/`, one pin
/// each: manifests, hooks, MCP files, agents, commands, skills, programs), and the agent files
/// (they set plugins' parameters) and commands (their `` !`…` `` lines run).
const PINNED_TREES: [&str; 4] = [
    ".noeta/agents",
    ".claude/agents",
    ".noeta/commands",
    ".claude/commands",
];

/// What one pinned tree may hold: past either limit it pins as [`UNPINNABLE`], which never
/// matches, so such a workspace cannot be trusted rather than trusted blind.
const MAX_TREE_FILES: usize = 20_000;
const MAX_TREE_BYTES: u64 = 64 * 1024 * 1024;

/// The most bytes of one pinned file that are hashed; a larger one pins as unreadable.
const MAX_PINNED_BYTES: u64 = 4 * 1024 * 1024;

/// The pin of what cannot be pinned (a tree over its limits): it never matches.
const UNPINNABLE: &str = "unpinnable";

/// Where the user's store lives, relative to the home directory.
pub const STORE_FILE: &str = ".noeta/trust.json";

/// The most bytes the store itself may hold.
const MAX_STORE_BYTES: u64 = 4 * 1024 * 1024;

/// How a workspace stands in the trust store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkspaceTrust {
    /// Trusted, and nothing it was trusted with changed since.
    Trusted,
    /// Never trusted.
    Untrusted,
    /// Trusted once, but these files or directories (relative to the workspace, a directory
    /// ending in `/`) changed since, appeared or went away.
    Changed(Vec<String>),
    /// Trusted by an older noeta, before content was pinned: to be trusted again.
    Unpinned,
}

impl WorkspaceTrust {
    /// Whether the workspace's files may make noeta do things now.
    pub fn is_trusted(&self) -> bool {
        matches!(self, Self::Trusted)
    }

    /// Why the workspace is not trusted, in a few words (`None` when it is).
    pub fn why_not(&self) -> Option<String> {
        match self {
            Self::Trusted => None,
            Self::Untrusted => Some("the workspace is not trusted".to_owned()),
            Self::Changed(files) => Some(format!(
                "the workspace was trusted, but {} changed since",
                files.join(", ")
            )),
            Self::Unpinned => Some(
                "the workspace was trusted by an older noeta, before trust was pinned to its files"
                    .to_owned(),
            ),
        }
    }
}

/// The SHA-256 of one file's bytes, or what stands for a file that cannot be read.
fn file_pin(path: &Path) -> Option<String> {
    match crate::files::read_bounded(path, MAX_PINNED_BYTES) {
        Ok(bytes) => Some(crate::canonical::sha256_hex(&bytes)),
        Err(err) if err.is_not_found() => None,
        Err(_) => Some("unreadable".to_owned()),
    }
}

/// One digest of everything under `dir` (not following links: a link pins as its target's
/// name; `.git` left out), or [`UNPINNABLE`] past the limits; `None` for no directory.
fn tree_pin(dir: &Path) -> Option<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>, bytes: &mut u64) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return true;
        };
        for entry in entries.flatten() {
            if out.len() >= MAX_TREE_FILES || *bytes > MAX_TREE_BYTES {
                return false;
            }
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let relative = path
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            if meta.is_dir() {
                if entry.file_name() != ".git" && !walk(root, &path, out, bytes) {
                    return false;
                }
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap_or_default();
                out.push((relative, format!("link {}", target.display())));
            } else {
                *bytes += meta.len();
                out.push((relative, file_pin(&path).unwrap_or_default()));
            }
        }
        true
    }
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let mut files = Vec::new();
    let mut bytes = 0;
    if !walk(dir, dir, &mut files, &mut bytes)
        || files.len() > MAX_TREE_FILES
        || bytes > MAX_TREE_BYTES
    {
        return Some(UNPINNABLE.to_owned());
    }
    files.sort();
    let mut all = Vec::new();
    for (relative, pin) in files {
        all.extend_from_slice(relative.as_bytes());
        all.push(0);
        all.extend_from_slice(pin.as_bytes());
        all.push(b'\n');
    }
    Some(crate::canonical::sha256_hex(&all))
}

/// What the workspace at `dir` holds now: the SHA-256 of each pinned file that exists, one
/// digest for each pinned directory that exists (its name ending in `/`): [`PINNED`], each of
/// `.noeta/plugins/*`, and [`PINNED_TREES`].
pub fn pins(dir: &Path) -> BTreeMap<String, String> {
    let mut pins = BTreeMap::new();
    for file in PINNED {
        if let Some(pin) = file_pin(&dir.join(file)) {
            pins.insert(file.to_owned(), pin);
        }
    }
    let plugins = dir.join(".noeta").join("plugins");
    let mut trees: Vec<String> = PINNED_TREES.iter().map(|t| (*t).to_owned()).collect();
    if let Ok(entries) = std::fs::read_dir(&plugins) {
        trees.extend(
            entries
                .flatten()
                .map(|e| format!(".noeta/plugins/{}", e.file_name().to_string_lossy())),
        );
    }
    for tree in trees {
        let path = dir.join(&tree);
        let pin = if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            tree_pin(&path)
        } else {
            file_pin(&path)
        };
        if let Some(pin) = pin {
            pins.insert(format!("{tree}/"), pin);
        }
    }
    pins
}

/// Errors reading or writing the trust store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// The store could not be read.
    #[error("cannot read trust store `{path}`: {source}")]
    Read {
        /// The store's path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The store is not the expected JSON.
    #[error(
        "trust store `{path}` is not valid JSON of the form {{\"trusted\": [{{\"path\": …, \"pins\": {{…}}}}]}}: {source}"
    )]
    Malformed {
        /// The store's path.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// The store could not be written.
    #[error("cannot write trust store `{path}`: {source}")]
    Write {
        /// The store's path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The directory to trust does not exist.
    #[error("cannot trust `{path}`: {source}")]
    NoSuchDirectory {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// One entry of the store's file: a bare path (written before content was pinned), or a path
/// with its pins.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum Entry {
    Pinned {
        path: PathBuf,
        pins: BTreeMap<String, String>,
    },
    Bare(PathBuf),
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    trusted: Vec<Entry>,
}

/// The loaded trust store.
#[derive(Debug, Clone, Default)]
pub struct TrustStore {
    path: PathBuf,
    home: PathBuf,
    /// Each trusted directory, canonical, with its pins (`None`: trusted before pins).
    trusted: BTreeMap<PathBuf, Option<BTreeMap<String, String>>>,
}

impl TrustStore {
    /// A store that trusts nothing and is never written (for hosts without a home directory).
    pub fn empty() -> Self {
        Self::default()
    }

    /// Loads the store at `path`; `home` expands `~` in the stored and compared paths.
    pub fn load(path: &Path, home: &Path) -> Result<Self, TrustError> {
        let mut store = Self {
            path: path.to_path_buf(),
            home: home.to_path_buf(),
            trusted: BTreeMap::new(),
        };
        let text = match crate::files::read_text(path, MAX_STORE_BYTES) {
            Ok(text) => text,
            Err(err) if err.is_not_found() => return Ok(store),
            Err(err) => {
                return Err(TrustError::Read {
                    path: path.to_path_buf(),
                    source: err.into_io(),
                });
            }
        };
        let file: TrustFile =
            serde_json::from_str(&text).map_err(|source| TrustError::Malformed {
                path: path.to_path_buf(),
                source,
            })?;
        for entry in file.trusted {
            let (dir, pins) = match entry {
                Entry::Pinned { path, pins } => (path, Some(pins)),
                Entry::Bare(path) => (path, None),
            };
            store.trusted.insert(canonical_path(&dir, home), pins);
        }
        Ok(store)
    }

    /// The user's store, `~/.noeta/trust.json` under `home` ([`STORE_FILE`]).
    pub fn of_home(home: &Path) -> Result<Self, TrustError> {
        Self::load(&home.join(STORE_FILE), home)
    }

    /// How the workspace `dir` stands in the user's store (`home`'s; without a home, or with a
    /// store that cannot be read, it is untrusted).
    pub fn workspace_of(home: Option<&Path>, dir: &Path) -> WorkspaceTrust {
        home.and_then(|home| Self::of_home(home).ok())
            .map_or(WorkspaceTrust::Untrusted, |store| store.workspace(dir))
    }

    /// The store's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The trusted directories, canonical and sorted (whether their content still matches or
    /// not: see [`TrustStore::workspace`]).
    pub fn trusted(&self) -> impl Iterator<Item = &Path> {
        self.trusted.keys().map(PathBuf::as_path)
    }

    /// How the directory `dir` stands: trusted with its pinned files unchanged, never trusted,
    /// changed since, or trusted before pins.
    pub fn workspace(&self, dir: &Path) -> WorkspaceTrust {
        let dir = canonical_path(dir, &self.home);
        match self.trusted.get(&dir) {
            None => WorkspaceTrust::Untrusted,
            Some(None) => WorkspaceTrust::Unpinned,
            Some(Some(pinned)) => {
                let now = pins(&dir);
                let changed: Vec<String> = pinned
                    .keys()
                    .chain(now.keys())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .filter(|file| {
                        pinned.get(*file) != now.get(*file)
                            || now.get(*file).is_some_and(|pin| pin == UNPINNABLE)
                    })
                    .cloned()
                    .collect();
                if changed.is_empty() {
                    WorkspaceTrust::Trusted
                } else {
                    WorkspaceTrust::Changed(changed)
                }
            }
        }
    }

    /// Whether `dir` is trusted now: the store lists it (or the workspace whose `.noeta/plugins`
    /// it is) and nothing pinned changed since.
    pub fn is_trusted(&self, dir: &Path) -> bool {
        let canonical = canonical_path(dir, &self.home);
        if self.trusted.contains_key(&canonical) {
            return self.workspace(&canonical).is_trusted();
        }
        canonical
            .strip_suffix_components(&[".noeta", "plugins"])
            .is_some_and(|ws| self.workspace(ws).is_trusted())
    }

    /// Trusts `dir` (which must exist) as it is now, pinning its files, and writes the store.
    /// Returns the canonical path stored.
    pub fn grant(&mut self, dir: &Path) -> Result<PathBuf, TrustError> {
        let expanded = expand_home(dir, &self.home);
        let metadata =
            std::fs::metadata(&expanded).map_err(|source| TrustError::NoSuchDirectory {
                path: expanded.clone(),
                source,
            })?;
        if !metadata.is_dir() {
            return Err(TrustError::NoSuchDirectory {
                path: expanded,
                source: std::io::Error::other("not a directory"),
            });
        }
        let canonical = canonical_path(dir, &self.home);
        let pinned = pins(&canonical);
        self.trusted.insert(canonical.clone(), Some(pinned));
        self.write()?;
        Ok(canonical)
    }

    /// Pins `dir` again as it is now, when it was trusted with nothing changed but what noeta
    /// itself just wrote on the user's word (`noeta mcp add --scope project`); whether it did.
    /// A workspace not trusted, or changed by something else, stays as it is.
    pub fn renew(&mut self, dir: &Path, before: &WorkspaceTrust) -> Result<bool, TrustError> {
        if !before.is_trusted() {
            return Ok(false);
        }
        self.grant(dir).map(|_| true)
    }

    /// The pins stored for `dir`, if it is trusted with pins.
    pub fn pinned(&self, dir: &Path) -> Option<&BTreeMap<String, String>> {
        self.trusted
            .get(&canonical_path(dir, &self.home))
            .and_then(Option::as_ref)
    }

    fn write(&self) -> Result<(), TrustError> {
        let file = TrustFile {
            trusted: self
                .trusted
                .iter()
                .map(|(path, pins)| match pins {
                    Some(pins) => Entry::Pinned {
                        path: path.clone(),
                        pins: pins.clone(),
                    },
                    None => Entry::Bare(path.clone()),
                })
                .collect(),
        };
        let write = |source| TrustError::Write {
            path: self.path.clone(),
            source,
        };
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent).map_err(write)?;
        }
        let mut text =
            serde_json::to_string_pretty(&file).map_err(|source| TrustError::Malformed {
                path: self.path.clone(),
                source,
            })?;
        text.push('\n');
        // Written whole or not at all: a crash never leaves half a store.
        let staged = self.path.with_extension("json.tmp");
        std::fs::write(&staged, text).map_err(write)?;
        std::fs::rename(&staged, &self.path).map_err(write)
    }
}

trait StripComponents {
    fn strip_suffix_components(&self, suffix: &[&str]) -> Option<&Path>;
}

impl StripComponents for Path {
    fn strip_suffix_components(&self, suffix: &[&str]) -> Option<&Path> {
        let mut path = self;
        for part in suffix.iter().rev() {
            if path.file_name()? != *part {
                return None;
            }
            path = path.parent()?;
        }
        Some(path)
    }
}

fn expand_home(path: &Path, home: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => home.join(rest),
        Err(_) => path.to_path_buf(),
    }
}

/// `~` expanded, made absolute, symlinks resolved where the path exists, `.` and `..` removed otherwise.
pub fn canonical_path(path: &Path, home: &Path) -> PathBuf {
    let expanded = expand_home(path, home);
    let absolute = if expanded.is_absolute() {
        expanded
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(&expanded))
            .unwrap_or(expanded)
    };
    if let Ok(real) = std::fs::canonicalize(&absolute) {
        return real;
    }
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
