//! `[plugins.mcp]`: the servers, each under its alias — a command to start (stdio), a URL to
//! reach (streamable HTTP), or `type = "host"` for a remote server whose endpoint the host's
//! resolver gives (`remote.rs`) — with its timeouts.

use std::collections::BTreeMap;
use std::time::Duration;

use noeta_toolkit::{SettingsTable, TimeUnit};
use serde_json::Value;

/// The plugin's name (and its settings table, `[plugins.mcp]`).
pub const PLUGIN: &str = "mcp";

/// How long a server may take to start and answer `initialize` and `tools/list`, by default.
pub const STARTUP_TIMEOUT_MS: u64 = 30_000;

/// How long one tool call may take, by default.
pub const CALL_TIMEOUT_MS: u64 = 600_000;

/// A server with more tools than this has them offered through ToolSearch, by default.
pub const DEFER_ABOVE: usize = 40;

/// How long the first offer of a session's tools waits for servers still starting, by
/// default, counted from when they began: a server that takes longer joins later, its tools
/// deferred (found with ToolSearch).
pub const STARTUP_WAIT_MS: u64 = 500;

const KEYS: &[&str] = &["servers", "defer_above", "startup_wait_ms"];

const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "type",
    "enabled",
    "startup_timeout_ms",
    "call_timeout_ms",
    "deferred",
];

/// Where a server is.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// A command started as a child process, spoken to over its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it, on top of the host's environment.
        env: BTreeMap<String, String>,
        /// Its working directory (the host's when absent).
        cwd: Option<String>,
    },
    /// A streamable-HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request (credentials, often).
        headers: BTreeMap<String, String>,
    },
    /// A server in this process (a plugin's `mcp_server` contribution), spoken to over an
    /// in-memory transport.
    InProcess(crate::in_process::InProcess),
    /// A streamable-HTTP server whose URL and headers the host's resolver gives at every turn
    /// (`type = "host"`; see `remote.rs`).
    Host,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio { command, args, .. } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .finish_non_exhaustive(),
            // Headers and variables may hold credentials: never shown.
            Self::Http { url, .. } => f
                .debug_struct("Http")
                .field("url", url)
                .finish_non_exhaustive(),
            Self::InProcess(server) => f.debug_tuple("InProcess").field(server).finish(),
            Self::Host => f.write_str("Host"),
        }
    }
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Its alias: tools are named `mcp__<alias>__<tool>`.
    pub alias: String,
    /// Where it is.
    pub transport: Transport,
    /// How long it may take to start and list its tools.
    pub startup_timeout: Duration,
    /// How long one call may take.
    pub call_timeout: Duration,
    /// Whether its tools are offered through ToolSearch: always (`true`), never (`false`), or
    /// when it has more than `defer_above` of them (unset).
    pub deferred: Option<bool>,
}

/// The settings: the enabled servers, by alias.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The servers to connect, in alias order.
    pub servers: Vec<Server>,
    /// A server with more tools than this (and no `deferred` of its own) has them offered
    /// through ToolSearch.
    pub defer_above: usize,
    /// How long the first offer of tools waits for servers still starting.
    pub startup_wait: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            defer_above: DEFER_ABOVE,
            startup_wait: Duration::from_millis(STARTUP_WAIT_MS),
        }
    }
}

impl Settings {
    /// Reads `[plugins.mcp]`; an error names the server and the key at fault.
    pub fn parse(config: &Value) -> Result<Self, String> {
        let table = SettingsTable::new(PLUGIN, config, KEYS).map_err(|e| e.to_string())?;
        let mut servers = Vec::new();
        for (alias, server) in table
            .tables("servers", SERVER_KEYS)
            .map_err(|e| e.to_string())?
        {
            if alias.is_empty()
                || !alias
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "settings [plugins.{PLUGIN}] servers.{alias}: a server's alias is letters, \
                     digits, `_` and `-` (it names its tools, `mcp__<alias>__<tool>`)"
                ));
            }
            if let Some(server) = read_server(&alias, &server).map_err(|e| e.to_string())? {
                servers.push(server);
            }
        }
        let defer_above = table
            .whole::<usize>("defer_above")
            .map_err(|e| e.to_string())?
            .unwrap_or(DEFER_ABOVE);
        let startup_wait = table
            .duration("startup_wait_ms", TimeUnit::Milliseconds)
            .map_err(|e| e.to_string())?
            .unwrap_or(Duration::from_millis(STARTUP_WAIT_MS));
        Ok(Self {
            servers,
            defer_above,
            startup_wait,
        })
    }
}

