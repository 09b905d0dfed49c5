//! Opening providers by name, and detecting the one the environment has a key for.

use noeta_builtin_providers::{
    ANTHROPIC_DEFAULT_MODEL, KNOWN_PROVIDERS, OPENAI_DEFAULT_MODEL, ProviderConfig,
    ProviderSetupError, detect_with, open_provider, open_provider_with,
};
use serde_json::json;

use crate::support::env_of;

/// The error opening `spec` gives.
fn open_error(spec: &str, env: &dyn Fn(&str) -> Option<String>) -> ProviderSetupError {
    match open_provider_with(spec, ProviderConfig::default(), env) {
        Ok(provider) => panic!("`{spec}` opened {}", provider.name()),
        Err(error) => error,
    }
}

#[test]
fn providers_open_by_name() {
    let env = env_of(&[("ANTHROPIC_API_KEY", "a"), ("OPENAI_API_KEY", "o")]);
    let anthropic = open_provider_with("anthropic", ProviderConfig::default(), &env).unwrap();
    assert_eq!(anthropic.name(), "anthropic");
    assert_eq!(anthropic.model(), ANTHROPIC_DEFAULT_MODEL);
    let openai = open_provider_with(" openai ", ProviderConfig::default(), &env).unwrap();
    assert_eq!(openai.name(), "openai");
    assert_eq!(openai.model(), OPENAI_DEFAULT_MODEL);
}

#[test]
fn a_configured_model_is_used() {
    let config = ProviderConfig {
        api_key: Some("k".to_owned()),
        model: Some("claude-haiku-4-5".to_owned()),
        ..ProviderConfig::default()
    };
    let provider = open_provider_with("anthropic", config, &env_of(&[])).unwrap();
    assert_eq!(provider.model(), "claude-haiku-4-5");
    assert_eq!(provider.context_window(), 200_000);
}

#[test]
fn the_scripted_provider_opens_from_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    let script = json!({"model": "replay", "context_window": 1000, "turns": [{"text": "hi"}]});
    std::fs::write(&path, script.to_string()).unwrap();
    let provider = open_provider(
        &format!("scripted:{}", path.display()),
        ProviderConfig::default(),
    )
    .unwrap();
    assert_eq!(provider.name(), "scripted");
    assert_eq!(provider.model(), "replay");
    assert_eq!(provider.context_window(), 1000);
}

#[test]
fn open_errors_say_what_to_do() {
    let env = env_of(&[]);
    let unknown = open_error("gemini", &env);
    assert!(matches!(
        unknown,
        ProviderSetupError::UnknownProvider { .. }
    ));
    let text = unknown.to_string();
    assert!(text.contains("`gemini`"), "{text}");
    assert!(text.contains(KNOWN_PROVIDERS), "{text}");
    assert!(
        text.contains("anthropic") && text.contains("openai") && text.contains("scripted:FILE")
    );

    let text = open_error("anthropic:extra", &env).to_string();
    assert!(
        text.contains("unknown provider `anthropic:extra`"),
        "{text}"
    );

    for spec in ["scripted", "scripted:", "scripted:  "] {
        let error = open_error(spec, &env);
        assert!(matches!(error, ProviderSetupError::MissingScript), "{spec}");
        assert!(error.to_string().contains("scripted:FILE"), "{error}");
    }

    let missing = open_error("scripted:/no/such/script.json", &env).to_string();
    assert!(missing.contains("/no/such/script.json"), "{missing}");

    for (spec, variable) in [
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("openai", "OPENAI_API_KEY"),
    ] {
        let text = open_error(spec, &env).to_string();
        assert!(text.contains(variable), "{text}");
        assert!(text.contains(&format!("`{spec}`")), "{text}");
    }
}

#[test]
fn detection_prefers_anthropic_and_ignores_blank_keys() {
    assert_eq!(
        detect_with(&env_of(&[
            ("ANTHROPIC_API_KEY", "a"),
            ("OPENAI_API_KEY", "o")
        ])),
        Some("anthropic")
    );
    assert_eq!(
        detect_with(&env_of(&[
            ("ANTHROPIC_API_KEY", " "),
            ("OPENAI_API_KEY", "o")
        ])),
        Some("openai")
    );
    assert_eq!(
        detect_with(&env_of(&[("OPENAI_BASE_URL", "http://x/v1")])),
        None
    );
    assert_eq!(detect_with(&env_of(&[])), None);
}

#[test]
fn the_manifest_stays_declaration_only() {
    let manifest = include_str!("../../noeta-plugin.toml");
    assert!(manifest.contains("name = \"providers\""));
    assert!(manifest.contains("contributions = []"));
}
