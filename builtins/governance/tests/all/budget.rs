//! Budgets and the repetition guard, through the real runtime.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use crate::common;

use async_trait::async_trait;
use common::{Probe, call, results, scripted, session};
use futures::executor::block_on;
use noeta_core::runner::RunOutcome;
use noeta_core::store::TaskId;
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::{Value, json};
use std::sync::Arc;

/// Spawns one child per entry of `input.agents`, then waits for them.
struct Delegate;

#[async_trait]
impl Tool for Delegate {
    fn name(&self) -> &str {
        "Delegate"
    }
    fn description(&self) -> &str {
        "Delegates to child agents."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        for agent in input["agents"].as_array().into_iter().flatten() {
            ctx.spawn(agent.as_str().unwrap_or_default(), "help")?;
        }
        Ok(ToolOutput::wait_for_children())
    }
}

fn look() -> Vec<Arc<dyn Tool>> {
    vec![Probe::tool("Look", ToolFlags::read_only()).0]
}

#[test]
fn max_tool_calls_counts_calls_waiting_in_the_same_batch_and_earlier_replies() {
    let s = session(json!({"budget": {"max_tool_calls": 3}}), &look()).unwrap();
    let rt = scripted(json!({ "turns": [
        { "calls": [call("Look", json!({"n": 1}))] },
        // Read-only calls are allowed one by one, then run together: the budget counts the waiting ones.
        { "calls": [call("Look", json!({"n": 2})), call("Look", json!({"n": 3})), call("Look", json!({"n": 4}))] },
        { "text": "done" }
    ]}));
    let t = TaskId::new("calls").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(
        results(&rt, &s, &t),
        [
            "Look ran",
            "Look ran",
            "Look ran",
            "budget: 3 tool calls already made in this task (max_tool_calls = 3); finish with what you have"
        ]
    );
}

#[test]
fn max_iterations_fails_the_turn_before_the_next_model_call() {
    let s = session(json!({"budget": {"max_iterations": 1}}), &look()).unwrap();
    let rt =
        scripted(json!({ "turns": [{ "calls": [call("Look", json!({}))] }, { "text": "done" }] }));
    let t = TaskId::new("iterations").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert_eq!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::TurnFailed {
            reason: "budget: the task has made 1 model calls (max_iterations = 1)".into()
        }
    );
    assert_eq!(results(&rt, &s, &t), ["Look ran"]);
}

#[test]
fn max_tokens_counts_input_and_output_over_the_task() {
    let s = session(json!({"budget": {"max_tokens": 100}}), &look()).unwrap();
    let usage = json!({"input_tokens": 80, "output_tokens": 30});
    let rt = scripted(json!({ "turns": [
        { "calls": [call("Look", json!({}))], "usage": usage },
        { "text": "done" }
    ]}));
    let t = TaskId::new("tokens").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert_eq!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::TurnFailed {
            reason: "budget: the task has used 110 tokens (max_tokens = 100)".into()
        }
    );
}

#[test]
fn max_cost_usd_ends_the_turn_once_the_priced_calls_reach_it() {
    let s = session(json!({"budget": {"max_cost_usd": 0.01}}), &look()).unwrap();
    let cost = |micros: u64| json!({"input_tokens": 1, "output_tokens": 1, "cost_micros": micros});
    let rt = scripted(json!({ "turns": [
        { "calls": [call("Look", json!({}))], "usage": cost(4_000) },
        { "calls": [call("Look", json!({}))], "usage": cost(7_000) },
        { "text": "done" }
    ]}));
    let t = TaskId::new("cost").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert_eq!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::TurnFailed {
            reason: "budget: the task has cost $0.0110 (max_cost_usd = 0.01)".into()
        }
    );
    assert_eq!(results(&rt, &s, &t), ["Look ran", "Look ran"]);
}

