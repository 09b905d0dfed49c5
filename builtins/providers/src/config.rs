//! Provider configuration, and how unset values are read from the environment.

use std::time::Duration;

use noeta_toolkit::{SettingsTable, TimeUnit};

use crate::open::ProviderSetupError;

/// How to reach and drive a model provider. Anything left `None` comes from the environment
/// (see `AnthropicProvider::from_env`, `OpenAiProvider::from_env`) or a documented default.
///
/// Build one from the default and set what you need:
/// `ProviderConfig { model: Some("…".into()), ..ProviderConfig::default() }`. Its `Debug` form
/// hides the key.
#[derive(Clone, PartialEq)]
pub struct ProviderConfig {
    /// The model; each provider has a documented default.
    pub model: Option<String>,
    /// The API key; without it the provider's key variable is read.
    pub api_key: Option<String>,
    /// The API base URL; without it the provider's base-URL variable, then its default.
    pub base_url: Option<String>,
    /// How many times a transient failure is retried (so at most `max_retries + 1` attempts).
    pub max_retries: u32,
    /// The first backoff step: attempt `n` waits up to `min(retry_base_delay · 2ⁿ,
    /// retry_max_delay)`, with equal jitter.
    pub retry_base_delay: Duration,
    /// The longest backoff step.
    pub retry_max_delay: Duration,
    /// The longest the retries of one call may take in all: a retry whose wait would end past
    /// it is not made, however many `max_retries` allow.
    pub max_retry_time: Duration,
    /// Told one line per retry (`retrying in 6 s: … (attempt 3 of 9)`), for a frontend to
    /// show; every retry is also logged at info level.
    pub notify: Option<Notify>,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long the response may go quiet: before its headers, and between two bytes of the stream.
    pub idle_timeout: Duration,
    /// Anthropic extended thinking: the token budget, off when `None`.
    pub thinking_budget: Option<u32>,
    /// The output-token limit sent with each request, instead of the catalog's.
    pub max_output_tokens: Option<u32>,
    /// The context window reported to the runner, instead of the catalog's (for local models).
    pub context_window: Option<u64>,
    /// OpenAI `reasoning_effort`, sent verbatim when set.
    pub reasoning_effort: Option<String>,
    /// The model's price, instead of the catalog's (which has none for models without a
    /// published one): each reply's `usage.cost_micros` is computed from it.
    pub price: Option<crate::catalog::Price>,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            model: None,
            api_key: None,
            base_url: None,
            max_retries: 8,
            retry_base_delay: Duration::from_secs(1),
            retry_max_delay: Duration::from_secs(30),
            max_retry_time: Duration::from_secs(600),
            notify: None,
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
            thinking_budget: None,
            max_output_tokens: None,
            context_window: None,
            reasoning_effort: None,
            price: None,
        }
    }
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "(hidden)"))
            .field("base_url", &self.base_url)
            .field("max_retries", &self.max_retries)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .field("max_retry_time", &self.max_retry_time)
            .field("notify", &self.notify)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("thinking_budget", &self.thinking_budget)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("context_window", &self.context_window)
            .field("reasoning_effort", &self.reasoning_effort)
            .finish()
    }
}

/// Where a provider tells a frontend about its retries: one line each.
#[derive(Clone)]
pub struct Notify(std::sync::Arc<dyn Fn(&str) + Send + Sync>);

impl Notify {
    /// A sink calling `tell` with each line.
    pub fn new(tell: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(tell))
    }

    /// Tells the sink `line`.
    pub fn tell(&self, line: &str) {
        (self.0)(line);
    }
}

/// Two sinks are equal when they are the same sink.
impl PartialEq for Notify {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for Notify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notify")
    }
}

/// A lookup of environment variables (the process environment, or a table in tests).
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment, as an [`EnvLookup`].
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// A trimmed, non-empty value.
pub(crate) fn present(value: Option<&str>) -> Option<String> {
    value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// The configured value, else the variable's (blank counts as unset, as the SDKs read it).
pub(crate) fn setting(given: Option<&str>, env: EnvLookup<'_>, variable: &str) -> Option<String> {
    present(given).or_else(|| present(env(variable).as_deref()))
}

/// A base URL checked to be http(s), without trailing slashes (a trailing slash is tolerated,
/// as the official SDKs tolerate it).
pub(crate) fn base_url(url: &str) -> Result<String, ProviderSetupError> {
    let trimmed = url.trim().trim_end_matches('/');
    let invalid = |reason: String| ProviderSetupError::BaseUrl {
        url: url.to_owned(),
        reason,
    };
    let parsed = reqwest::Url::parse(trimmed).map_err(|e| invalid(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "the scheme must be http or https, not `{}`",
            parsed.scheme()
        )));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid("a base URL takes no query or fragment".to_owned()));
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_lose_trailing_slashes_and_must_be_http() {
        assert_eq!(
            base_url("https://api.openai.com/v1/").unwrap(),
            "https://api.openai.com/v1"
        );
        assert_eq!(
            base_url(" http://localhost:11434/v1// ").unwrap(),
            "http://localhost:11434/v1"
        );
        let err = base_url("ftp://example.com").unwrap_err().to_string();
        assert!(err.contains("ftp://example.com"), "{err}");
        assert!(err.contains("http or https"), "{err}");
        assert!(base_url("not a url").is_err());
    }

    #[test]
    fn the_debug_form_hides_the_key() {
        let config = ProviderConfig {
            api_key: Some("sk-secret".to_owned()),
            ..ProviderConfig::default()
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("sk-secret"), "{shown}");
        assert!(shown.contains("(hidden)"), "{shown}");
    }

    #[test]
    fn blank_settings_count_as_unset() {
        let env = |name: &str| (name == "KEY").then(|| "  from-env ".to_owned());
        assert_eq!(
            setting(Some("given"), &env, "KEY").as_deref(),
            Some("given")
        );
        assert_eq!(
            setting(Some("  "), &env, "KEY").as_deref(),
            Some("from-env")
        );
        assert_eq!(setting(None, &env, "OTHER"), None);
    }
}

