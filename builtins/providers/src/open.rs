//! Opening a provider by name, and which one the environment has a key for.

use std::path::Path;
use std::sync::Arc;

use noeta_core::provider::{Provider, ScriptFileError, ScriptedProvider};

use crate::anthropic::{ANTHROPIC_API_KEY_VAR, AnthropicProvider};
use crate::config::{EnvLookup, ProviderConfig, present, process_env};
use crate::openai::{OPENAI_API_KEY_VAR, OpenAiProvider};

/// The provider names `open_provider` knows, as shown in errors.
pub const KNOWN_PROVIDERS: &str = "anthropic, openai, scripted:FILE";

/// Why a provider could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderSetupError {
    /// No provider has that name.
    #[error("unknown provider `{name}` (known: {KNOWN_PROVIDERS})")]
    UnknownProvider {
        /// The name asked for.
        name: String,
    },
    /// The scripted provider was asked for without its file.
    #[error("the scripted provider needs its script file: `scripted:FILE`")]
    MissingScript,
    /// No API key was configured or found in the environment.
    #[error(
        "no API key for provider `{provider}`: set {variable} (or give one in the provider config)"
    )]
    MissingKey {
        /// The provider.
        provider: &'static str,
        /// The variable to set.
        variable: &'static str,
    },
    /// The base URL cannot be used.
    #[error("invalid base URL `{url}`: {reason}")]
    BaseUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting is out of range.
    #[error("invalid provider setting: {message}")]
    Config {
        /// What is wrong.
        message: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// The script file could not be read.
    #[error(transparent)]
    Script(#[from] ScriptFileError),
}

/// Opens the provider `spec` names: `anthropic`, `openai`, or `scripted:FILE` (the kernel's
/// [`ScriptedProvider`]). Settings the config leaves unset are read from the process
/// environment.
pub fn open_provider(
    spec: &str,
    config: ProviderConfig,
) -> Result<Arc<dyn Provider>, ProviderSetupError> {
    open_provider_with(spec, config, &process_env)
}

/// [`open_provider`] reading the environment through `env`.
pub fn open_provider_with(
    spec: &str,
    config: ProviderConfig,
    env: EnvLookup<'_>,
) -> Result<Arc<dyn Provider>, ProviderSetupError> {
    let spec = spec.trim();
    let (name, argument) = match spec.split_once(':') {
        Some((name, argument)) => (name, Some(argument)),
        None => (spec, None),
    };
    match (name, argument) {
        ("anthropic", None) => Ok(Arc::new(AnthropicProvider::from_env(config, env)?)),
        ("openai", None) => Ok(Arc::new(OpenAiProvider::from_env(config, env)?)),
        ("scripted", Some(file)) if !file.trim().is_empty() => Ok(Arc::new(
            ScriptedProvider::from_file(Path::new(file.trim()))?,
        )),
        ("scripted", _) => Err(ProviderSetupError::MissingScript),
        _ => Err(ProviderSetupError::UnknownProvider {
            name: spec.to_owned(),
        }),
    }
}

/// The provider the process environment has an API key for: `anthropic` first, then `openai`.
pub fn detect_from_env() -> Option<&'static str> {
    detect_with(&process_env)
}

/// [`detect_from_env`] reading the environment through `env`.
pub fn detect_with(env: EnvLookup<'_>) -> Option<&'static str> {
    [
        ("anthropic", ANTHROPIC_API_KEY_VAR),
        ("openai", OPENAI_API_KEY_VAR),
    ]
    .into_iter()
    .find(|(_, variable)| present(env(variable).as_deref()).is_some())
    .map(|(name, _)| name)
}
