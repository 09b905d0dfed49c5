//! Command hooks in the shape Claude Code users write, run through the real runtime with `sh`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Probe, Runs, call, messages, records, results, scripted, session};
use futures::executor::block_on;
use noeta_core::model::Role;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::Session;
use noeta_core::store::TaskId;
use noeta_core::{Risk, Tool, ToolFlags};
use serde_json::{Value, json};

/// A low-risk `Bash` probe (so the permission modes never ask) and its runs.
fn bash() -> (Vec<Arc<dyn Tool>>, Runs) {
    let (tool, runs) = Probe::tool("Bash", ToolFlags::default());
    (vec![tool], runs)
}

/// A session whose hooks are `hooks` (Claude Code's JSON shape), running in `dir`.
fn with_hooks(hooks: Value, dir: &Path, tools: &[Arc<dyn Tool>]) -> Session {
    session(json!({ "hooks": hooks, "hooks_cwd": dir }), tools).unwrap()
}

/// One group of `event` matching `matcher`, running `command` with `extra` fields.
fn hook(event: &str, matcher: &str, command: &str, extra: Value) -> Value {
    let mut spec = json!({ "type": "command", "command": command });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({ event: [{ "matcher": matcher, "hooks": [spec] }] })
}

/// Runs a task whose model calls `Bash` with each of `inputs`, then says "done".
fn run_bash(s: &Session, inputs: &[Value], name: &str) -> (Runtime, TaskId, RunOutcome) {
    let calls: Vec<Value> = inputs.iter().map(|i| call("Bash", i.clone())).collect();
    let rt = scripted(json!({ "turns": [{ "calls": calls }, { "text": "done" }] }));
    let t = TaskId::new(name).unwrap();
    block_on(rt.create(s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(s, &t)).unwrap();
    (rt, t, outcome)
}

#[test]
fn a_pre_tool_use_hook_exiting_2_blocks_the_call_with_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = bash();
    let guard = r#"if grep -q 'rm -rf'; then echo 'rm -rf is not allowed here' >&2; exit 2; fi"#;
    let s = with_hooks(
        hook("PreToolUse", "Bash", guard, json!({})),
        dir.path(),
        &tools,
    );
    let inputs = [json!({"command": "rm -rf /"}), json!({"command": "ls"})];
    let (rt, t, outcome) = run_bash(&s, &inputs, "exit2");
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(
        results(&rt, &s, &t),
        ["rm -rf is not allowed here", "Bash ran"]
    );
    assert_eq!(runs.inputs(), [json!({"command": "ls"})]);
}

#[test]
fn the_matcher_picks_the_tools_a_hook_sees() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = bash();
    let s = with_hooks(
        hook("PreToolUse", "Edit|Write", "exit 2", json!({})),
        dir.path(),
        &tools,
    );
    let (_, _, outcome) = run_bash(&s, &[json!({})], "matcher");
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(runs.count(), 1);
}

#[test]
fn a_json_permission_decision_denies_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = bash();
    let deny = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"not on Fridays"}}'"#;
    let s = with_hooks(hook("PreToolUse", "*", deny, json!({})), dir.path(), &tools);
    let (rt, t, _) = run_bash(&s, &[json!({})], "json-deny");
    assert_eq!(results(&rt, &s, &t), ["not on Fridays"]);
    assert_eq!(runs.count(), 0);
}

#[test]
fn an_updated_input_rewrites_the_call_which_is_checked_again() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = bash();
    // Rewrites once; the rewritten call carries the mark, so the second check leaves it alone.
    let rewrite = r#"grep -q '"safe":true' || echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"command":"ls -la","safe":true}}}'"#;
    let s = with_hooks(
        hook("PreToolUse", "Bash", rewrite, json!({})),
        dir.path(),
        &tools,
    );
    let (_, _, outcome) = run_bash(&s, &[json!({"command": "ls"})], "rewrite");
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(runs.inputs(), [json!({"command": "ls -la", "safe": true})]);
}