/// The keys `[plugins.providers]` takes.
pub(crate) const SETTINGS_KEYS: &[&str] = &[
    "provider",
    "model",
    "api_key",
    "base_url",
    "max_retries",
    "max_retry_time_ms",
    "connect_timeout_ms",
    "idle_timeout_ms",
    "thinking_budget",
    "max_output_tokens",
    "context_window",
    "reasoning_effort",
    "price",
    "model_aliases",
];

/// The keys of `price`, in US dollars per million tokens.
const PRICE_KEYS: &[&str] = &["input", "output", "cache_read", "cache_write"];

/// `[plugins.providers]` read into the provider to use (when it names one) and its
/// configuration, over `base`. Secret references (`{env:…}`) must already be resolved; a
/// string is taken as written. Every error names the key and the value.
pub fn from_settings(
    params: &serde_json::Value,
    base: ProviderConfig,
) -> Result<(Option<String>, ProviderConfig), String> {
    let table = SettingsTable::new("providers", params, SETTINGS_KEYS)?;
    crate::aliases::model_aliases_from_settings(params)?;
    let price = match table.table("price", PRICE_KEYS)? {
        Some(price) => {
            let dollars = |part: &str| {
                price
                    .read(part, "dollars per million tokens", |v| {
                        v.as_f64().filter(|d| d.is_finite() && *d >= 0.0)
                    })
                    .map(|d| d.unwrap_or(0.0))
            };
            Some(crate::catalog::Price {
                input: dollars("input")?,
                output: dollars("output")?,
                cache_read: dollars("cache_read")?,
                cache_write: dollars("cache_write")?,
            })
        }
        None => base.price,
    };
    let config = ProviderConfig {
        model: table.string("model")?.or(base.model),
        api_key: table.string("api_key")?.or(base.api_key),
        base_url: table.string("base_url")?.or(base.base_url),
        max_retries: table.whole("max_retries")?.unwrap_or(base.max_retries),
        retry_base_delay: base.retry_base_delay,
        retry_max_delay: base.retry_max_delay,
        max_retry_time: table
            .duration("max_retry_time_ms", TimeUnit::Milliseconds)?
            .unwrap_or(base.max_retry_time),
        notify: base.notify,
        connect_timeout: table
            .duration("connect_timeout_ms", TimeUnit::Milliseconds)?
            .unwrap_or(base.connect_timeout),
        idle_timeout: table
            .duration("idle_timeout_ms", TimeUnit::Milliseconds)?
            .unwrap_or(base.idle_timeout),
        thinking_budget: table.whole("thinking_budget")?.or(base.thinking_budget),
        max_output_tokens: table.whole("max_output_tokens")?.or(base.max_output_tokens),
        context_window: table.whole("context_window")?.or(base.context_window),
        reasoning_effort: table.string("reasoning_effort")?.or(base.reasoning_effort),
        price,
    };
    Ok((table.string("provider")?, config))
}

#[cfg(test)]
mod settings_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_fill_the_configuration_and_name_what_is_wrong() {
        let (provider, config) = from_settings(
            &json!({
                "provider": "openai", "model": "llama3", "base_url": "http://127.0.0.1:11434/v1",
                "max_retries": 2, "idle_timeout_ms": 1500, "context_window": 8192,
                "price": { "input": 0.5, "output": 1.5 }
            }),
            ProviderConfig::default(),
        )
        .unwrap();
        assert_eq!(provider.as_deref(), Some("openai"));
        assert_eq!(config.model.as_deref(), Some("llama3"));
        assert_eq!(config.max_retries, 2);
        assert_eq!(config.idle_timeout, Duration::from_millis(1500));
        assert_eq!(config.context_window, Some(8192));
        assert_eq!(config.price.unwrap().output, 1.5);
        assert_eq!(
            from_settings(&serde_json::Value::Null, ProviderConfig::default())
                .unwrap()
                .0,
            None
        );
        for (bad, message) in [
            (
                json!({"modle": "x"}),
                "settings [plugins.providers]: unknown key `modle`",
            ),
            (
                json!({"max_retries": "3"}),
                "settings [plugins.providers] max_retries: expected a whole number, got `\"3\"`",
            ),
            (
                json!({"max_retries": 5_000_000_000_u64}),
                "settings [plugins.providers] max_retries: expected a whole number no greater than 4294967295, got `5000000000`",
            ),
            (
                json!({"idle_timeout_ms": 1.5}),
                "settings [plugins.providers] idle_timeout_ms: expected a whole number of milliseconds, got `1.5`",
            ),
            (
                json!({"price": 3}),
                "settings [plugins.providers] price: expected a table, got `3`",
            ),
            (
                json!({"price": {"input": -1}}),
                "settings [plugins.providers] price.input: expected dollars per million tokens, got `-1`",
            ),
            (
                json!({"price": {"in": 1}}),
                "settings [plugins.providers] price: unknown key `in` (known: input, output, cache_read, cache_write)",
            ),
            (
                json!("anthropic"),
                "settings [plugins.providers]: expected a table",
            ),
        ] {
            let err = from_settings(&bad, ProviderConfig::default()).unwrap_err();
            assert!(err.starts_with(message), "{err}");
        }
    }
}
