//! The plugin's settings, `[plugins.memory]`: `dir` and `read_only`.

use std::path::PathBuf;

use noeta_toolkit::SettingsTable;
use serde_json::Value;

/// The keys `[plugins.memory]` takes.
const KEYS: &[&str] = &["dir", "read_only"];

/// The settings the pack is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    /// The memory directory.
    pub(crate) dir: PathBuf,
    /// Mount only `memory_read` and `memory_search`.
    pub(crate) read_only: bool,
}

/// The directory used when `dir` is not set: `<home>/.noeta/memories`.
pub(crate) fn default_dir(home: Option<PathBuf>) -> Option<PathBuf> {
    home.filter(|h| !h.as_os_str().is_empty())
        .map(|h| h.join(".noeta").join("memories"))
}

impl Settings {
    /// Reads `[plugins.memory]` (JSON null when absent); `home` is the user's home directory,
    /// if known. Errors name the key and the value.
    pub(crate) fn parse(config: &Value, home: Option<PathBuf>) -> Result<Self, String> {
        let table = SettingsTable::new("memory", config, KEYS)?;
        let read_only = table.bool("read_only")?.unwrap_or(false);
        let dir = match table.read("dir", "a non-empty path", |v| {
            v.as_str().filter(|t| !t.is_empty())
        })? {
            Some(text) => {
                let path = PathBuf::from(text);
                if !path.is_absolute() {
                    return Err(table
                        .invalid("dir", format!("`{text}` is not an absolute path"))
                        .into());
                }
                path
            }
            None => default_dir(home).ok_or_else(|| {
                table.invalid(
                    "dir",
                    "not set and the home directory is unknown; set dir to the memory directory",
                )
            })?,
        };
        Ok(Self { dir, read_only })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn dir_defaults_under_the_home_directory() {
        let settings = Settings::parse(&Value::Null, Some(PathBuf::from("/h"))).unwrap();
        assert_eq!(settings.dir, PathBuf::from("/h/.noeta/memories"));
        assert!(!settings.read_only);
    }

    #[test]
    fn without_dir_or_home_the_error_names_the_setting() {
        let err = Settings::parse(&json!({ "read_only": true }), None).unwrap_err();
        assert_eq!(
            err,
            "settings [plugins.memory] dir: not set and the home directory is unknown; set dir to the memory directory"
        );
        let err = Settings::parse(&Value::Null, Some(PathBuf::new())).unwrap_err();
        assert!(err.contains("home directory is unknown"), "{err}");
    }

    #[test]
    fn a_given_dir_needs_no_home() {
        let settings = Settings::parse(&json!({ "dir": "/m", "read_only": true }), None).unwrap();
        assert_eq!(
            settings,
            Settings {
                dir: PathBuf::from("/m"),
                read_only: true
            }
        );
    }
}
