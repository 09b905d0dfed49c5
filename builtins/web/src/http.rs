//! The HTTP side both tools share: the client (no automatic redirects, the configured user
//! agent and timeout), reading a body up to a cap, and error messages that say why.

use std::sync::{Once, OnceLock};
use std::time::Duration;

use noeta_core::ToolError;

use crate::settings::Settings;

/// The longest a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Installs ring as the process's TLS crypto provider, once; one installed already stays.
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An error means another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// An HTTP client built on its first use: building one loads the TLS trust roots, which a
/// session whose model never reads the web does not pay for.
#[derive(Default)]
pub(crate) struct LazyClient(OnceLock<reqwest::Client>);

impl LazyClient {
    /// The client, built from `settings` the first time.
    pub(crate) fn get(&self, settings: &Settings) -> Result<&reqwest::Client, String> {
        if let Some(client) = self.0.get() {
            return Ok(client);
        }
        let built = client(settings)?;
        Ok(self.0.get_or_init(|| built))
    }
}

/// A client that follows no redirect by itself (WebFetch decides which it follows).
pub(crate) fn client(settings: &Settings) -> Result<reqwest::Client, String> {
    install_crypto_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT.min(settings.timeout))
        .timeout(settings.timeout)
        .user_agent(settings.user_agent.clone())
        .build()
        .map_err(|err| {
            format!(
                "plugin `web`: the HTTP client could not be built: {}",
                describe(&err)
            )
        })
}

/// The first `max` bytes of a response's body, and whether there was more.
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    max: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = max - body.len();
        if chunk.len() >= room {
            body.extend_from_slice(&chunk[..room]);
            // Exactly at the cap is whole only if nothing follows.
            let more = chunk.len() > room || response.chunk().await?.is_some_and(|c| !c.is_empty());
            return Ok((body, more));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// An error with its causes, which reqwest keeps apart (`error sending request: connection
/// refused`).
pub(crate) fn describe(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The tools need a Tokio runtime for their requests; without one they say so instead of
/// panicking inside the HTTP client.
pub(crate) fn require_runtime(tool: &str) -> Result<(), ToolError> {
    tokio::runtime::Handle::try_current()
        .map(|_| ())
        .map_err(|_| {
            ToolError::Fatal(format!(
                "{tool} needs a Tokio runtime to make HTTP requests, and none is running"
            ))
        })
}
