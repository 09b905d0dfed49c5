//! The `providers` built-in plugin: model providers (Anthropic Messages, OpenAI-compatible chat
//! completions and the scripted provider), found by name.
//!
//! The plugin contributes nothing to any surface: a host opens a provider by name with
//! [`open_provider`] and hands it to the runner. Both network providers stream every request,
//! retry transient failures themselves with bounded, jittered backoff, bound every wait with a
//! deadline, and stop as soon as the `complete` future is dropped (the connection is closed with
//! it). See the README for the wire mapping.

mod aliases;
mod anthropic;
mod catalog;
mod config;
mod http;
mod open;
mod openai;
#[cfg(test)]
mod props;

use noeta_core::{LinkedPlugin, RefTable};

pub use aliases::{
    MODEL_ALIASES, is_model_alias, model_aliases_from_settings, resolve_model_alias,
};
pub use anthropic::{
    ANTHROPIC_API_KEY_VAR, ANTHROPIC_BASE_URL_VAR, ANTHROPIC_DEFAULT_BASE_URL,
    ANTHROPIC_DEFAULT_MODEL, ANTHROPIC_VERSION, AnthropicProvider,
};
pub use catalog::{ModelLimits, Price, UNKNOWN_MODEL, knows_model, model_limits, model_price};
pub use config::{EnvLookup, Notify, ProviderConfig, from_settings, process_env};
pub use open::{
    KNOWN_PROVIDERS, ProviderSetupError, detect_from_env, detect_with, open_provider,
    open_provider_with,
};
pub use openai::{
    CONTEXT_PREAMBLE, OPENAI_API_KEY_VAR, OPENAI_BASE_URL_VAR, OPENAI_DEFAULT_BASE_URL,
    OPENAI_DEFAULT_MODEL, OpenAiProvider,
};

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new(),
    )
}
