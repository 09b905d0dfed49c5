//! `[plugins.workspace]`: what both packs read.

use noeta_toolkit::SettingsTable;
use serde_json::Value;

/// The default cap on one instruction file, in bytes.
pub const MAX_INSTRUCTION_BYTES: usize = 40_000;

/// The plugin's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The bytes of one instruction file kept; the rest is cut with a note.
    pub max_instruction_bytes: usize,
    /// Whether the environment resident reports the git state.
    pub git: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_instruction_bytes: MAX_INSTRUCTION_BYTES,
            git: true,
        }
    }
}

/// The keys `[plugins.workspace]` takes.
const KEYS: &[&str] = &["max_instruction_bytes", "git"];

impl Settings {
    /// Reads `[plugins.workspace]` (`null`: the defaults); every error names the key.
    pub fn parse(config: &Value) -> Result<Self, String> {
        let table = SettingsTable::new("workspace", config, KEYS)?;
        let defaults = Self::default();
        Ok(Self {
            max_instruction_bytes: table
                .positive("max_instruction_bytes")?
                .unwrap_or(defaults.max_instruction_bytes),
            git: table.bool("git")?.unwrap_or(defaults.git),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_both_keys() {
        assert_eq!(Settings::parse(&Value::Null).unwrap(), Settings::default());
        let read = Settings::parse(&json!({ "max_instruction_bytes": 10, "git": false })).unwrap();
        assert_eq!(read.max_instruction_bytes, 10);
        assert!(!read.git);
    }

    #[test]
    fn bad_settings_name_the_key_and_value() {
        for (config, needle) in [
            (json!({ "gti": true }), "unknown key `gti`"),
            (
                json!({ "git": "yes" }),
                "git: expected true or false, got `\"yes\"`",
            ),
            (
                json!({ "max_instruction_bytes": 0 }),
                "max_instruction_bytes: expected a positive integer, got `0`",
            ),
            (json!("x"), "expected a table, got `\"x\"`"),
            (
                json!({ "gti": true }),
                "unknown key `gti` (known: max_instruction_bytes, git)",
            ),
        ] {
            let err = Settings::parse(&config).unwrap_err();
            assert!(err.contains("settings [plugins.workspace]"), "{err}");
            assert!(err.contains(needle), "{err}");
        }
    }
}
