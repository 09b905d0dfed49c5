//! The `workspace` built-in through the real runtime: instruction files and the environment
//! as residents, their records, resumes, fencing, and settings errors.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_builtin_workspace::{
    ENVIRONMENT_KIND, Environment, INSTRUCTIONS_KIND, Instructions, content_kind,
};
use noeta_core::exec::LocalExecEnv;
use noeta_core::extension::{Extension, StepSignal, View};
use noeta_core::fold::Folder;
use noeta_core::model::ModelRequest;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::{Session, bare_session, build_session};
use noeta_core::store::{EventLog, ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_core::{
    ActivationRules, AgentOptions, LoadOptions, PluginSource, Tool, ToolContext, ToolError,
    ToolOutput, compile_agent, load_plugins, standard_registry,
};
use serde_json::{Value, json};

/// Keeps the residents of every request.
struct Capture(Arc<Mutex<Vec<Vec<String>>>>);

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
        self.0.lock().unwrap().push(request.residents.clone());
        Ok(request)
    }
}

/// A stand-in for the file tool: `Read` answers with the path it was given.
struct Read;

#[async_trait]
impl Tool for Read {
    fn name(&self) -> &str {
        "Read"
    }
    fn description(&self) -> &str {
        "Reads."
    }
    fn input_schema(&self) -> Value {
        json!({ "type": "object", "properties": { "file_path": { "type": "string" } } })
    }
    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("read {}", input["file_path"])))
    }
}

struct Offer;

impl Extension for Offer {
    fn name(&self) -> &str {
        "offer"
    }
    fn tools(&self, _view: &View<'_>) -> noeta_core::extension::HookResult<Vec<Arc<dyn Tool>>> {
        Ok(vec![Arc::new(Read)])
    }
}

struct Harness {
    log: Arc<MemoryEventLog>,
    content: Arc<MemoryContentStore>,
    seen: Arc<Mutex<Vec<Vec<String>>>>,
    script: Mutex<Vec<Value>>,
    session: Session,
    workspace: tempfile::TempDir,
    /// A directory holding `root`, a symlink to the workspace, when the execution environment
    /// names the workspace through it.
    linked: Option<tempfile::TempDir>,
}

impl Harness {
    fn new(extensions: Vec<Arc<dyn Extension>>) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut session = bare_session("main", "You help.")
            .with_content_kind(content_kind(INSTRUCTIONS_KIND))
            .with_content_kind(content_kind(ENVIRONMENT_KIND));
        session.extensions.extend(extensions);
        session.extensions.push(Arc::new(Offer));
        session.extensions.push(Arc::new(Capture(seen.clone())));
        session.folder = Folder::new(&session.extensions, "test");
        Self {
            log: Arc::new(MemoryEventLog::new(ManualClock::at(1_000))),
            content: Arc::new(MemoryContentStore::new()),
            seen,
            script: Mutex::new(Vec::new()),
            session,
            workspace: tempfile::tempdir().unwrap(),
            linked: None,
        }
    }

    /// The same, with the execution environment naming the workspace through a symlink.
    fn linked(mut self) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(self.workspace.path(), dir.path().join("root")).unwrap();
        self.linked = Some(dir);
        self
    }

    /// The workspace root as the execution environment names it.
    fn exec_root(&self) -> std::path::PathBuf {
        self.linked.as_ref().map_or_else(
            || self.workspace.path().to_path_buf(),
            |dir| dir.path().join("root"),
        )
    }

    fn write(&self, path: &str, text: &str) {
        let path = self.workspace.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn runtime(&self, turns: Value, exec: bool) -> Runtime {
        let provider =
            ScriptedProvider::from_json(&json!({ "turns": turns }).to_string(), "test").unwrap();
        let rt = Runtime::new(self.log.clone(), self.content.clone(), Arc::new(provider));
        if exec {
            rt.with_exec_env(Arc::new(LocalExecEnv::new(self.exec_root())))
        } else {
            rt
        }
    }

    /// Sends `message` and runs the turn `turns` script (after the model steps of the turns
    /// before: the scripted model answers by the task's step number).
    fn turn(&self, task: &str, message: &str, turns: Value) {
        let script = {
            let mut script = self.script.lock().unwrap();
            script.extend(turns.as_array().unwrap().iter().cloned());
            Value::Array(script.clone())
        };
        let rt = self.runtime(script, true);
        let t = TaskId::new(task).unwrap();
        if block_on(self.log.info(&t)).is_err() {
            block_on(rt.create(&self.session, &t, message)).unwrap();
        } else {
            block_on(rt.send(&self.session, &t, message)).unwrap();
        }
        let outcome = block_on(rt.run(&self.session, &t)).unwrap();
        assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    }

    /// The residents of the last request.
    fn last(&self) -> Vec<String> {
        self.seen.lock().unwrap().last().cloned().unwrap()
    }

    fn kinds(&self, task: &str, extension: &str) -> Vec<String> {
        block_on(self.log.read(&TaskId::new(task).unwrap(), 0))
            .unwrap()
            .iter()
            .filter(|e| e.record.extension == extension)
            .map(|e| e.record.kind.clone())
            .collect()
    }
}

