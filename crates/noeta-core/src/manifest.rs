//! Plugin manifests: the inert TOML data a plugin declares — its name, version, range and contributions.
//!
//! Reading a manifest runs no plugin code. Four shapes are accepted, in this
//! order: `[package.metadata.noeta]` (a plugin crate's own `Cargo.toml`),
//! `[tool.noeta]`, `[noeta]`, and bare top-level keys (`noeta-plugin.toml`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::contrib::Seam;
use crate::surface::SurfaceRegistry;
use crate::surface::names;

/// The file name of an on-disk plugin's manifest.
pub const MANIFEST_FILE: &str = "noeta-plugin.toml";

/// Where a manifest came from, named in every message about it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// Embedded in a linked crate.
    Crate(String),
    /// Read from a file.
    File(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Crate(name) => write!(f, "crate `{name}`"),
            Origin::File(path) => write!(f, "file `{}`", path.display()),
        }
    }
}

/// One entry of a manifest's `contributions` array.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ManifestContribution {
    /// The surface it targets.
    pub surface: String,
    /// Its name, given or derived from `ref` or `path`.
    pub name: String,
    /// The ref its plugin's resolver maps to a value.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// A path, for resource-only surfaces such as `skills`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Every other key of the entry, verbatim.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, Value>,
    /// Its 1-based position in the manifest.
    #[serde(skip)]
    pub index: usize,
}

impl ManifestContribution {
    /// The integer `priority` parameter (absent is 0; checked when the manifest is read).
    pub fn priority(&self) -> i64 {
        self.params
            .get("priority")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }

    /// The model-visible tool names a `tool` or `control_tool` contribution mounts:
    /// its `tools` parameter (a string or a list), else its own name.
    pub fn tool_names(&self) -> Vec<String> {
        match self.params.get("tools") {
            Some(Value::String(one)) => vec![one.clone()],
            Some(Value::Array(many)) => many
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => vec![self.name.clone()],
        }
    }

    /// The session pack of the same plugin that mounts a declared tool: a `tool` contribution
    /// with a `pack` and no `ref` names a tool the pack mounts at session time. It takes part
    /// in listings and in the namespace of model-visible tool names, but is not resolved (the
    /// pack's own contribution is).
    pub fn mounted_by(&self) -> Option<&str> {
        if self.surface != names::TOOL {
            return None;
        }
        self.params.get("pack").and_then(Value::as_str)
    }

    /// The literal `text` parameter of an inline prompt fragment.
    pub fn text(&self) -> Option<&str> {
        self.params.get("text").and_then(Value::as_str)
    }

    /// The seams of a reminder provider (default `turn_intake`).
    pub fn seams(&self) -> Vec<Seam> {
        let names: Vec<&str> = match self.params.get("seams") {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            _ => vec!["turn_intake"],
        };
        names.into_iter().filter_map(Seam::parse).collect()
    }
}

/// A parsed manifest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginManifest {
    /// The plugin's unique name.
    pub name: String,
    /// Its version (semver), if declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The kernel versions it works with, as a semver range.
    #[serde(rename = "requires-noeta", skip_serializing_if = "Option::is_none")]
    pub requires_noeta: Option<String>,
    /// A JSON Schema for the plugin's settings.
    #[serde(rename = "config-schema", skip_serializing_if = "Option::is_none")]
    pub config_schema: Option<Value>,
    /// `claude-code = true`: the plugin's directory also holds Claude Code parts (`skills/`,
    /// `agents/`, `commands/`, `hooks/hooks.json`, `.mcp.json`), which the host loads as part
    /// of it; without it a directory with a manifest is a noeta plugin only.
    #[serde(rename = "claude-code", skip_serializing_if = "std::ops::Not::not")]
    pub claude_code: bool,
    /// `add-to`: the agents an on-disk plugin joins by itself (`"*"`: every agent). A linked
    /// crate's has no effect: installing a dependency must not change anyone's agents.
    #[serde(rename = "add-to", skip_serializing_if = "Vec::is_empty")]
    pub add_to: Vec<String>,
    /// `[extension]`: the program an on-disk plugin's code runs as (see
    /// [`crate::plugin_command`]); its refs are `command:<export>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extension: Option<crate::plugin_command::ExtensionCommand>,
    /// Its contributions, in manifest order.
    pub contributions: Vec<ManifestContribution>,
}