#[test]
fn a_rewrite_written_without_a_guard_applies_once_and_keeps_its_decision() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = bash();
    // As Claude Code users write it: always the same updatedInput, with a decision.
    let rewrite = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"ls -la"}}}'"#;
    let s = with_hooks(
        hook("PreToolUse", "Bash", rewrite, json!({})),
        dir.path(),
        &tools,
    );
    let (_, _, outcome) = run_bash(&s, &[json!({"command": "ls"})], "unguarded");
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(runs.inputs(), [json!({"command": "ls -la"})]);

    let ask = r#"echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"check the flags","updatedInput":{"command":"ls -la"}}}'"#;
    let s = with_hooks(
        hook("PreToolUse", "Bash", ask, json!({})),
        dir.path(),
        &tools,
    );
    let (_, _, outcome) = run_bash(&s, &[json!({"command": "ls"})], "rewrite-ask");
    assert!(
        matches!(&outcome, RunOutcome::Parked { question, .. } if question == "check the flags"),
        "{outcome:?}"
    );
}

#[test]
fn a_hook_that_hangs_is_cut_off_and_only_a_fail_closed_one_denies() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = bash();
    let s = with_hooks(
        hook("PreToolUse", "Bash", "sleep 30", json!({"timeout": 1})),
        dir.path(),
        &tools,
    );
    let (rt, t, _) = run_bash(&s, &[json!({})], "open");
    assert_eq!(runs.count(), 1, "a failing hook does not block by default");
    let warnings = records(&rt, &t, "hooks", "warning");
    assert_eq!(warnings.len(), 1);
    assert_eq!(
        warnings[0].data,
        json!({"event": "PreToolUse", "command": "sleep 30", "message": "failed (not blocking): timed out after 1 s"})
    );

    let s = with_hooks(
        hook(
            "PreToolUse",
            "Bash",
            "sleep 30",
            json!({"timeout": 1, "fail_closed": true}),
        ),
        dir.path(),
        &tools,
    );
    let (rt, t, _) = run_bash(&s, &[json!({})], "closed");
    assert_eq!(runs.count(), 1, "the fail-closed hook denied the call");
    assert_eq!(
        results(&rt, &s, &t),
        ["PreToolUse hook `sleep 30` failed: timed out after 1 s"]
    );
}

#[test]
fn unknown_output_keys_are_recorded_as_a_warning_and_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = bash();
    let typo = r#"echo '{"decison":"block","continue":false,"hookSpecificOutput":{"permisionDecision":"deny"}}'"#;
    let s = with_hooks(
        hook("PreToolUse", "Bash", typo, json!({})),
        dir.path(),
        &tools,
    );
    let (rt, t, _) = run_bash(&s, &[json!({})], "typo");
    assert_eq!(runs.count(), 1);
    let warnings = records(&rt, &t, "hooks", "warning");
    assert_eq!(
        warnings[0].data["message"],
        "the hook's output has unknown keys, which were ignored: continue, decison, hookSpecificOutput.permisionDecision"
    );
}

#[test]
fn post_tool_use_feedback_reaches_the_model_with_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, _) = bash();
    // The hook sees the call and its result on standard input.
    let lint = r#"cat > post.json; echo 'lint: 2 warnings' >&2; exit 2"#;
    let s = with_hooks(
        hook("PostToolUse", "Bash", lint, json!({})),
        dir.path(),
        &tools,
    );
    let (rt, t, _) = run_bash(&s, &[json!({"command": "make"})], "post");
    assert_eq!(
        results(&rt, &s, &t),
        ["Bash ran\n\nPostToolUse hook: lint: 2 warnings"]
    );
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("post.json")).unwrap())
            .unwrap();
    assert_eq!(seen["hook_event_name"], "PostToolUse");
    assert_eq!(seen["session_id"], "post");
    assert_eq!(seen["cwd"], dir.path().display().to_string());
    assert_eq!(seen["tool_name"], "Bash");
    assert_eq!(seen["tool_input"], json!({"command": "make"}));
    assert_eq!(
        seen["tool_response"],
        json!({"text": "Bash ran", "is_error": false})
    );
}

#[test]
fn a_stop_hook_can_refuse_the_end_once_and_knows_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, _) = bash();
    let stop = r#"cat >> stops.jsonl; echo >> stops.jsonl; if [ -f checked ]; then exit 0; fi; touch checked; echo 'run the tests before you stop' >&2; exit 2"#;
    let s = with_hooks(hook("Stop", "", stop, json!({})), dir.path(), &tools);
    let rt = scripted(json!({ "turns": [{ "text": "done" }, { "text": "tests pass; done" }] }));
    let t = TaskId::new("stop").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(
        messages(&rt, &s, &t, Role::Assistant),
        ["done", "tests pass; done"]
    );
    let stops = std::fs::read_to_string(dir.path().join("stops.jsonl")).unwrap();
    let active: Vec<Value> = stops
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["stop_hook_active"].clone())
        .collect();
    assert_eq!(active, [json!(false), json!(true)]);
}