fn done() -> Value {
    json!([{ "text": "done" }])
}

fn read(path: &str) -> Value {
    json!([
        { "calls": [{ "name": "Read", "input": { "file_path": path } }] },
        { "text": "done" }
    ])
}

fn instructions() -> Harness {
    Harness::new(vec![Arc::new(Instructions::new(1_000))])
}

#[test]
fn the_first_non_empty_root_file_is_a_resident() {
    let h = instructions();
    h.write("NOETA.md", "  \n");
    h.write("AGENTS.md", "Run `make check` before finishing.");
    h.write("CLAUDE.md", "Never used: AGENTS.md comes first.");
    h.turn("t", "go", done());
    let residents = h.last();
    assert_eq!(residents.len(), 1, "{residents:?}");
    assert!(residents[0].contains("from `AGENTS.md` at the workspace root"));
    assert!(residents[0].ends_with("Run `make check` before finishing."));
    assert_eq!(h.kinds("t", "instructions"), vec!["loaded"]);
}

#[test]
fn an_unchanged_file_is_recorded_once_and_a_change_or_removal_is_recorded_again() {
    let h = instructions();
    h.write("NOETA.md", "First rules.");
    h.turn("t", "one", done());
    h.turn("t", "two", done());
    assert_eq!(h.kinds("t", "instructions"), vec!["loaded"]);
    h.write("NOETA.md", "Second rules.");
    h.turn("t", "three", done());
    assert!(h.last()[0].ends_with("Second rules."));
    std::fs::remove_file(h.workspace.path().join("NOETA.md")).unwrap();
    h.turn("t", "four", done());
    assert!(h.last().is_empty(), "{:?}", h.last());
    assert_eq!(
        h.kinds("t", "instructions"),
        vec!["loaded", "loaded", "removed"]
    );
}

#[test]
fn a_large_file_is_cut_with_a_note() {
    let h = Harness::new(vec![Arc::new(Instructions::new(10))]);
    h.write("NOETA.md", "0123456789abcdef");
    h.turn("t", "go", done());
    assert!(
        h.last()[0].contains("0123456789\n\n[cut: the file has 16 bytes, the first 10 are shown")
    );
}