/// A manifest that cannot be read; every message names the plugin (when known), the file and the entry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read manifest {origin}: {source}")]
    Read {
        /// The manifest's origin.
        origin: Origin,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than a manifest may be.
    #[error("manifest {origin} is {size} bytes, over the {limit}-byte limit of a manifest")]
    TooLarge {
        /// The manifest's origin.
        origin: Origin,
        /// Its size, or at least how much was read.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The text is not TOML.
    #[error("manifest {origin} is not valid TOML: {source}")]
    Toml {
        /// The manifest's origin.
        origin: Origin,
        /// The parse error.
        #[source]
        source: toml::de::Error,
    },
    /// A top-level field is missing or of the wrong type.
    #[error("manifest {origin}{plugin}: field `{field}` {problem}")]
    Field {
        /// The manifest's origin.
        origin: Origin,
        /// `" (plugin `x`)"` when the name is known.
        plugin: PluginLabel,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A top-level field the format does not know (usually a typo).
    #[error(
        "manifest {origin} (plugin `{plugin}`): unknown field `{field}` (known: name, version, requires-noeta, config-schema, claude-code, add-to, extension, contributions)"
    )]
    UnknownField {
        /// The manifest's origin.
        origin: Origin,
        /// The plugin.
        plugin: String,
        /// The unknown field.
        field: String,
    },
    /// A contribution entry is malformed.
    #[error("manifest {origin} (plugin `{plugin}`): contribution #{index}{entry}: {problem}")]
    Contribution {
        /// The manifest's origin.
        origin: Origin,
        /// The plugin.
        plugin: String,
        /// The entry's 1-based position.
        index: usize,
        /// `" (surface `s`, name `n`)"` as far as known.
        entry: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A contribution names a surface that is not registered.
    #[error(
        "manifest {origin} (plugin `{plugin}`): contribution #{index} names unknown surface `{surface}` (known: {known})"
    )]
    UnknownSurface {
        /// The manifest's origin.
        origin: Origin,
        /// The plugin.
        plugin: String,
        /// The entry's 1-based position.
        index: usize,
        /// The unknown surface.
        surface: String,
        /// The registered surfaces.
        known: String,
    },
    /// Two entries share `(surface, name)`.
    #[error(
        "manifest {origin} (plugin `{plugin}`): contribution #{second} duplicates #{first} — surface `{surface}` already declares `{name}`; (surface, name) must be unique within a manifest"
    )]
    Duplicate {
        /// The manifest's origin.
        origin: Origin,
        /// The plugin.
        plugin: String,
        /// The surface.
        surface: String,
        /// The shared name.
        name: String,
        /// The first entry's position.
        first: usize,
        /// The second entry's position.
        second: usize,
    },
}

impl ManifestError {
    /// The manifest's origin.
    pub fn origin(&self) -> &Origin {
        match self {
            ManifestError::Read { origin, .. }
            | ManifestError::TooLarge { origin, .. }
            | ManifestError::Toml { origin, .. }
            | ManifestError::Field { origin, .. }
            | ManifestError::UnknownField { origin, .. }
            | ManifestError::Contribution { origin, .. }
            | ManifestError::UnknownSurface { origin, .. }
            | ManifestError::Duplicate { origin, .. } => origin,
        }
    }
}

/// The optional plugin name in a field error, rendered as `" (plugin `x`)"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginLabel(pub Option<String>);

impl fmt::Display for PluginLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(name) => write!(f, " (plugin `{name}`)"),
            None => Ok(()),
        }
    }
}

