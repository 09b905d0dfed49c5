//! The gate in front of every tool call (`runner/calls.rs`): denials, rewrites, asks and
//! `resolve_ask`, broken checks, gating in call order, plan mode and guard contributions.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{Extension, HookError, HookResult, View};
use noeta_core::model::ToolCall;
use noeta_core::runner::{RunError, RunOutcome};
use noeta_core::{PluginSource, Resolved, Verdict};
use noeta_testkit::harness::Harness;
use serde_json::{Value, json};

use super::support::{TestTool, built, call, gate_run, offers, result_text, says, session, task};
use crate::support::{Fixtures, Manifest, ResolveWith};

#[test]
fn any_deny_denies_even_after_a_rewrite() {
    let (_h, rt, s, t, tool) = gate_run(vec![
        says(
            "rewriter",
            Some(Verdict::Rewrite {
                input: json!({"n": 2}),
                reason: "r".into(),
            }),
        ),
        says(
            "denier",
            Some(Verdict::Deny {
                reason: "not today".into(),
            }),
        ),
    ]);
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(result_text(&rt, &s, &t), "not today");
}

#[test]
fn the_first_rewrite_wins_and_is_gated_again_at_most_three_times() {
    struct Once(AtomicUsize);
    #[async_trait]
    impl Extension for Once {
        fn name(&self) -> &str {
            "once"
        }
        async fn before_tool(&self, _v: &View<'_>, c: &ToolCall) -> HookResult<Option<Verdict>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok((c.input["n"] == 1).then(|| Verdict::Rewrite {
                input: json!({"n": 7}),
                reason: "seven".into(),
            }))
        }
    }
    let once = Arc::new(Once(AtomicUsize::new(0)));
    let (_h, rt, s, t, tool) = gate_run(vec![once.clone(), says("second", None)]);
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        once.0.load(Ordering::SeqCst),
        2,
        "the rewritten call is gated again"
    );
    assert_eq!(result_text(&rt, &s, &t), "ran with {\"n\":7}");

    let (_h, rt, s, t, tool) = gate_run(vec![says(
        "loop",
        Some(Verdict::Rewrite {
            input: json!({"n": 1}),
            reason: "again".into(),
        }),
    )]);
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        result_text(&rt, &s, &t),
        "`Work` was rewritten more than 3 times; denied"
    );
}

#[test]
fn an_ask_parks_the_turn_until_answered() {
    let (h, rt, s, t, tool) = gate_run(vec![says(
        "asker",
        Some(Verdict::Ask {
            reason: "run Work?".into(),
            firm: false,
        }),
    )]);
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        outcome,
        RunOutcome::Parked {
            call_id: "call_1_1".into(),
            question: "run Work?".into()
        }
    );
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    let err = block_on(rt.answer(&s, &t, "call_9", true)).unwrap_err();
    assert!(matches!(err, RunError::NotParked { .. }), "{err}");
    block_on(rt.answer(&s, &t, "call_1_1", true)).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
    assert!(h.core_kinds(&t).contains(&"ask_answered".to_owned()));
}

#[test]
fn a_declined_ask_denies_the_call() {
    let (_h, rt, s, t, tool) = gate_run(vec![says(
        "asker",
        Some(Verdict::Ask {
            reason: "ok?".into(),
            firm: false,
        }),
    )]);
    block_on(rt.run(&s, &t)).unwrap();
    block_on(rt.answer(&s, &t, "call_1_1", false)).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(result_text(&rt, &s, &t), "the user declined this call");
}

#[test]
fn an_approving_allow_satisfies_asks_unless_they_are_firm() {
    let (_h, rt, s, t, tool) = gate_run(vec![
        says(
            "asker",
            Some(Verdict::Ask {
                reason: "ok?".into(),
                firm: false,
            }),
        ),
        says("voucher", Some(Verdict::Allow { approve: true })),
    ]);
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);

    let (_h, rt, s, t, _tool) = gate_run(vec![
        says(
            "asker",
            Some(Verdict::Ask {
                reason: "really?".into(),
                firm: true,
            }),
        ),
        says("voucher", Some(Verdict::Allow { approve: true })),
    ]);
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Parked { .. }
    ));
}

