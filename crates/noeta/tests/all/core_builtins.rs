//! The core built-ins together: a scripted task that reads, greps, edits and runs a shell
//! command in a temporary workspace, under each permission mode.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::executor::block_on;
use noeta_core::exec::LocalExecEnv;
use noeta_core::model::Role;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::Session;
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_core::{AgentOptions, LoadOptions, PluginSource, compile_agent, load_plugins};
use serde_json::{Value, json};
use tempfile::TempDir;

const NOTES: &str = "alpha\nTODO: fix the parser\nomega\n";

/// A session of `main` under the host's rules (so `react`'s loop runs it) with fs (writing, any
/// shell command) and governance in `mode`.
fn session(mode: &str) -> Session {
    let sources: Vec<PluginSource> = noeta::builtins::linked()
        .into_iter()
        .map(PluginSource::Linked)
        .collect();
    let set = load_plugins(&sources, &LoadOptions::new(noeta_core::standard_registry())).unwrap();
    let merged = set.merged().unwrap();
    let mut options = AgentOptions::named("main");
    options.plugins = vec!["fs".into(), "governance".into()];
    let compiled = compile_agent(&set, &merged, &options, &noeta::activation_rules()).unwrap();
    let config = BTreeMap::from([
        (
            "fs".to_owned(),
            json!({ "write_mode": "apply", "shell_mode": "arbitrary" }),
        ),
        (
            "governance".to_owned(),
            json!({ "permission_mode": mode, "allow": ["Bash"] }),
        ),
    ]);
    noeta::build_session(&set, &compiled, &config).unwrap()
}

/// A runtime on `ws` whose model reads, greps, edits and runs `cat`, one call a reply.
fn runtime(ws: &TempDir) -> Runtime {
    let step = |name: &str, input: Value| json!({ "calls": [{ "name": name, "input": input }] });
    let turns = json!({ "turns": [
        step("Read", json!({ "file_path": "notes.txt" })),
        step("Grep", json!({ "pattern": "TODO", "output_mode": "content" })),
        step("Edit", json!({ "file_path": "notes.txt", "old_string": "TODO: fix", "new_string": "DONE: fixed" })),
        step("Bash", json!({ "command": "cat notes.txt" })),
        { "text": "done" }
    ]});
    let provider = ScriptedProvider::from_json(&turns.to_string(), "e2e").unwrap();
    Runtime::new(
        Arc::new(MemoryEventLog::new(ManualClock::at(0))),
        Arc::new(MemoryContentStore::new()),
        Arc::new(provider),
    )
    .with_exec_env(Arc::new(LocalExecEnv::new(ws.path())))
}

fn workspace() -> TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), NOTES).unwrap();
    ws
}

fn results(rt: &Runtime, s: &Session, t: &TaskId) -> Vec<String> {
    let state = block_on(rt.load(s, t)).unwrap();
    state
        .core
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text.to_string())
        .collect()
}

fn notes(ws: &TempDir) -> String {
    std::fs::read_to_string(ws.path().join("notes.txt")).unwrap()
}

#[test]
fn in_default_mode_the_edit_waits_for_approval_then_the_task_goes_on() {
    let ws = workspace();
    let (s, rt) = (session("default"), runtime(&ws));
    let t = TaskId::new("default").unwrap();
    block_on(rt.create(&s, &t, "fix the TODO")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    let RunOutcome::Parked { call_id, question } = outcome else {
        panic!("expected a park, got {outcome:?}");
    };
    assert_eq!(question, "`Edit` is a high risk tool — allow this call?");
    assert_eq!(notes(&ws), NOTES, "nothing written before the answer");
    block_on(rt.answer(&s, &t, &call_id, true)).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(notes(&ws), "alpha\nDONE: fixed the parser\nomega\n");
    let out = results(&rt, &s, &t);
    assert_eq!(out.len(), 4);
    assert!(out[0].contains("TODO: fix the parser"), "{}", out[0]);
    assert!(
        out[1].contains("notes.txt:2:TODO: fix the parser"),
        "{}",
        out[1]
    );
    assert_eq!(out[3], "alpha\nDONE: fixed the parser\nomega");
}

#[test]
fn in_accept_edits_mode_the_whole_task_runs_without_asking() {
    let ws = workspace();
    let (s, rt) = (session("acceptEdits"), runtime(&ws));
    let t = TaskId::new("accept").unwrap();
    block_on(rt.create(&s, &t, "fix the TODO")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(notes(&ws), "alpha\nDONE: fixed the parser\nomega\n");
    assert_eq!(
        results(&rt, &s, &t)[3],
        "alpha\nDONE: fixed the parser\nomega"
    );
}

#[test]
fn in_plan_mode_the_reads_run_and_the_edit_and_shell_are_refused() {
    let ws = workspace();
    let (s, rt) = (session("plan"), runtime(&ws));
    let t = TaskId::new("plan").unwrap();
    block_on(rt.create(&s, &t, "fix the TODO")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(notes(&ws), NOTES);
    let out = results(&rt, &s, &t);
    assert!(out[0].contains("TODO: fix the parser"), "{}", out[0]);
    assert!(out[1].contains("TODO: fix the parser"), "{}", out[1]);
    assert!(
        out[2].starts_with("plan mode: `Edit` is not safe while planning"),
        "{}",
        out[2]
    );
    assert!(
        out[3].starts_with("plan mode: `Bash` is not safe while planning"),
        "{}",
        out[3]
    );
}