/// The most bytes a manifest file may hold.
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// A text file the user wrote, read whole unless it is larger than `limit` bytes: `Ok(Err(size))`
/// then, with its size (or the bytes read past the limit), and nothing more is read. Read by
/// [`crate::files::read_text`]: only regular files, opened without blocking, and text only.
pub fn read_capped(path: &Path, limit: u64) -> std::io::Result<Result<String, u64>> {
    match crate::files::read_text(path, limit) {
        Ok(text) => Ok(Ok(text)),
        Err(crate::files::FileError::TooLarge { size, .. }) => Ok(Err(size)),
        Err(err) => Err(err.into_io()),
    }
}

/// Reads a manifest file (`noeta-plugin.toml`, a `Cargo.toml` or a `pyproject`-style file).
pub fn read_manifest(
    path: &Path,
    registry: &SurfaceRegistry,
) -> Result<PluginManifest, ManifestError> {
    let origin = Origin::File(path.to_path_buf());
    let text = read_capped(path, MAX_MANIFEST_BYTES)
        .map_err(|source| ManifestError::Read {
            origin: origin.clone(),
            source,
        })?
        .map_err(|size| ManifestError::TooLarge {
            origin: origin.clone(),
            size,
            limit: MAX_MANIFEST_BYTES,
        })?;
    parse_manifest(&text, &origin, registry)
}

/// Whether a plugin name is well formed: a lowercase letter, then lowercase letters, digits, `_` or `-`.
pub fn is_valid_plugin_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn sub_table<'a>(table: &'a toml::Table, key: &str) -> Option<&'a toml::Table> {
    table.get(key).and_then(toml::Value::as_table)
}

/// Picks the manifest table out of a TOML document, with the Cargo package version when there is one.
fn select_table(root: &toml::Table) -> (&toml::Table, Option<&str>) {
    if let Some(package) = sub_table(root, "package")
        && let Some(table) = sub_table(package, "metadata").and_then(|m| sub_table(m, "noeta"))
    {
        let version = package.get("version").and_then(toml::Value::as_str);
        return (table, version);
    }
    if let Some(table) = sub_table(root, "tool").and_then(|t| sub_table(t, "noeta")) {
        return (table, None);
    }
    if let Some(table) = sub_table(root, "noeta") {
        return (table, None);
    }
    (root, None)
}

/// The `name` of a manifest file that may be otherwise invalid, when it can be read at all.
pub(crate) fn peek_name(path: &Path) -> Option<String> {
    let text = read_capped(path, MAX_MANIFEST_BYTES).ok()?.ok()?;
    let root: toml::Table = toml::from_str(&text).ok()?;
    let (table, _) = select_table(&root);
    table
        .get("name")
        .and_then(toml::Value::as_str)
        .map(str::trim)
        .filter(|n| is_valid_plugin_name(n))
        .map(str::to_owned)
}

/// The top-level fields a manifest may have, in both spellings.
const KNOWN_FIELDS: [&str; 12] = [
    "name",
    "version",
    "requires-noeta",
    "requires_noeta",
    "config-schema",
    "config_schema",
    "claude-code",
    "claude_code",
    "add-to",
    "add_to",
    "extension",
    "contributions",
];

/// A float JSON cannot hold (`nan`, `inf`, `-inf`) found while converting TOML, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct NonFinite {
    /// The value's path from where the conversion started: `key`, `key[2]`, `key.sub`.
    pub path: String,
    /// The float.
    pub value: f64,
}

/// TOML as JSON, the one conversion manifests and settings share: a date or time becomes its
/// TOML text; a non-finite float is refused, naming its path under `path`.
pub fn toml_to_json(value: &toml::Value, path: &str) -> Result<Value, NonFinite> {
    Ok(match value {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| NonFinite {
                path: path.to_owned(),
                value: *f,
            })?,
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| toml_to_json(item, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(table) => Value::Object(
            table
                .iter()
                .map(|(k, v)| Ok((k.clone(), toml_to_json(v, &format!("{path}.{k}"))?)))
                .collect::<Result<_, NonFinite>>()?,
        ),
    })
}

/// Looks up a field under its kebab-case or snake_case spelling.
fn field<'a>(table: &'a toml::Table, kebab: &str) -> Option<&'a toml::Value> {
    table
        .get(kebab)
        .or_else(|| table.get(&kebab.replace('-', "_")))
}

