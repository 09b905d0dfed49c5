//! Tool search through the real runtime: deferred tools found, loaded, kept loaded.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_builtin_react::TOOL_SEARCH;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::fold::Folder;
use noeta_core::model::Role;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::Runtime;
use noeta_core::session::Session;
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::{Value, json};

/// A deferred tool that answers `<name> ran`.
struct Deferred {
    name: &'static str,
    description: &'static str,
    hint: &'static str,
}

#[async_trait]
impl Tool for Deferred {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        self.description
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn flags(&self) -> ToolFlags {
        ToolFlags::default().deferred().with_search_hint(self.hint)
    }
    async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("{} ran", self.name)))
    }
}

struct Offers;

#[async_trait]
impl Extension for Offers {
    fn name(&self) -> &str {
        "offers"
    }
    fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        Ok(vec![
            Arc::new(Deferred {
                name: "Deploy",
                description: "Deploys the current build.",
                hint: "release ship production",
            }),
            Arc::new(Deferred {
                name: "Rollback",
                description: "Rolls production back to the previous release.",
                hint: "undo revert",
            }),
        ])
    }
}

fn session(deferred: bool) -> Session {
    let mut session = noeta_testkit::harness::session_of(
        vec![noeta_builtin_react::plugin()],
        &["react"],
        &BTreeMap::new(),
    );
    if deferred {
        session.extensions.push(Arc::new(Offers));
    }
    session.folder = Folder::new(&session.extensions, "test");
    session
}

fn step(name: &str, input: Value) -> Value {
    json!({ "calls": [{ "name": name, "input": input }] })
}

fn runtime(turns: Value) -> Runtime {
    let provider =
        ScriptedProvider::from_json(&json!({ "turns": turns }).to_string(), "test").unwrap();
    Runtime::new(
        Arc::new(MemoryEventLog::new(ManualClock::at(0))),
        Arc::new(MemoryContentStore::new()),
        Arc::new(provider),
    )
}

fn results(rt: &Runtime, s: &Session, t: &TaskId) -> Vec<String> {
    block_on(rt.load(s, t))
        .unwrap()
        .core
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text.to_string())
        .collect()
}

#[test]
fn a_deferred_tool_is_found_by_its_hint_loaded_and_stays_loaded_across_workers() {
    let s = session(true);
    let rt = runtime(json!([
        step("Deploy", json!({})),
        step("ToolSearch", json!({ "query": "ship it" })),
        step("Deploy", json!({})),
        { "text": "deployed" },
        step("Deploy", json!({})),
        { "text": "again" }
    ]));
    let t = TaskId::new("search").unwrap();
    block_on(rt.create(&s, &t, "ship the build")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let out = results(&rt, &s, &t);
    assert!(
        out[0].contains("Deploy"),
        "not callable before it is loaded: {out:?}"
    );
    assert_eq!(
        out[1],
        "Loaded 1 tool(s); call them from your next reply on:\n- `Deploy`: Deploys the current build."
    );
    assert_eq!(out[2], "Deploy ran");
    // Another worker folds the loaded set back.
    let again = session(true);
    block_on(rt.send(&again, &t, "once more")).unwrap();
    block_on(rt.run(&again, &t)).unwrap();
    assert_eq!(results(&rt, &again, &t)[3], "Deploy ran");
    let state = block_on(rt.load(&again, &t)).unwrap();
    assert_eq!(
        state.ext_state(TOOL_SEARCH),
        Some(&json!({ "loaded": ["Deploy"] }))
    );
}

#[test]
fn select_loads_by_name_and_misses_name_what_is_available() {
    let s = session(true);
    let rt = runtime(json!([
        step("ToolSearch", json!({ "query": "select:Rollback,Nope" })),
        step("ToolSearch", json!({ "query": "kubernetes" })),
        step("ToolSearch", json!({ "query": "select:Rollback, Deploy" })),
        step("Rollback", json!({})),
        { "text": "done" }
    ]));
    let t = TaskId::new("select").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let out = results(&rt, &s, &t);
    assert_eq!(
        out[0],
        "ToolSearch: no tool to load named `Nope` (available: Deploy, Rollback)"
    );
    assert_eq!(
        out[1],
        "No tool matches `kubernetes`. Available to load: Deploy, Rollback"
    );
    assert!(out[2].starts_with("Loaded 2 tool(s)"), "{out:?}");
    assert_eq!(out[3], "Rollback ran");
}

#[test]
fn tool_search_is_offered_only_while_some_tool_is_held_back() {
    let s = session(false);
    let rt = runtime(json!([step("ToolSearch", json!({ "query": "x" })), { "text": "done" }]));
    let t = TaskId::new("none").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let out = results(&rt, &s, &t);
    assert!(out[0].contains("ToolSearch"), "{out:?}");
    assert!(!out[0].starts_with("Loaded"), "{out:?}");
}
