//! Signing in to remote servers (OAuth 2.1, as the MCP specification's authorization asks):
//! the server's protected-resource metadata and its authorization server's metadata are
//! discovered (from the server's `WWW-Authenticate` challenge when there is one), a client is
//! registered dynamically (or a pre-registered one, or a client-metadata URL, is used), the
//! person signs in through their browser with an authorization code protected by PKCE, and the
//! code comes back to a one-time listener on the loopback interface. The tokens go to the
//! [`TokenVault`]; connections then send them and refresh them (rmcp's `AuthClient`).
//!
//! rmcp's auth support does the protocol; this module owns the loopback redirect, the vault
//! record and the words a person reads.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
    OAuthClientConfig,
};
use rmcp::transport::streamable_http_client::StreamableHttpError;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::tokens::{Record, TokenVault, VaultStore};

/// The name noeta registers its OAuth client under.
const CLIENT_NAME: &str = "noeta";

/// What a sign-in starts from.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SignIn {
    /// The server's streamable-HTTP URL.
    pub url: String,
    /// The `WWW-Authenticate` challenge the server answered with, if any: it points at the
    /// server's metadata and names the scopes it wants.
    pub challenge: Option<String>,
    /// Scopes to ask for; empty: the challenge's, else the server's advertised ones.
    pub scopes: Vec<String>,
    /// A client registered beforehand with the authorization server (no dynamic
    /// registration then).
    pub client_id: Option<String>,
    /// That client's secret, when it is a confidential client.
    pub client_secret: Option<String>,
    /// An HTTPS URL of a client-metadata document to use as the client id, where the
    /// authorization server accepts such ids.
    pub client_metadata_url: Option<String>,
    /// How long to wait for the browser to come back.
    pub wait: Duration,
}

impl SignIn {
    /// A sign-in to the server at `url`, waiting five minutes for the person.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            wait: Duration::from_secs(300),
            ..Self::default()
        }
    }
}

/// What a finished sign-in got.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SignedIn {
    /// The scopes the authorization server granted (or those asked for, when it did not say).
    pub scopes: Vec<String>,
    /// Where the tokens are kept.
    pub kept_in: String,
}