/// One server's table; `None` when it is switched off (`enabled = false`).
fn read_server(
    alias: &str,
    table: &SettingsTable<'_>,
) -> Result<Option<Server>, noeta_toolkit::SettingsError> {
    if table.bool("enabled")? == Some(false) {
        return Ok(None);
    }
    let kind = table.string("type")?;
    let command = table.string("command")?;
    let url = table.string("url")?;
    let transport = match (kind.as_deref(), command, url) {
        (Some("sse"), _, _) => {
            return Err(table.invalid(
                "type",
                "the HTTP+SSE transport (`sse`) is not supported: point `url` at the server's \
                 streamable-HTTP endpoint and use `type = \"http\"`",
            ));
        }
        (Some("host"), _, _) => {
            if let Some(key) = ["command", "url", "args", "env", "cwd", "headers"]
                .into_iter()
                .find(|k| table.get(k).is_some())
            {
                return Err(table.invalid(
                    key,
                    "a `host` server's URL and headers come from the host's resolver at every \
                     turn, never from settings",
                ));
            }
            Transport::Host
        }
        (Some(other), _, _) if !matches!(other, "stdio" | "http" | "streamable-http") => {
            return Err(table.invalid(
                "type",
                format!("`{other}` is not a transport — use `stdio`, `http` or `host`"),
            ));
        }
        (_, Some(_), Some(_)) => {
            return Err(table.invalid("url", "a server has a `command` or a `url`, not both"));
        }
        (Some("http" | "streamable-http"), Some(_), None) => {
            return Err(table.invalid("url", "an `http` server needs a `url`"));
        }
        (Some("stdio"), None, Some(_)) => {
            return Err(table.invalid("command", "a `stdio` server needs a `command`"));
        }
        (_, Some(command), None) => Transport::Stdio {
            command,
            args: table.strings("args")?.unwrap_or_default(),
            env: table.string_map("env")?.unwrap_or_default(),
            cwd: table.string("cwd")?,
        },
        (_, None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(table.invalid("url", format!("`{url}` is not an http(s) URL")));
            }
            Transport::Http {
                url,
                headers: table.string_map("headers")?.unwrap_or_default(),
            }
        }
        (_, None, None) => {
            return Err(table.invalid(
                "command",
                "a server needs a `command` to start (stdio) or a `url` to reach (http)",
            ));
        }
    };
    if matches!(transport, Transport::Stdio { .. }) && table.get("headers").is_some() {
        return Err(table.invalid("headers", "headers are for an `http` server"));
    }
    if matches!(transport, Transport::Http { .. })
        && let Some(key) = ["args", "env", "cwd"]
            .into_iter()
            .find(|k| table.get(k).is_some())
    {
        return Err(table.invalid(key, format!("`{key}` is for a server started by a command")));
    }
    Ok(Some(Server {
        alias: alias.to_owned(),
        transport,
        startup_timeout: table
            .positive_duration("startup_timeout_ms", TimeUnit::Milliseconds)?
            .unwrap_or(Duration::from_millis(STARTUP_TIMEOUT_MS)),
        call_timeout: table
            .positive_duration("call_timeout_ms", TimeUnit::Milliseconds)?
            .unwrap_or(Duration::from_millis(CALL_TIMEOUT_MS)),
        deferred: table.bool("deferred")?,
    }))
}
