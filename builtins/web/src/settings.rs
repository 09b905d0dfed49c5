//! `[plugins.web]`: the search key and endpoint, the download and content caps, the cache's
//! lifetime, the user agent and the request timeout.

use std::fmt;
use std::time::Duration;

use noeta_toolkit::{SettingsTable, TimeUnit};
use serde_json::Value;

/// The default cap on one download, in bytes (10 MiB).
pub const MAX_BYTES: usize = 10 * 1024 * 1024;

/// The default cap on the page content handed to the model, in characters.
pub const MAX_CONTENT_CHARS: usize = 100_000;

/// The default lifetime of a cached page, in seconds (15 minutes).
pub const CACHE_TTL_SECS: u64 = 15 * 60;

/// The default time one HTTP request may take, in seconds.
pub const TIMEOUT_SECS: u64 = 30;

/// The search API called by default (Tavily's search endpoint).
pub const SEARCH_ENDPOINT: &str = "https://api.tavily.com/search";

/// The user agent sent by default.
pub const USER_AGENT: &str = concat!("noeta/", env!("CARGO_PKG_VERSION"), " (WebFetch)");

/// The keys `[plugins.web]` takes.
const KEYS: &[&str] = &[
    "search_api_key",
    "search_endpoint",
    "max_bytes",
    "max_content_chars",
    "cache_ttl_secs",
    "user_agent",
    "timeout_secs",
];

/// The plugin's settings.
#[derive(Clone, PartialEq, Eq)]
pub struct Settings {
    /// The search API's key; without one `WebSearch` is not offered.
    pub search_api_key: Option<String>,
    /// Where `WebSearch` posts its queries.
    pub search_endpoint: String,
    /// The most bytes of one response read; the rest is dropped with a note.
    pub max_bytes: usize,
    /// The most characters of a page's content handed to the model.
    pub max_content_chars: usize,
    /// How long a fetched page is served from the cache (zero: never cached).
    pub cache_ttl: Duration,
    /// The `User-Agent` header of every request.
    pub user_agent: String,
    /// How long one HTTP request (connecting, the answer and its body) may take.
    pub timeout: Duration,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field(
                "search_api_key",
                &self.search_api_key.as_ref().map(|_| "(hidden)"),
            )
            .field("search_endpoint", &self.search_endpoint)
            .field("max_bytes", &self.max_bytes)
            .field("max_content_chars", &self.max_content_chars)
            .field("cache_ttl", &self.cache_ttl)
            .field("user_agent", &self.user_agent)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            search_api_key: None,
            search_endpoint: SEARCH_ENDPOINT.to_owned(),
            max_bytes: MAX_BYTES,
            max_content_chars: MAX_CONTENT_CHARS,
            cache_ttl: Duration::from_secs(CACHE_TTL_SECS),
            user_agent: USER_AGENT.to_owned(),
            timeout: Duration::from_secs(TIMEOUT_SECS),
        }
    }
}

impl Settings {
    /// Reads `[plugins.web]` (`null`: the defaults), with secret references already resolved
    /// by the host; every error names the key and the value (a key's value never, since it is
    /// a secret).
    pub fn parse(config: &Value) -> Result<Self, String> {
        let table = SettingsTable::new("web", config, KEYS)?;
        let defaults = Self::default();
        let search_api_key = match table.secret("search_api_key")? {
            Some(secret) if is_secret_reference(&secret) => {
                return Err(table
                    .invalid(
                        "search_api_key",
                        format!(
                            "the secret reference `{secret}` was not resolved (the host resolves secret references before it builds the plugin)"
                        ),
                    )
                    .into());
            }
            secret => secret,
        };
        let search_endpoint = match table.text("search_endpoint")? {
            Some(endpoint) => match reqwest::Url::parse(&endpoint) {
                Ok(url) if matches!(url.scheme(), "http" | "https") => endpoint,
                _ => {
                    return Err(table
                        .invalid(
                            "search_endpoint",
                            format!("`{endpoint}` is not an http or https URL"),
                        )
                        .into());
                }
            },
            None => defaults.search_endpoint,
        };
        let user_agent = match table.text("user_agent")? {
            Some(agent) if reqwest::header::HeaderValue::from_str(&agent).is_err() => {
                return Err(table
                    .invalid(
                        "user_agent",
                        format!("`{agent}` cannot be sent as a header value"),
                    )
                    .into());
            }
            Some(agent) => agent,
            None => defaults.user_agent,
        };
        Ok(Self {
            search_api_key,
            search_endpoint,
            max_bytes: table.positive("max_bytes")?.unwrap_or(defaults.max_bytes),
            max_content_chars: table
                .positive("max_content_chars")?
                .unwrap_or(defaults.max_content_chars),
            cache_ttl: table
                .duration("cache_ttl_secs", TimeUnit::Seconds)?
                .unwrap_or(defaults.cache_ttl),
            user_agent,
            timeout: table
                .positive_duration("timeout_secs", TimeUnit::Seconds)?
                .unwrap_or(defaults.timeout),
        })
    }
}

