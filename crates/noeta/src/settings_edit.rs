//! Changing one settings file in place (`noeta mcp add`, `noeta mcp remove`).
//!
//! The file is read under the settings' own size limit and must parse as settings first (a
//! broken file is reported, never overwritten). The change is made with `toml_edit`, so the
//! file's comments, order and layout stay as the person wrote them; the result is parsed
//! again as settings, then written to a temporary file beside it and renamed over it, so a
//! crash leaves the old file or the new one, never half of one.

use std::path::Path;

use serde_json::Value;
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table};

use crate::settings::{Layer, Settings, SettingsError};

/// Why a settings file was not changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// The file cannot be read, or is not valid settings as it stands.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The server given is not one the `mcp` plugin would accept.
    #[error("{file}: MCP server `{alias}` is not valid: {message}")]
    Server {
        /// The file.
        file: String,
        /// The server's alias.
        alias: String,
        /// What is wrong (naming the key).
        message: String,
    },
    /// A table on the way to the server is something else in the file.
    #[error("{file}: `{key}` is not a table, so a server cannot be added under it")]
    NotATable {
        /// The file.
        file: String,
        /// The dotted key.
        key: String,
    },
    /// The alias is taken in this file.
    #[error(
        "{file}: MCP server `{alias}` is already configured here; `noeta mcp remove {alias}` first to replace it"
    )]
    Exists {
        /// The file.
        file: String,
        /// The alias.
        alias: String,
    },
    /// The alias is not in this file.
    #[error("{file}: no MCP server `{alias}` is configured here{elsewhere}")]
    Missing {
        /// The file.
        file: String,
        /// The alias.
        alias: String,
        /// Where else it is configured, as a clause (empty when nowhere).
        elsewhere: String,
    },
    /// The new file could not be written.
    #[error("cannot write {file}: {source}")]
    Write {
        /// The file.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Adds MCP server `alias` to the settings file `file` (made, with its directory, when
/// missing) as `[plugins.mcp.servers.<alias>]` with the keys of `server` (a JSON object in
/// the `mcp` plugin's server format: `command`/`args`/`env`/`cwd` or `url`/`headers`, …).
///
/// # Errors
/// The file is unreadable or invalid, the server is not valid, the alias is taken in this
/// file, or the file cannot be written.
pub fn add_mcp_server(file: &Path, alias: &str, server: &Value) -> Result<(), EditError> {
    let name = file.display().to_string();
    noeta_builtin_mcp::Settings::parse(&serde_json::json!({ "servers": { alias: server } }))
        .map_err(|message| EditError::Server {
            file: name.clone(),
            alias: alias.to_owned(),
            message,
        })?;
    let mut doc = read(file)?;
    let servers = servers_table(&mut doc, &name)?;
    if servers.contains_key(alias) {
        return Err(EditError::Exists {
            file: name,
            alias: alias.to_owned(),
        });
    }
    // The keys in the order a person writes them: what it is, then how to reach it.
    const FIRST: [&str; 7] = ["type", "command", "args", "env", "cwd", "url", "headers"];
    let mut table = Table::new();
    if let Some(keys) = server.as_object() {
        let mut ordered: Vec<(&String, &Value)> = keys.iter().collect();
        ordered.sort_by_key(|(key, _)| FIRST.iter().position(|k| k == key).unwrap_or(FIRST.len()));
        for (key, value) in ordered {
            table.insert(key, toml_item(value));
        }
    }
    servers.insert(alias, Item::Table(table));
    write(file, &doc)
}

/// Removes MCP server `alias` from the settings file `file`; `elsewhere` names where else it
/// is configured, for the error when this file does not have it.
///
/// # Errors
/// The file is unreadable or invalid, has no such server, or cannot be written.
pub fn remove_mcp_server(file: &Path, alias: &str, elsewhere: &str) -> Result<(), EditError> {
    let name = file.display().to_string();
    let mut doc = read(file)?;
    let removed = doc
        .get_mut("plugins")
        .and_then(|p| p.get_mut("mcp"))
        .and_then(|m| m.get_mut("servers"))
        .and_then(Item::as_table_like_mut)
        .and_then(|servers| servers.remove(alias));
    if removed.is_none() {
        return Err(EditError::Missing {
            file: name,
            alias: alias.to_owned(),
            elsewhere: elsewhere.to_owned(),
        });
    }
    write(file, &doc)
}

/// The file as a document, after checking it is valid settings; a missing file is empty.
fn read(file: &Path) -> Result<DocumentMut, EditError> {
    let name = file.display().to_string();
    let text = crate::settings::read_text(file)?;
    Settings::parse(&text, &name, Layer::User)?;
    // Valid settings are valid TOML, which toml_edit parses too.
    text.parse::<DocumentMut>().map_err(|err| {
        SettingsError::Toml {
            file: name,
            line: 0,
            column: 0,
            message: err.to_string(),
        }
        .into()
    })
}

/// `[plugins.mcp.servers]`, made (as implicit tables, so no empty headers appear) when absent.
fn servers_table<'d>(doc: &'d mut DocumentMut, file: &str) -> Result<&'d mut Table, EditError> {
    let mut table = doc.as_table_mut();
    let mut key = String::new();
    for part in ["plugins", "mcp", "servers"] {
        if !key.is_empty() {
            key.push('.');
        }
        key.push_str(part);
        let item = table.entry(part).or_insert_with(|| {
            let mut made = Table::new();
            made.set_implicit(true);
            Item::Table(made)
        });
        if let Some(inline) = item.as_inline_table() {
            *item = Item::Table(inline.clone().into_table());
        }
        table = item.as_table_mut().ok_or_else(|| EditError::NotATable {
            file: file.to_owned(),
            key: key.clone(),
        })?;
    }
    Ok(table)
}

