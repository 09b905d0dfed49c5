//! Permission modes, allow and deny lists and per-tool risk, through the real runtime's gate.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{Probe, Runs, call, results, scripted, session};
use futures::executor::block_on;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::store::TaskId;
use noeta_core::{Risk, Tool, ToolFlags};
use serde_json::{Value, json};

struct Bench {
    runs: BTreeMap<&'static str, Runs>,
    tools: Vec<Arc<dyn Tool>>,
}

fn bench() -> Bench {
    let specs: [(&'static str, ToolFlags); 4] = [
        ("Look", ToolFlags::read_only()),
        ("Edit", ToolFlags::default().with_risk(Risk::High)),
        ("Bash", ToolFlags::default().with_risk(Risk::High)),
        ("Fetch", ToolFlags::default().with_risk(Risk::Medium)),
    ];
    let mut runs = BTreeMap::new();
    let mut tools = Vec::new();
    for (name, flags) in specs {
        let (tool, counter) = Probe::tool(name, flags);
        runs.insert(name, counter);
        tools.push(tool);
    }
    Bench { runs, tools }
}

fn runtime(calls: &[&str]) -> Runtime {
    let first: Vec<Value> = calls.iter().map(|c| call(c, json!({}))).collect();
    scripted(json!({ "turns": [{ "calls": first }, { "text": "done" }] }))
}

#[test]
fn by_default_low_risk_tools_run_and_riskier_ones_ask() {
    let b = bench();
    let s = session(Value::Null, &b.tools).unwrap();
    let rt = runtime(&["Look", "Edit"]);
    let t = TaskId::new("default").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        outcome,
        RunOutcome::Parked {
            call_id: "call_1_2".into(),
            question: "`Edit` is a high risk tool — allow this call?".into()
        }
    );
    assert_eq!(b.runs["Look"].count(), 1);
    assert_eq!(b.runs["Edit"].count(), 0);
    block_on(rt.answer(&s, &t, "call_1_2", true)).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(b.runs["Edit"].count(), 1);
}

#[test]
fn accept_edits_runs_the_edit_tools_without_asking_but_not_the_shell() {
    let b = bench();
    let s = session(json!({"permission_mode": "acceptEdits"}), &b.tools).unwrap();
    let rt = runtime(&["Edit", "Bash"]);
    let t = TaskId::new("accept").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(
        matches!(&outcome, RunOutcome::Parked { question, .. } if question.starts_with("`Bash`")),
        "{outcome:?}"
    );
    assert_eq!(b.runs["Edit"].count(), 1);
}

#[test]
fn bypass_runs_everything_but_the_deny_list() {
    let b = bench();
    let s = session(
        json!({"permission_mode": "bypass-permissions", "deny": ["Bash"]}),
        &b.tools,
    )
    .unwrap();
    let rt = runtime(&["Edit", "Fetch", "Bash"]);
    let t = TaskId::new("bypass").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(
        results(&rt, &s, &t),
        [
            "Edit ran",
            "Fetch ran",
            "`Bash` is denied by the permission settings"
        ]
    );
}

#[test]
fn the_allow_list_runs_a_tool_without_asking() {
    let b = bench();
    let s = session(json!({"allow": ["Fetch"]}), &b.tools).unwrap();
    let rt = runtime(&["Fetch"]);
    let t = TaskId::new("allow").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(b.runs["Fetch"].count(), 1);
}

#[test]
fn plan_mode_refuses_what_is_not_safe_while_planning_and_reads_run() {
    let b = bench();
    let s = session(json!({"permission_mode": "plan"}), &b.tools).unwrap();
    let rt = runtime(&["Look", "Edit"]);
    let t = TaskId::new("plan").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    let out = results(&rt, &s, &t);
    assert_eq!(out[0], "Look ran");
    assert!(
        out[1].starts_with("plan mode: `Edit` is not safe while planning"),
        "{}",
        out[1]
    );
}

#[test]
fn the_mode_switch_is_recorded_and_outlives_the_session_that_made_it() {
    let b = bench();
    let s = session(Value::Null, &b.tools).unwrap();
    let rt = runtime(&["Edit"]);
    let t = TaskId::new("switch").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert_eq!(
        block_on(rt.run_command(&s, &t, "mode", "")).unwrap().text(),
        "permission mode: default"
    );
    assert_eq!(
        block_on(rt.run_command(&s, &t, "mode", "plan"))
            .unwrap()
            .text(),
        "permission mode: plan"
    );
    // A fresh session (a new worker) folds the switch back.
    let again = session(Value::Null, &b.tools).unwrap();
    assert_eq!(
        block_on(rt.run_command(&again, &t, "mode", ""))
            .unwrap()
            .text(),
        "permission mode: plan"
    );
    block_on(rt.run(&again, &t)).unwrap();
    assert!(results(&rt, &again, &t)[0].starts_with("plan mode: `Edit`"));
    let err = block_on(rt.run_command(&again, &t, "mode", "yolo")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/mode: `yolo` is not a permission mode (expected one of: default, acceptEdits, bypassPermissions, plan)"
    );
}

#[test]
fn bad_settings_fail_the_session_naming_the_field() {
    let b = bench();
    let err = session(json!({"permission_mode": "sometimes"}), &b.tools).unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin `governance`: session pack `governance` failed for agent `main`: settings [plugins.governance]: permission_mode `sometimes` is not one of default, acceptEdits, bypassPermissions, plan"
    );
    let err = session(json!({"alow": ["Fetch"]}), &b.tools).unwrap_err();
    assert!(err.to_string().contains("unknown field `alow`"), "{err}");
}

#[test]
fn a_child_task_starts_in_the_mode_its_parent_hands_down() {
    use noeta_core::Verdict;
    use noeta_core::extension::{Extension, View};
    use noeta_core::fold::TaskState;
    use noeta_core::model::ToolCall;

    let b = bench();
    let permissions = |s: &noeta_core::session::Session| -> Arc<dyn Extension> {
        s.extensions
            .iter()
            .find(|e| e.name() == "permissions")
            .cloned()
            .unwrap()
    };
    let task = TaskId::new("parent").unwrap();
    // The parent runs in plan mode: that is what it hands down.
    let parent = session(json!({ "permission_mode": "plan" }), &b.tools).unwrap();
    let state = TaskState::default();
    let view = View::new(&task, "main", &state, &[], &[]);
    let handed = permissions(&parent).inherit(&view).unwrap();
    assert_eq!(handed, Some(json!({ "mode": "plan" })));

    // A child configured with the default mode runs in the inherited one.
    let child = session(Value::Null, &b.tools).unwrap();
    let mut state = TaskState::default();
    state
        .core
        .inherited
        .insert("permissions".to_owned(), handed.unwrap());
    let view = View::new(&task, "explore", &state, &[], &[]);
    let edit = ToolCall {
        id: "c1".into(),
        name: "Edit".into(),
        input: json!({}),
    };
    let verdict = block_on(permissions(&child).before_tool(&view, &edit)).unwrap();
    assert!(
        matches!(&verdict, Some(Verdict::Deny { reason }) if reason.starts_with("plan mode")),
        "{verdict:?}"
    );
}
