//! `noeta mcp list`: each configured MCP server, connected, with its tools' model-visible names
//! or why it is down; `noeta mcp call`: one tool of one server, called by hand; `add` and
//! `remove`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use noeta::HostPaths;
use noeta::mcp::{Mcp, Server, ServerStatus, Settings, Transport};
use serde_json::{Value, json};

use crate::agent;
use crate::stdio::{eoutln, outln};

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
        Transport::InProcess(server) => format!("in-process: {}", server.name()),
        Transport::Host => "host: resolved by the embedding host at every turn".to_owned(),
        _ => "(unknown transport)".to_owned(),
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
    let sources =
        noeta::settings_edit::mcp_server_sources(&noeta::SettingsFiles::new(paths), paths);
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
                Transport::InProcess(server) => ("in-process", server.name().to_owned()),
                Transport::Host => ("host", String::new()),
                _ => ("unknown", String::new()),
            };
            outln!(
                "{}",
                json!({
                    "alias": server.alias,
                    "transport": kind,
                    "target": place,
                    "from": sources.get(&server.alias).cloned().unwrap_or_default(),
                    "status": if state.is_ok() { "ok" } else { "error" },
                    "tools": state.as_ref().ok(),
                    "error": state.as_ref().err(),
                })
            );
        } else {
            outln!("{}  ({})", server.alias, describe(server));
            if let Some(files) = sources.get(&server.alias) {
                outln!("  from {}", files.join(", "));
            }
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

/// `noeta mcp call SERVER [TOOL [ARGS]]`: starts that one server (a configured alias, or a
/// URL), waits for it, calls the tool and prints the result (without a tool, lists its tools);
/// exit 1 when the call fails or the server is down.
pub(crate) fn call(
    paths: &HostPaths,
    plugin_dirs: Vec<PathBuf>,
    server: &str,
    tool: Option<&str>,
    arguments: Option<&str>,
    headers: &[String],
) -> Result<ExitCode> {
    let input: Value = match arguments {
        None => json!({}),
        Some(text) => serde_json::from_str(text)
            .with_context(|| format!("the arguments `{text}` are not JSON"))?,
    };
    if !input.is_object() {
        bail!("the arguments must be a JSON object, not `{input}`");
    }
    let mut settings = if server.starts_with("http://") || server.starts_with("https://") {
        let headers = pairs("--header", headers, ':')?;
        Settings::parse(&json!({ "servers": { "remote": { "url": server, "headers": headers } } }))
            .map_err(anyhow::Error::msg)?
    } else {
        if !headers.is_empty() {
            bail!("--header goes with a URL; a configured server's headers are in its settings");
        }
        let args = agent::AgentArgs {
            plugin_dirs,
            ..agent::AgentArgs::default()
        };
        let host = noeta::Host::open(agent::config(paths, &args)?)?;
        let mut settings = configured(&host)?;
        let known: Vec<String> = settings.servers.iter().map(|s| s.alias.clone()).collect();
        settings.servers.retain(|s| s.alias == server);
        if settings.servers.is_empty() {
            bail!(
                "no MCP server `{server}` is configured (configured: {}); give a URL to call one \
                 that is not",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            );
        }
        settings
    };
    let alias = settings.servers[0].alias.clone();
    // An explicit call waits for its server as long as it takes to start.
    settings.startup_wait = settings.servers[0].startup_timeout;
    let url = match &settings.servers[0].transport {
        Transport::Http { url, .. } => Some(url.clone()),
        _ => None,
    };
    let printer = Arc::new(crate::output::Printer::new(false, false, false));
    let elicitor: Arc<dyn noeta::mcp::Elicitor> =
        Arc::new(crate::elicit::TerminalElicitor::new(printer));
    let tokens = agent::mcp_tokens(paths);
    let runtime = crate::mcp_login::runtime()?;
    // A server that refuses for want of sign-in (or of scope) is signed in to, through the
    // person's browser, and the call tried again — a few times at most, so a server that
    // keeps refusing does not loop.
    let mut sign_ins = 0;
    loop {
        let mcp = Mcp::with_host(
            settings.clone(),
            None,
            Some(Arc::clone(&elicitor)),
            tokens.clone(),
        );
        let result = call_once(&mcp, &runtime, &alias, tool, &input);
        let challenge = mcp.sign_in_challenge(&alias);
        drop(mcp);
        match (challenge, &url, &tokens) {
            (Some(challenge), Some(url), Some(vault)) if sign_ins < MAX_SIGN_INS => {
                sign_ins += 1;
                eoutln!("mcp server `{alias}` asks for sign-in");
                let mut request = noeta::mcp::SignIn::new(url.clone());
                request.challenge = Some(challenge);
                let done = runtime.block_on(crate::mcp_login::sign_in(vault, request))?;
                eoutln!("signed in; the tokens are kept in {}", done.kept_in);
            }
            _ => return result,
        }
    }
}

/// How many times one `mcp call` signs in before it gives up on a server that keeps refusing.
const MAX_SIGN_INS: u32 = 3;

/// Starts `mcp`'s one server and calls `tool` with `input` (without a tool, lists its tools).
fn call_once(
    mcp: &Mcp,
    runtime: &tokio::runtime::Runtime,
    alias: &str,
    tool: Option<&str>,
    input: &Value,
) -> Result<ExitCode> {
    for (_, state) in runtime.block_on(mcp.connect()) {
        if let Err(err) = state {
            bail!("{err}");
        }
    }
    let task = noeta_core::store::TaskId::new("mcp-call")?;
    let state = noeta_core::fold::TaskState::default();
    let view = noeta_core::extension::View::new(&task, "main", &state, &[], &[]);
    let tools =
        noeta_core::extension::Extension::tools(mcp, &view).map_err(|e| anyhow::anyhow!("{e}"))?;
    let prefix = format!("mcp__{alias}__");
    let Some(tool) = tool else {
        for listed in &tools {
            if let Some(name) = listed.name().strip_prefix(&prefix) {
                outln!("{name}");
            }
        }
        return Ok(ExitCode::SUCCESS);
    };
    let name = noeta::mcp::tool_name(alias, tool);
    let Some(found) = tools.iter().find(|t| t.name() == name) else {
        let offered: Vec<&str> = tools
            .iter()
            .filter_map(|t| t.name().strip_prefix(&prefix))
            .collect();
        bail!(
            "mcp server `{alias}` has no tool `{tool}` (it offers: {})",
            offered.join(", ")
        );
    };
    let context = noeta_core::ToolContext::new("mcp-call", "call-1");
    let output = runtime
        .block_on(found.run(input.clone(), &context))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    outln!("{}", output.text);
    Ok(if output.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether `command` names a program that can be started: a path to a file, or a name found
/// in a directory of `$PATH`.
fn runnable(command: &str) -> bool {
    if command.contains('/') {
        return std::path::Path::new(command).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(command).is_file()))
}

/// `noeta mcp add`'s server arguments.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct NewServer {
    /// The server's alias (its tools are `mcp__<alias>__<tool>`)
    pub(crate) alias: String,
    /// The command to start, or the URL of a streamable-HTTP server
    pub(crate) target: String,
    /// The command's arguments (put `--` before them when they start with `-`)
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
    /// `stdio` or `http` (default: `http` for an http(s) URL, else `stdio`)
    #[arg(long, short = 't', value_name = "KIND")]
    pub(crate) transport: Option<String>,
    /// An environment variable for the command, KEY=VALUE (repeatable; `{env:NAME}` and
    /// `{keyring:service/user}` references are resolved only when the server starts)
    #[arg(long, short = 'e', value_name = "KEY=VALUE")]
    pub(crate) env: Vec<String>,
    /// A header for an HTTP server, 'Name: value' (repeatable; references as for --env)
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub(crate) headers: Vec<String>,
}

/// The settings file of `--scope`.
fn scope_file(paths: &HostPaths, scope: &str) -> Result<PathBuf> {
    let files = noeta::SettingsFiles::new(paths);
    match scope {
        "user" => files.user.context(
            "no home directory ($HOME is unset): cannot locate the user's settings; use --scope project",
        ),
        "project" => Ok(files.project),
        other => bail!("--scope `{other}` is not one of user, project"),
    }
}

/// `KEY=VALUE` (or `Name: value`) pairs as a JSON object, naming the flag and pair at fault.
fn pairs(flag: &str, items: &[String], separator: char) -> Result<serde_json::Map<String, Value>> {
    let mut map = serde_json::Map::new();
    for item in items {
        let Some((key, value)) = item.split_once(separator) else {
            bail!("{flag} `{item}` has no `{separator}`: write it as KEY{separator}VALUE");
        };
        let key = key.trim();
        if key.is_empty() {
            bail!("{flag} `{item}` has no name before `{separator}`");
        }
        let value = if separator == ':' {
            value.trim()
        } else {
            value
        };
        map.insert(key.to_owned(), Value::from(value));
    }
    Ok(map)
}

/// The server as the `mcp` plugin's settings spell it.
fn server_spec(new: &NewServer) -> Result<Value> {
    let looks_like_url = new.target.starts_with("http://") || new.target.starts_with("https://");
    let transport = match new.transport.as_deref() {
        None if looks_like_url => "http",
        None => "stdio",
        Some(kind @ ("stdio" | "http")) => kind,
        Some("sse") => bail!(
            "--transport sse: the older HTTP+SSE transport is not supported; use a server's \
             streamable-HTTP endpoint (--transport http)"
        ),
        Some(other) => bail!("--transport `{other}` is not one of stdio, http"),
    };
    let mut spec = serde_json::Map::new();
    if transport == "http" {
        if !new.args.is_empty() {
            bail!(
                "an HTTP server takes no arguments after its URL (got {})",
                new.args.join(" ")
            );
        }
        if !new.env.is_empty() {
            bail!("--env is for a command; an HTTP server takes --header");
        }
        spec.insert("url".to_owned(), Value::from(new.target.clone()));
        let headers = pairs("--header", &new.headers, ':')?;
        if !headers.is_empty() {
            spec.insert("headers".to_owned(), Value::Object(headers));
        }
    } else {
        if !new.headers.is_empty() {
            bail!("--header is for an HTTP server; a command takes --env");
        }
        spec.insert("command".to_owned(), Value::from(new.target.clone()));
        if !new.args.is_empty() {
            spec.insert("args".to_owned(), json!(new.args));
        }
        let env = pairs("--env", &new.env, '=')?;
        if !env.is_empty() {
            spec.insert("env".to_owned(), Value::Object(env));
        }
    }
    Ok(Value::Object(spec))
}

/// `noeta mcp add`: writes the server into the scope's settings file.
pub(crate) fn add(paths: &HostPaths, new: &NewServer, scope: &str) -> Result<ExitCode> {
    let file = scope_file(paths, scope)?;
    let spec = server_spec(new)?;
    let before = noeta::ProjectTrust::of(paths);
    noeta::settings_edit::add_mcp_server(&file, &new.alias, &spec)?;
    let server = Settings::parse(&json!({ "servers": { new.alias.clone(): spec } }))
        .map_err(anyhow::Error::msg)?;
    if let Some(server) = server.servers.first() {
        outln!(
            "added MCP server `{}` ({}) to {}; `noeta mcp list` starts it and lists its tools",
            new.alias,
            describe(server),
            file.display()
        );
        if let Transport::Stdio { command, .. } = &server.transport
            && !runnable(command)
        {
            eoutln!(
                "warning: `{command}` is not on the PATH here: the server will not start until \
                 it is installed (or give its full path)"
            );
        }
    }
    if scope == "project" && !keep_trust(paths, scope, &before)? {
        outln!(
            "the workspace is not trusted, so its settings start no MCP server: `noeta trust {}` \
             to use them",
            paths.workspace.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// After the user changed the settings of `scope` through noeta: a workspace trusted as it was
/// stays trusted as it is now (nothing else changed its files). Whether it is trusted.
fn keep_trust(paths: &HostPaths, scope: &str, before: &noeta::ProjectTrust) -> Result<bool> {
    if scope == "project" && before.is_trusted() {
        paths
            .trust_store()?
            .renew(&paths.workspace, before.state())?;
    }
    Ok(before.is_trusted())
}

/// `noeta mcp remove`: takes the server out of the scope's settings file.
pub(crate) fn remove(paths: &HostPaths, alias: &str, scope: &str) -> Result<ExitCode> {
    let file = scope_file(paths, scope)?;
    let sources =
        noeta::settings_edit::mcp_server_sources(&noeta::SettingsFiles::new(paths), paths);
    let shown = file.display().to_string();
    let others: Vec<&String> = sources
        .get(alias)
        .into_iter()
        .flatten()
        .filter(|f| **f != shown)
        .collect();
    let elsewhere = if others.is_empty() {
        String::new()
    } else {
        format!(
            " (it is configured in {})",
            others
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let before = noeta::ProjectTrust::of(paths);
    noeta::settings_edit::remove_mcp_server(&file, alias, &elsewhere)?;
    outln!("removed MCP server `{alias}` from {shown}");
    keep_trust(paths, scope, &before)?;
    if !others.is_empty() {
        outln!(
            "it is still configured in {}",
            others
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