/// A JSON value as TOML: objects become inline tables (`env = { KEY = "value" }`).
fn toml_item(value: &Value) -> Item {
    Item::Value(toml_value(value))
}

fn toml_value(value: &Value) -> toml_edit::Value {
    match value {
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => n.as_i64().map_or_else(
            || n.as_f64().unwrap_or_default().into(),
            toml_edit::Value::from,
        ),
        Value::Array(items) => {
            let mut array = Array::new();
            for item in items {
                array.push(toml_value(item));
            }
            array.into()
        }
        Value::Object(keys) => {
            let mut table = InlineTable::new();
            for (key, item) in keys {
                table.insert(key, toml_value(item));
            }
            table.into()
        }
        Value::String(s) => s.as_str().into(),
        Value::Null => "".into(),
    }
}

/// Checks the new text as settings and puts it in place atomically.
fn write(file: &Path, doc: &DocumentMut) -> Result<(), EditError> {
    let name = file.display().to_string();
    let text = doc.to_string();
    Settings::parse(&text, &name, Layer::User)?;
    let failed = |source| EditError::Write {
        file: name.clone(),
        source,
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    let staged = file.with_extension("toml.new");
    std::fs::write(&staged, text).map_err(failed)?;
    std::fs::rename(&staged, file).map_err(failed)
}

/// Where each MCP server alias is configured: the settings files (machine, user, project)
/// whose `[plugins.mcp.servers]` name it, then the `.mcp.json` files (the user's, and the
/// workspace's when present), in that order. A file that cannot be read is left out (the
/// commands that load settings report it).
pub fn mcp_server_sources(
    files: &crate::settings::SettingsFiles,
    paths: &crate::HostPaths,
) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut sources: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let layers = [
        (Some(files.machine.clone()), Layer::Machine),
        (files.user.clone(), Layer::User),
        (Some(files.project.clone()), Layer::Project),
    ];
    for (file, layer) in layers {
        let Some(file) = file else { continue };
        let Ok(settings) = Settings::read(&file, layer) else {
            continue;
        };
        let servers = settings
            .params("mcp")
            .and_then(|p| p.get("servers"))
            .and_then(Value::as_object);
        for alias in servers.into_iter().flat_map(|s| s.keys()) {
            let entry = sources.entry(alias.clone()).or_default();
            let shown = file.display().to_string();
            if !entry.contains(&shown) {
                entry.push(shown);
            }
        }
    }
    let json_files = paths
        .user_dir()
        .map(|d| d.join(".mcp.json"))
        .into_iter()
        .chain([paths.workspace.join(".mcp.json")]);
    for file in json_files {
        if let Ok((servers, _)) = crate::mcp_json::read(&file, &|_| None) {
            for alias in servers.keys() {
                sources
                    .entry(alias.clone())
                    .or_default()
                    .push(file.display().to_string());
            }
        }
    }
    sources
}
