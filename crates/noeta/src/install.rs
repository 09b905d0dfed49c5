//! Installing plugins (`noeta plugin add|list|remove|update`, `noeta plugin marketplace add`):
//! copying a noeta plugin or a Claude Code plugin into `~/.noeta/plugins/<name>` (or, for a
//! project, the workspace's `.noeta/plugins/<name>`), with a record of where it came from —
//! and running nothing in it.
//!
//! A source is `<git-url>@<commit>` (any URL `git` reads, `file://` included; the commit is
//! required and checked out detached), a local directory or manifest file, or
//! `<plugin>@<marketplace>` — an entry of a Claude Code `marketplace.json` added with
//! [`add_marketplace`], which is only read. Git runs with the user's and the system's
//! configuration ignored and hooks, templates, submodules, LFS filters and credential helpers
//! off, so fetching a plugin starts no program of the plugin's. The records live beside the
//! plugins, in `plugin-installs.json` (and `marketplaces.json` with the marketplaces'
//! checkouts under `marketplaces/`), outside any plugin's directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::conventions::HostPaths;

/// Where plugins go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `~/.noeta/plugins`.
    User,
    /// The workspace's `.noeta/plugins` (loaded only once the workspace is trusted).
    Project,
}

/// One installed plugin, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Installed {
    /// Its name (its directory under the plugins directory).
    pub name: String,
    /// The source as given.
    pub source: String,
    /// The git URL, for a git source (a marketplace entry's too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The full commit hash checked out, for a git source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The marketplace, for a marketplace entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marketplace: Option<String>,
    /// The version its manifest or `plugin.json` gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// What kind of plugin: `noeta` or `claude-code`.
    pub kind: String,
    /// SHA-256 over its files (sorted relative paths and contents): what was installed.
    pub tree: String,
}

/// One added marketplace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Marketplace {
    /// The `name` inside its `marketplace.json`.
    pub name: String,
    /// The source as given.
    pub source: String,
    /// The full commit hash, for a git source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Its checkout (under `~/.noeta/marketplaces/`).
    pub dir: PathBuf,
}

/// Why an install, a removal or an update did not happen; the message names the source, the
/// plugin or the file at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InstallError(pub String);

fn fail<T>(message: impl Into<String>) -> Result<T, InstallError> {
    Err(InstallError(message.into()))
}

/// A source, read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Git { url: String, commit: String },
    Path(PathBuf),
    Entry { plugin: String, marketplace: String },
}

/// Whether `text` is a commit: 7 to 40 hex digits.
fn is_commit(text: &str) -> bool {
    (7..=40).contains(&text.len()) && text.chars().all(|c| c.is_ascii_hexdigit())
}

/// Whether `text` reads as a git URL (not a local path).
fn is_git_url(text: &str) -> bool {
    text.contains("://") || text.starts_with("git@") || text.ends_with(".git")
}

fn parse_source(text: &str, workspace: &Path) -> Result<Source, InstallError> {
    let text = text.trim();
    let local = |p: &str| {
        let path = PathBuf::from(p);
        if path.is_absolute() {
            path
        } else {
            workspace.join(path)
        }
    };
    if let Some((left, right)) = text.rsplit_once('@') {
        if is_git_url(left) {
            if !is_commit(right) {
                return fail(format!(
                    "`{text}`: `{right}` is not a commit (7 to 40 hex digits); a git source \
                     names the commit to install, as `<url>@<commit>`"
                ));
            }
            return Ok(Source::Git {
                url: left.to_owned(),
                commit: right.to_owned(),
            });
        }
        if !left.contains('/') && !left.is_empty() && !local(text).exists() {
            return Ok(Source::Entry {
                plugin: left.to_owned(),
                marketplace: right.to_owned(),
            });
        }
    }
    if is_git_url(text) {
        return fail(format!(
            "`{text}`: a git source names the commit to install: `{text}@<commit>`"
        ));
    }
    let path = local(text);
    if !path.exists() {
        return fail(format!(
            "`{text}`: no such file or directory, and not `<git-url>@<commit>` or \
             `<plugin>@<marketplace>`"
        ));
    }
    Ok(Source::Path(path))
}

/// The plugins directory of `scope`.
fn plugins_dir(paths: &HostPaths, scope: Scope) -> Result<PathBuf, InstallError> {
    match scope {
        Scope::User => paths.user_plugin_dir().map_or_else(
            || fail("no home directory ($HOME is unset): cannot install into ~/.noeta/plugins"),
            Ok,
        ),
        Scope::Project => Ok(paths.workspace_plugin_dir()),
    }
}

