//! The `noeta` command: runs agent tasks (`run`, `chat`, `resume`, `answer`), shows them
//! (`tasks`, `log`), lists MCP servers (`mcp list`), checks and salvages the store file (`store`), reports the setup (`doctor`), lists the surface registry, lists and checks
//! plugins, and manages plugin trust.

mod agent;
mod agents;
mod api;
mod approvals;
mod chat_commands;
mod check;
mod commands;
mod diff;
mod doctor;
mod editor;
mod elicit;
mod interact;
mod live;
mod mcp;
mod mcp_login;
mod mcp_server;
mod output;
mod overview;
mod plugin;
mod render;
mod serve;
mod skills;
mod status;
mod stdio;
mod store;
mod style;
mod tasks;
mod transcript;
mod worker;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::commands::{
    AgentsCommand, MarketplaceCommand, McpCommand, PluginCommand, PluginsCommand, SandboxCommand,
    SkillsCommand, StoreCommand,
};
use crate::render::{claude_json, claude_text, pretty, render_error, warn_all};
use crate::stdio::{eoutln, out, outln};
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use noeta::listing;
use noeta::{HostOptions, HostPaths};

#[derive(Parser)]
#[command(
    name = "noeta",
    version,
    about = "A durable agent runtime whose every capability is a plugin"
)]
struct Cli {
    /// An extra plugin directory, plugin directory of directories, or manifest file for this run (repeatable)
    #[arg(long = "plugin-dir", global = true, value_name = "DIR")]
    plugin_dirs: Vec<PathBuf>,

    #[command(subcommand)]
    command: Option<Command>,
}

/// What `noeta` with no command prints: where to start.
const GETTING_STARTED: &str = "\
noeta — a durable agent runtime whose every capability is a plugin

Getting started:
  noeta demo                          a short task here with a bundled scripted model (no key)
  noeta doctor                        what is configured and what is missing
  noeta run \"fix the failing test\"    run a task here (set ANTHROPIC_API_KEY or OPENAI_API_KEY)
  noeta chat                          a conversation: one task, one turn per message
  noeta resume --last                 carry on with the latest task

Every command has --help with examples; `noeta --help` lists them all.";