#[test]
fn resolve_ask_may_answer_for_the_user() {
    struct Classifier;
    #[async_trait]
    impl Extension for Classifier {
        fn name(&self) -> &str {
            "classifier"
        }
        async fn resolve_ask(
            &self,
            _v: &View<'_>,
            _c: &ToolCall,
            asks: &[String],
        ) -> HookResult<Option<noeta_core::extension::AskAnswer>> {
            Ok(Some(noeta_core::extension::AskAnswer::from_bool(
                asks == ["ok?"],
            )))
        }
    }
    let (_h, rt, s, t, tool) = gate_run(vec![
        says(
            "asker",
            Some(Verdict::Ask {
                reason: "ok?".into(),
                firm: false,
            }),
        ),
        Arc::new(Classifier),
    ]);
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
}

#[test]
fn a_person_s_reason_for_declining_reaches_the_model_with_the_refusal() {
    struct Person;
    #[async_trait]
    impl Extension for Person {
        fn name(&self) -> &str {
            "person"
        }
        async fn resolve_ask(
            &self,
            _v: &View<'_>,
            _c: &ToolCall,
            _asks: &[String],
        ) -> HookResult<Option<noeta_core::extension::AskAnswer>> {
            Ok(Some(noeta_core::extension::AskAnswer::Deny(Some(
                "edit the copy in docs/ instead".into(),
            ))))
        }
    }
    let (_h, rt, s, t, tool) = gate_run(vec![
        says(
            "asker",
            Some(Verdict::Ask {
                reason: "ok?".into(),
                firm: false,
            }),
        ),
        Arc::new(Person),
    ]);
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        result_text(&rt, &s, &t),
        "the user declined this call and said: edit the copy in docs/ instead"
    );
}

#[test]
fn a_broken_check_denies_with_permission_check_failed() {
    struct Broken;
    #[async_trait]
    impl Extension for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        async fn before_tool(&self, _v: &View<'_>, _c: &ToolCall) -> HookResult<Option<Verdict>> {
            Err(HookError::new("rules file unreadable"))
        }
    }
    let (_h, rt, s, t, tool) = gate_run(vec![Arc::new(Broken)]);
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        result_text(&rt, &s, &t),
        "permission check failed: rules file unreadable"
    );

    struct Panics;
    #[async_trait]
    impl Extension for Panics {
        fn name(&self) -> &str {
            "panics"
        }
        async fn before_tool(&self, _v: &View<'_>, _c: &ToolCall) -> HookResult<Option<Verdict>> {
            panic!("boom")
        }
    }
    let (_h, rt, s, t, tool) = gate_run(vec![Arc::new(Panics)]);
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        result_text(&rt, &s, &t),
        "permission check failed: `panics` before_tool panicked: boom"
    );
}

