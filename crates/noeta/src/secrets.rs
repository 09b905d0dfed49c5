//! Secret references in settings (`{env:NAME}`, `{keyring:service/user}`) and the stores
//! that resolve them.
//!
//! Settings keep references as written, so plugin pins hash the reference and never the
//! secret; [`resolve_secrets`] replaces them when a plugin instance is built. A store answers
//! found, missing, or unsupported (not its kind); [`SecretChain`] asks several in order.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// A secret reference: a whole string parameter `{env:NAME}` or `{keyring:service/user}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum SecretRef {
    /// `{env:NAME}`: the environment variable `NAME`.
    Env(String),
    /// `{keyring:service/user}`: the OS keyring entry of `service` and `user`.
    Keyring {
        /// The keyring service.
        service: String,
        /// The keyring user.
        user: String,
    },
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretRef::Env(name) => write!(f, "{{env:{name}}}"),
            SecretRef::Keyring { service, user } => write!(f, "{{keyring:{service}/{user}}}"),
        }
    }
}

impl SecretRef {
    /// Reads a string parameter: `None` when it is no reference, `Err` (what is wrong) when it
    /// has a reference's shape but not its parts.
    pub fn parse(text: &str) -> Option<Result<Self, &'static str>> {
        let inner = text.strip_prefix('{')?.strip_suffix('}')?;
        let (scheme, rest) = inner.split_once(':')?;
        let malformed = |why| Some(Err(why));
        match scheme {
            "env" => {
                if rest.is_empty() || rest.contains(['=', '\0', '{', '}']) {
                    malformed("expected `{env:NAME}` with a variable name (no `=`, braces or NUL)")
                } else {
                    Some(Ok(SecretRef::Env(rest.to_owned())))
                }
            }
            "keyring" => match rest.split_once('/') {
                Some((service, user)) if !service.is_empty() && !user.is_empty() => {
                    Some(Ok(SecretRef::Keyring {
                        service: service.to_owned(),
                        user: user.to_owned(),
                    }))
                }
                _ => malformed("expected `{keyring:service/user}` with a service and a user"),
            },
            _ => None,
        }
    }
}

/// Whether a string parameter is a secret reference (well formed or not).
pub fn is_secret_ref(text: &str) -> bool {
    SecretRef::parse(text).is_some()
}

/// A secret value. Its `Debug` never shows it; read it with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// What a [`SecretStore`] says about one reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretLookup {
    /// The secret.
    Found(Secret),
    /// The store handles this kind of reference and has no such secret.
    Missing,
    /// The store does not handle this kind of reference.
    Unsupported,
    /// The store failed; the text names the problem and never holds a secret.
    Failed(String),
}

/// Where secrets come from: the environment, the OS keyring, a test map.
pub trait SecretStore: Send + Sync {
    /// Looks `reference` up.
    fn lookup(&self, reference: &SecretRef) -> SecretLookup;
}

/// Where a reference sits: `for plugin `p`, key `a.b``.
fn place(plugin: Option<&str>, key: &str) -> String {
    match (plugin, key.is_empty()) {
        (Some(plugin), false) => format!(" for plugin `{plugin}`, key `{key}`"),
        (Some(plugin), true) => format!(" for plugin `{plugin}`"),
        (None, false) => format!(" at key `{key}`"),
        (None, true) => String::new(),
    }
}

fn missing_message(reference: &SecretRef, plugin: Option<&str>, key: &str) -> String {
    let place = place(plugin, key);
    match reference {
        SecretRef::Env(name) => {
            format!(
                "environment variable `{name}` is not set (or empty), needed by `{reference}`{place}"
            )
        }
        SecretRef::Keyring { service, user } => format!(
            "the keyring has no entry for service `{service}`, user `{user}`, needed by `{reference}`{place}"
        ),
    }
}

