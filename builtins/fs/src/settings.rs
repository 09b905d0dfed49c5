//! The plugin's settings, `[plugins.fs]`: `write_mode`, `write_path_globs`, `write_roots`
//! and the shell's.

use std::path::Path;
use std::sync::Arc;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use noeta_toolkit::SettingsTable;
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

/// The keys `[plugins.fs]` takes.
const KEYS: &[&str] = &[
    "write_mode",
    "write_path_globs",
    "write_roots",
    "shell_mode",
    "shell_allowlist",
    "shell_env",
    "shell_env_inherit",
    "background_ends_with_turn",
];

impl Settings {
    /// Reads `[plugins.fs]` (JSON null when absent); errors name the field and the value.
    pub(crate) fn parse(config: &Value) -> Result<Self, String> {
        let table = SettingsTable::new("fs", config, KEYS)?;
        let mut shell = Shell::default();
        if let Some(mode) = table.one_of("shell_mode", &ShellMode::WORDS)? {
            shell.mode = mode;
        }
        if let Some(allowlist) = table.strings("shell_allowlist")? {
            shell.allowlist = allowlist;
        }
        if let Some(env) = table.string_map("shell_env")? {
            shell.env = env;
        }
        if let Some(inherit) = table.bool("shell_env_inherit")? {
            shell.inherit_env = inherit;
        }
        if let Some(ends) = table.bool("background_ends_with_turn")? {
            shell.ends_with_turn = ends;
        }
        Ok(Self {
            write_mode: table
                .one_of(
                    "write_mode",
                    &[("dry_run", WriteMode::DryRun), ("apply", WriteMode::Apply)],
                )?
                .unwrap_or(WriteMode::DryRun),
            write_globs: write_path_globs(&table)?,
            write_roots: write_roots(&table)?.into(),
            shell,
        })
    }
}

/// `write_path_globs`: globs over workspace-relative paths; an empty list restricts nothing,
/// as when the key is absent.
fn write_path_globs(table: &SettingsTable<'_>) -> Result<Option<(GlobSet, Vec<String>)>, String> {
    const KEY: &str = "write_path_globs";
    let Some(items) = table.array(KEY, "a list of globs")? else {
        return Ok(None);
    };
    let mut builder = GlobSetBuilder::new();
    let mut texts = Vec::new();
    for item in items {
        let Some(text) = item.as_str() else {
            return Err(table.expected(KEY, "a glob", item).into());
        };
        let glob = GlobBuilder::new(text)
            .literal_separator(true)
            .build()
            .map_err(|err| table.invalid(KEY, format!("`{text}` is not a valid glob: {err}")))?;
        builder.add(glob);
        texts.push(text.to_owned());
    }
    let set = builder.build().map_err(|err| table.invalid(KEY, err))?;
    Ok((!texts.is_empty()).then_some((set, texts)))
}

/// `write_roots`: absolute paths of existing directories, resolved through their symlinks.
fn write_roots(table: &SettingsTable<'_>) -> Result<Vec<WriteRoot>, String> {
    const KEY: &str = "write_roots";
    let Some(items) = table.array(KEY, "a list of directories")? else {
        return Ok(Vec::new());
    };
    let mut roots = Vec::new();
    for item in items {
        let Some(text) = item.as_str() else {
            return Err(table.expected(KEY, "a directory path", item).into());
        };
        let given = Path::new(text);
        if !given.is_absolute() {
            return Err(table
                .invalid(KEY, format!("`{text}` is not an absolute path"))
                .into());
        }
        let real = std::fs::canonicalize(given).map_err(|err| {
            table.invalid(
                KEY,
                format!("`{text}` is not an existing directory ({err})"),
            )
        })?;
        if !real.is_dir() {
            return Err(table
                .invalid(KEY, format!("`{text}` is not a directory"))
                .into());
        }
        roots.push(WriteRoot {
            given: given.to_path_buf(),
            real,
        });
    }
    Ok(roots)
}
