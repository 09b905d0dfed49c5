//! Running agents from the command line: the flags as a `noeta::HostConfig`, and the
//! `noeta::Host`, store, model and runtime of one run with the terminal's printer and approver.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};
use noeta::{Host, HostConfig, HostOptions, HostPaths, Settings, TaskRun};
use noeta_core::runner::Runtime;
use noeta_core::session::Session;
use noeta_core::store::{ContentStore, EventLog, TaskId};
use serde_json::json;

use crate::interact::Approver;
use crate::output::Printer;
use crate::stdio::eoutln;

/// The permission modes, as Claude Code users type them (kebab-case accepted too).
pub(crate) const PERMISSION_MODES: [&str; 4] =
    ["default", "acceptEdits", "bypassPermissions", "plan"];

/// `--permission-mode` in its canonical spelling.
pub(crate) fn permission_mode(text: &str) -> Result<String> {
    let canonical = match text {
        "default" => "default",
        "acceptEdits" | "accept-edits" => "acceptEdits",
        "bypassPermissions" | "bypass-permissions" => "bypassPermissions",
        "plan" => "plan",
        other => bail!(
            "--permission-mode `{other}` is not one of {} (kebab-case spellings such as `accept-edits` work too)",
            PERMISSION_MODES.join(", ")
        ),
    };
    Ok(canonical.to_owned())
}

/// What the task-running commands share.
#[derive(Debug, Clone, Default)]
pub(crate) struct AgentArgs {
    /// `--provider`: `anthropic`, `openai` or `scripted:FILE`.
    pub(crate) provider: Option<String>,
    /// `--model`.
    pub(crate) model: Option<String>,
    /// `--agent` (default `main`).
    pub(crate) agent: Option<String>,
    /// `--permission-mode`, canonical.
    pub(crate) permission_mode: Option<String>,
    /// `--store` URL.
    pub(crate) store: Option<String>,
    /// `--json`: events as JSON lines.
    pub(crate) json: bool,
    /// `--verbose`: results and diffs in full.
    pub(crate) verbose: bool,
    /// `--sandbox`: the sandbox commands run in.
    pub(crate) sandbox: Option<String>,
    /// A chat (hidden result lines are named by `/show N`).
    pub(crate) chat: bool,
    /// `--wait`: wait for another process running the task instead of refusing.
    pub(crate) wait: bool,
    /// `--plugin-dir`.
    pub(crate) plugin_dirs: Vec<PathBuf>,
    /// `run --detach`: the task is submitted to the store's queue, recording how to run it.
    pub(crate) detach: bool,
}

/// The runtime and session of one agent in one workspace.
pub(crate) struct AgentHost {
    /// The runtime.
    pub(crate) runtime: Runtime,
    /// The agent's session.
    pub(crate) session: Arc<Session>,
    /// The host: every agent's session (the agent's own and its subagents'), for `run_tree`.
    pub(crate) sessions: Arc<Host>,
    /// The store's events (for listings).
    pub(crate) log: Arc<dyn EventLog>,
    /// The open store, kept across `/reload-plugins` (an in-memory one included).
    pub(crate) stores: noeta::backends::Stores,
    /// Prints what happens.
    pub(crate) printer: Arc<Printer>,
    /// Wait for another process running a task instead of refusing (`--wait`).
    pub(crate) wait: bool,
    /// Where commands run, so an interrupt can end them.
    exec: Arc<noeta_core::exec::LocalExecEnv>,
    /// The `[plugins.providers]` settings the model was opened with: a reload keeps the model
    /// and says so when they changed.
    model_settings: Option<serde_json::Map<String, serde_json::Value>>,
}