#[test]
fn a_cost_cap_with_an_unpriced_model_stops_instead_of_pretending() {
    let s = session(json!({"budget": {"max_cost_usd": 5}}), &look()).unwrap();
    let rt = scripted(json!({ "turns": [
        { "calls": [call("Look", json!({}))] },
        { "text": "done" }
    ]}));
    let t = TaskId::new("unpriced").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    match block_on(rt.run(&s, &t)).unwrap() {
        RunOutcome::TurnFailed { reason } => assert!(
            reason.starts_with("budget: max_cost_usd = 5 is set, but 1 model call(s) of this task came without a price"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_cost_cap_that_is_not_a_positive_amount_is_refused() {
    for bad in [json!(0), json!(-1.5)] {
        let err = session(json!({"budget": {"max_cost_usd": bad}}), &look()).unwrap_err();
        assert!(
            err.to_string().contains("settings [plugins.governance] budget.max_cost_usd: expected a positive number of US dollars"),
            "{err}"
        );
    }
}

fn delegating(settings: Value) -> noeta_core::session::Session {
    let mut s = session(settings, &[Arc::new(Delegate)]).unwrap();
    s.spec.spawnable = vec!["scout".into()];
    s
}

#[test]
fn max_subtasks_counts_the_children_one_call_already_asked_for() {
    let s = delegating(json!({"budget": {"max_subtasks": 2}}));
    let three = json!({"agents": ["scout", "scout", "scout"]});
    let rt =
        scripted(json!({ "turns": [{ "calls": [call("Delegate", three)] }, { "text": "done" }] }));
    let t = TaskId::new("subtasks").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        results(&rt, &s, &t),
        ["budget: this task has spawned 2 child tasks (max_subtasks = 2)"]
    );
}

#[test]
fn spawned_children_are_folded_from_the_log_and_count_in_later_calls() {
    let s = delegating(json!({"budget": {"max_subtasks": 2}}));
    let two = json!({"agents": ["scout", "scout"]});
    let rt =
        scripted(json!({ "turns": [{ "calls": [call("Delegate", two)] }, { "text": "done" }] }));
    let t = TaskId::new("folded").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Parked { .. }), "{outcome:?}");
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(state.ext["budget"], json!({"started": 1, "children": 2}));
}

#[test]
fn max_depth_refuses_a_child_below_it() {
    let s = delegating(json!({"budget": {"max_depth": 0}}));
    let one = json!({"agents": ["scout"]});
    let rt =
        scripted(json!({ "turns": [{ "calls": [call("Delegate", one)] }, { "text": "done" }] }));
    let t = TaskId::new("depth").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        results(&rt, &s, &t),
        ["budget: a child of `scout` would run at depth 1 (max_depth = 0)"]
    );
}

#[test]
fn the_repetition_guard_asks_on_the_thresholdth_identical_call_in_the_window() {
    let s = session(json!({"repetition": {"threshold": 3}}), &look()).unwrap();
    let same = || call("Look", json!({"path": "a"}));
    let rt = scripted(json!({ "turns": [
        { "calls": [same(), call("Look", json!({"path": "b"}))] },
        { "calls": [same()] },
        { "text": "done" }
    ]}));
    let t = TaskId::new("repeat").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert_eq!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended {
            reason: "end_turn".into()
        },
        "two identical calls are under the threshold"
    );

    let rt = scripted(json!({ "turns": [
        { "calls": [same(), same()] },
        { "calls": [same()] },
        { "text": "done" }
    ]}));
    let t = TaskId::new("stuck").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert_eq!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Parked {
            call_id: "call_2_1".into(),
            question: "`Look` was already called 2 times with this same input among the last 8 calls — the approach may be stuck".into()
        }
    );
}

#[test]
fn the_repetition_guard_can_deny_and_forgets_calls_outside_its_window() {
    let settings = json!({"repetition": {"threshold": 2, "window": 2, "action": "deny"}});
    let s = session(settings, &look()).unwrap();
    let a = || call("Look", json!({"path": "a"}));
    let b = || call("Look", json!({"path": "b"}));
    let rt = scripted(json!({ "turns": [{ "calls": [a(), b(), a(), a()] }, { "text": "done" }] }));
    let t = TaskId::new("window").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let out = results(&rt, &s, &t);
    assert_eq!(out[..3], ["Look ran", "Look ran", "Look ran"], "{out:?}");
    assert!(
        out[3].starts_with("`Look` was already called once with"),
        "{out:?}"
    );
    assert!(out[3].ends_with("; try something different"), "{out:?}");
}

#[test]
fn bad_budget_and_repetition_settings_name_the_field() {
    let err = |settings: Value| match session(settings, &look()) {
        Ok(_) => panic!("the session should be refused"),
        Err(err) => err.to_string(),
    };
    let prefix = "plugin `governance`: session pack `governance` failed for agent `main`: settings [plugins.governance]";
    assert!(err(json!({"budget": {"max_turns": 3}})).contains("unknown field `max_turns`"));
    assert!(err(json!({"budget": {"max_tool_calls": -1}})).starts_with(prefix));
    assert_eq!(
        err(json!({"repetition": {"threshold": 1}})),
        format!(
            "{prefix} repetition.threshold: 1 is less than 2 (a call repeats from its second time)"
        )
    );
    assert_eq!(
        err(json!({"repetition": {"threshold": 4, "window": 3}})),
        format!("{prefix} repetition.window: 3 is less than the threshold 4")
    );
    assert!(
        err(json!({"repetition": {"threshold": 3, "action": "warn"}}))
            .contains("unknown variant `warn`")
    );
}