/// Why a secret reference could not be resolved. Messages name the reference, the plugin and
/// the key, and never a secret value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// A string shaped like a reference whose parts are wrong.
    #[error("malformed secret reference `{reference}`{}: {problem}", place(plugin.as_deref(), key))]
    Malformed {
        /// The string as written.
        reference: String,
        /// The plugin whose parameters hold it, when known.
        plugin: Option<String>,
        /// The key path inside the value (`auth.token`, `headers[0]`).
        key: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// The store has no such secret (an unset variable).
    #[error("{}", missing_message(reference, plugin.as_deref(), key))]
    Missing {
        /// The reference.
        reference: SecretRef,
        /// The plugin, when known.
        plugin: Option<String>,
        /// The key path.
        key: String,
    },
    /// No configured store handles this kind of reference.
    #[error(
        "`{reference}`{} needs a secret store for it and none is configured (the OS keyring needs a build with the `keyring` feature; `{{env:NAME}}` always works)",
        place(plugin.as_deref(), key)
    )]
    Unsupported {
        /// The reference.
        reference: SecretRef,
        /// The plugin, when known.
        plugin: Option<String>,
        /// The key path.
        key: String,
    },
    /// The store failed.
    #[error("cannot read `{reference}`{}: {problem}", place(plugin.as_deref(), key))]
    Failed {
        /// The reference.
        reference: SecretRef,
        /// The plugin, when known.
        plugin: Option<String>,
        /// The key path.
        key: String,
        /// The store's problem.
        problem: String,
    },
}

/// Replaces every secret reference inside `value` (recursively) with its secret from `store`.
/// Call it when a plugin instance is built; keep the value as written for anything hashed.
pub fn resolve_secrets(value: &Value, store: &dyn SecretStore) -> Result<Value, SecretError> {
    resolve_at(value, store, None, String::new())
}

/// [`resolve_secrets`] for the parameters of `plugin`, whose name errors then give.
pub fn resolve_plugin_secrets(
    plugin: &str,
    params: &Value,
    store: &dyn SecretStore,
) -> Result<Value, SecretError> {
    resolve_at(params, store, Some(plugin), String::new())
}

/// [`resolve_plugin_secrets`] for every plugin of a config map (an [`AgentOptions::config`]).
pub fn resolve_config(
    config: &BTreeMap<String, Value>,
    store: &dyn SecretStore,
) -> Result<BTreeMap<String, Value>, SecretError> {
    config
        .iter()
        .map(|(plugin, params)| {
            Ok((
                plugin.clone(),
                resolve_plugin_secrets(plugin, params, store)?,
            ))
        })
        .collect()
}

fn resolve_at(
    value: &Value,
    store: &dyn SecretStore,
    plugin: Option<&str>,
    key: String,
) -> Result<Value, SecretError> {
    let join = |key: &str, part: &str| {
        if key.is_empty() {
            part.to_owned()
        } else {
            format!("{key}.{part}")
        }
    };
    Ok(match value {
        Value::String(text) => match SecretRef::parse(text) {
            None => value.clone(),
            Some(Err(problem)) => {
                return Err(SecretError::Malformed {
                    reference: text.clone(),
                    plugin: plugin.map(str::to_owned),
                    key,
                    problem,
                });
            }
            Some(Ok(reference)) => {
                let plugin = plugin.map(str::to_owned);
                match store.lookup(&reference) {
                    SecretLookup::Found(secret) => Value::String(secret.0),
                    SecretLookup::Missing => {
                        return Err(SecretError::Missing {
                            reference,
                            plugin,
                            key,
                        });
                    }
                    SecretLookup::Unsupported => {
                        return Err(SecretError::Unsupported {
                            reference,
                            plugin,
                            key,
                        });
                    }
                    SecretLookup::Failed(problem) => {
                        return Err(SecretError::Failed {
                            reference,
                            plugin,
                            key,
                            problem,
                        });
                    }
                }
            }
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| resolve_at(item, store, plugin, format!("{key}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), resolve_at(v, store, plugin, join(&key, k))?)))
                .collect::<Result<_, SecretError>>()?,
        ),
        Value::Null | Value::Bool(_) | Value::Number(_) => value.clone(),
    })
}

type EnvLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// Secrets from environment variables (`{env:NAME}`); `{keyring:…}` is unsupported. An empty
/// variable counts as unset.
#[derive(Clone, Default)]
pub struct EnvSecrets {
    lookup: Option<Arc<EnvLookup>>,
}

impl EnvSecrets {
    /// Reads the process environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads variables through `lookup` instead of the process environment (for tests and
    /// embedders).
    pub fn with_lookup(lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Self {
            lookup: Some(Arc::new(lookup)),
        }
    }
}

impl fmt::Debug for EnvSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = if self.lookup.is_some() {
            "lookup"
        } else {
            "process environment"
        };
        f.debug_struct("EnvSecrets")
            .field("source", &source)
            .finish()
    }
}

