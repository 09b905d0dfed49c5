//! The plugin's settings, `[plugins.memory]`: `dir` and `read_only`.

use std::path::PathBuf;

use serde_json::Value;

const KEYS: &str = "dir, read_only";

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
        let mut dir: Option<PathBuf> = None;
        let mut read_only = false;
        match config {
            Value::Null => {}
            Value::Object(map) => {
                for (key, value) in map {
                    match key.as_str() {
                        "dir" => {
                            let text = value.as_str().filter(|t| !t.is_empty()).ok_or_else(|| {
                                format!("settings [plugins.memory] dir `{value}` is not a non-empty path")
                            })?;
                            let path = PathBuf::from(text);
                            if !path.is_absolute() {
                                return Err(format!(
                                    "settings [plugins.memory] dir `{text}` is not an absolute path"
                                ));
                            }
                            dir = Some(path);
                        }
                        "read_only" => {
                            read_only = value.as_bool().ok_or_else(|| {
                                format!(
                                    "settings [plugins.memory] read_only `{value}` is not true or false"
                                )
                            })?;
                        }
                        other => {
                            return Err(format!(
                                "settings [plugins.memory]: unknown key `{other}` (expected one of: {KEYS})"
                            ));
                        }
                    }
                }
            }
            other => {
                return Err(format!(
                    "settings [plugins.memory]: expected a table, got `{other}`"
                ));
            }
        }
        let dir = match dir {
            Some(dir) => dir,
            None => default_dir(home).ok_or_else(|| {
                "settings [plugins.memory] dir is not set and the home directory is unknown; set dir to the memory directory".to_owned()
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
        assert!(
            err.starts_with("settings [plugins.memory] dir is not set"),
            "{err}"
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
