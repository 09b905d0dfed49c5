//! Markdown commands as Claude Code writes them (`.claude/commands`, `.noeta/commands`,
//! `~/.noeta/commands`): `/name args` in `noeta run` and `noeta chat` sends the expanded body —
//! `$ARGUMENTS`, `$1`…, `@file` — as the message recorded in the task's log.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// The first user message of the only task.
fn first_message(env: &CliEnv) -> String {
    let listed = stdout(&env.run(&["tasks", "--json"]));
    let task: Value = serde_json::from_str(listed.lines().last().unwrap()).unwrap();
    let log = stdout(&env.run(&["log", task["id"].as_str().unwrap(), "--json"]));
    log.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "user_message")
        .map(|e| e["data"]["text"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no user message in {log}"))
}

fn review_command(env: &CliEnv) {
    env.write("notes.txt", "remember the parser\n");
    env.write(
        ".claude/commands/review.md",
        "---\ndescription: Review a part of the code\nargument-hint: <part>\n\
         allowed-tools: Read, Grep\nmodel: sonnet\n---\n\
         Review $ARGUMENTS carefully; start with $1.\nContext: @notes.txt\n",
    );
}

#[test]
fn run_sends_the_expanded_command_as_the_goal() {
    let env = CliEnv::new(NOETA);
    review_command(&env);
    let provider = env.script(json!([{ "text": "reviewed" }]));
    let out = env.run(&["run", "--provider", &provider, "/review the parser module"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim_end(), "reviewed");
    assert_eq!(
        first_message(&env),
        "Review the parser module carefully; start with the.\nContext: notes.txt:\n```\nremember the parser\n```"
    );
}

#[test]
fn a_body_without_arguments_gets_them_appended_and_a_project_command_beats_the_users() {
    let env = CliEnv::new(NOETA);
    env.write(
        env.home.join(".noeta/commands/hello.md").to_str().unwrap(),
        "Say hello from home.\n",
    );
    env.write(
        ".noeta/commands/tools/hello.md",
        "Say hello from the project.\n",
    );
    let provider = env.script(json!([{ "text": "hi" }]));
    let out = env.run(&["run", "--provider", &provider, "/hello to everyone"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        first_message(&env),
        "Say hello from the project.\n\nARGUMENTS: to everyone"
    );
}

#[test]
fn a_goal_starting_with_a_slash_that_names_no_command_is_taken_as_written() {
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([{ "text": "ok" }]));
    let out = env.run(&["run", "--provider", &provider, "/etc/hosts looks wrong"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(first_message(&env), "/etc/hosts looks wrong");
}

#[test]
fn files_outside_the_workspace_and_shell_pre_execution_are_refused_and_nothing_starts() {
    let env = CliEnv::new(NOETA);
    env.write(".noeta/commands/leak.md", "Show @../home/.bashrc please\n");
    env.write(".noeta/commands/shell.md", "Status: !`git status`\n");
    std::fs::write(env.home.join(".bashrc"), "secret\n").unwrap();
    let provider = env.script(json!([{ "text": "never" }]));
    let out = env.run(&["run", "--provider", &provider, "/leak"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("/leak: `@../home/.bashrc` is outside the workspace"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["run", "--provider", &provider, "/shell"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("runs shell commands before it is sent"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&env.run(&["tasks", "--json"])).trim().is_empty());
}

#[test]
fn chat_lists_the_commands_in_help_and_sends_one_as_a_message() {
    let env = CliEnv::new(NOETA);
    review_command(&env);
    let provider = env.script(json!([{ "text": "reviewed it" }]));
    let out = env.run_with(
        &["chat", "--provider", &provider],
        Some("/help\n/review the lexer\n/exit\n"),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "/review  Review a part of the code (project) — arguments: <part> [markdown_commands]"
        ),
        "{err}"
    );
    assert_eq!(stdout(&out).trim_end(), "reviewed it");
    assert!(first_message(&env).starts_with("Review the lexer carefully; start with the."));
}
