//! Remote servers the host resolves: a server configured with `type = "host"` has no URL or
//! credential in any settings file; each turn, the endpoint — a URL and the headers to send,
//! credentials often — comes from the embedding host's resolver, by the server's alias (seed
//! 000: a remote server's spec carries a URL and a credential a static manifest must never
//! hold). A host hands its resolver to the plugin as the host value [`RESOLVER`].

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::HostValue;

/// The name the host hands its resolver under ([`noeta_core::session::Instances::with_host_value`]).
pub const RESOLVER: &str = "mcp_server_resolver";

/// A remote server's endpoint for now: where it is, and the headers every request carries.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Remote {
    /// The streamable-HTTP endpoint.
    pub url: String,
    /// Headers sent with every request (credentials, often); never shown or recorded.
    pub headers: BTreeMap<String, String>,
}

impl Remote {
    /// The endpoint `url` with no headers.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: BTreeMap::new(),
        }
    }

    /// The same endpoint sending header `name: value` too.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&String> = self.headers.keys().collect();
        f.debug_struct("Remote")
            .field("url", &self.url)
            .field("headers", &headers)
            .finish()
    }
}

/// The host's resolver of remote servers, asked at every turn for each `type = "host"` server.
#[async_trait]
pub trait RemoteResolver: Send + Sync {
    /// The endpoint of the server known as `alias` now: `Ok(None)` when the host offers it no
    /// endpoint (its tools are then not offered), `Err` naming why it cannot say.
    async fn resolve(&self, alias: &str) -> Result<Option<Remote>, String>;
}

/// `resolver` as the host value the plugin reads (set it under [`RESOLVER`]).
pub fn host_value(resolver: Arc<dyn RemoteResolver>) -> HostValue {
    HostValue::new(resolver)
}

/// The resolver a session's host handed over, if any.
pub(crate) fn from_host(values: &noeta_core::HostValues) -> Option<Arc<dyn RemoteResolver>> {
    values.get::<Arc<dyn RemoteResolver>>(RESOLVER).cloned()
}