impl SecretStore for EnvSecrets {
    fn lookup(&self, reference: &SecretRef) -> SecretLookup {
        let SecretRef::Env(name) = reference else {
            return SecretLookup::Unsupported;
        };
        let value = match &self.lookup {
            Some(lookup) => lookup(name),
            None => match std::env::var(name) {
                Ok(value) => Some(value),
                Err(std::env::VarError::NotPresent) => None,
                Err(std::env::VarError::NotUnicode(_)) => {
                    return SecretLookup::Failed(format!(
                        "environment variable `{name}` is not valid UTF-8"
                    ));
                }
            },
        };
        match value {
            Some(value) if !value.is_empty() => SecretLookup::Found(Secret(value)),
            _ => SecretLookup::Missing,
        }
    }
}

/// Several stores asked in order: the first secret found wins; a store's failure stops the
/// search; the reference is missing if any store handles its kind, unsupported otherwise.
#[derive(Clone, Default)]
pub struct SecretChain {
    stores: Vec<Arc<dyn SecretStore>>,
}

impl SecretChain {
    /// An empty chain (every reference unsupported).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a store after the ones already there.
    pub fn with(mut self, store: Arc<dyn SecretStore>) -> Self {
        self.stores.push(store);
        self
    }
}

impl fmt::Debug for SecretChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretChain")
            .field("stores", &self.stores.len())
            .finish()
    }
}

impl SecretStore for SecretChain {
    fn lookup(&self, reference: &SecretRef) -> SecretLookup {
        let mut answer = SecretLookup::Unsupported;
        for store in &self.stores {
            match store.lookup(reference) {
                SecretLookup::Unsupported => {}
                SecretLookup::Missing => answer = SecretLookup::Missing,
                found_or_failed => return found_or_failed,
            }
        }
        answer
    }
}

/// Secrets from a keyring credential store (`{keyring:service/user}`); `{env:…}` is left to
/// other stores. Built with the `keyring` feature; the store is the host's choice (the `noeta`
/// binary uses the platform's own, tests an in-memory one).
#[cfg(feature = "keyring")]
#[derive(Clone)]
pub struct KeyringSecrets {
    store: Arc<keyring_core::CredentialStore>,
}

#[cfg(feature = "keyring")]
impl KeyringSecrets {
    /// Reads entries from `store`.
    pub fn new(store: Arc<keyring_core::CredentialStore>) -> Self {
        Self { store }
    }
}

#[cfg(feature = "keyring")]
impl fmt::Debug for KeyringSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyringSecrets")
            .field("store", &self.store.vendor())
            .finish()
    }
}

#[cfg(feature = "keyring")]
impl SecretStore for KeyringSecrets {
    fn lookup(&self, reference: &SecretRef) -> SecretLookup {
        let SecretRef::Keyring { service, user } = reference else {
            return SecretLookup::Unsupported;
        };
        let read = keyring_core::Entry::new_in_store(&self.store, service, user)
            .and_then(|entry| entry.get_password());
        match read {
            Ok(value) if !value.is_empty() => SecretLookup::Found(Secret(value)),
            Ok(_) | Err(keyring_core::Error::NoEntry) => SecretLookup::Missing,
            // The store's own words name the failure; a bad encoding's bytes (which may be the
            // secret) are never shown.
            Err(keyring_core::Error::BadEncoding(_)) => SecretLookup::Failed(format!(
                "the keyring entry for service `{service}`, user `{user}` is not valid UTF-8"
            )),
            Err(keyring_core::Error::BadDataFormat(_, cause)) => SecretLookup::Failed(format!(
                "the keyring entry for service `{service}`, user `{user}` is malformed: {cause}"
            )),
            Err(other) => SecretLookup::Failed(format!(
                "the keyring ({}) failed for service `{service}`, user `{user}`: {other}",
                self.store.vendor()
            )),
        }
    }
}

/// A keyring that could not be opened: every `{keyring:…}` reference fails with the reason.
#[derive(Debug, Clone)]
pub struct UnavailableKeyring {
    reason: String,
}

impl UnavailableKeyring {
    /// A keyring unavailable for `reason`.
    pub fn new(reason: String) -> Self {
        Self { reason }
    }
}

impl SecretStore for UnavailableKeyring {
    fn lookup(&self, reference: &SecretRef) -> SecretLookup {
        match reference {
            SecretRef::Keyring { .. } => SecretLookup::Failed(self.reason.clone()),
            SecretRef::Env(_) => SecretLookup::Unsupported,
        }
    }
}
