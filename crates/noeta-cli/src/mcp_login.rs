//! `noeta mcp login` and `noeta mcp logout`: signing in to a remote MCP server (OAuth, through
//! the person's browser and a loopback redirect) and forgetting the sign-in. The tokens are
//! kept where [`agent::mcp_tokens`] says; every session's connection to that server sends them.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use noeta::HostPaths;
use noeta::mcp::{SignIn, TokenVault, Transport};

use crate::agent;
use crate::stdio::{eoutln, outln};

/// `noeta mcp login`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LoginArgs {
    /// A configured streamable-HTTP server's alias, or its URL
    pub(crate) server: String,
    /// A scope to ask for (repeatable; default: what the server asks for)
    #[arg(long = "scope", value_name = "SCOPE")]
    pub(crate) scopes: Vec<String>,
    /// A client registered with the server's authorization server beforehand (default:
    /// noeta registers itself, where the server allows it)
    #[arg(long, value_name = "ID")]
    pub(crate) client_id: Option<String>,
    /// The environment variable holding that client's secret (a confidential client)
    #[arg(long, value_name = "VAR", requires = "client_id")]
    pub(crate) client_secret_env: Option<String>,
    /// An HTTPS URL of a client-metadata document to use as the client id, where the
    /// authorization server takes such ids
    #[arg(long, value_name = "URL")]
    pub(crate) client_metadata_url: Option<String>,
}

/// The URL behind `server`: itself when it is one, else the configured server of that alias,
/// which must be a streamable-HTTP one.
fn url_of(paths: &HostPaths, plugin_dirs: Vec<PathBuf>, server: &str) -> Result<String> {
    if server.starts_with("http://") || server.starts_with("https://") {
        return Ok(server.to_owned());
    }
    let args = agent::AgentArgs {
        plugin_dirs,
        ..agent::AgentArgs::default()
    };
    let host = noeta::Host::open(agent::config(paths, &args)?)?;
    let settings = crate::mcp::configured(&host)?;
    let Some(found) = settings.servers.iter().find(|s| s.alias == server) else {
        let known: Vec<&str> = settings.servers.iter().map(|s| s.alias.as_str()).collect();
        bail!(
            "no MCP server `{server}` is configured (configured: {}); give its URL to sign in to \
             one that is not",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        );
    };
    match &found.transport {
        Transport::Http { url, .. } => Ok(url.clone()),
        _ => bail!(
            "mcp server `{server}` is not a streamable-HTTP server ({}): only those sign in",
            crate::mcp::describe(found)
        ),
    }
}

/// The vault, or why there is none.
fn vault(paths: &HostPaths) -> Result<Arc<dyn TokenVault>> {
    agent::mcp_tokens(paths).context(
        "there is nowhere to keep a sign-in: no home directory ($HOME is unset) and no keyring",
    )
}

/// `noeta mcp login SERVER`: signs in and keeps the tokens.
pub(crate) fn login(
    paths: &HostPaths,
    plugin_dirs: Vec<PathBuf>,
    args: &LoginArgs,
) -> Result<ExitCode> {
    let url = url_of(paths, plugin_dirs, &args.server)?;
    let mut request = SignIn::new(url.clone());
    request.scopes.clone_from(&args.scopes);
    request.client_id.clone_from(&args.client_id);
    request
        .client_metadata_url
        .clone_from(&args.client_metadata_url);
    if let Some(var) = &args.client_secret_env {
        request.client_secret = Some(std::env::var(var).with_context(|| {
            format!("--client-secret-env names `{var}`, which is not set in the environment")
        })?);
    }
    let runtime = runtime()?;
    let done = runtime.block_on(sign_in(&vault(paths)?, request))?;
    outln!(
        "signed in to {url}{}; the tokens are kept in {}",
        if done.scopes.is_empty() {
            String::new()
        } else {
            format!(" (scopes: {})", done.scopes.join(" "))
        },
        done.kept_in
    );
    Ok(ExitCode::SUCCESS)
}

/// `noeta mcp logout SERVER`: forgets the kept sign-in.
pub(crate) fn logout(
    paths: &HostPaths,
    plugin_dirs: Vec<PathBuf>,
    server: &str,
) -> Result<ExitCode> {
    let url = url_of(paths, plugin_dirs, server)?;
    let vault = vault(paths)?;
    if noeta::mcp::sign_out(vault.as_ref(), &url).map_err(anyhow::Error::msg)? {
        outln!(
            "signed out of {url}: its tokens are removed from {}",
            vault.place()
        );
    } else {
        outln!("no sign-in is kept for {url}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The runtime a sign-in runs on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Signs in with `request`, showing the person where to sign in.
pub(crate) async fn sign_in(
    vault: &Arc<dyn TokenVault>,
    request: SignIn,
) -> Result<noeta::mcp::SignedIn> {
    noeta::mcp::sign_in(Arc::clone(vault), request, &open_browser)
        .await
        .map_err(anyhow::Error::msg)
}

/// Shows `address` to the person: printed, and opened with `$BROWSER` (a command, given the
/// address as its last argument) or the desktop's opener when there is one. The browser runs
/// on its own; a browser that cannot start leaves the printed address to copy.
fn open_browser(address: &str) -> Result<(), String> {
    eoutln!("Sign in at this address (opening it in a browser where one can be opened):");
    eoutln!("  {address}");
    let command = match std::env::var("BROWSER") {
        Ok(browser) if !browser.trim().is_empty() => shlex::split(&browser)
            .filter(|words| !words.is_empty())
            .ok_or_else(|| format!("$BROWSER (`{browser}`) is not a command line"))?,
        _ if cfg!(target_os = "macos") => vec!["open".to_owned()],
        _ => vec!["xdg-open".to_owned()],
    };
    let started = std::process::Command::new(&command[0])
        .args(&command[1..])
        .arg(address)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Ok(mut child) = started {
        // Reaped in the background: the sign-in does not wait for the browser to close.
        std::thread::spawn(move || child.wait());
    }
    Ok(())
}
