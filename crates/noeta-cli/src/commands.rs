//! The subcommands of `noeta sandbox`, `mcp`, `store`, `agents`, `skills`, `plugin`,
//! `plugin marketplace` and `plugins`: their arguments and help, as clap reads them.

use std::path::PathBuf;

use clap::Subcommand;

use crate::mcp;

#[derive(Subcommand)]
pub(crate) enum SandboxCommand {
    /// Remove every container the sandbox keeps for this workspace's tasks; run it when no
    /// task of the workspace is running (a running one gets a new container at its next
    /// command)
    Prune {
        /// The sandbox provider (default: `[plugins.sandbox] provider`)
        #[arg(long, value_name = "NAME")]
        sandbox: Option<String>,
    },
}

#[derive(Subcommand)]
pub(crate) enum McpCommand {
    /// Start every configured server (settings and `.mcp.json`) and list its tools by the names
    /// the model sees, or why it is down; exit 1 when one is down
    #[command(after_help = "Examples:\n  noeta mcp list\n  noeta mcp list --json")]
    List {
        /// One JSON object per server
        #[arg(long)]
        json: bool,
    },
    /// Call one tool of an MCP server — a configured one by its alias, or a streamable-HTTP
    /// endpoint by its URL — and print its result; exit 1 when the call fails
    ///
    /// A request of the server for input is asked at the terminal, and a server that asks for
    /// sign-in is signed in to as `noeta mcp login` does. No task or model is involved: this is
    /// for trying a server.
    #[command(
        after_help = "Examples:\n  noeta mcp call everything echo '{\"message\": \"hi\"}'\n  noeta mcp call http://127.0.0.1:3000/mcp add_numbers '{\"a\": 5, \"b\": 3}'"
    )]
    Call {
        /// A configured server's alias, or an `http://` / `https://` URL
        server: String,
        /// The tool's name on the server (none: list its tools)
        tool: Option<String>,
        /// Its arguments, a JSON object (default `{}`)
        arguments: Option<String>,
        /// A header sent with every request to a URL (`Name: value`), repeatable
        #[arg(long = "header", short = 'H')]
        headers: Vec<String>,
    },
    /// Sign in to a remote MCP server that asks for it (OAuth): the sign-in page opens in the
    /// browser (`$BROWSER`, else the desktop's opener; the address is printed too), and the
    /// tokens are kept for every later connection
    ///
    /// noeta registers itself with the server's authorization server where that is allowed;
    /// otherwise give a registered client with --client-id. The tokens are kept in the OS
    /// keyring (with the `keyring` feature) or in `~/.noeta/mcp-sign-in`, readable by the user
    /// alone, and refreshed when they expire.
    #[command(
        after_help = "Examples:\n  noeta mcp login docs\n  noeta mcp login https://example.com/mcp --scope read"
    )]
    Login {
        #[command(flatten)]
        args: crate::mcp_login::LoginArgs,
    },
    /// Forget the sign-in kept for a remote MCP server
    #[command(after_help = "Examples:\n  noeta mcp logout docs")]
    Logout {
        /// A configured streamable-HTTP server's alias, or its URL
        server: String,
    },
    /// Add an MCP server to the user's settings (`~/.noeta/config.toml`) or the project's
    ///
    /// `noeta mcp add fs -- npx -y @modelcontextprotocol/server-filesystem .` adds a command
    /// spoken to over stdio;
    /// `noeta mcp add docs https://example.com/mcp` a streamable-HTTP endpoint. The file's
    /// comments and layout are kept.
    #[command(
        after_help = "Examples:\n  noeta mcp add fs -- npx -y @modelcontextprotocol/server-filesystem .\n  noeta mcp add -H 'Authorization: {env:DOCS_TOKEN}' docs https://example.com/mcp"
    )]
    Add {
        #[command(flatten)]
        server: mcp::NewServer,
        /// `user` (`~/.noeta/config.toml`, the default) or `project` (`.noeta/config.toml`)
        #[arg(long, short = 's', default_value = "user")]
        scope: String,
    },
    /// Remove an MCP server from the user's settings or the project's
    #[command(after_help = "Examples:\n  noeta mcp remove git")]
    Remove {
        /// The server's alias
        alias: String,
        /// `user` (`~/.noeta/config.toml`, the default) or `project` (`.noeta/config.toml`)
        #[arg(long, short = 's', default_value = "user")]
        scope: String,
    },
    /// Serve an agent's tools to MCP clients, over stdio (or streamable HTTP with --http)
    ///
    /// The tools keep the names the agent's model sees and go through the same permission
    /// policy as `noeta run`: a call that would ask a person is refused, unless
    /// --permission-mode allows it. Every call is recorded in one task of the store.
    #[command(
        after_help = "Examples:\n  noeta mcp serve\n  noeta mcp serve --http 127.0.0.1:8765 --tools Read,Grep"
    )]
    Serve {
        /// The agent whose tools are served (default `main`, serving its file tools)
        #[arg(long)]
        agent: Option<String>,
        /// The tools to serve, comma-separated (default: Read, Write, Edit, Glob, Grep for
        /// `main`, every tool of an agent named with --agent)
        #[arg(long, value_delimiter = ',')]
        tools: Vec<String>,
        /// default | acceptEdits | bypassPermissions | plan
        #[arg(long, value_name = "MODE")]
        permission_mode: Option<String>,
        /// Serve streamable HTTP on ADDR (such as 127.0.0.1:8931) instead of stdio
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// The store (default `.noeta/noeta.db` in the workspace)
        #[arg(long)]
        store: Option<String>,
    },
}