#[test]
fn gating_stops_at_the_first_call_that_must_ask_until_it_is_answered() {
    /// Asks about `Risky`, and remembers every call it was asked about.
    struct Watcher(Arc<Mutex<Vec<String>>>);
    #[async_trait]
    impl Extension for Watcher {
        fn name(&self) -> &str {
            "watcher"
        }
        async fn before_tool(&self, _v: &View<'_>, call: &ToolCall) -> HookResult<Option<Verdict>> {
            self.0.lock().unwrap().push(call.id.clone());
            Ok((call.name == "Risky").then(|| Verdict::Ask {
                reason: "Risky needs a yes".into(),
                firm: false,
            }))
        }
    }
    let h = Harness::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let risky = Arc::new(TestTool::new("Risky"));
    let later = Arc::new(TestTool::new("Later"));
    let rt = h.runtime(json!([
        { "calls": [
            { "id": "a", "name": "Later", "input": {"n": 1} },
            { "id": "b", "name": "Risky", "input": {"n": 2} },
            { "id": "c", "name": "Later", "input": {"n": 3} }
        ] },
        { "text": "done" }
    ]));
    let s = session(vec![
        offers(vec![risky.clone(), later.clone()]),
        Arc::new(Watcher(seen.clone())),
    ]);
    let t = task("ask-stops");
    block_on(rt.create(&s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(
        matches!(&outcome, RunOutcome::Parked { call_id, .. } if call_id == "b"),
        "{outcome:?}"
    );
    assert_eq!(*seen.lock().unwrap(), ["a", "b"], "c is not gated yet");
    assert_eq!(later.runs.load(Ordering::SeqCst), 1, "only a ran");
    assert_eq!(risky.runs.load(Ordering::SeqCst), 0);

    block_on(rt.answer(&s, &t, "b", true)).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.last().map(String::as_str), Some("c"), "{seen:?}");
    assert!(
        !seen[..seen.len() - 1].contains(&"c".to_owned()),
        "{seen:?}"
    );
    assert_eq!(risky.runs.load(Ordering::SeqCst), 1);
    assert_eq!(later.runs.load(Ordering::SeqCst), 2);
}

#[test]
fn records_a_guard_stages_while_gating_are_kept() {
    struct Auditor;
    #[async_trait]
    impl Extension for Auditor {
        fn name(&self) -> &str {
            "auditor"
        }
        async fn before_tool(&self, v: &View<'_>, c: &ToolCall) -> HookResult<Option<Verdict>> {
            v.record("auditor", "checked", json!({ "tool": c.name }));
            Ok(None)
        }
    }
    let (h, rt, s, t, _tool) = gate_run(vec![Arc::new(Auditor)]);
    block_on(rt.run(&s, &t)).unwrap();
    assert!(
        h.events(&t)
            .iter()
            .any(|e| e.record.kind == "checked" && e.record.data["tool"] == "Work")
    );
}

/// A test plan mode: `/plan` in a user message switches it on (recorded); then only tools
/// safe while planning run.
struct PlanMode;

#[async_trait]
impl Extension for PlanMode {
    fn name(&self) -> &str {
        "plan-mode"
    }
    async fn turn_intake(&self, v: &View<'_>, message: &str) -> HookResult<()> {
        if message.starts_with("/plan") {
            v.record("plan-mode", "switch", json!({"on": true}));
        }
        Ok(())
    }
    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        if kind == "switch" {
            *state = data.clone();
        }
        Ok(())
    }
    async fn before_tool(&self, v: &View<'_>, c: &ToolCall) -> HookResult<Option<Verdict>> {
        let planning = v.ext_state("plan-mode").is_some_and(|s| s["on"] == true);
        let safe = c.name == "Look";
        Ok((planning && !safe).then(|| Verdict::Deny {
            reason: format!("plan mode: `{}` is not safe while planning", c.name),
        }))
    }
}

#[test]
fn in_plan_mode_only_tools_safe_while_planning_run() {
    let h = Harness::new();
    let look = Arc::new(TestTool::new("Look").read_only());
    assert!(look.flags.safe_while_planning);
    let change = Arc::new(TestTool::new("Change"));
    let rt = h.runtime(json!([
        { "calls": [call("Look", json!({})), call("Change", json!({}))] },
        { "text": "planned" }
    ]));
    let s = session(vec![
        offers(vec![look.clone(), change.clone()]),
        Arc::new(PlanMode),
    ]);
    let t = task("plan");
    block_on(rt.create(&s, &t, "/plan the refactor")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(look.runs.load(Ordering::SeqCst), 1);
    assert_eq!(change.runs.load(Ordering::SeqCst), 0);
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert!(
        state
            .core
            .messages
            .iter()
            .any(|m| m.text == "plan mode: `Change` is not safe while planning")
    );
}

#[test]
fn a_process_wide_guard_applies_to_an_agent_that_does_not_activate_its_plugin() {
    let s = built(
        vec![
            PluginSource::Linked(
                Manifest::new("tools")
                    .with("tool", "Echo", "")
                    .linked("noeta-tools", Fixtures),
            ),
            PluginSource::Linked(
                Manifest::new("policy-guard")
                    .with("guard", "no-echo", "")
                    .linked(
                        "noeta-guard",
                        ResolveWith(|_: &noeta_core::ResolveRequest<'_>| {
                            Ok(Resolved::Guard(Arc::new(noeta_testkit_like::DenyEcho)))
                        }),
                    ),
            ),
        ],
        &["tools"],
    );
    let h = Harness::new();
    let rt =
        h.runtime(json!([{ "calls": [call("Echo", json!({"text": "x"}))] }, { "text": "ok" }]));
    let t = task("guarded");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(result_text(&rt, &s, &t), "Echo is not allowed here");
}

mod noeta_testkit_like {
    use noeta_core::{Checkpoint, Guard, GuardInput, Verdict};

    pub(crate) struct DenyEcho;

    impl Guard for DenyEcho {
        fn check(&self, input: &GuardInput) -> Option<Verdict> {
            match &input.checkpoint {
                Checkpoint::ToolCall { tool, .. } if tool == "Echo" => Some(Verdict::Deny {
                    reason: "Echo is not allowed here".into(),
                }),
                _ => None,
            }
        }
    }
}