/// The install records of `scope`: `<plugins dir>/../plugin-installs.json`.
fn records_file(paths: &HostPaths, scope: Scope) -> Result<PathBuf, InstallError> {
    let dir = plugins_dir(paths, scope)?;
    Ok(dir
        .parent()
        .map_or_else(|| dir.clone(), Path::to_owned)
        .join("plugin-installs.json"))
}

/// The most bytes a marketplace listing or an install record may hold.
const MAX_RECORD_BYTES: u64 = 16 * 1024 * 1024;

fn read_json_map<T: for<'de> Deserialize<'de>>(
    file: &Path,
) -> Result<BTreeMap<String, T>, InstallError> {
    match noeta_core::files::read_text(file, MAX_RECORD_BYTES) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            InstallError(format!(
                "{}: not a record this version reads: {e}",
                file.display()
            ))
        }),
        Err(e) if e.is_not_found() => Ok(BTreeMap::new()),
        Err(e) => fail(e.to_string()),
    }
}

fn write_json_map<T: Serialize>(
    file: &Path,
    map: &BTreeMap<String, T>,
) -> Result<(), InstallError> {
    let text = serde_json::to_string_pretty(map)
        .map_err(|e| InstallError(format!("cannot write {}: {e}", file.display())))?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| InstallError(format!("cannot create {}: {e}", dir.display())))?;
    }
    let fresh = file.with_extension("json.new");
    std::fs::write(&fresh, format!("{text}\n"))
        .and_then(|()| std::fs::rename(&fresh, file))
        .map_err(|e| InstallError(format!("cannot write {}: {e}", file.display())))
}