#[test]
fn a_read_into_a_subdirectory_brings_its_instructions_once() {
    let h = instructions();
    h.write("NOETA.md", "Root rules.");
    h.write("app/AGENTS.md", "App rules.");
    h.write("app/web/CLAUDE.md", "Web rules.");
    h.write("app/web/page.txt", "x");
    h.write("lib/NOETA.md", "Lib rules, not read.");
    h.turn("t", "go", read("app/web/page.txt"));
    let residents = h.last();
    assert_eq!(residents.len(), 3, "{residents:?}");
    assert!(residents[1].starts_with("Instructions from `app/AGENTS.md`, for work in `app/`"));
    assert!(residents[1].ends_with("App rules."));
    assert!(residents[2].starts_with("Instructions from `app/web/CLAUDE.md`"));
    // The tool result says so.
    let state = block_on(
        h.runtime(done(), true)
            .load(&h.session, &TaskId::new("t").unwrap()),
    )
    .unwrap();
    let result = state
        .core
        .messages
        .iter()
        .find(|m| m.call_id.is_some())
        .unwrap();
    assert!(
        result
            .text
            .ends_with("apply to this directory: app/AGENTS.md, app/web/CLAUDE.md)"),
        "{}",
        result.text
    );
    // Reading there again loads nothing more.
    h.turn("t", "again", read("app/web/page.txt"));
    assert_eq!(
        h.kinds("t", "instructions"),
        vec!["loaded", "loaded", "loaded"]
    );
}

#[test]
fn a_read_at_the_root_brings_nothing_unless_it_is_a_link_into_a_subdirectory() {
    let h = instructions();
    h.write("NOETA.md", "Root rules.");
    h.write("top.txt", "x");
    h.write("app/AGENTS.md", "App rules.");
    h.write("app/page.txt", "x");
    std::os::unix::fs::symlink(
        h.workspace.path().join("app/page.txt"),
        h.workspace.path().join("page-link.txt"),
    )
    .unwrap();
    h.turn("t", "go", read("top.txt"));
    assert_eq!(h.kinds("t", "instructions"), vec!["loaded"]);
    // The link's file lives in `app/`: its instructions apply.
    h.turn("t", "more", read("page-link.txt"));
    assert_eq!(h.kinds("t", "instructions"), vec!["loaded", "loaded"]);
    assert!(h.last()[1].ends_with("App rules."), "{:?}", h.last());
}

#[test]
fn a_workspace_named_through_a_symlink_gets_the_same_instructions() {
    let h = instructions().linked();
    h.write("NOETA.md", "Root rules.");
    h.write("top.txt", "x");
    h.write("app/AGENTS.md", "App rules.");
    h.write("app/page.txt", "x");
    h.turn("t", "go", read("top.txt"));
    assert_eq!(h.kinds("t", "instructions"), vec!["loaded"]);
    assert!(h.last()[0].ends_with("Root rules."), "{:?}", h.last());
    h.turn("t", "more", read("app/page.txt"));
    assert_eq!(h.kinds("t", "instructions"), vec!["loaded", "loaded"]);
    assert!(h.last()[1].ends_with("App rules."), "{:?}", h.last());
}

#[test]
fn reads_outside_the_workspace_and_symlinks_out_of_it_bring_nothing() {
    let h = instructions();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("AGENTS.md"), "Foreign rules.").unwrap();
    std::fs::write(outside.path().join("f.txt"), "x").unwrap();
    h.write("inner/f.txt", "x");
    std::os::unix::fs::symlink(
        outside.path().join("AGENTS.md"),
        h.workspace.path().join("inner/AGENTS.md"),
    )
    .unwrap();
    let outside_file = outside.path().join("f.txt");
    h.turn("t", "go", read(outside_file.to_str().unwrap()));
    h.turn("t", "more", read("inner/f.txt"));
    h.turn("t", "up", read("../f.txt"));
    assert!(h.last().is_empty(), "{:?}", h.last());
    assert!(h.kinds("t", "instructions").is_empty());
}