/// The flags every task-running command takes.
#[derive(clap::Args, Debug, Clone, Default)]
struct RunFlags {
    /// The model provider: `anthropic`, `openai` or `scripted:FILE` (default: the first with a key set)
    #[arg(long)]
    provider: Option<String>,
    /// The model (default: the provider's own default)
    #[arg(long)]
    model: Option<String>,
    /// The agent to run (default `main`)
    #[arg(long)]
    agent: Option<String>,
    /// `default`, `acceptEdits`, `bypassPermissions` or `plan` (kebab-case works too)
    #[arg(long = "permission-mode", value_name = "MODE")]
    permission_mode: Option<String>,
    /// The store: `sqlite:PATH`, `memory:` or `postgres://…` (default `.noeta/noeta.db` in the workspace)
    #[arg(long)]
    store: Option<String>,
    /// Print events as JSON lines on stdout
    #[arg(long)]
    json: bool,
    /// Run commands in this sandbox: `bubblewrap`, `container`, or `local` (no sandbox; the default)
    #[arg(long, value_name = "NAME")]
    sandbox: Option<String>,
    /// Show tool results and diffs in full, not as a preview
    #[arg(long, short = 'v')]
    verbose: bool,
    /// When another process runs the task, wait for it to let go instead of refusing
    #[arg(long)]
    wait: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Start a task in the current directory and run it, showing what the agent does
    #[command(
        after_help = "Examples:\n  noeta run \"fix the failing test\"\n  noeta run --permission-mode plan \"how would you split parser.rs?\"\n  noeta run \"/review src/lexer.rs\"          # a slash command as the goal"
    )]
    Run {
        /// What the agent is to do
        goal: Option<String>,
        /// Submit the task to the store's queue for `noeta worker` and print its id
        #[arg(long)]
        detach: bool,
        #[command(flatten)]
        flags: RunFlags,
    },
    /// An HTTP API over the store's tasks: submit, list, follow (SSE), message, answer, cancel
    #[command(
        after_help = "Examples:\n  noeta serve                                # 127.0.0.1:7878, one worker slot\n  noeta serve --store postgres://noeta@db/noeta --workers 0\n\nRoutes and bodies: docs/http-api.md"
    )]
    Serve {
        /// The address and port to listen on (a non-loopback one needs `[plugins.serve] token`)
        #[arg(long, default_value = api::DEFAULT_ADDR)]
        addr: String,
        /// The store (default `.noeta/noeta.db` in the workspace)
        #[arg(long)]
        store: Option<String>,
        /// Worker slots run in this process; 0 leaves the queue to `noeta worker` processes
        #[arg(long, default_value_t = 1)]
        workers: usize,
        /// Serve the API only, not the web page at `/`
        #[arg(long)]
        no_ui: bool,
        /// The model provider tasks run on unless a request names another (`anthropic`,
        /// `openai`; `scripted:FILE` for tests, which lets requests name scripts too)
        #[arg(long)]
        provider: Option<String>,
        /// The model tasks run on unless a request names another
        #[arg(long)]
        model: Option<String>,
        /// The loosest permission mode a request may ask for (default: the settings', else `default`)
        #[arg(long = "permission-mode", value_name = "MODE")]
        permission_mode: Option<String>,
    },
    /// Open a frontend over this workspace's tasks: `web` (serve on loopback, print the page's
    /// URL) or `terminal` (a chat)
    #[command(
        after_help = "Examples:\n  noeta open web\n  noeta open web --store postgres://noeta@db/noeta --workers 0"
    )]
    Open {
        /// The frontend: `web` or `terminal`
        frontend: String,
        /// The store (default `.noeta/noeta.db` in the workspace)
        #[arg(long)]
        store: Option<String>,
        /// Worker slots run in this process (web)
        #[arg(long, default_value_t = 1)]
        workers: usize,
    },
    /// Run the tasks of a store's queue (`noeta run --detach`), N at a time, until SIGTERM
    #[command(
        after_help = "Examples:\n  noeta worker --store postgres://noeta@db/noeta -n 4\n  noeta worker                               # the workspace's store"
    )]
    Worker {
        /// The store whose queue is worked (default `.noeta/noeta.db` in the workspace)
        #[arg(long)]
        store: Option<String>,
        /// How many tasks this worker runs at once
        #[arg(short = 'n', default_value_t = 1)]
        n: usize,
        /// How long a task stays with a worker that stopped answering before another takes it
        #[arg(long, value_name = "SECONDS", default_value_t = 60)]
        lease_secs: u64,
    },
    /// Run a short task here with a bundled scripted model: no key needed, nothing left behind
    #[command(after_help = "Examples:\n  noeta demo\n  noeta demo --json")]
    Demo {
        /// Events as JSON lines
        #[arg(long)]
        json: bool,
    },
    /// A conversation: one task, one turn per message, with slash commands
    #[command(
        after_help = "Examples:\n  noeta chat\n  noeta chat --agent explore --store memory:\n  noeta chat --task 20261204-175533-0f23"
    )]
    Chat {
        /// Carry on with this task (its agent, provider and model unless the flags name others)
        #[arg(long, value_name = "ID")]
        task: Option<String>,
        #[command(flatten)]
        flags: RunFlags,
    },
    /// Carry on with a task that was interrupted or waits for an answer
    #[command(after_help = "Examples:\n  noeta resume --last\n  noeta resume 20261204-175533-0f23")]
    Resume {
        /// The task's id
        task: Option<String>,
        /// The latest task of this workspace's store
        #[arg(long)]
        last: bool,
        #[command(flatten)]
        flags: RunFlags,
    },
    /// The tasks in the store
    #[command(after_help = "Examples:\n  noeta tasks\n  noeta tasks --json")]
    Tasks {
        /// The store (default `.noeta/noeta.db` in the workspace)
        #[arg(long)]
        store: Option<String>,
        /// One JSON object per task
        #[arg(long)]
        json: bool,
    },
    /// A task as a transcript: messages, replies, calls with their results (or every event as
    /// JSON lines)
    #[command(
        after_help = "Examples:\n  noeta log --last\n  noeta log 20261204-175533-0f23 --json"
    )]
    Log {
        /// The task's id (or --last)
        #[arg(required_unless_present = "last")]
        task: Option<String>,
        /// The latest task started here (not a subagent's), as `resume --last`
        #[arg(long, conflicts_with = "task")]
        last: bool,
        /// The store (default `.noeta/noeta.db` in the workspace)
        #[arg(long)]
        store: Option<String>,
        /// One JSON object per event
        #[arg(long)]
        json: bool,
        /// Keep printing events as they are written, until Ctrl-C
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Answer what a task waits for: a permission ask (`--allow`/`--deny`) or a question
    ///
    /// A question's answer is plain text when the call asks one question (an option's label,
    /// or your own words), or JSON:
    /// `{"answers": {"<question>": "<label or own words>", ...}}` (a list of labels for a
    /// question that allows several). The waiting tool checks it before it is recorded: an
    /// answer that does not fit is refused, and the question stays open.
    #[command(
        after_help = "Examples:\n  noeta answer 20261204-175533-0f23 --allow\n  noeta answer 20261204-175533-0f23 \"Postgres\""
    )]
    Answer {
        /// The task's id
        task: String,
        /// Allow the call that asks permission
        #[arg(long, conflicts_with = "deny")]
        allow: bool,
        /// Deny the call that asks permission
        #[arg(long)]
        deny: bool,
        /// The answer to a question (JSON, or plain text); asked at the terminal when left out
        answer: Option<String>,
        #[command(flatten)]
        flags: RunFlags,
    },
    /// MCP: the servers agents use (each connected, with its tools or its error), and serving an agent's tools
    #[command(
        after_help = "Examples:\n  noeta mcp list\n  noeta mcp add fs -- npx -y @modelcontextprotocol/server-filesystem ."
    )]
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// Check the store file, or copy what is readable of a damaged one into a new file
    #[command(after_help = "Examples:\n  noeta store check\n  noeta store salvage rescued.db")]
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// What is configured, what is missing, and every plugin that failed to load
    #[command(
        after_help = "Examples:\n  noeta doctor\n  noeta doctor --online\n  noeta doctor --store postgres://noeta@db/noeta"
    )]
    Doctor {
        /// Also ask the model's endpoint whether it answers and takes the key (lists its
        /// models: no model call, nothing billed)
        #[arg(long)]
        online: bool,
        /// Check this store instead of the workspace's (reachable, its schema, its tasks)
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Print the surface registry: every surface with its plane, scope, collision key, ordering and binding
    #[command(after_help = "Examples:\n  noeta surfaces\n  noeta surfaces --json")]
    Surfaces {
        /// Print JSON on stdout
        #[arg(long)]
        json: bool,
    },
    /// Install, list, update and remove plugins (`plugins` shows what is loaded)
    #[command(
        after_help = "Examples:\n  noeta plugin add https://git.example.com/team/kit.git@4e1c2a9\n  noeta plugin list"
    )]
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// List and check plugins
    #[command(after_help = "Examples:\n  noeta plugins list\n  noeta plugins check --strict")]
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// List the agents: each with where it is defined, its tools, or why it cannot be used
    #[command(after_help = "Examples:\n  noeta agents list")]
    Agents {
        #[command(subcommand)]
        command: AgentsCommand,
    },
    /// List the skills: every indexed skill with its tier and source, every skipped one with the reason
    #[command(after_help = "Examples:\n  noeta skills list")]
    Skills {
        #[command(subcommand)]
        command: SkillsCommand,
    },
    /// Remove what a sandbox left behind for this workspace (the container sandbox's
    /// containers of tasks no process finished)
    #[command(
        after_help = "Examples:\n  noeta sandbox prune\n  noeta sandbox prune --sandbox container"
    )]
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Trust a workspace plugin directory (or a workspace) so its plugins load; never prompts
    #[command(after_help = "Examples:\n  noeta trust .")]
    Trust {
        /// The directory to trust
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // Help and version go to standard output, usage errors to standard error; either
            // way a write failure must not panic or pass unnoticed.
            let to_stdout = !err.use_stderr();
            if let Err(io) = err.print()
                && to_stdout
            {
                stdio::gone(&io);
            }
            if to_stdout {
                stdio::flush_out();
            }
            return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
        }
    };
    // Warnings and errors of the runtime go to stderr; `NOETA_LOG` (e.g. `debug`,
    // `noeta_core=info`) chooses otherwise. The DevTools client warns of every protocol event
    // newer than its own types, which says nothing to a user: only its errors show. The MCP
    // client library's own reports (a connection's worker ending, in its internal terms) are
    // said again by the `mcp` built-in in one line with the fix: they show only on request.
    let filter = tracing_subscriber::EnvFilter::try_from_env("NOETA_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("warn,chromiumoxide=error,rmcp=off")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .init();
    let result = run(cli);
    stdio::flush_out();
    match result {
        Ok(code) => code,
        Err(err) => {
            eoutln!("error: {}", render_error(&err));
            ExitCode::FAILURE
        }
    }
}