impl AgentHost {
    /// One warning naming the tools the agent file's `tools` lists that no plugin offers
    /// (Claude Code's `LS`, `MultiEdit`, …): they are left out and the agent runs without them.
    pub(crate) async fn warn_unoffered_tools(&self, task: &noeta_core::store::TaskId) {
        let name = &self.session.spec.name;
        let Some(named) = self
            .sessions
            .agent_files()
            .iter()
            .find(|f| &f.name == name)
            .and_then(|f| f.tools.clone())
        else {
            return;
        };
        let Ok(tools) = self.runtime.direct_tools(&self.session, task).await else {
            return;
        };
        let missing = unoffered(&named, &tools);
        if !missing.is_empty() {
            eoutln!(
                "warning: agent `{name}`: tools not offered by any plugin, left out: {}",
                missing.join(", ")
            );
        }
    }
}

/// The names of `named` (an agent file's `tools`) that are not among `offered`.
pub(crate) fn unoffered(named: &[String], offered: &[Arc<dyn noeta_core::Tool>]) -> Vec<String> {
    named
        .iter()
        .filter(|n| !offered.iter().any(|t| t.name() == n.as_str()))
        .cloned()
        .collect()
}

/// How long an interrupted command gets between SIGTERM and SIGKILL: `NOETA_KILL_GRACE_MS`,
/// else 2 s.
pub(crate) fn kill_grace() -> std::time::Duration {
    let ms = std::env::var("NOETA_KILL_GRACE_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(2_000);
    std::time::Duration::from_millis(ms)
}

impl AgentHost {
    /// Ends the commands the run started (each with its process group) — the background ones
    /// too when the process is about to end — before the command line says the run was
    /// interrupted or failed.
    pub(crate) fn stop_commands(&self, background: bool) {
        self.exec.stop(kill_grace(), background);
    }

    /// The host is done with `task` and the subagents it started (its turn over, nothing
    /// waiting for a person): what the sandbox kept for each (a container per task) goes. A
    /// task that waits, or was interrupted, keeps it for `noeta resume`.
    pub(crate) async fn done_with(&self, task: &TaskId) {
        let env = self.sessions.command_env();
        if env.name() == noeta::sandbox::LOCAL {
            return;
        }
        // The subagents are the tasks whose parent chain leads to `task`.
        let all = self.log.tasks().await.unwrap_or_default();
        let mut done = std::collections::BTreeSet::from([task.clone()]);
        let mut grew = true;
        while grew {
            grew = false;
            for info in &all {
                if let Some(parent) = &info.parent
                    && done.contains(parent)
                    && !done.contains(&info.id)
                {
                    done.insert(info.id.clone());
                    grew = true;
                }
            }
        }
        for id in &done {
            env.task_done(id.as_str());
        }
    }
}

/// Whether a run that ended this way leaves its task done with (see
/// [`AgentHost::done_with`]): not when it waits for a person or was stopped.
pub(crate) fn leaves_task_done(outcome: &noeta_core::runner::RunOutcome) -> bool {
    !matches!(
        outcome,
        noeta_core::runner::RunOutcome::Parked { .. } | noeta_core::runner::RunOutcome::Stopped
    )
}

/// The store named by `url` for a command that only reads it: a SQLite file that does not
/// exist yet is not made — an empty store in memory stands for it, so reading never leaves a
/// `.noeta/noeta.db` behind.
pub(crate) fn read_store(paths: &HostPaths, url: Option<&str>) -> Result<noeta::backends::Stores> {
    let missing = noeta::store_file(paths, url).is_ok_and(|file| !file.exists());
    let url = if missing { Some("memory:") } else { url };
    Ok(noeta::open_store(paths, url)?)
}

/// The store named by `url` (default `<workspace>/.noeta/noeta.db`).
pub(crate) fn open_store(
    paths: &HostPaths,
    url: Option<&str>,
) -> Result<(Arc<dyn EventLog>, Arc<dyn ContentStore>)> {
    let stores = noeta::open_store(paths, url)?;
    Ok((stores.log, stores.content))
}

/// Where secret references resolve: the environment, then (with the `keyring` feature) the OS
/// keyring. A keyring that cannot be opened is reported on each `{keyring:…}` reference.
pub(crate) fn secrets() -> noeta::secrets::SecretChain {
    let chain = noeta::secrets::SecretChain::new().with(Arc::new(noeta::EnvSecrets::new()));
    #[cfg(feature = "keyring")]
    let chain = chain.with(os_keyring());
    chain
}

/// Where sign-ins to remote MCP servers are kept: with the `keyring` feature the OS keyring
/// (when it opens), else files under `~/.noeta/mcp-sign-in`.
pub(crate) fn mcp_tokens(paths: &HostPaths) -> Option<Arc<dyn noeta::mcp::TokenVault>> {
    #[cfg(all(feature = "keyring", target_os = "linux"))]
    if let Ok(store) = linux_keyutils_keyring_store::Store::new() {
        return Some(Arc::new(noeta::sign_ins::KeyringVault::new(store)));
    }
    noeta::sign_ins::file_vault(paths)
}

#[cfg(all(feature = "keyring", target_os = "linux"))]
fn os_keyring() -> Arc<dyn noeta::SecretStore> {
    match linux_keyutils_keyring_store::Store::new() {
        Ok(store) => Arc::new(noeta::secrets::KeyringSecrets::new(store)),
        Err(error) => Arc::new(noeta::secrets::UnavailableKeyring::new(format!(
            "the kernel keyring cannot be opened: {error}"
        ))),
    }
}

#[cfg(all(feature = "keyring", not(target_os = "linux")))]
fn os_keyring() -> Arc<dyn noeta::SecretStore> {
    Arc::new(noeta::secrets::UnavailableKeyring::new(
        "this build has no keyring store for this platform (only Linux's kernel keyring)".into(),
    ))
}

/// The command line's own defaults, under every settings file: writes applied and any shell
/// command allowed, each risky call asked about first (the permission mode decides which).
fn defaults() -> Result<Settings, noeta::SettingsError> {
    let mut settings = Settings::default();
    settings.set_param("fs", "write_mode", json!("apply"))?;
    settings.set_param("fs", "shell_mode", json!("arbitrary"))?;
    Ok(settings)
}

/// The flags as the last settings layer.
fn flags(args: &AgentArgs) -> Result<Settings, noeta::SettingsError> {
    let mut flags = Settings::default();
    if let Some(mode) = &args.permission_mode {
        flags.set_param("governance", "permission_mode", json!(mode))?;
    }
    if let Some(sandbox) = &args.sandbox {
        flags.set_param("sandbox", "provider", json!(sandbox))?;
    }
    Ok(flags)
}

/// The host configuration of a run: the command line's defaults under the machine, user and
/// project `config.toml`, the flags over them, `--plugin-dir`, secrets from the environment
/// (and the OS keyring), and this machine's worker name.
pub(crate) fn config(
    paths: &HostPaths,
    args: &AgentArgs,
) -> Result<HostConfig, noeta::SettingsError> {
    Ok(HostConfig {
        options: HostOptions {
            paths: args.plugin_dirs.clone(),
            ..HostOptions::default()
        },
        defaults: defaults()?,
        flags: flags(args)?,
        secrets: Arc::new(secrets()),
        // One worker per process: a second process refuses a task this one runs, and takes it
        // over at once when this one has ended.
        worker: noeta::process_worker("cli"),
        holder_gone: Some(Arc::new(noeta::process_gone)),
        app_gateway: Some(app_gateway()),
        browser: true,
        mcp_tokens: mcp_tokens(paths),
        ..HostConfig::new(paths.clone())
    })
}

/// How the host operations ([`noeta::Tasks`]) of a server or a worker configure a host: as
/// [`config`] with `base`'s store and plugin directories, the run's permission mode and
/// sandbox as flags, and `worker` as the lease holder.
pub(crate) fn configure(base: AgentArgs, worker: String) -> Arc<noeta::tasks::ConfigureHost> {
    Arc::new(move |paths: HostPaths, run: &TaskRun| {
        let args = AgentArgs {
            permission_mode: run.permission_mode.clone(),
            sandbox: run.sandbox.clone(),
            ..base.clone()
        };
        Ok(HostConfig {
            worker: worker.clone(),
            ..config(&paths, &args)?
        })
    })
}

/// The process's preview gateway for the `app` built-in, one for the whole process (a reload
/// keeps it and its mounts). It binds its port and starts its thread when the first app is
/// opened, so a run that opens none pays nothing for it.
fn app_gateway() -> Arc<noeta::app::Gateway> {
    static GATEWAY: std::sync::OnceLock<Arc<noeta::app::Gateway>> = std::sync::OnceLock::new();
    Arc::clone(GATEWAY.get_or_init(noeta::app::Gateway::lazy))
}

/// The settings of a run (see [`config`]).
pub(crate) fn settings(paths: &HostPaths, args: &AgentArgs) -> Result<Settings> {
    Ok(config(paths, args)?.settings()?)
}

impl AgentHost {
    /// Opens the host (settings, plugins, agent files), builds the agent's session, opens the
    /// store and the model.
    pub(crate) fn open(paths: &HostPaths, args: &AgentArgs) -> Result<Self> {
        Self::open_over(paths, args, None, None)
    }

    /// `/reload-plugins`: the plugins, plugin files, agent files and settings read again and
    /// the agent rebuilt over the same store (a task in an in-memory store goes on). The
    /// running turn has finished; the task's next turn runs on the new code and records the
    /// new pins. The model is kept (a task keeps the model it was made with): the second value
    /// names the settings that changed and need a restart to take effect.
    pub(crate) fn reload(
        &self,
        paths: &HostPaths,
        args: &AgentArgs,
    ) -> Result<(Self, Option<String>)> {
        let reloaded = Self::open_over(
            paths,
            args,
            Some(self.stores.clone()),
            Some(Arc::clone(self.runtime.provider())),
        )?;
        let restart = (reloaded.model_settings != self.model_settings).then(|| {
            "the model settings (`[plugins.providers]`) changed: this chat keeps its model; \
             restart noeta to use the new ones"
                .to_owned()
        });
        Ok((reloaded, restart))
    }

    /// `/model NAME`: the agent rebuilt over the same store on the model `args` name (opened
    /// afresh: the provider, its key and the alias table as for a new run).
    pub(crate) fn with_model(&self, paths: &HostPaths, args: &AgentArgs) -> Result<Self> {
        Self::open_over(paths, args, Some(self.stores.clone()), None)
    }

    fn open_over(
        paths: &HostPaths,
        args: &AgentArgs,
        stores: Option<noeta::backends::Stores>,
        model: Option<Arc<dyn noeta_core::provider::Provider>>,
    ) -> Result<Self> {
        let printer = Arc::new(Printer::new(args.json, args.verbose, args.chat));
        // The person at the terminal answers an MCP server's requests for input.
        let elicitor: Arc<dyn noeta::mcp::Elicitor> =
            Arc::new(crate::elicit::TerminalElicitor::new(printer.clone()));
        let host = Host::open(HostConfig {
            mcp_elicitor: Some(elicitor),
            ..config(paths, args)?
        })?
        .with_extension(printer.clone())
        .with_extension(Arc::new(Approver::new(
            printer.clone(),
            crate::approvals::Approvals::load(paths.home.as_deref(), &paths.workspace),
        )))
        .with_warnings(Arc::new(|text: &str| eoutln!("warning: {text}")));
        let notes = printer.clone();
        let host = host.with_notices(Arc::new(move |text: &str| notes.note(text)));
        for warning in host.plugins().warnings() {
            eoutln!("warning: {warning}");
        }
        let session = host.session(args.agent.as_deref().unwrap_or("main"))?;
        skipped_warnings(&host, &session);
        // The model first: a run that cannot have one leaves no store behind.
        let model_settings = host.settings().params("providers").cloned();
        let model = match model {
            Some(model) => model,
            None => host.open_model(args.provider.as_deref(), args.model.as_deref())?,
        };
        let stores = match stores {
            Some(stores) => stores,
            None => host.open_store(args.store.as_deref())?,
        };
        let sink = printer.clone();
        let text = printer.clone();
        let exec = Arc::clone(host.exec_env());
        // The runner as every frontend opens it: agent files with a model of their own run on
        // it when the provider knows it; the agent run and its roster say so when not.
        let (runner, notes) = noeta::TaskRunner::over(Arc::new(host), &stores, model);
        for (agents, note) in notes {
            if agents
                .iter()
                .any(|a| *a == session.spec.name || session.spec.spawnable.contains(a))
            {
                eoutln!("warning: {note}");
            }
        }
        let noeta::TaskRunner {
            host: sessions,
            runtime,
        } = runner;
        // Each task keeps the model it was made with, so `resume` and `answer` need no flags;
        // a submitted one what a worker on any host needs to run it as it was submitted
        // (secrets stay references in the settings; none is recorded).
        let mut run = TaskRun {
            agent: Some(session.spec.name.clone()),
            provider: Some(
                args.provider
                    .clone()
                    .unwrap_or_else(|| runtime.provider().name().to_owned()),
            ),
            model: Some(runtime.provider().model().to_owned()),
            ..TaskRun::default()
        };
        if args.detach {
            run = TaskRun {
                queued: true,
                workspace: Some(paths.workspace.clone()),
                permission_mode: args.permission_mode.clone(),
                sandbox: args.sandbox.clone(),
                ..run
            }
            .with_absolute_script(&paths.workspace);
        }
        let runtime = runtime
            .with_host_facts(run.facts())
            .with_text_sink(Arc::new(move |_task: &TaskId, piece: &str| {
                text.text(piece)
            }))
            .with_progress(Arc::new(move |call, text| sink.progress(call, text)));
        Ok(Self {
            runtime,
            session,
            sessions,
            log: Arc::clone(&stores.log),
            stores,
            printer,
            wait: args.wait,
            exec,
            model_settings,
        })
    }
}

/// One warning line per thing the run goes without: a plugin that failed to load, a settings
/// table nothing reads, a skill that cannot be read (`noeta doctor` reports each as a problem).
pub(crate) fn skipped_warnings(host: &Host, session: &Session) {
    for note in host.trust_notes() {
        eoutln!("warning: {note}");
    }
    for problem in host.plugins().problems() {
        eoutln!("warning: plugin skipped: {problem}");
    }
    for (_, problem) in host.agent_file_problems() {
        eoutln!("warning: agent file skipped: {problem}");
    }
    for problem in &host.claude_plugins().problems {
        eoutln!("warning: plugin skipped: {problem}");
    }
    for warning in &host.claude_plugins().warnings {
        eoutln!("warning: {warning}");
    }
    if let Some(note) = host
        .agent_files()
        .iter()
        .find(|f| f.name == session.spec.name)
        .and_then(noeta::AgentFile::note)
    {
        eoutln!("warning: {note}");
    }
    for plugin in host.unused_plugins(session) {
        eoutln!(
            "warning: plugin `{plugin}` is loaded but no agent uses it: give its manifest \
             `add-to = \"*\"` (every agent) or add it to one (`[agents.main] add_plugins = [\"{plugin}\"]`)"
        );
    }
    for (table, near) in host.unknown_tables(session.extensions.iter().map(|e| e.name())) {
        let hint = near
            .map(|near| format!(" — did you mean `{near}`?"))
            .unwrap_or_default();
        eoutln!(
            "warning: settings table [plugins.{table}] is not used: it names no plugin or extension{hint}"
        );
    }
    if let Ok(listing) = host.skills() {
        for skill in listing.skipped.iter().filter(|s| !s.shadowed) {
            eoutln!(
                "warning: skill skipped: {} ({}): {}",
                skill.path.display(),
                skill.tier,
                skill.reason
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_modes_take_both_spellings_and_name_a_bad_one() {
        assert_eq!(permission_mode("accept-edits").unwrap(), "acceptEdits");
        assert_eq!(
            permission_mode("bypassPermissions").unwrap(),
            "bypassPermissions"
        );
        let err = permission_mode("yolo").unwrap_err().to_string();
        assert!(err.starts_with("--permission-mode `yolo` is not one of default, acceptEdits, bypassPermissions, plan"), "{err}");
    }
}