#[derive(Subcommand)]
pub(crate) enum StoreCommand {
    /// Check the store file without writing to it; exit 0 when sound, 1 when damaged
    ///
    /// Runs SQLite's integrity and foreign-key checks, then reads every task's log (numbered
    /// from 1 with no gap, data that parses), the snapshots, and every content body against its
    /// address and the logs that refer to it. Each problem is one line.
    #[command(after_help = "Examples:\n  noeta store check\n  noeta store check --json")]
    Check {
        /// The store (default `.noeta/noeta.db` in the workspace)
        #[arg(long)]
        store: Option<String>,
        /// One JSON object on stdout
        #[arg(long)]
        json: bool,
    },
    /// Copy every readable task of the store into the new file NEW, leaving the store as it is
    ///
    /// Each task keeps the readable part of its log from its first event up to the first one
    /// that is missing or damaged; content bodies are copied when their bytes match their
    /// address; leases are not copied. Exit 0 when everything was copied, 1 when something was
    /// lost (the new file holds the rest). NEW must not exist.
    #[command(after_help = "Examples:\n  noeta store salvage rescued.db")]
    Salvage {
        /// The new store file to write
        new: PathBuf,
        /// The store to read (default `.noeta/noeta.db` in the workspace)
        #[arg(long)]
        store: Option<String>,
    },
}

#[derive(Subcommand)]
pub(crate) enum AgentsCommand {
    /// Every agent `run --agent` and `Task` may start: the presets, plugins' agents and agent
    /// files (and the files that do not load); exit 1 when one cannot be used
    #[command(after_help = "Examples:\n  noeta agents list\n  noeta agents list --json")]
    List {
        /// One JSON object per agent
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub(crate) enum SkillsCommand {
    /// Every skill of every tier, indexed or skipped
    #[command(after_help = "Examples:\n  noeta skills list\n  noeta skills list --json")]
    List {
        /// Print JSON on stdout
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub(crate) enum PluginCommand {
    /// Install a plugin into ~/.noeta/plugins (running nothing in it): `<git-url>@<commit>`,
    /// a local directory or manifest file, or `<plugin>@<marketplace>`
    #[command(
        after_help = "Examples:\n  noeta plugin add https://git.example.com/team/kit.git@4e1c2a9\n  noeta plugin add ./my-plugin --project\n  noeta plugin add linter@house"
    )]
    Add {
        /// Where the plugin comes from
        source: String,
        /// Into the workspace's .noeta/plugins instead (loaded once the workspace is trusted)
        #[arg(long)]
        project: bool,
    },
    /// The plugins installed with `plugin add`: source, commit, version and content hash
    #[command(after_help = "Examples:\n  noeta plugin list\n  noeta plugin list --json")]
    List {
        /// One JSON object per plugin
        #[arg(long)]
        json: bool,
    },
    /// Take an installed plugin out
    #[command(after_help = "Examples:\n  noeta plugin remove kit")]
    Remove {
        /// The plugin's name
        name: String,
        /// From the workspace's .noeta/plugins
        #[arg(long)]
        project: bool,
    },
    /// Move a plugin installed from git to another commit
    #[command(after_help = "Examples:\n  noeta plugin update kit 9f3b0c7")]
    Update {
        /// The plugin's name
        name: String,
        /// The commit to check out
        commit: String,
        /// In the workspace's .noeta/plugins
        #[arg(long)]
        project: bool,
    },
    /// Claude Code marketplaces (`.claude-plugin/marketplace.json`), only read
    #[command(
        after_help = "Examples:\n  noeta plugin marketplace add ./marketplace\n  noeta plugin marketplace list"
    )]
    Marketplace {
        #[command(subcommand)]
        command: MarketplaceCommand,
    },
}

#[derive(Subcommand)]
pub(crate) enum MarketplaceCommand {
    /// Add a marketplace: a directory, or `<git-url>@<commit>`
    #[command(
        after_help = "Examples:\n  noeta plugin marketplace add https://git.example.com/team/market.git@1a2b3c4"
    )]
    Add {
        /// Where the marketplace comes from
        source: String,
    },
    /// The added marketplaces and their plugins
    #[command(after_help = "Examples:\n  noeta plugin marketplace list")]
    List,
}

#[derive(Subcommand)]
pub(crate) enum PluginsCommand {
    /// Every loaded plugin with its source, version and contributions by surface
    #[command(after_help = "Examples:\n  noeta plugins list\n  noeta plugins list --json")]
    List {
        /// Print JSON on stdout
        #[arg(long)]
        json: bool,
    },
    /// Load and merge plugins (plus the given manifests) without running them; exit 1 on any problem
    #[command(
        after_help = "Examples:\n  noeta plugins check\n  noeta plugins check --resolve ./my-plugin/noeta-plugin.toml"
    )]
    Check {
        /// Refuse plugins whose requires-noeta excludes this kernel, and fail on any warning
        #[arg(long)]
        strict: bool,
        /// Also resolve every ref and report those no compiled resolver knows
        #[arg(long)]
        resolve: bool,
        /// Print JSON on stdout
        #[arg(long)]
        json: bool,
        /// Manifest files or plugin directories to check as well
        paths: Vec<PathBuf>,
    },
}