/// Whether `text` is a secret reference as settings write them (`{env:…}`, `{keyring:…}`).
fn is_secret_reference(text: &str) -> bool {
    text.ends_with('}') && (text.starts_with("{env:") || text.starts_with("{keyring:"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_every_key() {
        assert_eq!(Settings::parse(&Value::Null).unwrap(), Settings::default());
        let read = Settings::parse(&json!({
            "search_api_key": "k-123",
            "search_endpoint": "http://127.0.0.1:9/search",
            "max_bytes": 1000,
            "max_content_chars": 200,
            "cache_ttl_secs": 0,
            "user_agent": "tester/1",
            "timeout_secs": 5,
        }))
        .unwrap();
        assert_eq!(read.search_api_key.as_deref(), Some("k-123"));
        assert_eq!(read.search_endpoint, "http://127.0.0.1:9/search");
        assert_eq!(read.max_bytes, 1000);
        assert_eq!(read.max_content_chars, 200);
        assert_eq!(read.cache_ttl, Duration::ZERO);
        assert_eq!(read.user_agent, "tester/1");
        assert_eq!(read.timeout, Duration::from_secs(5));
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let read = Settings::parse(&json!({ "search_api_key": "very-secret" })).unwrap();
        let shown = format!("{read:?}");
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(shown.contains("(hidden)"), "{shown}");
    }

    #[test]
    fn bad_settings_name_the_plugin_the_key_and_the_value() {
        for (config, needle) in [
            (json!("x"), "expected a table, got `\"x\"`"),
            (json!({ "max_byte": 1 }), "unknown key `max_byte`"),
            (
                json!({ "max_bytes": 0 }),
                "max_bytes: expected a positive integer, got `0`",
            ),
            (
                json!({ "max_bytes": "big" }),
                "max_bytes: expected a positive integer, got `\"big\"`",
            ),
            (
                json!({ "max_content_chars": -3 }),
                "max_content_chars: expected a positive integer, got `-3`",
            ),
            (
                json!({ "cache_ttl_secs": 1.5 }),
                "cache_ttl_secs: expected a whole number of seconds, got `1.5`",
            ),
            (
                json!({ "timeout_secs": 0 }),
                "timeout_secs: expected a positive whole number of seconds, got `0`",
            ),
            (
                json!({ "user_agent": "" }),
                "user_agent: expected a non-empty string, got `\"\"`",
            ),
            (
                json!({ "user_agent": "bad\nagent" }),
                "user_agent: `bad\nagent` cannot be sent as a header value",
            ),
            (
                json!({ "search_endpoint": "ftp://x/search" }),
                "search_endpoint: `ftp://x/search` is not an http or https URL",
            ),
            (
                json!({ "search_endpoint": 7 }),
                "search_endpoint: expected a non-empty string, got `7`",
            ),
            (
                json!({ "search_api_key": 12 }),
                "search_api_key: expected a non-empty string",
            ),
            (
                json!({ "search_api_key": "  " }),
                "search_api_key: expected a non-empty string",
            ),
            (
                json!({ "search_api_key": "{env:SEARCH_KEY}" }),
                "search_api_key: the secret reference `{env:SEARCH_KEY}` was not resolved",
            ),
        ] {
            let err = Settings::parse(&config).unwrap_err();
            assert!(err.contains("settings [plugins.web]"), "{err}");
            assert!(err.contains(needle), "{err} (wanted {needle})");
        }
    }

    #[test]
    fn an_unknown_key_lists_the_known_ones() {
        let err = Settings::parse(&json!({ "endpoint": "x" })).unwrap_err();
        assert!(
            err.ends_with(&format!(
                "unknown key `endpoint` (known: {})",
                KEYS.join(", ")
            )),
            "{err}"
        );
    }
}