#[test]
fn without_an_execution_environment_nothing_is_added() {
    let h = instructions();
    h.write("NOETA.md", "Rules.");
    let rt = h.runtime(done(), false);
    let t = TaskId::new("t").unwrap();
    block_on(rt.create(&h.session, &t, "go")).unwrap();
    block_on(rt.run(&h.session, &t)).unwrap();
    assert!(h.last().is_empty());
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.org"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const DAY: u64 = 20_789 * 86_400;

#[test]
fn the_environment_is_recorded_once_and_a_resume_keeps_its_bytes() {
    let clock = Arc::new(Mutex::new(DAY + 3_600));
    let tick = clock.clone();
    let h = Harness::new(vec![Arc::new(Environment::with_clock(true, move || {
        *tick.lock().unwrap()
    }))]);
    git(h.workspace.path(), &["init", "-q", "-b", "trunk"]);
    h.write("a.txt", "a");
    git(h.workspace.path(), &["add", "a.txt"]);
    git(h.workspace.path(), &["commit", "-q", "-m", "first commit"]);
    h.write("b.txt", "b");
    h.turn("t", "go", done());
    let first = h.last();
    assert_eq!(first.len(), 1);
    let text = &first[0];
    for needle in [
        "Environment (as recorded when this task started):",
        &format!("- Working directory: {}", h.workspace.path().display()),
        &format!("- Platform: {} (", std::env::consts::OS),
        "- Date: 2026-12-02",
        "- Git branch: trunk",
        "- Uncommitted changes: 1 paths\n  ?? b.txt",
        "- Recent commits:\n  ",
        " first commit",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    // A day later, with another commit, the task still sends the same bytes.
    *clock.lock().unwrap() += 86_400;
    git(h.workspace.path(), &["add", "b.txt"]);
    git(h.workspace.path(), &["commit", "-q", "-m", "second"]);
    h.turn("t", "again", done());
    assert_eq!(h.last(), first);
    assert_eq!(h.kinds("t", "environment"), vec!["captured"]);
}

#[test]
fn outside_a_repository_the_environment_says_so_and_git_can_be_left_out() {
    let h = Harness::new(vec![Arc::new(Environment::with_clock(true, || DAY))]);
    h.turn("t", "go", done());
    assert!(h.last()[0].ends_with("- Date: 2026-12-02\n- Git: not a git repository"));
    let quiet = Harness::new(vec![Arc::new(Environment::with_clock(false, || DAY))]);
    quiet.turn("t", "go", done());
    assert!(quiet.last()[0].ends_with("- Date: 2026-12-02"));
}

fn pack_session(config: Value) -> Result<Session, String> {
    let set = load_plugins(
        &[PluginSource::Linked(noeta_builtin_workspace::plugin())],
        &LoadOptions::new(standard_registry()),
    )
    .unwrap();
    let merged = set.merged().unwrap();
    let mut options = AgentOptions::named("main");
    options.plugins = vec!["workspace".into()];
    let compiled = compile_agent(&set, &merged, &options, &ActivationRules::default()).unwrap();
    let config = [("workspace".to_owned(), config)].into_iter().collect();
    build_session(&set, &compiled, &config, None).map_err(|e| e.to_string())
}

#[test]
fn the_packs_add_both_extensions_in_band_order() {
    let session = pack_session(Value::Null).unwrap();
    let names: Vec<&str> = session.extensions.iter().map(|e| e.name()).collect();
    let at = |name: &str| names.iter().position(|n| *n == name).unwrap();
    assert!(at("instructions") < at("environment"), "{names:?}");
    let kinds: Vec<(&str, i64)> = session
        .kinds
        .iter()
        .map(|k| (k.kind.as_str(), k.band))
        .collect();
    assert_eq!(kinds, [("instructions", 300), ("environment", 400)]);
}

#[test]
fn bad_settings_fail_the_session_naming_plugin_pack_and_key() {
    let err = pack_session(json!({ "git": "yes" })).unwrap_err();
    for needle in [
        "workspace",
        "instructions",
        "settings [plugins.workspace] git: expected true or false, got `\"yes\"`",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from {err}");
    }
}