#[test]
fn user_prompt_submit_adds_context_or_blocks_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, _) = bash();
    let s = with_hooks(
        hook("UserPromptSubmit", "", "echo 'branch: main'", json!({})),
        dir.path(),
        &tools,
    );
    let rt = scripted(json!({ "turns": [{ "text": "ok" }] }));
    let t = TaskId::new("prompt").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(messages(&rt, &s, &t, Role::Context), ["branch: main"]);

    let json_block = r#"echo '{"decision":"block","reason":"that prompt names a ticket we cannot see","continue":true}'"#;
    let s = with_hooks(
        hook("UserPromptSubmit", "", json_block, json!({})),
        dir.path(),
        &tools,
    );
    let t = TaskId::new("json-blocked").unwrap();
    block_on(rt.create(&s, &t, "fix TICKET-1")).unwrap();
    match block_on(rt.run(&s, &t)).unwrap() {
        RunOutcome::TurnFailed { reason } => assert!(
            reason.contains(
                "UserPromptSubmit hook blocked the prompt: that prompt names a ticket we cannot see"
            ),
            "{reason}"
        ),
        other => panic!("expected a failed turn, got {other:?}"),
    }

    let block = r#"grep -q secret && { echo 'no secrets in prompts' >&2; exit 2; }; exit 0"#;
    let s = with_hooks(
        hook("UserPromptSubmit", "", block, json!({})),
        dir.path(),
        &tools,
    );
    let t = TaskId::new("blocked").unwrap();
    block_on(rt.create(&s, &t, "the secret is 42")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    match outcome {
        RunOutcome::TurnFailed { reason } => assert!(
            reason.contains("UserPromptSubmit hook blocked the prompt: no secrets in prompts"),
            "{reason}"
        ),
        other => panic!("expected a failed turn, got {other:?}"),
    }
}

#[test]
fn session_start_runs_once_per_task_across_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, _) = bash();
    let start = "echo started >> starts.txt; echo 'today is a test day'";
    let hooks = hook("SessionStart", "", start, json!({}));
    let s = with_hooks(hooks.clone(), dir.path(), &tools);
    let rt = scripted(json!({ "turns": [{ "text": "one" }, { "text": "two" }] }));
    let t = TaskId::new("start").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    // A second session (another worker) takes the next turn of the same task.
    let again = with_hooks(hooks, dir.path(), &tools);
    block_on(rt.send(&again, &t, "again")).unwrap();
    block_on(rt.run(&again, &t)).unwrap();
    let starts = std::fs::read_to_string(dir.path().join("starts.txt")).unwrap();
    assert_eq!(starts, "started\n");
    assert_eq!(
        messages(&rt, &again, &t, Role::Context),
        ["today is a test day"]
    );
}

/// Waits (up to ten seconds) for a background hook to write `path` as a whole JSON document.
fn wait_for_json(path: &Path) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Ok(value) = serde_json::from_str::<Value>(&text) {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{} was not written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_notification_hook_hears_when_a_turn_parks_on_a_person() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, _) = Probe::tool("Edit", ToolFlags::default().with_risk(Risk::High));
    // Slow enough that a wrongly matched `touch idle`, started alongside, would have run.
    let notify = "cat > note.tmp && sleep 0.3 && mv note.tmp note.json";
    let hooks = json!({
        "Notification": [
            { "matcher": "permission_prompt", "hooks": [{ "type": "command", "command": notify }] },
            { "matcher": "idle_prompt", "hooks": [{ "type": "command", "command": "touch idle" }] },
        ]
    });
    let s = with_hooks(hooks, dir.path(), &[tool]);
    let rt =
        scripted(json!({ "turns": [{ "calls": [call("Edit", json!({}))] }, { "text": "done" }] }));
    let t = TaskId::new("notify").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Parked { .. }), "{outcome:?}");
    let note = wait_for_json(&dir.path().join("note.json"));
    assert_eq!(note["hook_event_name"], "Notification");
    assert_eq!(note["notification_type"], "permission_prompt");
    assert_eq!(
        note["message"],
        "`Edit` is a high risk tool — allow this call?"
    );
    assert_eq!(note["session_id"], "notify");
    assert!(
        !dir.path().join("idle").exists(),
        "the matcher picks the notification type"
    );
}