/// The name derived from a ref's last segment (`crate::module::Item`, `pkg.mod:Attr`).
pub fn name_from_ref(reference: &str) -> Option<String> {
    let tail = reference.rsplit(':').next().unwrap_or(reference);
    let last = tail.rsplit('.').next().unwrap_or(tail).trim();
    (!last.is_empty()).then(|| last.to_owned())
}

fn name_from_path(path: &str) -> Option<String> {
    Path::new(path.trim_end_matches(['/', '\\']))
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .filter(|n| !n.trim().is_empty())
}

/// Parses manifest text; `origin` is named in every error.
pub fn parse_manifest(
    text: &str,
    origin: &Origin,
    registry: &SurfaceRegistry,
) -> Result<PluginManifest, ManifestError> {
    let root: toml::Table = toml::from_str(text).map_err(|source| ManifestError::Toml {
        origin: origin.clone(),
        source,
    })?;
    let (table, cargo_version) = select_table(&root);
    let field_error =
        |plugin: Option<&str>, field: &'static str, problem: &str| ManifestError::Field {
            origin: origin.clone(),
            plugin: PluginLabel(plugin.map(str::to_owned)),
            field,
            problem: problem.to_owned(),
        };

    let name = match table.get("name") {
        Some(toml::Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(toml::Value::String(_)) | None => {
            return Err(field_error(
                None,
                "name",
                "is missing — every plugin needs a string `name`",
            ));
        }
        Some(_) => return Err(field_error(None, "name", "must be a string")),
    };
    if !is_valid_plugin_name(&name) {
        return Err(field_error(
            None,
            "name",
            &format!(
                "`{name}` is not a valid plugin name — use a lowercase letter, then lowercase letters, digits, `_` or `-`"
            ),
        ));
    }
    let plugin = Some(name.as_str());
    // A manifest table is ours alone: an unknown field is a typo, not an extension point.
    if let Some(unknown) = table.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
        return Err(ManifestError::UnknownField {
            origin: origin.clone(),
            plugin: name,
            field: unknown.clone(),
        });
    }

    let version = match table.get("version") {
        Some(toml::Value::String(v)) => Some(v.clone()),
        Some(_) => return Err(field_error(plugin, "version", "must be a string")),
        None => cargo_version.map(str::to_owned),
    };
    if let Some(v) = &version
        && let Err(err) = semver::Version::parse(v)
    {
        return Err(field_error(
            plugin,
            "version",
            &format!("`{v}` is not a semver version ({err})"),
        ));
    }

    let requires_noeta = match field(table, "requires-noeta") {
        Some(toml::Value::String(v)) => Some(v.clone()),
        Some(_) => return Err(field_error(plugin, "requires-noeta", "must be a string")),
        None => None,
    };
    let config_schema = match field(table, "config-schema") {
        Some(v @ toml::Value::Table(_)) => Some(toml_to_json(v, "config-schema").map_err(|n| {
            field_error(
                plugin,
                "config-schema",
                &format!("`{}` is {}, which JSON cannot hold", n.path, n.value),
            )
        })?),
        Some(_) => return Err(field_error(plugin, "config-schema", "must be a table")),
        None => None,
    };
    let claude_code = match field(table, "claude-code") {
        Some(toml::Value::Boolean(b)) => *b,
        Some(_) => return Err(field_error(plugin, "claude-code", "must be true or false")),
        None => false,
    };
    let add_to = match field(table, "add-to") {
        None => Vec::new(),
        Some(toml::Value::String(agent)) => vec![agent.clone()],
        Some(toml::Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                field_error(plugin, "add-to", "must be an agent name or a list of them")
            })?,
        Some(_) => {
            return Err(field_error(
                plugin,
                "add-to",
                "must be an agent name or a list of them",
            ));
        }
    };
    let extension = match table.get("extension") {
        None => None,
        Some(value) => Some(
            crate::plugin_command::parse_extension(value)
                .map_err(|problem| field_error(plugin, "extension", &problem))?,
        ),
    };
    let entries: &[toml::Value] = match table.get("contributions") {
        Some(toml::Value::Array(items)) => items,
        Some(_) => {
            return Err(field_error(
                plugin,
                "contributions",
                "must be an array of tables",
            ));
        }
        None => &[],
    };

    let mut contributions: Vec<ManifestContribution> = Vec::with_capacity(entries.len());
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate() {
        let index = i + 1;
        let contribution = parse_contribution(entry, index, origin, &name, registry)?;
        let key = (contribution.surface.clone(), contribution.name.clone());
        if let Some(first) = seen.get(&key) {
            return Err(ManifestError::Duplicate {
                origin: origin.clone(),
                plugin: name,
                surface: key.0,
                name: key.1,
                first: *first,
                second: index,
            });
        }
        seen.insert(key, index);
        contributions.push(contribution);
    }
    check_mounting_packs(&contributions, origin, &name)?;
    check_command_refs(&contributions, extension.is_some(), origin, &name)?;
    Ok(PluginManifest {
        name,
        version,
        requires_noeta,
        config_schema,
        claude_code,
        add_to,
        extension,
        contributions,
    })
}