/// Runs `git` with the user's and the system's configuration ignored and everything that
/// could start a program of the repository's switched off; its standard output, trimmed.
fn git(args: &[&str], cwd: Option<&Path>) -> Result<String, InstallError> {
    let mut command = Command::new("git");
    command
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "credential.helper=",
            "-c",
            "filter.lfs.smudge=",
            "-c",
            "filter.lfs.process=",
            "-c",
            "filter.lfs.required=false",
            "-c",
            "submodule.recurse=false",
            "-c",
            "protocol.file.allow=always",
            "-c",
            "advice.detachedHead=false",
        ])
        .args(args);
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let out = command
        .output()
        .map_err(|e| InstallError(format!("cannot run `git` (is it installed?): {e}")))?;
    if !out.status.success() {
        return fail(format!(
            "`git {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Clones `url` into `into` and checks `commit` out detached (no hooks, no templates, no
/// submodules); the full commit hash.
fn fetch(url: &str, commit: &str, into: &Path) -> Result<String, InstallError> {
    let target = into.display().to_string();
    git(
        &[
            "clone",
            "--quiet",
            "--no-checkout",
            "--template=",
            "--no-recurse-submodules",
            url,
            &target,
        ],
        None,
    )
    .map_err(|e| InstallError(format!("cannot fetch {url}: {}", e.0)))?;
    let full = git(
        &["rev-parse", "--verify", &format!("{commit}^{{commit}}")],
        Some(into),
    )
    .map_err(|_| InstallError(format!("{url} has no commit `{commit}`")))?;
    git(&["checkout", "--quiet", "--detach", &full], Some(into))?;
    Ok(full)
}

/// Copies the tree at `from` into `to` (a new directory), leaving `.git` out. A symbolic link
/// to a regular file inside the tree is installed as a copy of that file (published plugin
/// repositories carry such links, `CLAUDE.md -> AGENTS.md`); a link that leads out of the tree,
/// to a directory or a special file, or that cannot be followed (a loop, a dangling link) is
/// refused, naming it: a plugin is installed from its own files only.
fn copy_tree(from: &Path, to: &Path) -> Result<(), InstallError> {
    let root = std::fs::canonicalize(from)
        .map_err(|e| InstallError(format!("{}: {e}", from.display())))?;
    copy_within(&root, from, to)
}

fn copy_within(root: &Path, from: &Path, to: &Path) -> Result<(), InstallError> {
    let io = |what: &Path, e: std::io::Error| InstallError(format!("{}: {e}", what.display()));
    std::fs::create_dir_all(to).map_err(|e| io(to, e))?;
    let mut entries: Vec<_> = std::fs::read_dir(from)
        .map_err(|e| io(from, e))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let source = entry.path();
        let kind = entry.file_type().map_err(|e| io(&source, e))?;
        let target = to.join(&name);
        if kind.is_symlink() {
            let linked = linked_file(root, &source)?;
            std::fs::copy(&linked, &target).map_err(|e| io(&source, e))?;
        } else if kind.is_dir() {
            copy_within(root, &source, &target)?;
        } else {
            std::fs::copy(&source, &target).map_err(|e| io(&source, e))?;
        }
    }
    Ok(())
}

/// The regular file inside `root` (canonical) the symbolic link `link` leads to, or why the
/// link is refused.
fn linked_file(root: &Path, link: &Path) -> Result<PathBuf, InstallError> {
    let refuse = |why: String| {
        InstallError(format!(
            "{}: a symbolic link {why}; a plugin is installed from its own files only (a link to a file inside the plugin is installed as that file)",
            link.display()
        ))
    };
    let real = std::fs::canonicalize(link)
        .map_err(|e| refuse(format!("that cannot be followed ({e})")))?;
    if !real.starts_with(root) {
        return Err(refuse(format!(
            "to `{}`, outside the plugin",
            real.display()
        )));
    }
    let meta =
        std::fs::metadata(&real).map_err(|e| refuse(format!("that cannot be read ({e})")))?;
    if !meta.is_file() {
        return Err(refuse(format!(
            "to `{}`, which is not a regular file",
            real.display()
        )));
    }
    Ok(real)
}

/// SHA-256 over the files under `dir` ([`noeta_core::canonical::tree_sha256`]): the version
/// an on-disk plugin is pinned by.
///
/// # Errors
/// A file under `dir` cannot be read.
pub fn tree_hash(dir: &Path) -> Result<String, InstallError> {
    noeta_core::canonical::tree_sha256(dir)
        .map_err(|e| InstallError(format!("{}: {e}", dir.display())))
}

/// A plugin directory's name, version and kind: its `noeta-plugin.toml`'s, else its
/// `.claude-plugin/plugin.json`'s, else `fallback` (a Claude Code plugin in the bare layout).
fn identify(dir: &Path, fallback: &str) -> Result<(String, Option<String>, String), InstallError> {
    let manifest = dir.join(noeta_core::MANIFEST_FILE);
    if manifest.is_file() {
        let text =
            noeta_core::files::read_text(&manifest, noeta_core::manifest::MAX_MANIFEST_BYTES)
                .map_err(|e| InstallError(e.to_string()))?;
        let table: toml::Table = toml::from_str(&text)
            .map_err(|e| InstallError(format!("{}: not valid TOML: {e}", manifest.display())))?;
        let text_of = |k: &str| {
            table
                .get(k)
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
        };
        let Some(name) = text_of("name") else {
            return fail(format!("{}: no `name`", manifest.display()));
        };
        return Ok((name, text_of("version"), "noeta".to_owned()));
    }
    if crate::claude_plugins::is_claude_plugin(dir) {
        let file = dir.join(".claude-plugin").join("plugin.json");
        let json: Value =
            match noeta_core::files::read_text(&file, noeta_core::manifest::MAX_MANIFEST_BYTES) {
                Ok(text) => serde_json::from_str(&text).map_err(|e| {
                    InstallError(format!("{}: not valid JSON: {e}", file.display()))
                })?,
                Err(e) if e.is_not_found() => Value::Null,
                Err(e) => return fail(e.to_string()),
            };
        let text_of = |k: &str| json.get(k).and_then(Value::as_str).map(str::to_owned);
        let name = text_of("name").unwrap_or_else(|| fallback.to_owned());
        return Ok((name, text_of("version"), "claude-code".to_owned()));
    }
    fail(format!(
        "{} holds no plugin: no `noeta-plugin.toml`, no `.claude-plugin/plugin.json` and no \
         Claude Code layout (skills/, agents/, commands/, hooks/hooks.json, .mcp.json)",
        dir.display()
    ))
}

/// Whether `name` can be a plugin's directory name.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The last path segment of a URL or path, without `.git`.
fn last_segment(text: &str) -> String {
    text.trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or(text)
        .trim_end_matches(".git")
        .to_owned()
}

/// A scratch directory beside `dir` (on the same filesystem, so the finished plugin is moved
/// in at once), removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn beside(dir: &Path, what: &str) -> Result<Self, InstallError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| InstallError(format!("cannot create {}: {e}", dir.display())))?;
        let path = dir.join(format!(".{what}.{}.partial", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        Ok(Self(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Installs `source` into `scope`'s plugins directory, running nothing in it; the record.
///
/// # Errors
/// A source that cannot be read or fetched, a directory that holds no plugin, a name already
/// installed (see [`update`]).
pub fn add(paths: &HostPaths, source: &str, scope: Scope) -> Result<Installed, InstallError> {
    let parsed = parse_source(source, &paths.workspace)?;
    let dir = plugins_dir(paths, scope)?;
    let scratch = Scratch::beside(&dir, "install")?;
    let staged = scratch.0.join("plugin");
    let Fetched {
        url,
        commit,
        marketplace,
        fallback,
    } = fetch_into(paths, &parsed, &staged)?;
    let (name, version, kind) = identify(&staged, &fallback)?;
    if !valid_name(&name) {
        return fail(format!(
            "`{name}` (from {source}) cannot be a plugin's directory name (letters, digits, `-`, `_`, `.`)"
        ));
    }
    let target = dir.join(&name);
    let records_file = records_file(paths, scope)?;
    let mut records: BTreeMap<String, Installed> = read_json_map(&records_file)?;
    if target.exists() || records.contains_key(&name) {
        return fail(format!(
            "a plugin named `{name}` is already installed at {}: `noeta plugin update {name} \
             <commit>` changes it, `noeta plugin remove {name}` takes it out",
            target.display()
        ));
    }
    let tree = tree_hash(&staged)?;
    std::fs::rename(&staged, &target).map_err(|e| {
        InstallError(format!(
            "cannot move the plugin to {}: {e}",
            target.display()
        ))
    })?;
    let installed = Installed {
        name: name.clone(),
        source: source.trim().to_owned(),
        url,
        commit,
        marketplace,
        version,
        kind,
        tree,
    };
    records.insert(name, installed.clone());
    write_json_map(&records_file, &records)?;
    Ok(installed)
}

/// Where a fetched plugin came from.
struct Fetched {
    url: Option<String>,
    commit: Option<String>,
    marketplace: Option<String>,
    /// The name for a plugin that gives none (a Claude Code plugin in the bare layout).
    fallback: String,
}

fn fetched(
    url: Option<String>,
    commit: Option<String>,
    marketplace: Option<String>,
    fallback: String,
) -> Result<Fetched, InstallError> {
    Ok(Fetched {
        url,
        commit,
        marketplace,
        fallback,
    })
}

/// Puts the plugin `source` names at `staged`.
fn fetch_into(paths: &HostPaths, source: &Source, staged: &Path) -> Result<Fetched, InstallError> {
    match source {
        Source::Git { url, commit } => {
            let checkout = staged.with_extension("git");
            let full = fetch(url, commit, &checkout)?;
            copy_tree(&checkout, staged)?;
            let _ = std::fs::remove_dir_all(&checkout);
            fetched(Some(url.clone()), Some(full), None, last_segment(url))
        }
        Source::Path(path) if path.is_file() => {
            let is_manifest = path.extension().is_some_and(|e| e == "toml");
            if !is_manifest {
                return fail(format!(
                    "{}: a plugin file is a noeta manifest (`.toml`); a plugin with other files \
                     is installed from its directory",
                    path.display()
                ));
            }
            std::fs::create_dir_all(staged)
                .map_err(|e| InstallError(format!("{}: {e}", staged.display())))?;
            std::fs::copy(path, staged.join(noeta_core::MANIFEST_FILE))
                .map_err(|e| InstallError(format!("{}: {e}", path.display())))?;
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            fetched(None, None, None, stem)
        }
        Source::Path(path) => {
            copy_tree(path, staged)?;
            fetched(None, None, None, last_segment(&path.display().to_string()))
        }
        Source::Entry {
            plugin,
            marketplace,
        } => {
            let markets = marketplaces(paths)?;
            let Some(market) = markets.get(marketplace) else {
                let known: Vec<&str> = markets.keys().map(String::as_str).collect();
                return fail(format!(
                    "no marketplace `{marketplace}` is added (known: {}); add it with `noeta \
                     plugin marketplace add <path-or-git-url>@<commit>`",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ));
            };
            let file = market.dir.join(".claude-plugin").join("marketplace.json");
            let listing = read_marketplace(&file)?;
            let entries = listing.get("plugins").and_then(Value::as_array);
            let Some(entry) = entries
                .into_iter()
                .flatten()
                .find(|e| e.get("name").and_then(Value::as_str) == Some(plugin))
            else {
                return fail(format!("{}: no plugin `{plugin}`", file.display()));
            };
            let at = format!("{} plugin `{plugin}`", file.display());
            match entry.get("source") {
                Some(Value::String(relative)) => {
                    let root = market
                        .dir
                        .canonicalize()
                        .unwrap_or_else(|_| market.dir.clone());
                    let dir = root.join(relative.trim_start_matches("./"));
                    let real = dir.canonicalize().map_err(|_| {
                        InstallError(format!(
                            "{at}: `source` `{relative}` is not in the marketplace"
                        ))
                    })?;
                    if !real.starts_with(&root) || !real.is_dir() {
                        return fail(format!(
                            "{at}: `source` `{relative}` is not a directory of the marketplace"
                        ));
                    }
                    copy_tree(&real, staged)?;
                    fetched(
                        None,
                        market.commit.clone(),
                        Some(marketplace.clone()),
                        plugin.clone(),
                    )
                }
                Some(Value::Object(spec)) => {
                    let text = |k: &str| spec.get(k).and_then(Value::as_str);
                    let url = match (text("source"), text("url"), text("repo")) {
                        (_, Some(url), _) => url.to_owned(),
                        (Some("github"), None, Some(repo)) => {
                            format!("https://github.com/{repo}.git")
                        }
                        _ => return fail(format!("{at}: `source` names no git `url` or `repo`")),
                    };
                    let Some(commit) = text("sha").or_else(|| text("ref").filter(|r| is_commit(r)))
                    else {
                        return fail(format!(
                            "{at}: its git source names no commit (`sha`); noeta installs a git \
                             source only at a commit"
                        ));
                    };
                    let checkout = staged.with_extension("git");
                    let full = fetch(&url, commit, &checkout)?;
                    let sub = text("path").unwrap_or("");
                    copy_tree(&checkout.join(sub), staged)?;
                    let _ = std::fs::remove_dir_all(&checkout);
                    fetched(
                        Some(url),
                        Some(full),
                        Some(marketplace.clone()),
                        plugin.clone(),
                    )
                }
                _ => fail(format!(
                    "{at}: `source` must be a relative path or a git source"
                )),
            }
        }
    }
}

fn read_marketplace(file: &Path) -> Result<Value, InstallError> {
    let text = noeta_core::files::read_text(file, MAX_RECORD_BYTES)
        .map_err(|e| InstallError(e.to_string()))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| InstallError(format!("{}: not valid JSON: {e}", file.display())))?;
    if !value.get("plugins").is_some_and(Value::is_array) {
        return fail(format!("{}: `plugins` must be a list", file.display()));
    }
    Ok(value)
}

/// The installed plugins of `scope`, by name.
///
/// # Errors
/// The record file cannot be read.
pub fn list(paths: &HostPaths, scope: Scope) -> Result<BTreeMap<String, Installed>, InstallError> {
    read_json_map(&records_file(paths, scope)?)
}

/// Takes plugin `name` out of `scope`: its directory and its record.
///
/// # Errors
/// No such installed plugin.
pub fn remove(paths: &HostPaths, name: &str, scope: Scope) -> Result<Installed, InstallError> {
    let file = records_file(paths, scope)?;
    let mut records: BTreeMap<String, Installed> = read_json_map(&file)?;
    let Some(record) = records.remove(name) else {
        let known: Vec<&str> = records.keys().map(String::as_str).collect();
        return fail(format!(
            "no plugin `{name}` was installed with `noeta plugin add` (installed: {})",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ));
    };
    let dir = plugins_dir(paths, scope)?.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| InstallError(format!("cannot remove {}: {e}", dir.display())))?;
    }
    write_json_map(&file, &records)?;
    Ok(record)
}

/// Moves git-installed plugin `name` of `scope` to `commit` (fetched as [`add`] does); the
/// new record.
///
/// # Errors
/// No such plugin, one not installed from git, a commit the repository does not have.
pub fn update(
    paths: &HostPaths,
    name: &str,
    commit: &str,
    scope: Scope,
) -> Result<Installed, InstallError> {
    let file = records_file(paths, scope)?;
    let mut records: BTreeMap<String, Installed> = read_json_map(&file)?;
    let Some(record) = records.get(name).cloned() else {
        return fail(format!(
            "no plugin `{name}` was installed with `noeta plugin add`"
        ));
    };
    let Some(url) = record.url.clone() else {
        return fail(format!(
            "`{name}` was installed from {}, not from git: remove it and add it again",
            record.source
        ));
    };
    if !is_commit(commit) {
        return fail(format!("`{commit}` is not a commit (7 to 40 hex digits)"));
    }
    let dir = plugins_dir(paths, scope)?;
    let scratch = Scratch::beside(&dir, "update")?;
    let staged = scratch.0.join("plugin");
    let checkout = scratch.0.join("checkout");
    let full = fetch(&url, commit, &checkout)?;
    copy_tree(&checkout, &staged)?;
    let (found, version, kind) = identify(&staged, name)?;
    if found != name {
        return fail(format!(
            "{url} at {commit} names its plugin `{found}`, not `{name}`; add it as a plugin of \
             its own"
        ));
    }
    let target = dir.join(name);
    let old = scratch.0.join("old");
    if target.exists() {
        std::fs::rename(&target, &old)
            .map_err(|e| InstallError(format!("cannot replace {}: {e}", target.display())))?;
    }
    std::fs::rename(&staged, &target).map_err(|e| {
        InstallError(format!(
            "cannot move the plugin to {}: {e}",
            target.display()
        ))
    })?;
    let updated = Installed {
        source: format!("{url}@{commit}"),
        commit: Some(full),
        version,
        kind,
        tree: tree_hash(&target)?,
        ..record
    };
    records.insert(name.to_owned(), updated.clone());
    write_json_map(&file, &records)?;
    Ok(updated)
}

/// The added marketplaces, by name.
///
/// # Errors
/// The record file cannot be read, or there is no home directory.
pub fn marketplaces(paths: &HostPaths) -> Result<BTreeMap<String, Marketplace>, InstallError> {
    read_json_map(&marketplaces_file(paths)?)
}

fn marketplaces_file(paths: &HostPaths) -> Result<PathBuf, InstallError> {
    paths.user_dir().map_or_else(
        || fail("no home directory ($HOME is unset): cannot keep marketplaces"),
        |d| Ok(d.join("marketplaces.json")),
    )
}

/// Adds the marketplace at `source` (`<path-or-git-url>@<commit>`, or a local directory):
/// a checkout under `~/.noeta/marketplaces/<name>` that is only read.
///
/// # Errors
/// A source that cannot be read, no `.claude-plugin/marketplace.json`, a name taken.
pub fn add_marketplace(paths: &HostPaths, source: &str) -> Result<Marketplace, InstallError> {
    let Some(home) = paths.user_dir() else {
        return fail("no home directory ($HOME is unset): cannot keep marketplaces");
    };
    let root = home.join("marketplaces");
    let scratch = Scratch::beside(&root, "marketplace")?;
    let staged = scratch.0.join("market");
    let commit = match parse_source(source, &paths.workspace)? {
        Source::Git { url, commit } => {
            let checkout = scratch.0.join("checkout");
            let full = fetch(&url, &commit, &checkout)?;
            copy_tree(&checkout, &staged)?;
            Some(full)
        }
        Source::Path(path) if path.is_dir() => {
            copy_tree(&path, &staged)?;
            None
        }
        _ => {
            return fail(format!(
                "`{source}`: a marketplace is a directory or `<git-url>@<commit>`"
            ));
        }
    };
    let file = staged.join(".claude-plugin").join("marketplace.json");
    let listing = read_marketplace(&file).map_err(|e| {
        InstallError(format!(
            "`{source}` holds no Claude Code marketplace (.claude-plugin/marketplace.json): {}",
            e.0
        ))
    })?;
    let Some(name) = listing
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return fail(format!("{source}: its marketplace.json has no `name`"));
    };
    if !valid_name(&name) {
        return fail(format!("{source}: `{name}` cannot be a marketplace's name"));
    }
    let mut all = marketplaces(paths)?;
    if all.contains_key(&name) {
        return fail(format!("a marketplace named `{name}` is already added"));
    }
    let dir = root.join(&name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&staged, &dir).map_err(|e| {
        InstallError(format!(
            "cannot move the marketplace to {}: {e}",
            dir.display()
        ))
    })?;
    let market = Marketplace {
        name: name.clone(),
        source: source.trim().to_owned(),
        commit,
        dir,
    };
    all.insert(name, market.clone());
    write_json_map(&marketplaces_file(paths)?, &all)?;
    Ok(market)
}