#[test]
fn bad_hook_settings_fail_the_session_naming_the_event_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, _) = bash();
    let err =
        |hooks: Value| match session(json!({ "hooks": hooks, "hooks_cwd": dir.path() }), &tools) {
            Ok(_) => panic!("the session should be refused"),
            Err(err) => err.to_string(),
        };
    let prefix = "plugin `governance`: session pack `governance` failed for agent `main`: settings [plugins.governance] hooks";
    assert!(
        err(hook("PreToolUse", "Bash(", "true", json!({}))).starts_with(&format!(
            "{prefix}.PreToolUse[0]: matcher `Bash(` is not a valid pattern"
        )),
    );
    let no_command = json!({"PreToolUse": [{"hooks": [{"type": "command"}]}]});
    assert_eq!(
        err(no_command),
        format!("{prefix}.PreToolUse[0].hooks[0]: a command hook needs a `command`")
    );
    let not_a_list = json!({"PreToolUse": {"hooks": []}});
    assert!(err(not_a_list).starts_with(prefix));
}

#[test]
fn a_hooks_if_rule_decides_which_calls_start_it_and_a_bad_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, _runs) = bash();
    // The hook records each command it saw, and blocks nothing.
    let seen = dir.path().join("seen.txt");
    let command = format!("cat >> {}; echo >> {}", seen.display(), seen.display());
    let hooks = json!({ "PreToolUse": [{ "matcher": "Bash", "hooks": [
        { "type": "command", "command": command, "if": "Bash(git push *)" }
    ] }] });
    let s = with_hooks(hooks, dir.path(), &tools);
    let inputs = [
        json!({"command": "git status"}),
        json!({"command": "cargo test && git push origin main"}),
        json!({"command": "GIT_TRACE=1 git push"}),
        json!({"command": "echo git push"}),
    ];
    run_bash(&s, &inputs, "conditional");
    let seen: Vec<Value> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["tool_input"]["command"].clone())
        .collect();
    assert_eq!(
        seen,
        [
            json!("cargo test && git push origin main"),
            json!("GIT_TRACE=1 git push")
        ]
    );

    let bad = json!({ "PreToolUse": [{ "hooks": [
        { "type": "command", "command": "true", "if": "Bash(git" }
    ] }] });
    let err = match session(json!({ "hooks": bad, "hooks_cwd": dir.path() }), &tools) {
        Ok(_) => panic!("the session should be refused"),
        Err(err) => err.to_string(),
    };
    assert!(
        err.contains("hooks.PreToolUse[0].hooks[0].if: `Bash(git` is not a permission rule"),
        "{err}"
    );
}

#[test]
fn what_claude_code_configures_and_noeta_does_not_use_is_a_warning_not_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = bash();
    let guard =
        r#"if grep -q 'rm -rf'; then echo "no rm -rf in $CLAUDE_PROJECT_DIR" >&2; exit 2; fi"#;
    let hooks = json!({
        "PreToolUse": [{
            "matcher": "Bash",
            "description": "guards",
            "hooks": [
                { "type": "command", "command": guard, "if": "Bash(rm *)", "asyncRewake": true,
                  "statusMessage": "checking" },
                { "type": "prompt", "prompt": "Is this safe?" }
            ]
        }],
        "UserPromptExpansion": [{ "hooks": [{ "type": "command", "command": "true" }] }],
        "BeforeTool": [{ "hooks": [{ "type": "command", "command": "true" }] }]
    });
    let s = with_hooks(hooks, dir.path(), &tools);
    let inputs = [json!({"command": "rm -rf build"}), json!({"command": "ls"})];
    let (rt, t, outcome) = run_bash(&s, &inputs, "tolerant");
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let shown = dir.path().display().to_string();
    assert_eq!(
        results(&rt, &s, &t),
        [format!("no rm -rf in {shown}"), "Bash ran".to_owned()],
        "the command hook runs where its `if` matches, with CLAUDE_PROJECT_DIR set"
    );
    assert_eq!(runs.inputs(), [json!({"command": "ls"})]);
    let warnings: Vec<String> = records(&rt, &t, "hooks", "warning")
        .iter()
        .map(|r| r.data["message"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        warnings,
        [
            "settings [plugins.governance] hooks.BeforeTool[0]: `BeforeTool` is no hook event (known: PreToolUse, PostToolUse, Stop, UserPromptSubmit, SessionStart, Notification); 1 hook(s) ignored",
            "settings [plugins.governance] hooks.PreToolUse[0]: key `description` is not used",
            "settings [plugins.governance] hooks.PreToolUse[0].hooks[0]: `asyncRewake` is not supported yet; the hook runs without it",
            "settings [plugins.governance] hooks.PreToolUse[0].hooks[0]: `statusMessage` is not supported yet; the hook runs without it",
            "settings [plugins.governance] hooks.PreToolUse[0].hooks[1]: hook type `prompt` is not supported (only `command`); this hook is ignored",
            "settings [plugins.governance] hooks.UserPromptExpansion[0]: noeta does not run `UserPromptExpansion` hooks yet; 1 hook(s) ignored",
        ]
    );
}

