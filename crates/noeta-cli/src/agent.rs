//! Running agents from the command line: the plugin set, the agent's session, the store, the
//! model and the runtime, put together for one workspace.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use noeta::{HostOptions, HostPaths, Settings, SettingsFiles};
use noeta_core::exec::LocalExecEnv;
use noeta_core::provider::Provider;
use noeta_core::runner::{Runtime, Sessions};
use noeta_core::session::{Instances, Session};
use noeta_core::store::{ContentStore, EventLog, SystemClock, TaskId};
use serde_json::json;

use crate::interact::Approver;
use crate::output::Printer;

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
    /// `--plugin-dir`.
    pub(crate) plugin_dirs: Vec<PathBuf>,
}

/// How to reach the model when nothing says.
const NO_MODEL: &str = "no model is configured: set ANTHROPIC_API_KEY (Anthropic) or OPENAI_API_KEY (OpenAI; OPENAI_BASE_URL for a compatible server such as vLLM, Ollama or llama.cpp), or pass --provider anthropic|openai|scripted:FILE (examples/demo/script.json runs offline)";

/// The runtime and session of one agent in one workspace.
pub(crate) struct AgentHost {
    /// The runtime.
    pub(crate) runtime: Runtime,
    /// The agent's session.
    pub(crate) session: Arc<Session>,
    /// Every agent's session (the agent's own and its subagents'), for `run_tree`.
    pub(crate) sessions: HostSessions,
    /// The store's events (for listings).
    pub(crate) log: Arc<dyn EventLog>,
    /// Prints what happens.
    pub(crate) printer: Arc<Printer>,
}

/// The store named by `url` (default `<workspace>/.noeta/noeta.db`).
pub(crate) fn open_store(
    paths: &HostPaths,
    url: Option<&str>,
) -> Result<(Arc<dyn EventLog>, Arc<dyn ContentStore>)> {
    let stores = noeta::backends::open_store(url, &paths.workspace, Arc::new(SystemClock))
        .with_context(|| {
            format!(
                "cannot open the store{}",
                url.map(|u| format!(" `{u}`")).unwrap_or_default()
            )
        })?;
    Ok((stores.log, stores.content))
}

/// Where secret references resolve: the environment, then (with the `keyring` feature) the OS
/// keyring. A keyring that cannot be opened is reported on each `{keyring:…}` reference.
pub(crate) fn secrets() -> noeta::settings::SecretChain {
    let chain = noeta::settings::SecretChain::new().with(Arc::new(noeta::EnvSecrets::new()));
    #[cfg(feature = "keyring")]
    let chain = chain.with(os_keyring());
    chain
}

#[cfg(all(feature = "keyring", target_os = "linux"))]
fn os_keyring() -> Arc<dyn noeta::SecretStore> {
    match linux_keyutils_keyring_store::Store::new() {
        Ok(store) => Arc::new(noeta::settings::KeyringSecrets::new(store)),
        Err(error) => Arc::new(noeta::settings::UnavailableKeyring::new(format!(
            "the kernel keyring cannot be opened: {error}"
        ))),
    }
}

#[cfg(all(feature = "keyring", not(target_os = "linux")))]
fn os_keyring() -> Arc<dyn noeta::SecretStore> {
    Arc::new(noeta::settings::UnavailableKeyring::new(
        "this build has no keyring store for this platform (only Linux's kernel keyring)".into(),
    ))
}

/// The model: `--provider`, else `[plugins.providers] provider`, else the first provider with
/// a key in the environment; configured by `[plugins.providers]` (its secret references
/// resolved now), then `--model`.
pub(crate) fn open_model(args: &AgentArgs, settings: &Settings) -> Result<Arc<dyn Provider>> {
    let params = settings
        .params("providers")
        .map(|p| serde_json::Value::Object(p.clone()))
        .unwrap_or(serde_json::Value::Null);
    let params = noeta::settings::resolve_plugin_secrets("providers", &params, &secrets())?;
    let (named, mut config) =
        noeta::backends::from_settings(&params, noeta::backends::ProviderConfig::default())
            .map_err(anyhow::Error::msg)?;
    let spec = match (&args.provider, named) {
        (Some(spec), named) => {
            // The settings describe their own provider: its key, address, model and price
            // must not travel to another one.
            if named.is_some_and(|named| named != *spec) {
                config = noeta::backends::ProviderConfig {
                    max_retries: config.max_retries,
                    connect_timeout: config.connect_timeout,
                    idle_timeout: config.idle_timeout,
                    ..noeta::backends::ProviderConfig::default()
                };
            }
            spec.clone()
        }
        (None, Some(spec)) => spec,
        (None, None) => match noeta::backends::detect_from_env() {
            Some(name) => name.to_owned(),
            None => bail!("{NO_MODEL}"),
        },
    };
    if args.model.is_some() && args.model != config.model {
        // A price set for the settings' model is not this one's.
        config.model.clone_from(&args.model);
        config.price = None;
    }
    noeta::backends::open_provider(&spec, config)
        .with_context(|| format!("cannot set up provider `{spec}`"))
}

/// The worker name of this machine's command line: the same across runs, so a run that was
/// killed can be resumed at once (its lease is this worker's).
fn worker() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "local".to_owned());
    format!("cli@{host}")
}

