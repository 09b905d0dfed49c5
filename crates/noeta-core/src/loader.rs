//! Loading: from linked crates and plugin directories to one [`PluginSet`], without running plugin code.
//!
//! Sources are the linked built-ins, linked third-party crates, explicit
//! manifest paths, the user plugin directory and trusted workspace plugin
//! directories. Gates apply in this order: `disabled_builtins` and the
//! `enabled` allow-list (before anything is read further), name uniqueness
//! and shadowing, then `requires-noeta`. The set is keyed by plugin name, so
//! discovery order never changes what is loaded or how it merges.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use semver::Version;
use serde_json::Value;

use crate::manifest::{MANIFEST_FILE, Origin, PluginManifest, parse_manifest, read_manifest};
use crate::resolve::ResolveMemo;

mod diagnostics;
use crate::surface::SurfaceRegistry;
use crate::trust::TrustStore;
use crate::value::Resolved;
use crate::version::{RangeCheck, check_range, kernel_version};
pub use diagnostics::{LoadError, LoadProblem, LoadWarning, ProblemError};

/// What a resolver is asked to resolve.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ResolveRequest<'a> {
    /// The plugin declaring the contribution.
    pub plugin: &'a str,
    /// The surface.
    pub surface: &'a str,
    /// The contribution's name.
    pub name: &'a str,
    /// The ref string.
    pub reference: &'a str,
    /// The contribution's other keys.
    pub params: &'a BTreeMap<String, Value>,
}

impl<'a> ResolveRequest<'a> {
    /// A request for `reference`, declared by `plugin` on `surface` as `name`, with `params`
    /// (for hosts and benchmarks that resolve one contribution outside the loader).
    pub fn new(
        plugin: &'a str,
        surface: &'a str,
        name: &'a str,
        reference: &'a str,
        params: &'a BTreeMap<String, Value>,
    ) -> Self {
        Self {
            plugin,
            surface,
            name,
            reference,
            params,
        }
    }
}

/// Maps a plugin's ref strings to typed values. Each compiled plugin exposes exactly one.
pub trait Resolver: Send + Sync {
    /// The value behind `request.reference`, or why there is none.
    fn resolve(&self, request: &ResolveRequest<'_>) -> Result<Resolved, String>;
}

type Make = Box<dyn Fn(&ResolveRequest<'_>) -> Result<Resolved, String> + Send + Sync>;

/// A resolver backed by a table of ref strings, the usual way a plugin crate writes one.
#[derive(Default)]
pub struct RefTable {
    entries: BTreeMap<String, Make>,
}

impl RefTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a value builder under `reference`.
    pub fn with(
        mut self,
        reference: &str,
        make: impl Fn(&ResolveRequest<'_>) -> Result<Resolved, String> + Send + Sync + 'static,
    ) -> Self {
        self.entries.insert(reference.to_owned(), Box::new(make));
        self
    }

    /// The refs this table knows, sorted.
    pub fn refs(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }
}

impl Resolver for RefTable {
    fn resolve(&self, request: &ResolveRequest<'_>) -> Result<Resolved, String> {
        match self.entries.get(request.reference) {
            Some(make) => make(request),
            None => {
                let known: Vec<&str> = self.refs().collect();
                Err(format!(
                    "this plugin's resolver knows no ref `{}` (known: {})",
                    request.reference,
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ))
            }
        }
    }
}

/// A plugin compiled into the host: its manifest text and its resolver.
#[derive(Clone)]
pub struct LinkedPlugin {
    crate_name: &'static str,
    manifest: &'static str,
    resolver: Arc<dyn Resolver>,
    builtin: bool,
}

impl fmt::Debug for LinkedPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkedPlugin")
            .field("crate_name", &self.crate_name)
            .field("builtin", &self.builtin)
            .finish_non_exhaustive()
    }
}

impl LinkedPlugin {
    /// A third-party crate's plugin: its crate name (for messages), manifest text and resolver.
    pub fn new(
        crate_name: &'static str,
        manifest: &'static str,
        resolver: impl Resolver + 'static,
    ) -> Self {
        Self {
            crate_name,
            manifest,
            resolver: Arc::new(resolver),
            builtin: false,
        }
    }

    /// Marks the plugin as a built-in (only the host assembly does this).
    pub fn as_builtin(mut self) -> Self {
        self.builtin = true;
        self
    }