#[test]
fn an_async_hook_runs_in_the_background_and_never_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = bash();
    let heard = dir.path().join("heard.json");
    // It would block (exit 2) if anything waited for it.
    let command = format!("cat > {}; echo 'too late' >&2; exit 2", heard.display());
    let hooks = hook("PreToolUse", "Bash", &command, json!({ "async": true }));
    let s = with_hooks(hooks, dir.path(), &tools);
    let (rt, t, _) = run_bash(&s, &[json!({"command": "ls"})], "background");
    assert_eq!(results(&rt, &s, &t), ["Bash ran".to_owned()]);
    assert_eq!(runs.inputs(), [json!({"command": "ls"})]);
    let input = wait_for_json(&heard);
    assert_eq!(input["tool_input"]["command"], "ls");
    assert!(records(&rt, &t, "hooks", "warning").is_empty());
}

/// Waits (up to ten seconds) for `path` to exist.
fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} was not written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_hook_whose_first_line_asks_for_the_background_goes_on_there_and_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = bash();
    // As security-guidance's SessionStart does: the async answer, then slow work and output
    // (JSON and metric lines) that must never reach the model. It waits for `go`, which the
    // test writes only once the turn is over: had anything waited for it, the turn could not
    // have ended.
    let start = "echo '{\"async\": true, \"asyncTimeout\": 20000}'; \
                 while [ ! -f go ]; do sleep 0.05; done; \
                 echo '{\"hookSpecificOutput\": {\"additionalContext\": \"late\"}}'; \
                 echo 'metric: 1'; touch start-done";
    // A PreToolUse hook going async cannot block, though it exits 2 later.
    let guard = "echo '{\"async\":true}'; while [ ! -f go ]; do sleep 0.05; done; \
                 echo 'too late' >&2; touch guard-done; exit 2";
    let mut hooks = hook("SessionStart", "", start, json!({}));
    hooks.as_object_mut().unwrap().extend(
        hook("PreToolUse", "Bash", guard, json!({}))
            .as_object()
            .unwrap()
            .clone(),
    );
    let s = with_hooks(hooks, dir.path(), &tools);
    let (rt, t, outcome) = run_bash(&s, &[json!({"command": "ls"})], "async-answer");
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(results(&rt, &s, &t), ["Bash ran".to_owned()]);
    assert_eq!(runs.inputs(), [json!({"command": "ls"})]);
    assert!(messages(&rt, &s, &t, Role::Context).is_empty());
    assert!(!dir.path().join("start-done").exists());
    std::fs::write(dir.path().join("go"), "").unwrap();
    wait_for_file(&dir.path().join("start-done"));
    wait_for_file(&dir.path().join("guard-done"));
    assert!(messages(&rt, &s, &t, Role::Context).is_empty());
}

#[test]
fn a_background_hook_is_ended_when_its_async_timeout_passes() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, _) = bash();
    let start = "echo '{\"async\": true, \"asyncTimeout\": 200}'; sleep 2; touch finished";
    let hooks = hook("SessionStart", "", start, json!({}));
    let s = with_hooks(hooks, dir.path(), &tools);
    let (_, _, outcome) = run_bash(&s, &[], "async-timeout");
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    std::thread::sleep(Duration::from_millis(2_500));
    assert!(
        !dir.path().join("finished").exists(),
        "the hook ran past its async timeout"
    );
}
