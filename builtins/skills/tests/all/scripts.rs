//! `run_skill_script`: offered only when allowed, always asks (firmly), fenced to the active
//! skill's directory, output bounded.

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::Verdict;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::model::ToolCall;
use noeta_core::runner::RunOutcome;
use serde_json::{Value, json};

use crate::common::{Run, done, tool_names};

const TOOLS: &str = "---\nname: tools\ndescription: Has scripts.\n---\nRun scripts/hello.sh.\n";

fn run_with(config: Value) -> Run {
    let run = Run::new(config);
    let dir = run.tree.ws(".noeta/skills/tools");
    run.tree.write(&dir.join("SKILL.md"), TOOLS);
    run.tree.write(
        &dir.join("scripts/hello.sh"),
        "echo \"hello $1 from $(basename \"$NOETA_SKILL_DIR\")\"\necho warned >&2\n",
    );
    run.tree
        .write(&dir.join("scripts/fail.sh"), "echo broken >&2\nexit 3\n");
    run.tree.write(
        &dir.join("scripts/loud.sh"),
        "head -c 40000 /dev/zero | tr '\\0' 'x'\n",
    );
    run.tree.write(&dir.join("notes.txt"), "not a script");
    run
}

fn scripts_on() -> Run {
    run_with(json!({ "allow_skill_scripts": true }))
}

fn activate_then(call: Value) -> Value {
    json!([
        { "calls": [{ "name": "skill", "input": { "skill": "tools" } }] },
        { "calls": [{ "name": "run_skill_script", "input": call }] },
        { "text": "done" }
    ])
}

/// Answers every call with an approving allow, as a bypass mode would.
struct ApproveAll;

#[async_trait]
impl Extension for ApproveAll {
    fn name(&self) -> &str {
        "approve-all"
    }
    async fn before_tool(&self, _view: &View<'_>, _call: &ToolCall) -> HookResult<Option<Verdict>> {
        Ok(Some(Verdict::Allow { approve: true }))
    }
}

#[test]
fn a_script_run_asks_first_and_runs_in_the_workspace_when_allowed() {
    let run = scripts_on();
    let outcome = run.turn(
        "t",
        "go",
        activate_then(
            json!({ "skill": "tools", "relpath": "scripts/hello.sh", "args": ["world"] }),
        ),
    );
    let RunOutcome::Parked { call_id, question } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(
        question,
        "run the script `scripts/hello.sh` of the skill `tools` with arguments world?"
    );
    // The activation told the model about its scripts.
    assert!(run.results("t")[0].0.contains(
        "Its scripts (run them with `run_skill_script`): scripts/fail.sh, scripts/hello.sh, scripts/loud.sh\n"
    ));
    let outcome = run.answer("t", &call_id, true);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(
        run.results("t")[1],
        (
            "`scripts/hello.sh` exited with code 0\n--- stdout ---\nhello world from tools\n--- stderr ---\nwarned".to_owned(),
            false
        )
    );
}

#[test]
fn the_ask_is_firm_an_approving_allow_does_not_satisfy_it() {
    let run = scripts_on().with_extension(Arc::new(ApproveAll));
    let outcome = run.turn(
        "t",
        "go",
        activate_then(json!({ "skill": "tools", "relpath": "scripts/hello.sh" })),
    );
    assert!(matches!(outcome, RunOutcome::Parked { .. }), "{outcome:?}");
}

#[test]
fn a_refused_run_does_not_run() {
    let run = scripts_on();
    let RunOutcome::Parked { call_id, .. } = run.turn(
        "t",
        "go",
        activate_then(json!({ "skill": "tools", "relpath": "scripts/hello.sh" })),
    ) else {
        panic!("did not park");
    };
    run.answer("t", &call_id, false);
    let results = run.results("t");
    assert!(results[1].1, "{results:?}");
    assert!(!results[1].0.contains("hello"), "{results:?}");
}

#[test]
fn a_failing_script_is_an_error_result_with_its_code_and_output() {
    let run = scripts_on();
    let RunOutcome::Parked { call_id, .. } = run.turn(
        "t",
        "go",
        activate_then(json!({ "skill": "tools", "relpath": "scripts/fail.sh" })),
    ) else {
        panic!("did not park");
    };
    run.answer("t", &call_id, true);
    assert_eq!(
        run.results("t")[1],
        (
            "`scripts/fail.sh` exited with code 3\n--- stderr ---\nbroken".to_owned(),
            true
        )
    );
}

#[test]
fn output_is_bounded() {
    let run = scripts_on();
    let RunOutcome::Parked { call_id, .. } = run.turn(
        "t",
        "go",
        activate_then(json!({ "skill": "tools", "relpath": "scripts/loud.sh" })),
    ) else {
        panic!("did not park");
    };
    run.answer("t", &call_id, true);
    let (text, _) = &run.results("t")[1];
    assert!(text.len() < 16_000, "{}", text.len());
    assert!(
        text.ends_with("[25000 bytes of output were dropped past the 15000-byte cap per stream]"),
        "{}",
        &text[text.len() - 120..]
    );
}