/// A `command:<export>` ref needs the `[extension]` table that says which program exports it,
/// names an export, and sits on a session pack (whose extension and tools the program serves).
fn check_command_refs(
    contributions: &[ManifestContribution],
    has_extension: bool,
    origin: &Origin,
    plugin: &str,
) -> Result<(), ManifestError> {
    for c in contributions {
        let Some(export) = c
            .reference
            .as_deref()
            .and_then(crate::plugin_command::command_export)
        else {
            continue;
        };
        let problem = if !has_extension {
            Some(format!(
                "has ref `command:{export}` but the manifest has no `[extension]` table naming the program that exports it"
            ))
        } else if export.is_empty() {
            Some("has ref `command:` without an export name".to_owned())
        } else if c.surface != names::SESSION_PACK {
            Some(format!(
                "has ref `command:{export}` on surface `{}`; a plugin program's exports are session packs (declare its tools with `pack`, and use hooks for checks and observers)",
                c.surface
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(ManifestError::Contribution {
                origin: origin.clone(),
                plugin: plugin.to_owned(),
                index: c.index,
                entry: format!(" (surface `{}`, name `{}`)", c.surface, c.name),
                problem,
            });
        }
    }
    Ok(())
}

/// Every declared tool's `pack` is a session pack the same manifest declares.
fn check_mounting_packs(
    contributions: &[ManifestContribution],
    origin: &Origin,
    plugin: &str,
) -> Result<(), ManifestError> {
    let packs: Vec<&str> = contributions
        .iter()
        .filter(|c| c.surface == names::SESSION_PACK)
        .map(|c| c.name.as_str())
        .collect();
    for c in contributions {
        if let Some(pack) = c.mounted_by()
            && !packs.contains(&pack)
        {
            return Err(ManifestError::Contribution {
                origin: origin.clone(),
                plugin: plugin.to_owned(),
                index: c.index,
                entry: format!(" (surface `tool`, name `{}`)", c.name),
                problem: format!(
                    "is mounted by session pack `{pack}`, which plugin `{plugin}` does not declare (its session packs: {})",
                    if packs.is_empty() {
                        "none".to_owned()
                    } else {
                        packs.join(", ")
                    }
                ),
            });
        }
    }
    Ok(())
}

fn parse_contribution(
    entry: &toml::Value,
    index: usize,
    origin: &Origin,
    plugin: &str,
    registry: &SurfaceRegistry,
) -> Result<ManifestContribution, ManifestError> {
    let fail = |entry: String, problem: String| ManifestError::Contribution {
        origin: origin.clone(),
        plugin: plugin.to_owned(),
        index,
        entry,
        problem,
    };
    let Some(table) = entry.as_table() else {
        return Err(fail(String::new(), "must be a table".to_owned()));
    };
    let surface = match table.get("surface") {
        Some(toml::Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        _ => {
            return Err(fail(
                String::new(),
                "is missing a string `surface`".to_owned(),
            ));
        }
    };
    if !registry.contains(&surface) {
        return Err(ManifestError::UnknownSurface {
            origin: origin.clone(),
            plugin: plugin.to_owned(),
            index,
            surface,
            known: registry.known(),
        });
    }
    let at_surface = format!(" (surface `{surface}`)");
    let optional_string = |key: &str| -> Result<Option<String>, ManifestError> {
        match table.get(key) {
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(fail(
                at_surface.clone(),
                format!("`{key}` must be a string"),
            )),
            None => Ok(None),
        }
    };
    let reference = optional_string("ref")?;
    let path = optional_string("path")?;
    let name = match optional_string("name")?.filter(|n| !n.trim().is_empty()) {
        Some(n) => n.trim().to_owned(),
        None => reference
            .as_deref()
            .and_then(name_from_ref)
            .or_else(|| path.as_deref().and_then(name_from_path))
            .ok_or_else(|| {
                fail(
                    at_surface.clone(),
                    "needs a `name` (or a `ref` or `path` to derive one from)".to_owned(),
                )
            })?,
    };
    let entry_label = format!(" (surface `{surface}`, name `{name}`)");
    let params: BTreeMap<String, Value> = table
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "surface" | "name" | "ref" | "path"))
        .map(|(k, v)| Ok((k.clone(), toml_to_json(v, k)?)))
        .collect::<Result<_, NonFinite>>()
        .map_err(|n| {
            fail(
                entry_label.clone(),
                format!(
                    "`{}` is {}, which JSON cannot hold: give a finite number",
                    n.path, n.value
                ),
            )
        })?;

    match table.get("priority") {
        None | Some(toml::Value::Integer(_)) => {}
        Some(other) => {
            return Err(fail(
                entry_label,
                format!(
                    "`priority` must be an integer, got {} `{other}`",
                    other.type_str()
                ),
            ));
        }
    }
    if let Some(tools) = params.get("tools") {
        let ok = match tools {
            Value::String(s) => !s.trim().is_empty(),
            Value::Array(items) => {
                !items.is_empty()
                    && items
                        .iter()
                        .all(|v| v.as_str().is_some_and(|s| !s.trim().is_empty()))
            }
            _ => false,
        };
        if !ok {
            return Err(fail(
                entry_label,
                "`tools` must be a tool name or a non-empty list of tool names".to_owned(),
            ));
        }
    }
    if surface == names::TOOL
        && let Some(pack) = params.get("pack")
    {
        if pack.as_str().is_none_or(|p| p.trim().is_empty()) {
            return Err(fail(
                entry_label,
                format!("`pack` must name a session pack of this plugin, got `{pack}`"),
            ));
        }
        if reference.is_some() {
            return Err(fail(
                entry_label,
                "has both a `ref` and a `pack`: a tool is either resolved from its ref or mounted by a session pack, not both".to_owned(),
            ));
        }
    }
    if surface == names::REMINDER_PROVIDER
        && let Some(seams) = params.get("seams")
    {
        let names: Option<Vec<&str>> = match seams {
            Value::String(s) => Some(vec![s.as_str()]),
            Value::Array(items) => items.iter().map(Value::as_str).collect(),
            _ => None,
        };
        match names {
            Some(names) => {
                if let Some(bad) = names.iter().find(|n| Seam::parse(n).is_none()) {
                    return Err(fail(
                        entry_label,
                        format!("unknown seam `{bad}` in `seams` (known: task_seed, turn_intake)"),
                    ));
                }
            }
            None => {
                return Err(fail(
                    entry_label,
                    "`seams` must be a seam name or a list of seam names".to_owned(),
                ));
            }
        }
    }
    if surface == names::SKILLS {
        match path.as_deref() {
            None => {
                return Err(fail(
                    entry_label,
                    "a skills contribution needs an absolute `path`".to_owned(),
                ));
            }
            Some(p) if !Path::new(p).is_absolute() => {
                return Err(fail(
                    entry_label,
                    format!(
                        "the skills path `{p}` is relative — a skills path must be absolute, since a manifest's location says nothing reliable about what it would be relative to"
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(ManifestContribution {
        surface,
        name,
        reference,
        path,
        params,
        index,
    })
}