    /// The crate's name.
    pub fn crate_name(&self) -> &'static str {
        self.crate_name
    }

    /// The embedded manifest text.
    pub fn manifest_text(&self) -> &'static str {
        self.manifest
    }

    /// Whether this is a built-in.
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }
}

/// Where plugins are looked for.
#[derive(Debug, Clone)]
pub enum PluginSource {
    /// A plugin compiled into the host.
    Linked(LinkedPlugin),
    /// A manifest file, a plugin directory or a directory of plugin directories, named explicitly.
    Path(PathBuf),
    /// The user plugin directory (`~/.noeta/plugins`); always loaded when it exists.
    UserDir(PathBuf),
    /// A workspace plugin directory (`<workspace>/.noeta/plugins`); loaded only when trusted.
    WorkspaceDir(PathBuf),
}

/// What kind of source a loaded plugin came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceKind {
    /// A linked built-in crate.
    Builtin,
    /// A linked third-party crate.
    Crate,
    /// An explicitly named path.
    Path,
    /// The user plugin directory.
    User,
    /// A trusted workspace plugin directory.
    Workspace,
}

impl SourceKind {
    /// The spelling used in listings.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Builtin => "builtin",
            SourceKind::Crate => "crate",
            SourceKind::Path => "path",
            SourceKind::User => "user",
            SourceKind::Workspace => "workspace",
        }
    }

    /// Whether the plugin is compiled in.
    pub fn is_linked(self) -> bool {
        matches!(self, SourceKind::Builtin | SourceKind::Crate)
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Gates and context for [`load_plugins`].
#[derive(Clone)]
pub struct LoadOptions {
    /// The surfaces manifests are checked against.
    pub registry: SurfaceRegistry,
    /// When set, only these third-party plugins load (built-ins are governed by `disabled_builtins`).
    pub enabled: Option<BTreeSet<String>>,
    /// Third-party plugins that do not load, whatever `enabled` says (settings that switch a
    /// plugin off): the deny list beside the allow list, so one load applies both.
    pub disabled: BTreeSet<String>,
    /// Built-ins to drop.
    pub disabled_builtins: BTreeSet<String>,
    /// Built-ins that cannot be dropped, and why.
    pub non_removable: BTreeMap<String, String>,
    /// Refuse plugins whose `requires-noeta` range excludes this kernel.
    pub strict: bool,
    /// The trust store consulted for workspace plugin directories.
    pub trust: TrustStore,
    /// The kernel version ranges are checked against.
    pub kernel_version: Version,
    /// The host's runner of plugin programs: it gives each on-disk plugin with an
    /// `[extension]` table its resolver. Without one, such a plugin's refs stay unresolvable.
    pub command_plugins: Option<Arc<dyn crate::plugin_command::CommandPlugins>>,
}

impl fmt::Debug for LoadOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadOptions")
            .field("enabled", &self.enabled)
            .field("disabled", &self.disabled)
            .field("disabled_builtins", &self.disabled_builtins)
            .field("strict", &self.strict)
            .field("kernel_version", &self.kernel_version)
            .field("command_plugins", &self.command_plugins.is_some())
            .finish_non_exhaustive()
    }
}

impl LoadOptions {
    /// Options over `registry` with no gates, an empty trust store and this kernel's version.
    pub fn new(registry: SurfaceRegistry) -> Self {
        Self {
            registry,
            enabled: None,
            disabled: BTreeSet::new(),
            disabled_builtins: BTreeSet::new(),
            non_removable: BTreeMap::new(),
            strict: false,
            trust: TrustStore::empty(),
            kernel_version: kernel_version(),
            command_plugins: None,
        }
    }
}

/// A loaded plugin: its manifest, where it came from, and its resolver when compiled in.
#[derive(Clone)]
pub struct LoadedPlugin {
    /// The parsed manifest.
    pub manifest: PluginManifest,
    /// Where it came from.
    pub origin: Origin,
    /// What kind of source.
    pub source: SourceKind,
    pub(crate) resolver: Option<Arc<dyn Resolver>>,
}

impl fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("name", &self.manifest.name)
            .field("origin", &self.origin)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl LoadedPlugin {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// Whether a compiled resolver is attached.
    pub fn has_resolver(&self) -> bool {
        self.resolver.is_some()
    }
}

