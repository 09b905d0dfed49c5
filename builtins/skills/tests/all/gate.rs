//! `allowed-tools` of the active skills through the real runtime's gate, in each mode.

use noeta_core::runner::RunOutcome;
use serde_json::{Value, json};

use crate::common::Run;

const LIMITED: &str =
    "---\nname: limited\ndescription: Reads only.\nallowed-tools: [Read]\n---\nRead, never run.\n";
const GIT: &str =
    "---\nname: git\ndescription: Git work.\nallowed-tools: Read, Bash(git:*)\n---\nUse git.\n";
const FREE: &str = "---\nname: free\ndescription: Anything.\n---\nNo limits.\n";

fn run(mode: &str) -> Run {
    let run = Run::new(json!({ "tool_enforcement": mode }));
    let dir = run.tree.ws(".noeta/skills");
    for (name, text) in [("limited", LIMITED), ("git", GIT), ("free", FREE)] {
        run.tree.write(&dir.join(name).join("SKILL.md"), text);
    }
    run
}

/// Activates `skill`, then calls `Read` and `Bash` in one reply.
fn script(skill: &str) -> Value {
    json!([
        { "calls": [{ "name": "skill", "input": { "skill": skill } }] },
        { "calls": [
            { "name": "Read", "input": {} },
            { "name": "Bash", "input": {} }
        ] },
        { "text": "done" }
    ])
}

#[test]
fn off_allowed_tools_restrict_nothing() {
    let run = run("off");
    let outcome = run.turn("t", "go", script("limited"));
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!((run.read.count(), run.bash.count()), (1, 1));
    // The body does not mention the limit either.
    assert!(!run.results("t")[0].0.contains("use only these tools"));
}

#[test]
fn deny_denies_a_tool_outside_the_list_naming_the_skill_and_the_tool() {
    let run = run("deny");
    let outcome = run.turn("t", "go", script("limited"));
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!((run.read.count(), run.bash.count()), (1, 0));
    let results = run.results("t");
    assert!(
        results[0]
            .0
            .contains("While it is active, use only these tools: Read\n")
    );
    assert_eq!(
        results[2],
        (
            "`Bash` is not allowed: the active skill `limited` allows only Read (allowed-tools)"
                .to_owned(),
            true
        )
    );
}

#[test]
fn approve_asks_for_a_tool_outside_the_list_and_runs_it_when_allowed() {
    let run = run("approve");
    let outcome = run.turn("t", "go", script("limited"));
    let RunOutcome::Parked { call_id, question } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(
        question,
        "the active skill `limited` allows only Read (allowed-tools) — allow this call of `Bash`?"
    );
    assert_eq!(run.read.count(), 1);
    let outcome = run.answer("t", &call_id, true);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(run.bash.count(), 1);
}

#[test]
fn approve_refused_denies_the_call() {
    let run = run("approve");
    let RunOutcome::Parked { call_id, .. } = run.turn("t", "go", script("limited")) else {
        panic!("did not park");
    };
    run.answer("t", &call_id, false);
    assert_eq!(run.bash.count(), 0);
}

#[test]
fn an_argument_pattern_grants_its_tool() {
    let run = run("deny");
    run.turn("t", "go", script("git"));
    assert_eq!((run.read.count(), run.bash.count()), (1, 1));
}

#[test]
fn a_skill_without_allowed_tools_restricts_nothing() {
    let run = run("deny");
    run.turn("t", "go", script("free"));
    assert_eq!((run.read.count(), run.bash.count()), (1, 1));
}

#[test]
fn without_an_active_skill_nothing_is_restricted() {
    let run = run("deny");
    run.turn(
        "t",
        "go",
        json!([
            { "calls": [{ "name": "Bash", "input": {} }] },
            { "text": "done" }
        ]),
    );
    assert_eq!(run.bash.count(), 1);
}

#[test]
fn two_active_skills_grant_the_union_and_a_denial_names_both() {
    let run = run("deny");
    let extra = "---\nname: writer\ndescription: Writes.\nallowed-tools: [Write]\n---\nWrite.\n";
    run.tree
        .write(&run.tree.ws(".noeta/skills/writer/SKILL.md"), extra);
    run.turn(
        "t",
        "go",
        json!([
            { "calls": [
                { "name": "skill", "input": { "skill": "limited" } },
                { "name": "skill", "input": { "skill": "writer" } }
            ] },
            { "calls": [
                { "name": "Read", "input": {} },
                { "name": "Bash", "input": {} }
            ] },
            { "text": "done" }
        ]),
    );
    assert_eq!((run.read.count(), run.bash.count()), (1, 0));
    assert_eq!(
        run.results("t")[3].0,
        "`Bash` is not allowed: the active skills `limited`, `writer` allow only Read, Write (allowed-tools)"
    );
}

#[test]
fn the_restriction_ends_with_the_turn() {
    let run = run("deny");
    run.turn("t", "go", script("limited"));
    assert_eq!(run.bash.count(), 0);
    run.turn(
        "t",
        "next",
        json!([
            { "calls": [{ "name": "Bash", "input": {} }] },
            { "text": "done" }
        ]),
    );
    assert_eq!(run.bash.count(), 1);
}
