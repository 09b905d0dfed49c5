//! Agents on models of their own: `Runtime::with_agent_model` routes an agent's model calls
//! (its turns and the model its extensions see) to its provider; other agents keep the
//! runtime's.

use std::sync::Arc;

use futures::executor::block_on;
use noeta_core::provider::{Provider, ScriptedProvider};
use noeta_core::runner::RunOutcome;
use noeta_core::session::bare_session;
use noeta_core::store::TaskId;
use noeta_testkit::harness::Harness;
use serde_json::json;

fn scripted(text: &str) -> Arc<dyn Provider> {
    let script = json!({ "turns": [{ "text": text }] }).to_string();
    Arc::new(ScriptedProvider::from_json(&script, "agent model").unwrap())
}

#[test]
fn an_agent_with_a_model_of_its_own_runs_on_it_and_the_others_on_the_runtimes() {
    let harness = Harness::new();
    let rt = harness
        .runtime(json!([{ "text": "from the run's model" }]))
        .with_agent_model("reviewer", scripted("from the reviewer's model"));
    assert_eq!(rt.provider_for("reviewer").name(), "scripted");

    let reviewer = bare_session("reviewer", "You review.");
    let task = TaskId::new("review").unwrap();
    block_on(rt.create(&reviewer, &task, "review it")).unwrap();
    let outcome = block_on(rt.run(&reviewer, &task)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let state = block_on(rt.load(&reviewer, &task)).unwrap();
    assert_eq!(
        state.core.messages.last().unwrap().text,
        "from the reviewer's model"
    );

    let main = bare_session("main", "You help.");
    let task = TaskId::new("main-task").unwrap();
    block_on(rt.create(&main, &task, "help")).unwrap();
    block_on(rt.run(&main, &task)).unwrap();
    let state = block_on(rt.load(&main, &task)).unwrap();
    assert_eq!(
        state.core.messages.last().unwrap().text,
        "from the run's model"
    );
}