/// Signs in to `request.url`: discovers, registers, has `open` show the person the
/// authorization URL (a browser, or the URL printed), waits for the redirect on a loopback
/// port, exchanges the code and keeps the tokens in `vault`. Every failure is one line naming
/// the step and the server.
pub async fn sign_in(
    vault: Arc<dyn TokenVault>,
    request: SignIn,
    open: &(dyn Fn(&str) -> Result<(), String> + Send + Sync),
) -> Result<SignedIn, String> {
    crate::http::tls();
    let url = request.url.clone();
    let fail = |step: &str, e: AuthError| format!("signing in to {url}: {step} failed: {e}");
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| {
            format!("signing in to {url}: cannot listen on the loopback interface: {e}")
        })?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");

    let mut manager = AuthorizationManager::new(url.as_str())
        .await
        .map_err(|e| fail("starting the OAuth client", e))?;
    let store = VaultStore::new(
        Arc::clone(&vault),
        Record {
            url: url.clone(),
            credentials: None,
            client_secret: None,
            redirect_uri: redirect_uri.clone(),
            metadata: None,
        },
    );
    manager.set_credential_store(store.clone());
    let resolution = manager
        .resolve_metadata_from_challenge(request.challenge.as_deref())
        .await
        .map_err(|e| fail("discovering its authorization server", e))?;
    let metadata = resolution.metadata;
    manager.set_metadata(metadata.clone());
    let scopes = if request.scopes.is_empty() {
        manager.select_initial_scopes(&[]).await
    } else {
        request.scopes.clone()
    };
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();

    let mut authorization = AuthorizationRequest::new(redirect_uri.clone())
        .with_scopes(scopes.iter().cloned())
        .with_client_name(CLIENT_NAME);
    let supports_metadata_ids = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let secret = if let Some(id) = &request.client_id {
        authorization = authorization.with_preregistered_client(id.clone());
        if let Some(secret) = &request.client_secret {
            authorization = authorization.with_client_secret(secret.clone());
        }
        request.client_secret.clone()
    } else if let Some(document) = request
        .client_metadata_url
        .as_ref()
        .filter(|_| supports_metadata_ids)
    {
        authorization = authorization.with_client_metadata_url(document.clone());
        None
    } else if metadata.registration_endpoint.is_some() {
        // Registered here rather than inside the session, so a confidential client's secret is
        // known and kept for refreshing.
        let registered = manager
            .register_client(CLIENT_NAME, &redirect_uri, &scope_refs)
            .await
            .map_err(|e| fail("registering noeta as a client", e))?;
        authorization = authorization.with_preregistered_client(registered.client_id.clone());
        if let Some(secret) = &registered.client_secret {
            authorization = authorization.with_client_secret(secret.clone());
        }
        registered.client_secret
    } else {
        return Err(format!(
            "signing in to {url}: its authorization server offers no dynamic client registration \
             — register a client with it and give its id (`noeta mcp login … --client-id ID`)"
        ));
    };
    store.set_client(secret, Some(metadata));

    let session = AuthorizationSession::new(manager, authorization)
        .await
        .map_err(|(_, e)| fail("preparing the authorization request", e))?;
    // Only the redirect carrying this request's state is taken: anything else reaching the
    // port (another local program, a page guessing it) is answered and waited past.
    let state = query_value(&session.auth_url, "state").unwrap_or_default();
    open(&session.auth_url)?;
    let callback = tokio::time::timeout(request.wait, redirected(&listener, &url, &state))
        .await
        .map_err(|_| {
            format!(
                "signing in to {url}: the browser did not come back within {} s",
                request.wait.as_secs()
            )
        })??;
    session
        .handle_callback_url(&format!("http://127.0.0.1:{port}{callback}"))
        .await
        .map_err(|e| fail("exchanging the authorization code", e))?;
    let granted = Record::load(vault.as_ref(), &url)?
        .and_then(|record| record.credentials)
        .map(|credentials| credentials.granted_scopes)
        .filter(|granted| !granted.is_empty())
        .unwrap_or(scopes);
    Ok(SignedIn {
        scopes: granted,
        kept_in: vault.place(),
    })
}

/// The value of `key` in `address`'s query, decoded.
fn query_value(address: &str, key: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(address).ok()?;
    parsed
        .query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// Waits on `listener` for the browser's redirect carrying `state`: the `/callback?…` path and
/// query. Other paths (a browser's favicon) are answered 404, a callback with another state
/// 400, and waited past; an `error` in the redirect fails the sign-in with the authorization
/// server's own words.
async fn redirected(
    listener: &tokio::net::TcpListener,
    url: &str,
    state: &str,
) -> Result<String, String> {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let mut head = Vec::new();
        let mut buf = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&head);
        let target = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("GET "))
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_default()
            .to_owned();
        if !target.starts_with("/callback?") {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let address = format!("http://127.0.0.1{target}");
        if query_value(&address, "state").as_deref() != Some(state) {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let refused = query_value(&address, "error").map(|error| {
            match query_value(&address, "error_description") {
                Some(description) => format!("{error} ({description})"),
                None => error,
            }
        });
        let page = if refused.is_some() {
            "Signing in to the MCP server failed; see the terminal. You can close this tab."
        } else {
            "Signed in to the MCP server for noeta. You can close this tab."
        };
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n\
             cache-control: no-store\r\nconnection: close\r\n\r\n{page}",
            page.len()
        );
        let _ = stream.write_all(reply.as_bytes()).await;
        if let Some(error) = refused {
            return Err(format!(
                "signing in to {url}: the authorization server refused: {error}"
            ));
        }
        return Ok(target);
    }
}

/// Forgets the sign-in kept for `url`: whether there was one.
pub fn sign_out(vault: &dyn TokenVault, url: &str) -> Result<bool, String> {
    vault.clear(url)
}

