//! `noeta doctor`: everything `run` would check, each problem on its own line, exit 1 on any.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use noeta::HostPaths;
use noeta_core::provider::Provider;

use crate::agent;
use crate::render::render_error;
use crate::stdio::outln;

/// `noeta doctor`: checks what `run` checks — settings, agent files, plugins, every agent's
/// session, skills, the model, the store — and exits 1 on any problem (a workspace with no
/// store yet is not one). With `online`, the model's endpoint is asked whether it answers and
/// takes the key.
pub(crate) fn doctor(
    paths: &HostPaths,
    dirs: Vec<PathBuf>,
    online: bool,
    store_url: Option<&str>,
) -> Result<ExitCode> {
    let mut problems = 0_usize;
    let mut problem = |text: String| {
        problems += 1;
        outln!("problem: {text}");
    };
    outln!("workspace: {}", paths.workspace.display());
    match &paths.home {
        Some(home) => outln!("home: {}", home.display()),
        None => outln!("home: none ($HOME is unset): no user plugins, settings or trust store"),
    }
    for (name, key, base) in [
        ("anthropic", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
        ("openai", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    ] {
        let has_key = std::env::var(key).is_ok_and(|v| !v.is_empty());
        let base = std::env::var(base).ok().filter(|v| !v.is_empty());
        outln!(
            "provider {name}: {}{}",
            if has_key {
                format!("{key} is set")
            } else {
                format!("{key} is not set")
            },
            base.map(|b| format!(", base URL {b}")).unwrap_or_default()
        );
    }
    let args = agent::AgentArgs {
        plugin_dirs: dirs,
        ..agent::AgentArgs::default()
    };
    let trust = noeta::ProjectTrust::of(paths);
    match trust.state().why_not() {
        None => outln!("workspace trust: trusted, nothing pinned has changed"),
        Some(why) => outln!(
            "workspace trust: {why} — its settings start nothing and loosen nothing; `noeta \
             trust {}` to trust it as it is",
            paths.workspace.display()
        ),
    }
    let config = agent::config(paths, &args)?;
    let settings = match config.settings_noting() {
        Ok((settings, notes)) => {
            outln!("settings: ok");
            for note in notes {
                outln!("  {note}");
            }
            Some(settings)
        }
        Err(err) => {
            problem(format!("settings: {err}"));
            None
        }
    };
    // Each agent file that does not load is a problem of its own; the others still count.
    let found = noeta::read_agent_files(paths);
    let names: Vec<&str> = found.agents.iter().map(|f| f.name.as_str()).collect();
    outln!(
        "agent files: {}",
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    );
    for (_, err) in &found.problems {
        problem(format!("agent files: {err}"));
    }
    for note in found.agents.iter().filter_map(noeta::AgentFile::note) {
        outln!("note: {note}");
    }
    let files = found.agents;
    if settings.is_some() {
        match noeta::Host::open(config) {
            Ok(host) => {
                let set = host.plugins();
                outln!("plugins: {} loaded", set.plugins().count());
                for warning in set.warnings() {
                    outln!("warning: {warning}");
                }
                for load in set.problems() {
                    problem(format!("plugins: {load}"));
                }
                for plugin in &host.claude_plugins().plugins {
                    outln!(
                        "Claude Code plugin {} ({}): {}",
                        plugin.name,
                        plugin.root.display(),
                        plugin.summary()
                    );
                }
                for load in &host.claude_plugins().problems {
                    problem(format!("plugins: {load}"));
                }
                for warning in &host.claude_plugins().warnings {
                    outln!("warning: {warning}");
                }
                for (file, _) in &host.claude_plugins().hook_files {
                    outln!("hooks: {}", file.display());
                }
                // Every agent `run` may start: the default one and each agent file's.
                let agents: Vec<&str> = std::iter::once("main")
                    .chain(files.iter().map(|f| f.name.as_str()))
                    .collect();
                let mut built = 0;
                let mut extensions: Vec<String> = Vec::new();
                for name in &agents {
                    match host.session(name) {
                        Ok(session) => {
                            built += 1;
                            extensions
                                .extend(session.extensions.iter().map(|e| e.name().to_owned()));
                        }
                        Err(err) => problem(format!("agent `{name}`: {err}")),
                    }
                }
                outln!("agents: {built} of {} build", agents.len());
                for text in unknown_tables(&host, &extensions) {
                    problem(text);
                }
                match host.skills() {
                    Ok(listing) => {
                        outln!("skills: {} indexed", listing.skills.len());
                        for skill in listing.skipped.iter().filter(|s| !s.shadowed) {
                            problem(format!(
                                "skill {} ({}): {}",
                                skill.path.display(),
                                skill.tier,
                                skill.reason
                            ));
                        }
                    }
                    Err(err) => problem(format!("skills: {err}")),
                }
                match host.open_model(None, None) {
                    Ok(model) => {
                        outln!(
                            "model: `noeta run` uses {} ({})",
                            model.name(),
                            model.model()
                        );
                        if online {
                            match probe(model.as_ref()) {
                                Ok(Some(answer)) => outln!("model: reachable: {answer}"),
                                Ok(None) => {
                                    outln!("model: {} has no endpoint to reach", model.name())
                                }
                                Err(err) => problem(format!(
                                    "model: {} is not reachable: {}",
                                    model.name(),
                                    render_error(&err)
                                )),
                            }
                        }
                    }
                    Err(err) => problem(format!("model: {err}")),
                }
                match crate::mcp::configured(&host) {
                    Ok(settings) if settings.servers.is_empty() => {
                        outln!("mcp: no servers configured");
                    }
                    Ok(settings) => {
                        for server in &settings.servers {
                            outln!(
                                "mcp: server {} ({})",
                                server.alias,
                                crate::mcp::describe(server)
                            );
                        }
                        // Starting servers runs their commands: only when asked to go online.
                        if online {
                            match crate::mcp::connect(settings) {
                                Ok(states) => {
                                    for (alias, state) in states {
                                        match state {
                                            Ok(tools) => outln!(
                                                "mcp: server {alias} is up with {} tool(s)",
                                                tools.len()
                                            ),
                                            Err(err) => problem(format!("mcp: {err}")),
                                        }
                                    }
                                }
                                Err(err) => problem(format!("mcp: {err:#}")),
                            }
                        }
                    }
                    Err(err) => problem(format!("mcp: {err:#}")),
                }
            }
            Err(err) => problem(format!("plugins: {err}")),
        }
    }
    if let Some(url) = store_url {
        // Another store than the workspace's: does it open (reachable, a schema this build
        // reads) and list its tasks?
        let listed = noeta::open_store(paths, Some(url))
            .map_err(anyhow::Error::from)
            .and_then(|stores| {
                let tasks = runtime()?.block_on(stores.log.tasks())?;
                Ok((stores.url.to_string(), tasks.len(), stores))
            });
        match listed {
            Ok((name, tasks, stores)) => {
                outln!(
                    "store: {name} answers, its schema is one this build reads ({tasks} task(s))"
                );
                match queue_lines(&stores) {
                    Ok(lines) => lines.iter().for_each(|line| outln!("{line}")),
                    Err(err) => problem(format!("queue: {}", render_error(&err))),
                }
            }
            Err(err) => problem(format!("store: {}", render_error(&err))),
        }
        return Ok(if problems == 0 {
            ExitCode::SUCCESS
        } else {
            outln!("{problems} problem(s)");
            ExitCode::FAILURE
        });
    }
    let store = paths.workspace.join(".noeta").join("noeta.db");
    if store.exists() {
        let listed = noeta::open_store(paths, None)
            .map_err(anyhow::Error::from)
            .and_then(|stores| Ok((runtime()?.block_on(stores.log.tasks())?, stores)));
        match listed {
            Ok((tasks, stores)) => {
                outln!("store: {} ({} task(s))", store.display(), tasks.len());
                match queue_lines(&stores) {
                    Ok(lines) => lines.iter().for_each(|line| outln!("{line}")),
                    Err(err) => problem(format!("queue: {}", render_error(&err))),
                }
            }
            Err(err) => problem(format!("store {}: {}", store.display(), render_error(&err))),
        }
        // A store that opens and lists may still have damaged pages: SQLite reads them all.
        match noeta::backends::check_store_file(&store) {
            Ok(damage) if damage.is_empty() => outln!("store: SQLite's quick check finds it sound"),
            Ok(damage) => problem(format!(
                "store {} is damaged; SQLite's quick check says: {} — `noeta store check` says \
                 more, `noeta store salvage NEW.db` copies what is readable",
                store.display(),
                damage.join("; ")
            )),
            Err(err) => problem(format!(
                "store {}: the integrity check could not run: {err}",
                store.display()
            )),
        }
    } else {
        outln!("store: {} (created on the first run)", store.display());
    }
    Ok(if problems == 0 {
        ExitCode::SUCCESS
    } else {
        outln!("{problems} problem(s)");
        ExitCode::FAILURE
    })
}

/// How long ago a worker must have said it was alive to count as seen.
const WORKERS_WITHIN_MS: u64 = 60_000;

/// The store's queue depth and the workers seen in the last minute, as doctor lines.
fn queue_lines(stores: &noeta::backends::Stores) -> Result<Vec<String>> {
    let rt = runtime()?;
    let depth = rt.block_on(stores.queue.depth())?;
    let workers = rt.block_on(stores.queue.workers(WORKERS_WITHIN_MS))?;
    let mut lines = vec![format!(
        "queue: {} ready, {} running, {} waiting for a time; {} worker(s) seen in the last minute",
        depth.ready,
        depth.running,
        depth.later,
        workers.len()
    )];
    lines.extend(
        workers
            .iter()
            .map(|w| format!("  worker {}: {}", w.worker, w.about)),
    );
    Ok(lines)
}

/// The provider's own reachability probe, on a runtime of its own (its HTTP client needs one).
fn probe(model: &dyn Provider) -> Result<Option<String>> {
    Ok(runtime()?.block_on(model.probe())?)
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Each `[plugins.<name>]` table of the settings that names no plugin, Claude Code plugin or
/// extension of `host` (given the extensions its sessions have), as a problem line.
pub(crate) fn unknown_tables(host: &noeta::Host, extensions: &[String]) -> Vec<String> {
    host.unknown_tables(extensions.iter().map(String::as_str))
        .into_iter()
        .map(|(table, near)| {
            let hint = near
                .map(|near| format!(" — did you mean `{near}`?"))
                .unwrap_or_default();
            format!("settings: [plugins.{table}] names no plugin or extension this host has{hint}")
        })
        .collect()
}

/// The problems of the settings as `noeta plugins check` reports them: settings that do not
/// load, and `[plugins.<name>]` tables naming nothing (the default agent's extensions known).
/// Starts every plugin program in `set` for its handshake (`plugins check --resolve`), with the
/// settings' plugin parameters and secrets.
pub(crate) fn program_checks(
    paths: &HostPaths,
    set: &noeta_core::PluginSet,
    dirs: Vec<PathBuf>,
) -> Vec<noeta::programs::ProgramCheck> {
    let args = agent::AgentArgs {
        plugin_dirs: dirs,
        ..agent::AgentArgs::default()
    };
    let (config, secrets) = match agent::config(paths, &args) {
        Ok(host) => (
            host.settings().map(|s| s.config()).unwrap_or_default(),
            host.secrets,
        ),
        Err(_) => (
            std::collections::BTreeMap::new(),
            std::sync::Arc::new(noeta::EnvSecrets::new()) as _,
        ),
    };
    noeta::programs::check(set, &config, secrets)
}

pub(crate) fn settings_problems(paths: &HostPaths, dirs: Vec<PathBuf>) -> Vec<String> {
    let args = agent::AgentArgs {
        plugin_dirs: dirs,
        ..agent::AgentArgs::default()
    };
    let config = match agent::config(paths, &args) {
        Ok(config) => config,
        Err(err) => return vec![format!("settings: {err}")],
    };
    let host = match noeta::Host::open(config) {
        Ok(host) => host,
        Err(err) => return vec![format!("settings: {err}")],
    };
    let extensions: Vec<String> = host
        .session("main")
        .map(|s| s.extensions.iter().map(|e| e.name().to_owned()).collect())
        .unwrap_or_default();
    unknown_tables(&host, &extensions)
}
