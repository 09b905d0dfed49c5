//! Model aliases as Claude Code's agent files write them — `opus`, `sonnet`, `haiku` — and the
//! model each names for a provider kind.
//!
//! Each provider kind has defaults (Anthropic's: the newest model of each family, as Claude
//! Code resolves the aliases); `[plugins.providers] model_aliases` overrides them, and gives
//! aliases to providers that have none (`model_aliases = { haiku = "gpt-5.4-mini" }`).
//! `inherit` is no alias: it is the run's model.

use std::collections::BTreeMap;

use noeta_toolkit::SettingsTable;

/// The aliases agent files use.
pub const MODEL_ALIASES: [&str; 3] = ["opus", "sonnet", "haiku"];

/// The default model of each alias, by provider kind.
const DEFAULTS: &[(&str, &str, &str)] = &[
    ("anthropic", "opus", "claude-opus-5-5"),
    ("anthropic", "sonnet", "claude-sonnet-5-5"),
    ("anthropic", "haiku", "claude-haiku-5-5"),
];

/// Whether `model` is an alias rather than a model id.
pub fn is_model_alias(model: &str) -> bool {
    MODEL_ALIASES.contains(&model)
}

/// The model `alias` names for `provider`: `overrides` (`[plugins.providers] model_aliases`)
/// first, then the provider kind's defaults; `None` when neither has one.
pub fn resolve_model_alias(
    provider: &str,
    alias: &str,
    overrides: &BTreeMap<String, String>,
) -> Option<String> {
    overrides.get(alias).cloned().or_else(|| {
        DEFAULTS
            .iter()
            .find(|(kind, name, _)| *kind == provider && *name == alias)
            .map(|(_, _, model)| (*model).to_owned())
    })
}

/// `[plugins.providers] model_aliases`: alias to model id. Secret references must already be
/// resolved. Every error names the key and the value.
///
/// # Errors
/// `model_aliases` is not a table of strings, names no alias agent files use, or maps one to
/// an empty model.
pub fn model_aliases_from_settings(
    params: &serde_json::Value,
) -> Result<BTreeMap<String, String>, String> {
    let table = SettingsTable::new("providers", params, crate::config::SETTINGS_KEYS)
        .map_err(|e| e.to_string())?;
    let aliases = table
        .string_map("model_aliases")
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    for (alias, model) in &aliases {
        if !is_model_alias(alias) && alias != "inherit" {
            return Err(table
                .invalid(
                    &format!("model_aliases.{alias}"),
                    format!(
                        "`{alias}` is no model alias (they are {})",
                        MODEL_ALIASES.join(", ")
                    ),
                )
                .to_string());
        }
        if alias == "inherit" {
            return Err(table
                .invalid(
                    "model_aliases.inherit",
                    "`inherit` is always the run's model",
                )
                .to_string());
        }
        if model.trim().is_empty() {
            return Err(table
                .invalid(&format!("model_aliases.{alias}"), "the model is empty")
                .to_string());
        }
    }
    Ok(aliases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn aliases_resolve_through_the_settings_then_the_provider_kinds_defaults() {
        let none = BTreeMap::new();
        assert_eq!(
            resolve_model_alias("anthropic", "haiku", &none).as_deref(),
            Some("claude-haiku-5-5")
        );
        assert_eq!(
            resolve_model_alias("anthropic", "opus", &none).as_deref(),
            Some("claude-opus-5-5")
        );
        assert_eq!(resolve_model_alias("openai", "sonnet", &none), None);
        let mapped = model_aliases_from_settings(&json!({
            "provider": "openai",
            "model_aliases": { "haiku": "gpt-4o-mini" }
        }))
        .unwrap();
        assert_eq!(
            resolve_model_alias("openai", "haiku", &mapped).as_deref(),
            Some("gpt-4o-mini")
        );
        assert_eq!(
            resolve_model_alias("anthropic", "haiku", &mapped).as_deref(),
            Some("gpt-4o-mini")
        );
        for model in ["opus", "sonnet", "haiku"] {
            assert!(is_model_alias(model));
        }
        assert!(!is_model_alias("inherit") && !is_model_alias("claude-opus-5-5"));
    }

    #[test]
    fn a_bad_alias_table_is_an_error_naming_the_key() {
        for (params, parts) in [
            (
                json!({ "model_aliases": "haiku" }),
                &["model_aliases", "a table of strings"][..],
            ),
            (
                json!({ "model_aliases": { "haiku": 3 } }),
                &["model_aliases.haiku", "a string"],
            ),
            (
                json!({ "model_aliases": { "fast": "x" } }),
                &["model_aliases.fast", "no model alias"],
            ),
            (
                json!({ "model_aliases": { "inherit": "x" } }),
                &["model_aliases.inherit"],
            ),
            (
                json!({ "model_aliases": { "opus": " " } }),
                &["model_aliases.opus", "empty"],
            ),
        ] {
            let err = model_aliases_from_settings(&params).unwrap_err();
            for part in parts {
                assert!(err.contains(part), "{part} not in {err}");
            }
            assert!(err.contains("providers"), "{err}");
        }
        assert!(
            model_aliases_from_settings(&serde_json::Value::Null)
                .unwrap()
                .is_empty()
        );
    }
}
