//! What the skills tests share: a temporary workspace and home, skill files, the listing, and a
//! session with the plugin on a scripted runtime.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions; each test file uses a part"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_builtin_skills::listing::{Listing, index_for_listing};
use noeta_core::exec::LocalExecEnv;
use noeta_core::extension::{Extension, HookResult, StepSignal, View};
use noeta_core::fold::{Folder, TaskState};
use noeta_core::model::ModelRequest;
use noeta_core::model::Role;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::{Session, SessionError, build_session};
use noeta_core::store::{EventLog, ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_core::{
    ActivationRules, AgentOptions, LoadOptions, PluginSource, Risk, Tool, ToolContext, ToolError,
    ToolFlags, ToolOutput, compile_agent, load_plugins, standard_registry,
};
use serde_json::{Value, json};
use tempfile::TempDir;

/// A SKILL.md with `name` and `description` and a one-line body.
pub(crate) fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n\nInstructions of {name}.\n")
}

/// A temporary tree holding a workspace and a home directory.
pub(crate) struct Tree {
    root: TempDir,
    pub(crate) workspace: PathBuf,
    pub(crate) home: PathBuf,
}

impl Tree {
    pub(crate) fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        // Resolved, so the paths the index reports compare equal to the ones built here.
        let base = root.path().canonicalize().unwrap();
        let workspace = base.join("workspace");
        let home = base.join("home");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Self {
            root,
            workspace,
            home,
        }
    }

    /// A path under the tree's root.
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.workspace.parent().unwrap().join(rel)
    }

    /// Writes `text` at `path`, making its directories.
    pub(crate) fn write(&self, path: &Path, text: impl AsRef<[u8]>) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Writes the SKILL.md of `<dir>/<sub>` with `text`; returns its path.
    pub(crate) fn skill_file(&self, dir: &Path, sub: &str, text: &str) -> PathBuf {
        let path = dir.join(sub).join("SKILL.md");
        self.write(&path, text);
        path
    }

    /// Writes a simple skill `name` in `dir` (in a directory of the same name).
    pub(crate) fn skill(&self, dir: &Path, name: &str, description: &str) -> PathBuf {
        self.skill_file(dir, name, &skill_md(name, description))
    }

    pub(crate) fn ws(&self, rel: &str) -> PathBuf {
        self.workspace.join(rel)
    }

    pub(crate) fn in_home(&self, rel: &str) -> PathBuf {
        self.home.join(rel)
    }

    /// The listing with `settings` and no plugin directories.
    pub(crate) fn list(&self, settings: Value) -> Listing {
        self.list_with(settings, &[]).unwrap()
    }

    pub(crate) fn list_with(
        &self,
        settings: Value,
        plugin_dirs: &[(String, PathBuf)],
    ) -> Result<Listing, String> {
        index_for_listing(
            &settings,
            Some(&self.workspace),
            Some(&self.home),
            plugin_dirs,
        )
    }

    /// Trusts the workspace in the home's trust store.
    pub(crate) fn trust_workspace(&self) {
        let home = self.in_home("");
        let mut store = noeta_core::TrustStore::of_home(&home).unwrap();
        store.grant(&self.workspace).unwrap();
    }
}

/// The indexed skills as `(name, tier)`.
pub(crate) fn names(listing: &Listing) -> Vec<(String, String)> {
    listing
        .skills
        .iter()
        .map(|s| (s.name.clone(), s.tier.clone()))
        .collect()
}

/// The description of the indexed skill `name`.
pub(crate) fn description(listing: &Listing, name: &str) -> String {
    listing
        .skills
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("`{name}` is not indexed: {listing:?}"))
        .description
        .clone()
}

/// The one skipped entry for `path`.
pub(crate) fn skip_reason(listing: &Listing, path: &Path) -> String {
    listing
        .skipped
        .iter()
        .find(|s| s.path == path)
        .unwrap_or_else(|| panic!("`{}` is not skipped: {listing:?}", path.display()))
        .reason
        .clone()
}

