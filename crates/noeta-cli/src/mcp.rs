//! `noeta mcp list`: each configured MCP server, connected, with its tools' model-visible names
//! or why it is down.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use noeta::HostPaths;
use noeta::mcp::{Mcp, Server, ServerStatus, Settings, Transport};
use serde_json::json;

use crate::agent;
use crate::stdio::outln;

/// The servers agent `main` would get: the settings' and the `.mcp.json` files'.
pub(crate) fn configured(host: &noeta::Host) -> Result<Settings> {
    let params = host.mcp_params("main")?;
    Settings::parse(&params).map_err(anyhow::Error::msg)
}

/// A server's transport in one line: `stdio: cmd args…` or `http: url`.
pub(crate) fn describe(server: &Server) -> String {
    match &server.transport {
        Transport::Stdio { command, args, .. } => {
            let mut line = format!("stdio: {command}");
            for arg in args {
                line.push(' ');
                line.push_str(arg);
            }
            line
        }
        Transport::Http { url, .. } => format!("http: {url}"),
    }
}

/// Starts every server and reports each: its tools, or the error.
pub(crate) fn connect(settings: Settings) -> Result<Vec<(String, ServerStatus)>> {
    let mcp = Mcp::new(settings);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(runtime.block_on(mcp.connect()))
}

/// `noeta mcp list [--json]`: exit 0 when every server is up, 1 when one is not.
pub(crate) fn list(
    paths: &HostPaths,
    plugin_dirs: Vec<PathBuf>,
    json_out: bool,
) -> Result<ExitCode> {
    let args = agent::AgentArgs {
        plugin_dirs,
        ..agent::AgentArgs::default()
    };
    let host = noeta::Host::open(agent::config(paths, &args)?)?;
    let settings = configured(&host)?;
    if settings.servers.is_empty() {
        if !json_out {
            outln!(
                "no MCP servers are configured: add `[plugins.mcp.servers.<alias>]` to a \
                 config.toml, or a `.mcp.json` (see docs/builtins/mcp.md)"
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let servers = settings.servers.clone();
    let states = connect(settings)?;
    let mut down = 0;
    for server in &servers {
        let state = states
            .iter()
            .find(|(alias, _)| *alias == server.alias)
            .map_or_else(|| Err("not started".to_owned()), |(_, s)| s.clone());
        down += usize::from(state.is_err());
        if json_out {
            let (kind, place) = match &server.transport {
                Transport::Stdio { command, .. } => ("stdio", command.clone()),
                Transport::Http { url, .. } => ("http", url.clone()),
            };
            outln!(
                "{}",
                json!({
                    "alias": server.alias,
                    "transport": kind,
                    "target": place,
                    "status": if state.is_ok() { "ok" } else { "error" },
                    "tools": state.as_ref().ok(),
                    "error": state.as_ref().err(),
                })
            );
        } else {
            outln!("{}  ({})", server.alias, describe(server));
            match state {
                Ok(tools) => {
                    outln!("  ok: {} tool(s)", tools.len());
                    for tool in tools {
                        outln!("    {tool}");
                    }
                }
                Err(err) => outln!("  error: {err}"),
            }
        }
    }
    Ok(if down == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