/// Every loaded plugin, the problems and warnings met on the way, and the resolution memo.
///
/// Its methods live with what they do: loading and reading the set here, merging it in
/// `merge.rs` (`merged`), resolving contributions through the memo in `resolve.rs`
/// (`resolve_contribution`, `resolve_for`, `resolve_everything`).
pub struct PluginSet {
    pub(crate) registry: SurfaceRegistry,
    pub(crate) plugins: BTreeMap<String, LoadedPlugin>,
    problems: Vec<LoadProblem>,
    warnings: Vec<LoadWarning>,
    disabled_builtins: BTreeSet<String>,
    pub(crate) memo: Mutex<ResolveMemo>,
}

impl fmt::Debug for PluginSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginSet")
            .field("plugins", &self.plugins.keys().collect::<Vec<_>>())
            .field("problems", &self.problems.len())
            .field("warnings", &self.warnings.len())
            .finish_non_exhaustive()
    }
}

impl PluginSet {
    /// The registry the set was loaded against.
    pub fn registry(&self) -> &SurfaceRegistry {
        &self.registry
    }

    /// Loaded plugins, sorted by name.
    pub fn plugins(&self) -> impl Iterator<Item = &LoadedPlugin> {
        self.plugins.values()
    }

    /// Loaded plugin names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.plugins.keys().map(String::as_str).collect()
    }

    /// One loaded plugin.
    pub fn get(&self, name: &str) -> Option<&LoadedPlugin> {
        self.plugins.get(name)
    }

    /// Whether a plugin is loaded.
    pub fn contains(&self, name: &str) -> bool {
        self.plugins.contains_key(name)
    }

    /// Plugins that could not be loaded, sorted by origin.
    pub fn problems(&self) -> &[LoadProblem] {
        &self.problems
    }

    /// The problem recorded for a plugin name, if loading it failed.
    pub fn problem_for(&self, name: &str) -> Option<&LoadProblem> {
        self.problems
            .iter()
            .find(|p| p.plugin.as_deref() == Some(name))
    }

    /// Warnings met while loading, in a stable order.
    pub fn warnings(&self) -> &[LoadWarning] {
        &self.warnings
    }

    /// The built-ins that were disabled.
    pub fn disabled_builtins(&self) -> &BTreeSet<String> {
        &self.disabled_builtins
    }
}

struct Candidate {
    manifest: PluginManifest,
    origin: Origin,
    source: SourceKind,
    resolver: Option<Arc<dyn Resolver>>,
}

/// Loads plugins from `sources` under `options`. Runs no plugin code.
pub fn load_plugins(
    sources: &[PluginSource],
    options: &LoadOptions,
) -> Result<PluginSet, LoadError> {
    for name in &options.disabled_builtins {
        if let Some(why) = options.non_removable.get(name) {
            return Err(LoadError::NonRemovable {
                plugin: name.clone(),
                why: why.clone(),
            });
        }
    }
    let enabled = |name: &str| {
        !options.disabled.contains(name)
            && options
                .enabled
                .as_ref()
                .is_none_or(|set| set.contains(name))
    };

    let mut candidates: Vec<Candidate> = Vec::new();
    let mut problems: Vec<LoadProblem> = Vec::new();
    let mut warnings: Vec<LoadWarning> = Vec::new();
    // One manifest file reached through two sources (or a symlink) is read once.
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();

    for source in sources {
        match source {
            PluginSource::Linked(linked) => {
                let origin = Origin::Crate(linked.crate_name.to_owned());
                let manifest = parse_manifest(linked.manifest, &origin, &options.registry)
                    .map_err(|err| LoadError::LinkedManifest(Box::new(err)))?;
                let keep = if linked.builtin {
                    !options.disabled_builtins.contains(&manifest.name)
                } else {
                    enabled(&manifest.name)
                };
                if keep {
                    candidates.push(Candidate {
                        manifest,
                        origin,
                        source: if linked.builtin {
                            SourceKind::Builtin
                        } else {
                            SourceKind::Crate
                        },
                        resolver: Some(Arc::clone(&linked.resolver)),
                    });
                }
            }
            PluginSource::Path(path) => {
                let found = explicit_manifests(path);
                read_all(
                    dedupe(found, &mut seen),
                    SourceKind::Path,
                    options,
                    &enabled,
                    &mut candidates,
                    &mut problems,
                );
            }
            PluginSource::UserDir(dir) => {
                let found = scan_plugin_dir(dir);
                read_all(
                    dedupe(found, &mut seen),
                    SourceKind::User,
                    options,
                    &enabled,
                    &mut candidates,
                    &mut problems,
                );
            }
            PluginSource::WorkspaceDir(dir) => {
                if !dir.is_dir() {
                    continue;
                }
                if !options.trust.is_trusted(dir) {
                    let why = dir
                        .parent()
                        .and_then(Path::parent)
                        .map(|ws| options.trust.workspace(ws))
                        .filter(|t| !matches!(t, crate::WorkspaceTrust::Untrusted))
                        .and_then(|t| t.why_not());
                    warnings.push(LoadWarning::Untrusted {
                        dir: dir.clone(),
                        store: options.trust.path().to_path_buf(),
                        why,
                    });
                    continue;
                }
                let found = scan_plugin_dir(dir);
                read_all(
                    dedupe(found, &mut seen),
                    SourceKind::Workspace,
                    options,
                    &enabled,
                    &mut candidates,
                    &mut problems,
                );
            }
        }
    }

    let plugins = settle_names(candidates, &mut problems, &mut warnings)?;
    let plugins = check_ranges(plugins, options, &mut problems, &mut warnings);

    problems.sort_by(|a, b| (&a.plugin, &a.origin).cmp(&(&b.plugin, &b.origin)));
    warnings.sort_by_cached_key(ToString::to_string);
    warnings.dedup();
    Ok(PluginSet {
        registry: options.registry.clone(),
        plugins,
        problems,
        warnings,
        disabled_builtins: options.disabled_builtins.clone(),
        memo: Mutex::new(ResolveMemo::default()),
    })
}