fn agent_args(flags: RunFlags, plugin_dirs: Vec<PathBuf>) -> Result<agent::AgentArgs> {
    Ok(agent::AgentArgs {
        provider: flags.provider,
        model: flags.model,
        agent: flags.agent,
        permission_mode: flags
            .permission_mode
            .as_deref()
            .map(agent::permission_mode)
            .transpose()?,
        store: flags.store,
        json: flags.json,
        verbose: flags.verbose,
        sandbox: flags.sandbox,
        chat: false,
        wait: flags.wait,
        detach: false,
        plugin_dirs,
    })
}

/// Runs an async command on a runtime of its own.
fn block<F: std::future::Future<Output = Result<ExitCode>>>(work: F) -> Result<ExitCode> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // Told, so the runtime does not ask the system again (unless its own setting is given).
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        builder.worker_threads(noeta_core::runner::parallelism());
    }
    let runtime = builder
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let done = runtime.block_on(work);
    // Work still running when the command is done (a stopped server's tasks in flight) is left
    // to the process's end: it resumes with the next process, as after a crash.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    done
}

fn run(cli: Cli) -> Result<ExitCode> {
    let paths = HostPaths::from_env().context("cannot determine the current directory")?;
    let dirs = cli.plugin_dirs;
    let Some(command) = cli.command else {
        outln!("{GETTING_STARTED}");
        return Ok(ExitCode::SUCCESS);
    };
    match command {
        Command::Run {
            goal,
            detach,
            flags,
        } => {
            let mut args = agent_args(flags, dirs)?;
            args.detach = detach;
            block(tasks::run(&paths, &args, goal))
        }
        Command::Serve {
            addr,
            store,
            workers,
            no_ui,
            provider,
            model,
            permission_mode,
        } => block(api::serve(
            &paths,
            api::ServeArgs {
                addr,
                store,
                workers,
                plugin_dirs: dirs,
                ui: (!no_ui).then(api::web_page),
                provider,
                model,
                permission_mode: permission_mode
                    .as_deref()
                    .map(agent::permission_mode)
                    .transpose()?,
                opened: false,
            },
        )),
        Command::Open {
            frontend,
            store,
            workers,
        } => block(api::open(&paths, dirs, &frontend, store, workers)),
        Command::Worker {
            store,
            n,
            lease_secs,
        } => block(worker::work(
            &paths,
            worker::WorkerArgs {
                store,
                slots: n,
                lease_secs,
                plugin_dirs: dirs,
                plugins_shown: true,
            },
        )),
        Command::Chat { task, flags } => {
            let args = agent_args(flags, dirs)?;
            block(tasks::chat(&paths, &args, task.as_deref()))
        }
        Command::Resume { task, last, flags } => {
            let args = agent_args(flags, dirs)?;
            block(tasks::resume(&paths, &args, task.as_deref(), last))
        }
        Command::Tasks { store, json } => block(tasks::tasks(&paths, store.as_deref(), json)),
        Command::Log {
            task,
            last,
            store,
            json,
            follow,
        } => block(tasks::log(
            &paths,
            store.as_deref(),
            task.as_deref(),
            last,
            json,
            follow,
        )),
        Command::Answer {
            task,
            allow,
            deny,
            answer,
            flags,
        } => {
            let args = agent_args(flags, dirs)?;
            block(tasks::answer(&paths, &args, &task, allow, deny, answer))
        }
        Command::Demo { json } => block(tasks::demo(&paths, json)),
        Command::Plugin { command } => match command {
            PluginCommand::Add { source, project } => plugin::add(&paths, &source, project),
            PluginCommand::List { json } => plugin::list(&paths, json),
            PluginCommand::Remove { name, project } => plugin::remove(&paths, &name, project),
            PluginCommand::Update {
                name,
                commit,
                project,
            } => plugin::update(&paths, &name, &commit, project),
            PluginCommand::Marketplace { command } => match command {
                MarketplaceCommand::Add { source } => plugin::add_marketplace(&paths, &source),
                MarketplaceCommand::List => plugin::list_marketplaces(&paths),
            },
        },
        Command::Mcp { command } => match command {
            McpCommand::List { json } => mcp::list(&paths, dirs, json),
            McpCommand::Call {
                server,
                tool,
                arguments,
                headers,
            } => mcp::call(
                &paths,
                dirs,
                &server,
                tool.as_deref(),
                arguments.as_deref(),
                &headers,
            ),
            McpCommand::Login { args } => mcp_login::login(&paths, dirs, &args),
            McpCommand::Logout { server } => mcp_login::logout(&paths, dirs, &server),
            McpCommand::Add { server, scope } => mcp::add(&paths, &server, &scope),
            McpCommand::Remove { alias, scope } => mcp::remove(&paths, &alias, &scope),
            McpCommand::Serve {
                agent,
                tools,
                permission_mode,
                http,
                store,
            } => {
                let args = serve::ServeArgs {
                    agent: agent::AgentArgs {
                        agent,
                        permission_mode: permission_mode
                            .as_deref()
                            .map(agent::permission_mode)
                            .transpose()?,
                        store,
                        plugin_dirs: dirs,
                        ..agent::AgentArgs::default()
                    },
                    tools,
                    http,
                };
                serve::serve(&paths, &args)
            }
        },
        Command::Store { command } => match command {
            StoreCommand::Check { store, json } => store::check(&paths, store.as_deref(), json),
            StoreCommand::Salvage { new, store } => store::salvage(&paths, store.as_deref(), &new),
        },
        Command::Doctor { online, store } => doctor::doctor(&paths, dirs, online, store.as_deref()),
        Command::Surfaces { json } => {
            let registry = noeta_core::standard_registry();
            if json {
                out!("{}", listing::surfaces_json(&registry));
            } else {
                out!("{}", listing::surfaces_text(&registry));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Plugins {
            command: PluginsCommand::List { json },
        } => {
            let options = HostOptions {
                paths: dirs,
                ..HostOptions::default()
            };
            let set = noeta::load(&paths, &options)?;
            warn_all(&set);
            let merged = set.merged();
            let claude = noeta::claude_plugins::discover(&paths, &options.paths);
            if json {
                let mut listed = listing::plugins_json(&set, &merged);
                listed["claude_code_plugins"] = claude_json(&claude);
                out!("{}", pretty(&listed));
            } else {
                out!("{}", listing::plugins_text(&set, &merged));
                out!("{}", claude_text(&claude));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Plugins {
            command:
                PluginsCommand::Check {
                    strict,
                    resolve,
                    json,
                    paths: extra,
                },
        } => {
            let mut options = HostOptions {
                paths: dirs,
                strict,
                ..HostOptions::default()
            };
            options.paths.extend(extra);
            let set = noeta::load(&paths, &options)?;
            // The human report lists the warnings itself; JSON keeps stdout for the machine.
            if json {
                warn_all(&set);
            }
            let claude = noeta::claude_plugins::discover(&paths, &options.paths);
            let mut extra_problems: Vec<String> = claude.problems.clone();
            for path in &options.paths {
                // A path some noeta plugin was read from holds one, whatever its file.
                let loaded_from = |p: &noeta_core::LoadedPlugin| match &p.origin {
                    noeta_core::Origin::File(file) => file.starts_with(path),
                    noeta_core::Origin::Crate(_) => false,
                };
                let problem_at = set
                    .problems()
                    .iter()
                    .any(|problem| problem.to_string().contains(&path.display().to_string()));
                if !set.plugins().any(loaded_from)
                    && !problem_at
                    && noeta::claude_plugins::holds_no_plugin(path)
                {
                    extra_problems.push(format!(
                        "{} holds no plugin: no `noeta-plugin.toml`, no \
                         `.claude-plugin/plugin.json` and no Claude Code layout (skills/, \
                         agents/, commands/, hooks/hooks.json, .mcp.json), here or in a \
                         directory under it",
                        path.display()
                    ));
                }
            }
            extra_problems.extend(doctor::settings_problems(&paths, options.paths.clone()));
            let programs = if resolve {
                doctor::program_checks(&paths, &set, options.paths.clone())
            } else {
                Vec::new()
            };
            check::check(
                &set,
                &claude,
                extra_problems,
                &programs,
                strict,
                resolve,
                json,
            )
        }
        Command::Skills {
            command: SkillsCommand::List { json },
        } => skills::list(&paths, dirs, json),
        Command::Agents {
            command: AgentsCommand::List { json },
        } => agents::list(&paths, dirs, json),
        Command::Sandbox {
            command: SandboxCommand::Prune { sandbox },
        } => {
            let args = agent::AgentArgs {
                plugin_dirs: dirs,
                sandbox,
                ..agent::AgentArgs::default()
            };
            let host = noeta::Host::open(agent::config(&paths, &args)?)?;
            let (name, removed) = host.prune_sandbox()?;
            if removed.is_empty() {
                outln!("sandbox `{name}`: nothing to remove");
            }
            for item in removed {
                outln!("removed {item}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Trust { dir } => {
            let mut store = paths.trust_store()?;
            if paths.trust_store_path().is_none() {
                anyhow::bail!("no home directory ($HOME is unset): cannot locate the trust store");
            }
            let was = store.workspace(&dir);
            let trusted = store.grant(&dir)?;
            outln!(
                "trusted {} as it is now (trust store {})",
                trusted.display(),
                store.path().display()
            );
            if let noeta_core::WorkspaceTrust::Changed(files) = was {
                outln!(
                    "  since it was trusted before, these changed: {}",
                    files.join(", ")
                );
            }
            let pinned: Vec<&str> = store
                .pinned(&trusted)
                .map(|pins| pins.keys().map(String::as_str).collect())
                .unwrap_or_default();
            if pinned.is_empty() {
                outln!(
                    "  it holds no settings, hooks, MCP servers, plugins, agent files or commands \
                     yet; any that appear are untrusted until `noeta trust` is run again"
                );
            } else {
                outln!("  pinned: {}", pinned.join(", "));
                outln!(
                    "  when any of them changes, or others appear, the workspace is untrusted \
                     until `noeta trust` is run again"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
