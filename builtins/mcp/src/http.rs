//! Connections to streamable-HTTP servers: headers from the settings, the kept sign-in's
//! tokens when there is one (sent, and refreshed when the server rejects them), and a refusal
//! for want of sign-in turned into one line that says which command signs in.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt as _};

use crate::elicit::Client;
use crate::hub::Slot;
use crate::sign_in::{Challenge, authorized, challenge_in};
use crate::tokens::TokenVault;

/// A client of the streamable-HTTP server at `url`, sending `headers` with every request and,
/// when `tokens` keeps a sign-in for `url`, its access token. A refusal for want of sign-in is
/// noted in `challenge`.
pub(crate) async fn service(
    client: Client,
    url: &str,
    headers: &BTreeMap<String, String>,
    tokens: Option<&Arc<dyn TokenVault>>,
    challenge: &Mutex<Option<Challenge>>,
) -> Result<RunningService<RoleClient, Client>, String> {
    tls();
    let mut custom = std::collections::HashMap::new();
    for (name, value) in headers {
        let name = http::HeaderName::try_from(name.as_str())
            .map_err(|_| format!("`{name}` is not a header name"))?;
        let mut value = http::HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("the value of header `{name}` cannot be sent"))?;
        value.set_sensitive(true);
        custom.insert(name, value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    let signed_in = match tokens {
        Some(vault) => authorized(vault, url).await?,
        None => None,
    };
    let served = match signed_in {
        Some(auth) => {
            client
                .serve(StreamableHttpClientTransport::with_client(auth, config))
                .await
        }
        None => {
            client
                .serve(StreamableHttpClientTransport::from_config(config))
                .await
        }
    };
    served.map_err(|e| {
        note_challenge(challenge, &e);
        e.to_string()
    })
}

/// Installs the process's one TLS provider (ring, as the providers use) before any HTTP client
/// is built; a second install is refused harmlessly.
pub(crate) fn tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Keeps the sign-in challenge inside `error`, if the server refused for want of one.
pub(crate) fn note_challenge(
    challenge: &Mutex<Option<Challenge>>,
    error: &(dyn std::error::Error + 'static),
) {
    if let Some(found) = challenge_in(error) {
        *challenge.lock().unwrap_or_else(PoisonError::into_inner) = Some(found);
    }
}

/// The one line saying `slot`'s server wants sign-in and the command that does it, when its
/// last refusal was for that.
pub(crate) fn sign_in_needed(slot: &Slot) -> Option<String> {
    let challenge = slot
        .challenge
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()?;
    let alias = &slot.server.alias;
    Some(if challenge.more_scope {
        format!(
            "mcp server `{alias}` needs more access than the kept sign-in grants — run `noeta mcp \
             login {alias}` to sign in again"
        )
    } else {
        format!("mcp server `{alias}` needs sign-in — run `noeta mcp login {alias}`")
    })
}

/// The challenge `slot`'s server last answered with (its `WWW-Authenticate` header).
pub(crate) fn last_challenge(slot: &Slot) -> Option<String> {
    slot.challenge
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map(|c| c.header.clone())
}