/// An HTTP client that sends `url`'s kept tokens and refreshes them, when a sign-in is kept.
pub(crate) async fn authorized(
    vault: &Arc<dyn TokenVault>,
    url: &str,
) -> Result<Option<AuthClient<reqwest::Client>>, String> {
    let Some(record) = Record::load(vault.as_ref(), url)? else {
        return Ok(None);
    };
    let Some(client_id) = record.credentials.as_ref().map(|c| c.client_id.clone()) else {
        return Ok(None);
    };
    crate::http::tls();
    let fail = |e: AuthError| format!("the sign-in kept for {url} cannot be used: {e}");
    let mut manager = AuthorizationManager::new(url).await.map_err(fail)?;
    if let Some(metadata) = &record.metadata {
        manager.set_metadata(metadata.clone());
    }
    let secret = record.client_secret.clone();
    let redirect_uri = record.redirect_uri.clone();
    manager.set_credential_store(VaultStore::new(Arc::clone(vault), record));
    if !manager.initialize_from_store().await.map_err(fail)? {
        return Ok(None);
    }
    if let Some(secret) = secret {
        manager
            .configure_client(
                OAuthClientConfig::new(client_id, redirect_uri).with_client_secret(secret),
            )
            .map_err(fail)?;
    }
    Ok(Some(AuthClient::new(reqwest::Client::new(), manager)))
}

/// What a server's refusal asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// The `WWW-Authenticate` header.
    pub(crate) header: String,
    /// Whether the client had a token, with too little scope (403), rather than none (401).
    pub(crate) more_scope: bool,
}

/// The sign-in challenge inside a client error, if the server refused for want of one.
pub(crate) fn challenge_in(error: &(dyn std::error::Error + 'static)) -> Option<Challenge> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(found) = from_transport(error) {
            return Some(found);
        }
        if let Some(rmcp::ServiceError::TransportSend(dynamic)) =
            error.downcast_ref::<rmcp::ServiceError>()
            && let Some(found) = from_transport(dynamic.error.as_ref())
        {
            return Some(found);
        }
        if let Some(rmcp::service::ClientInitializeError::TransportError { error, .. }) =
            error.downcast_ref::<rmcp::service::ClientInitializeError>()
            && let Some(found) = from_transport(error.error.as_ref())
        {
            return Some(found);
        }
        next = error.source();
    }
    None
}

fn from_transport(error: &(dyn std::error::Error + 'static)) -> Option<Challenge> {
    match error.downcast_ref::<StreamableHttpError<reqwest::Error>>()? {
        StreamableHttpError::AuthRequired(e) => Some(Challenge {
            header: e.www_authenticate_header.clone(),
            more_scope: false,
        }),
        StreamableHttpError::InsufficientScope(e) => Some(Challenge {
            header: e.www_authenticate_header.clone(),
            more_scope: true,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    /// Sends `GET path` to `port` and returns the status line.
    async fn get(port: u16, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        stream
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.unwrap();
        reply.lines().next().unwrap_or_default().to_owned()
    }

    /// A listener waiting for the redirect of a sign-in with state `s1`, and its port.
    async fn waiting() -> (tokio::task::JoinHandle<Result<String, String>>, u16) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let waiting =
            tokio::spawn(async move { redirected(&listener, "https://a.example/mcp", "s1").await });
        (waiting, port)
    }

    #[tokio::test]
    async fn only_the_redirect_with_this_sign_ins_state_is_taken() {
        let (waiting, port) = waiting().await;
        assert!(get(port, "/favicon.ico").await.contains("404"));
        assert!(
            get(port, "/callback?code=forged&state=other")
                .await
                .contains("400")
        );
        assert!(get(port, "/callback?code=c&state=s1").await.contains("200"));
        assert_eq!(waiting.await.unwrap().unwrap(), "/callback?code=c&state=s1");
    }

    #[tokio::test]
    async fn a_refusal_in_the_redirect_fails_the_sign_in_in_the_servers_words() {
        let (waiting, port) = waiting().await;
        get(
            port,
            "/callback?error=access_denied&error_description=the+person+said+no&state=s1",
        )
        .await;
        let err = waiting.await.unwrap().unwrap_err();
        assert_eq!(
            err,
            "signing in to https://a.example/mcp: the authorization server refused: \
             access_denied (the person said no)"
        );
    }
}
