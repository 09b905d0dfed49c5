//! The plugin's settings, `[plugins.fs]`: `write_mode`, `write_path_globs`, `write_roots`
//! and the shell's.

use std::path::Path;
use std::sync::Arc;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde_json::Value;

use crate::bash::{Shell, ShellMode};
use crate::paths::WriteRoot;

/// Whether `Edit` and `Write` change files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteMode {
    /// Show what would change; write nothing.
    DryRun,
    /// Write.
    Apply,
}

/// The settings the write tools read.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) write_mode: WriteMode,
    /// The allow-list of workspace-relative paths the write tools may change (none or empty: any).
    pub(crate) write_globs: Option<(GlobSet, Vec<String>)>,
    /// Directories outside the workspace the file tools may also use (canonical).
    pub(crate) write_roots: Arc<[WriteRoot]>,
    /// How `Bash` runs commands (and whether background shells end with the turn).
    pub(crate) shell: Shell,
}

const KEYS: &str = "write_mode, write_path_globs, write_roots, shell_mode, shell_allowlist, shell_env, shell_env_inherit, background_ends_with_turn";

impl Settings {
    /// Reads `[plugins.fs]` (JSON null when absent); errors name the field and the value.
    pub(crate) fn parse(config: &Value) -> Result<Self, String> {
        let mut settings = Self {
            write_mode: WriteMode::DryRun,
            write_globs: None,
            write_roots: Arc::from(Vec::new()),
            shell: Shell::default(),
        };
        let map = match config {
            Value::Null => return Ok(settings),
            Value::Object(map) => map,
            other => {
                return Err(format!(
                    "settings [plugins.fs]: expected a table, got `{other}`"
                ));
            }
        };
        for (key, value) in map {
            match key.as_str() {
                "write_mode" => {
                    settings.write_mode = match value.as_str() {
                        Some("dry_run") => WriteMode::DryRun,
                        Some("apply") => WriteMode::Apply,
                        _ => {
                            return Err(format!(
                                "settings [plugins.fs]: write_mode `{}` is not one of dry_run, apply",
                                shown(value)
                            ));
                        }
                    }
                }
                "write_path_globs" => {
                    let Some(items) = value.as_array() else {
                        return Err(format!(
                            "settings [plugins.fs]: write_path_globs `{value}` is not a list of globs"
                        ));
                    };
                    let mut builder = GlobSetBuilder::new();
                    let mut texts = Vec::new();
                    for item in items {
                        let Some(text) = item.as_str() else {
                            return Err(format!(
                                "settings [plugins.fs]: write_path_globs entry `{item}` is not a string"
                            ));
                        };
                        let glob = GlobBuilder::new(text)
                            .literal_separator(true)
                            .build()
                            .map_err(|err| {
                                format!(
                                    "settings [plugins.fs]: write_path_globs entry `{text}` is not a valid glob: {err}"
                                )
                            })?;
                        builder.add(glob);
                        texts.push(text.to_owned());
                    }
                    let set = builder
                        .build()
                        .map_err(|err| format!("settings [plugins.fs]: write_path_globs: {err}"))?;
                    // An empty list restricts nothing, as when the key is absent.
                    settings.write_globs = (!texts.is_empty()).then_some((set, texts));
                }
                "write_roots" => settings.write_roots = write_roots(value)?.into(),
                "background_ends_with_turn" => {
                    settings.shell.ends_with_turn = value.as_bool().ok_or_else(|| {
                        format!(
                            "settings [plugins.fs]: background_ends_with_turn `{value}` is not true or false"
                        )
                    })?;
                }
                "shell_mode" => {
                    settings.shell.mode =
                        value.as_str().and_then(ShellMode::parse).ok_or_else(|| {
                            format!(
                                "settings [plugins.fs]: shell_mode `{}` is not one of off, allowlist, arbitrary",
                                shown(value)
                            )
                        })?;
                }
                "shell_allowlist" => {
                    let programs: Option<Vec<String>> = value.as_array().and_then(|items| {
                        items
                            .iter()
                            .map(|i| i.as_str().map(str::to_owned))
                            .collect()
                    });
                    settings.shell.allowlist = programs.ok_or_else(|| {
                        format!(
                            "settings [plugins.fs]: shell_allowlist `{value}` is not a list of program names"
                        )
                    })?;
                }
                "shell_env" => {
                    let Some(table) = value.as_object() else {
                        return Err(format!(
                            "settings [plugins.fs]: shell_env `{value}` is not a table of variables"
                        ));
                    };
                    for (name, text) in table {
                        let Some(text) = text.as_str() else {
                            return Err(format!(
                                "settings [plugins.fs]: shell_env `{name}` is not a string"
                            ));
                        };
                        settings.shell.env.insert(name.clone(), text.to_owned());
                    }
                }
                "shell_env_inherit" => {
                    settings.shell.inherit_env = value.as_bool().ok_or_else(|| {
                        format!(
                            "settings [plugins.fs]: shell_env_inherit `{value}` is not true or false"
                        )
                    })?;
                }
                other => {
                    return Err(format!(
                        "settings [plugins.fs]: unknown key `{other}` (expected one of: {KEYS})"
                    ));
                }
            }
        }
        Ok(settings)
    }
}

/// `write_roots`: absolute paths of existing directories, resolved through their symlinks.
fn write_roots(value: &Value) -> Result<Vec<WriteRoot>, String> {
    let Some(items) = value.as_array() else {
        return Err(format!(
            "settings [plugins.fs]: write_roots `{value}` is not a list of directories"
        ));
    };
    let mut roots = Vec::new();
    for item in items {
        let Some(text) = item.as_str() else {
            return Err(format!(
                "settings [plugins.fs]: write_roots entry `{item}` is not a string"
            ));
        };
        let given = Path::new(text);
        if !given.is_absolute() {
            return Err(format!(
                "settings [plugins.fs]: write_roots entry `{text}` is not an absolute path"
            ));
        }
        let real = std::fs::canonicalize(given).map_err(|err| {
            format!(
                "settings [plugins.fs]: write_roots entry `{text}` is not an existing directory ({err})"
            )
        })?;
        if !real.is_dir() {
            return Err(format!(
                "settings [plugins.fs]: write_roots entry `{text}` is not a directory"
            ));
        }
        roots.push(WriteRoot {
            given: given.to_path_buf(),
            real,
        });
    }
    Ok(roots)
}

/// A value as a message quotes it: a string bare, anything else as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