/// The error result of a script call that the gate denies.
fn denied(call: Value) -> String {
    let run = scripts_on();
    let outcome = run.turn("t", "go", activate_then(call));
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let (text, is_error) = run.results("t")[1].clone();
    assert!(is_error);
    text
}

#[test]
fn a_path_out_of_the_skill_directory_is_denied() {
    assert_eq!(
        denied(json!({ "skill": "tools", "relpath": "../tools/scripts/hello.sh" })),
        "run_skill_script: `../tools/scripts/hello.sh` is outside the directory of the skill `tools` — give a path relative to it"
    );
    let absolute = "/bin/sh";
    assert_eq!(
        denied(json!({ "skill": "tools", "relpath": absolute })),
        "run_skill_script: `/bin/sh` is outside the directory of the skill `tools` — give a path relative to it"
    );
}

#[test]
fn a_file_that_is_not_one_of_its_scripts_is_denied() {
    assert_eq!(
        denied(json!({ "skill": "tools", "relpath": "notes.txt" })),
        "run_skill_script: `notes.txt` is not a script of the skill `tools` (its scripts: scripts/fail.sh, scripts/hello.sh, scripts/loud.sh)"
    );
}

#[test]
fn a_symbolic_link_out_of_the_skill_directory_is_not_a_script() {
    let run = scripts_on();
    let outside = run.tree.path("outside.sh");
    run.tree.write(&outside, "echo escaped\n");
    std::os::unix::fs::symlink(&outside, run.tree.ws(".noeta/skills/tools/scripts/link.sh"))
        .unwrap();
    run.turn(
        "t",
        "go",
        activate_then(json!({ "skill": "tools", "relpath": "scripts/link.sh" })),
    );
    let (text, is_error) = run.results("t")[1].clone();
    assert!(is_error);
    assert!(
        text.contains("`scripts/link.sh` is not a script of the skill `tools`"),
        "{text}"
    );
}

#[test]
fn a_script_of_a_skill_that_is_not_active_is_denied() {
    let run = scripts_on();
    // Another skill with scripts is active, so the tool is offered.
    let other = run.tree.ws(".noeta/skills/other");
    run.tree.write(
        &other.join("SKILL.md"),
        "---\nname: other\ndescription: d\n---\nx\n",
    );
    run.tree.write(&other.join("run.sh"), "echo other\n");
    run.turn(
        "t",
        "go",
        json!([
            { "calls": [{ "name": "skill", "input": { "skill": "other" } }] },
            { "calls": [{ "name": "run_skill_script", "input": { "skill": "tools", "relpath": "scripts/hello.sh" } }] },
            { "text": "done" }
        ]),
    );
    assert_eq!(
        run.results("t")[1],
        (
            "run_skill_script: the skill `tools` is not active — activate it with the `skill` tool first".to_owned(),
            true
        )
    );
}

#[test]
fn the_tool_is_offered_only_when_allowed_and_while_an_active_skill_ships_scripts() {
    let off = run_with(Value::Null);
    off.turn(
        "t",
        "go",
        json!([
            { "calls": [{ "name": "skill", "input": { "skill": "tools" } }] },
            { "text": "done" }
        ]),
    );
    assert!(
        off.requests()
            .iter()
            .all(|r| !tool_names(r).contains(&"run_skill_script".to_owned()))
    );
    // Not offered in scripts either when not allowed.
    assert!(!off.results("t")[0].0.contains("run_skill_script"));

    let on = scripts_on();
    on.turn(
        "t",
        "go",
        json!([
            { "calls": [{ "name": "skill", "input": { "skill": "tools" } }] },
            { "text": "done" }
        ]),
    );
    let offered: Vec<bool> = on
        .requests()
        .iter()
        .map(|r| tool_names(r).contains(&"run_skill_script".to_owned()))
        .collect();
    assert_eq!(offered, [false, true]);
    on.turn("t", "next", done());
    assert!(!tool_names(&on.last()).contains(&"run_skill_script".to_owned()));
}

#[test]
fn a_script_call_in_the_reply_that_activates_the_skill_is_refused_as_withheld() {
    let run = scripts_on();
    let outcome = run.turn(
        "t",
        "go",
        json!([
            { "calls": [
                { "name": "skill", "input": { "skill": "tools" } },
                { "name": "run_skill_script", "input": { "skill": "tools", "relpath": "scripts/hello.sh" } }
            ] },
            { "text": "done" }
        ]),
    );
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let (text, is_error) = run.results("t")[1].clone();
    assert!(is_error);
    assert!(
        text.contains("no active skill ships scripts — activate one with the `skill` tool first"),
        "{text}"
    );
}