/// The inputs a probe tool ran with.
#[derive(Clone, Default)]
pub(crate) struct Runs(Arc<Mutex<Vec<Value>>>);

impl Runs {
    pub(crate) fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// A tool that answers `<name> ran`.
struct Probe {
    name: &'static str,
    risk: Risk,
    runs: Runs,
}

#[async_trait]
impl Tool for Probe {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "A probe."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn flags(&self) -> ToolFlags {
        ToolFlags::default().with_risk(self.risk)
    }
    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.0.lock().unwrap().push(input);
        Ok(ToolOutput::text(format!("{} ran", self.name)))
    }
}

struct Offer(Vec<Arc<dyn Tool>>);

impl Extension for Offer {
    fn name(&self) -> &str {
        "test-tools"
    }
    fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        Ok(self.0.clone())
    }
}

/// Keeps every request.
struct Capture(Arc<Mutex<Vec<ModelRequest>>>);

#[async_trait]
impl Extension for Capture {
    fn name(&self) -> &str {
        "capture"
    }
    async fn before_model(
        &self,
        _view: &View<'_>,
        request: ModelRequest,
    ) -> Result<ModelRequest, StepSignal> {
        self.0.lock().unwrap().push(request.clone());
        Ok(request)
    }
}

/// A session of agent `main` with the skills plugin (and `extra` plugin sources), `config` as
/// `[plugins.skills]`.
pub(crate) fn session_with(config: Value, extra: Vec<PluginSource>) -> Result<Session, String> {
    let mut sources = vec![PluginSource::Linked(noeta_builtin_skills::plugin())];
    sources.extend(extra);
    let set = load_plugins(&sources, &LoadOptions::new(standard_registry()))
        .map_err(|e| e.to_string())?;
    let merged = set.merged().map_err(|e| e.to_string())?;
    let config = if config.is_null() {
        BTreeMap::new()
    } else {
        BTreeMap::from([("skills".to_owned(), config)])
    };
    let mut options = AgentOptions::named("main");
    options.plugins = vec!["skills".into()];
    options.config = config.clone();
    let compiled = compile_agent(&set, &merged, &options, &ActivationRules::default())
        .map_err(|e| e.to_string())?;
    build_session(&set, &compiled, &config, None).map_err(|e: SessionError| e.to_string())
}

/// The plugin on a scripted runtime in a temporary workspace, with probe tools `Read` (low
/// risk) and `Bash` (low risk here, so only the skills gate speaks).
pub(crate) struct Run {
    pub(crate) tree: Tree,
    pub(crate) log: Arc<MemoryEventLog>,
    content: Arc<MemoryContentStore>,
    pub(crate) session: Session,
    seen: Arc<Mutex<Vec<ModelRequest>>>,
    script: Mutex<Vec<Value>>,
    pub(crate) read: Runs,
    pub(crate) bash: Runs,
}

impl Run {
    pub(crate) fn new(config: Value) -> Self {
        Self::with_tree(Tree::new(), config, Vec::new())
    }

    pub(crate) fn with_tree(tree: Tree, config: Value, extra: Vec<PluginSource>) -> Self {
        let mut session = session_with(config, extra).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (read, bash) = (Runs::default(), Runs::default());
        let probes: Vec<Arc<dyn Tool>> = vec![
            Arc::new(Probe {
                name: "Read",
                risk: Risk::Low,
                runs: read.clone(),
            }),
            Arc::new(Probe {
                name: "Bash",
                risk: Risk::Low,
                runs: bash.clone(),
            }),
        ];
        session.extensions.push(Arc::new(Offer(probes)));
        session.extensions.push(Arc::new(Capture(seen.clone())));
        session.folder = Folder::new(&session.extensions, "test");
        Self {
            tree,
            log: Arc::new(MemoryEventLog::new(ManualClock::at(1_000))),
            content: Arc::new(MemoryContentStore::new()),
            session,
            seen,
            script: Mutex::new(Vec::new()),
            read,
            bash,
        }
    }