/// A manifest file found on disk, with the plugin name its location implies.
struct Found {
    path: PathBuf,
    implied_name: Option<String>,
}

fn implied_name(dir: &Path) -> Option<String> {
    dir.file_name().and_then(|n| n.to_str()).map(str::to_owned)
}

/// Subdirectories of `dir` that hold a manifest, sorted.
fn scan_plugin_dir(dir: &Path) -> Vec<Found> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<Found> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        // Anything by the manifest's name is read, so what is not a regular file (a named
        // pipe, a directory) is a problem naming it rather than a plugin silently missing.
        .filter(|p| p.join(MANIFEST_FILE).exists())
        .map(|p| Found {
            path: p.join(MANIFEST_FILE),
            implied_name: implied_name(&p),
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// An explicit path: a manifest file, a plugin directory (with `noeta-plugin.toml` or a
/// `Cargo.toml`), or a directory of plugin directories.
fn explicit_manifests(path: &Path) -> Vec<Found> {
    if path.is_dir() {
        for file in [MANIFEST_FILE, "Cargo.toml"] {
            if path.join(file).is_file() {
                return vec![Found {
                    path: path.join(file),
                    implied_name: implied_name(path),
                }];
            }
        }
        return scan_plugin_dir(path);
    }
    // A manifest named by its role implies its directory's name; any other file its stem.
    let by_role = path
        .file_name()
        .is_some_and(|n| n == MANIFEST_FILE || n == "Cargo.toml");
    let implied = if by_role {
        path.parent().and_then(implied_name)
    } else {
        path.file_stem().and_then(|n| n.to_str()).map(str::to_owned)
    };
    vec![Found {
        path: path.to_path_buf(),
        implied_name: implied,
    }]
}

/// Drops manifests whose canonical path was already read from an earlier source.
fn dedupe(found: Vec<Found>, seen: &mut BTreeSet<PathBuf>) -> Vec<Found> {
    found
        .into_iter()
        .filter(|f| seen.insert(std::fs::canonicalize(&f.path).unwrap_or_else(|_| f.path.clone())))
        .collect()
}

fn read_all(
    found: Vec<Found>,
    source: SourceKind,
    options: &LoadOptions,
    enabled: &dyn Fn(&str) -> bool,
    candidates: &mut Vec<Candidate>,
    problems: &mut Vec<LoadProblem>,
) {
    for Found { path, implied_name } in found {
        match read_manifest(&path, &options.registry) {
            Ok(manifest) => {
                if enabled(&manifest.name) {
                    let resolver = match (&manifest.extension, &options.command_plugins) {
                        (Some(_), Some(programs)) => {
                            let dir = path.parent().unwrap_or(Path::new("."));
                            Some(programs.resolver(&manifest, dir))
                        }
                        _ => None,
                    };
                    candidates.push(Candidate {
                        manifest,
                        origin: Origin::File(path),
                        source,
                        resolver,
                    });
                }
            }
            Err(error) => {
                // A manifest that parses far enough to name itself is filed under that name.
                let name = crate::manifest::peek_name(&path).or(implied_name);
                if name.as_deref().is_none_or(enabled) {
                    problems.push(LoadProblem {
                        plugin: name,
                        origin: Origin::File(path),
                        source,
                        error: ProblemError::Manifest(error),
                    });
                }
            }
        }
    }
}

/// Enforces name uniqueness: linked crates shadow on-disk plugins; two of one kind are an error.
fn settle_names(
    candidates: Vec<Candidate>,
    problems: &mut Vec<LoadProblem>,
    warnings: &mut Vec<LoadWarning>,
) -> Result<BTreeMap<String, Candidate>, LoadError> {
    let mut by_name: BTreeMap<String, Vec<Candidate>> = BTreeMap::new();
    for candidate in candidates {
        by_name
            .entry(candidate.manifest.name.clone())
            .or_default()
            .push(candidate);
    }
    let mut settled = BTreeMap::new();
    for (name, mut group) in by_name {
        group.sort_by(|a, b| a.origin.cmp(&b.origin));
        let (linked, on_disk): (Vec<_>, Vec<_>) =
            group.into_iter().partition(|c| c.source.is_linked());
        let duplicate = |pair: &[Candidate]| LoadError::DuplicateName {
            plugin: name.clone(),
            first: pair[0].origin.clone(),
            second: pair[1].origin.clone(),
        };
        if linked.len() > 1 {
            return Err(duplicate(&linked));
        }
        if linked.is_empty() && on_disk.len() > 1 {
            return Err(duplicate(&on_disk));
        }
        let winner = match linked.into_iter().next() {
            Some(crate_plugin) => {
                for shadowed in &on_disk {
                    warnings.push(LoadWarning::Shadowed {
                        plugin: name.clone(),
                        linked: crate_plugin.origin.clone(),
                        on_disk: shadowed.origin.clone(),
                    });
                }
                crate_plugin
            }
            None => match on_disk.into_iter().next() {
                Some(only) => only,
                None => continue,
            },
        };
        settled.insert(name, winner);
    }
    // A broken manifest found by scanning a plugin directory under the name of a linked
    // crate is shadowed as well; one named explicitly is always reported.
    problems.retain(|problem| {
        if problem.source == SourceKind::Path {
            return true;
        }
        let shadowing = problem
            .plugin
            .as_ref()
            .and_then(|name| settled.get(name))
            .filter(|c| c.source.is_linked());
        match shadowing {
            Some(crate_plugin) => {
                warnings.push(LoadWarning::Shadowed {
                    plugin: crate_plugin.manifest.name.clone(),
                    linked: crate_plugin.origin.clone(),
                    on_disk: problem.origin.clone(),
                });
                false
            }
            None => true,
        }
    });
    Ok(settled)
}

fn check_ranges(
    candidates: BTreeMap<String, Candidate>,
    options: &LoadOptions,
    problems: &mut Vec<LoadProblem>,
    warnings: &mut Vec<LoadWarning>,
) -> BTreeMap<String, LoadedPlugin> {
    let mut plugins = BTreeMap::new();
    for (name, c) in candidates {
        if let Some(range) = &c.manifest.requires_noeta {
            match check_range(range, &options.kernel_version) {
                RangeCheck::Satisfied => {}
                RangeCheck::Unsatisfied if options.strict => {
                    problems.push(LoadProblem {
                        plugin: Some(name.clone()),
                        origin: c.origin.clone(),
                        source: c.source,
                        error: ProblemError::Refused {
                            plugin: name,
                            origin: c.origin,
                            range: range.clone(),
                            kernel: options.kernel_version.clone(),
                        },
                    });
                    continue;
                }
                RangeCheck::Unsatisfied => warnings.push(LoadWarning::Unsatisfied {
                    plugin: name.clone(),
                    origin: c.origin.clone(),
                    range: range.clone(),
                    kernel: options.kernel_version.clone(),
                }),
                RangeCheck::Unparseable(reason) => warnings.push(LoadWarning::Unparseable {
                    plugin: name.clone(),
                    origin: c.origin.clone(),
                    range: range.clone(),
                    reason,
                }),
            }
        }
        plugins.insert(
            name,
            LoadedPlugin {
                manifest: c.manifest,
                origin: c.origin,
                source: c.source,
                resolver: c.resolver,
            },
        );
    }
    plugins
}