/// The command line's own defaults, under every settings file: writes applied and any shell
/// command allowed, each risky call asked about first (the permission mode decides which).
fn defaults() -> Result<Settings> {
    let mut settings = Settings::default();
    settings.set_param("fs", "write_mode", json!("apply"))?;
    settings.set_param("fs", "shell_mode", json!("arbitrary"))?;
    Ok(settings)
}

/// The flags as the last settings layer.
fn flags(args: &AgentArgs) -> Result<Settings> {
    let mut flags = Settings::default();
    if let Some(mode) = &args.permission_mode {
        flags.set_param("governance", "permission_mode", json!(mode))?;
    }
    Ok(flags)
}

/// The settings of a run: the command line's defaults, then the machine, user and project
/// `config.toml`, then the flags.
pub(crate) fn settings(paths: &HostPaths, args: &AgentArgs) -> Result<Settings> {
    let mut settings = defaults()?;
    settings.merge(Settings::load(&SettingsFiles::new(paths), &flags(args)?)?);
    Ok(settings)
}

impl AgentHost {
    /// Loads the settings and the plugins, compiles the agent, opens the store and the model.
    pub(crate) fn open(paths: &HostPaths, args: &AgentArgs) -> Result<Self> {
        let settings = settings(paths, args)?;
        let options = HostOptions {
            paths: args.plugin_dirs.clone(),
            ..HostOptions::default()
        };
        let set = settings.load_host(paths, &options)?;
        for warning in set.warnings() {
            eprintln!("warning: {warning}");
        }
        let merged = set.merged()?;
        let name = args.agent.as_deref().unwrap_or("main");
        let printer = Arc::new(Printer::new(args.json));
        let sessions = HostSessions {
            files: noeta::load_agent_files(paths)?,
            set,
            merged,
            settings,
            instances: Instances::new(),
            printer: printer.clone(),
            built: Mutex::new(BTreeMap::new()),
        };
        let session = sessions.get(name)?;
        let (log, content) = open_store(paths, args.store.as_deref())?;
        let model = open_model(args, &sessions.settings)?;
        let sink = printer.clone();
        let text = printer.clone();
        let runtime = Runtime::new(log.clone(), content.clone(), model)
            .with_text_sink(Arc::new(move |piece: &str| text.text(piece)))
            .with_worker(worker())
            .with_exec_env(Arc::new(LocalExecEnv::new(&paths.workspace)))
            .with_progress(Arc::new(move |call, text| sink.progress(call, text)));
        Ok(Self {
            runtime,
            session,
            sessions,
            log,
            printer,
        })
    }
}

/// The sessions of the agents this host runs, each built when first asked for (the task's
/// own agent's at once, a subagent's when `run_tree` first needs it), all over one set of
/// plugin instances and with the host's printer and approver, so a subagent's activity and
/// its permission prompts reach the same terminal.
pub(crate) struct HostSessions {
    set: noeta_core::PluginSet,
    merged: noeta_core::Merged,
    settings: Settings,
    files: Vec<noeta::AgentFile>,
    instances: Instances,
    printer: Arc<Printer>,
    built: Mutex<BTreeMap<String, Arc<Session>>>,
}

impl HostSessions {
    /// The session of agent `name`: an agent file of that name, else an `agent` contribution
    /// (`main`: the official preset), with the settings applied.
    pub(crate) fn get(&self, name: &str) -> Result<Arc<Session>> {
        if let Some(session) = self.lock().get(name) {
            return Ok(Arc::clone(session));
        }
        let mut agent = match self.files.iter().find(|f| f.name == name) {
            Some(file) => file.options(),
            None => noeta::agent_options(&self.set, &self.merged, name)?,
        };
        for dropped in self.settings.apply_to(&mut agent) {
            eprintln!(
                "warning: plugin `{dropped}` is switched off by the settings; agent `{name}` runs without it"
            );
        }
        let compiled =
            noeta_core::compile_agent(&self.set, &self.merged, &agent, &noeta::activation_rules())?;
        let session = noeta::build_session_shared(
            &self.set,
            &compiled,
            &agent.config,
            &secrets(),
            &self.instances,
        )?
        .with_host_extension(self.printer.clone())
        .with_host_extension(Arc::new(Approver::new(self.printer.clone())));
        let session = Arc::new(session);
        self.lock().insert(name.to_owned(), Arc::clone(&session));
        Ok(session)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Session>>> {
        self.built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Sessions for HostSessions {
    fn session(&self, agent: &str) -> Option<Arc<Session>> {
        match self.get(agent) {
            Ok(session) => Some(session),
            Err(err) => {
                // The child fails alone, and its parent hears that this host cannot run it.
                eprintln!("warning: agent `{agent}` cannot run here: {err:#}");
                None
            }
        }
    }
}

/// A new task id: the time it was made and a few characters to keep two made in one second apart.
pub(crate) fn new_task_id() -> Result<TaskId> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) =
        noeta_toolkit::dates::civil_from_days(i64::try_from(days).unwrap_or_default());
    let salt = (now.subsec_nanos() ^ std::process::id().rotate_left(16)) & 0xffff;
    Ok(TaskId::new(format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}-{salt:04x}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    ))?)
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