    /// Adds a test extension to the session.
    pub(crate) fn with_extension(mut self, extension: Arc<dyn Extension>) -> Self {
        self.session.extensions.push(extension);
        self.session.folder = Folder::new(&self.session.extensions, "test");
        self
    }

    fn runtime(&self, script: Value) -> Runtime {
        let provider =
            ScriptedProvider::from_json(&json!({ "turns": script }).to_string(), "test").unwrap();
        Runtime::new(self.log.clone(), self.content.clone(), Arc::new(provider))
            .with_exec_env(Arc::new(LocalExecEnv::new(&self.tree.workspace)))
    }

    fn script(&self, turns: Value) -> Value {
        let mut script = self.script.lock().unwrap();
        script.extend(turns.as_array().unwrap().iter().cloned());
        Value::Array(script.clone())
    }

    /// Sends `message` and runs the model `turns` (after those of earlier turns: the scripted
    /// model answers by step number).
    pub(crate) fn turn(&self, task: &str, message: &str, turns: Value) -> RunOutcome {
        let rt = self.runtime(self.script(turns));
        let t = TaskId::new(task).unwrap();
        if block_on(self.log.info(&t)).is_err() {
            block_on(rt.create(&self.session, &t, message)).unwrap();
        } else {
            block_on(rt.send(&self.session, &t, message)).unwrap();
        }
        block_on(rt.run(&self.session, &t)).unwrap()
    }

    /// Answers the parked call and runs on.
    pub(crate) fn answer(&self, task: &str, call_id: &str, allow: bool) -> RunOutcome {
        let rt = self.runtime(self.script(json!([])));
        let t = TaskId::new(task).unwrap();
        block_on(rt.answer(&self.session, &t, call_id, allow)).unwrap();
        block_on(rt.run(&self.session, &t)).unwrap()
    }

    /// Runs the slash command `/name`.
    pub(crate) fn command(&self, task: &str, name: &str) -> String {
        let rt = self.runtime(self.script(json!([])));
        block_on(rt.run_command(&self.session, &TaskId::new(task).unwrap(), name, ""))
            .unwrap()
            .text()
            .to_owned()
    }

    pub(crate) fn state(&self, task: &str) -> TaskState {
        let rt = self.runtime(self.script(json!([])));
        block_on(rt.load(&self.session, &TaskId::new(task).unwrap())).unwrap()
    }

    /// The tool results, in order, as `(text, is_error)`.
    pub(crate) fn results(&self, task: &str) -> Vec<(String, bool)> {
        self.state(task)
            .core
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| (m.text.to_string(), m.is_error))
            .collect()
    }

    /// The `skills` records of the task, as `(kind, data)`.
    pub(crate) fn records(&self, task: &str) -> Vec<(String, Value)> {
        let events = block_on(self.log.read(&TaskId::new(task).unwrap(), 0)).unwrap();
        events
            .iter()
            .filter(|e| e.record.extension == "skills")
            .map(|e| (e.record.kind.clone(), e.record.data.clone()))
            .collect()
    }

    /// The requests sent so far.
    pub(crate) fn requests(&self) -> Vec<ModelRequest> {
        self.seen.lock().unwrap().clone()
    }

    /// The last request sent.
    pub(crate) fn last(&self) -> ModelRequest {
        self.seen.lock().unwrap().last().cloned().unwrap()
    }
}

/// The tool names a request offers.
pub(crate) fn tool_names(request: &ModelRequest) -> Vec<String> {
    request
        .tools
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// A scripted model turn calling `name` with `input`, then one answering `done`.
pub(crate) fn call_then_done(name: &str, input: Value) -> Value {
    json!([
        { "calls": [{ "name": name, "input": input }] },
        { "text": "done" }
    ])
}

pub(crate) fn done() -> Value {
    json!([{ "text": "done" }])
}
